//go:build linux

package reach

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// freebind lets a socket bind an address the host does not hold yet (the
// management IP while ovn-k8s-mp0 is being configured).
func freebind(network, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		level, opt := unix.SOL_IP, unix.IP_FREEBIND
		if network == "tcp6" || network == "udp6" {
			level, opt = unix.SOL_IPV6, unix.IPV6_FREEBIND
		}
		serr = unix.SetsockoptInt(int(fd), level, opt, 1)
	})
	return errors.Join(err, serr)
}
