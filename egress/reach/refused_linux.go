//go:build linux

package reach

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// watchRefusals makes conn keep the ICMP errors its datagrams cause
// (IP_RECVERR and IPV6_RECVERR, its error queue) and returns a function
// that drains that queue without blocking, calling refused with the
// destination of each datagram a host answered with "port unreachable":
// the host is alive, nothing listens on the port. It returns nil when
// conn cannot.
func watchRefusals(conn net.PacketConn) func(refused func(netip.Addr)) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVERR, 1)
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1) // an IPv4 socket refuses it
	}); err != nil || serr != nil {
		return nil
	}
	return func(refused func(netip.Addr)) {
		buf, oob := make([]byte, 64), make([]byte, 256)
		for {
			var oobn int
			var to unix.Sockaddr
			var rerr error
			// Control, not Read: the monitor's reader may be blocked in
			// ReadFrom on the same socket.
			if err := rc.Control(func(fd uintptr) {
				_, oobn, _, to, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
			}); err != nil || rerr != nil {
				return // drained (EAGAIN) or closed
			}
			if a, ok := sockaddrAddr(to); ok && portUnreachable(oob[:oobn]) {
				refused(a)
			}
		}
	}
}

// portUnreachable reports whether the control messages of an error queue
// entry say ICMP or ICMPv6 "port unreachable" (ECONNREFUSED).
func portUnreachable(oob []byte) bool {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		recverr := (m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_RECVERR) ||
			(m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_RECVERR)
		if !recverr || len(m.Data) < 5 {
			continue
		}
		// struct sock_extended_err: ee_errno (u32), ee_origin (u8), ...
		errno, origin := binary.NativeEndian.Uint32(m.Data), m.Data[4]
		if errno == uint32(unix.ECONNREFUSED) && (origin == unix.SO_EE_ORIGIN_ICMP || origin == unix.SO_EE_ORIGIN_ICMP6) {
			return true
		}
	}
	return false
}

// sockaddrAddr is the address of an IPv4 or IPv6 socket address.
func sockaddrAddr(sa unix.Sockaddr) (netip.Addr, bool) {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrFrom4(a.Addr), true
	case *unix.SockaddrInet6:
		return netip.AddrFrom16(a.Addr).Unmap(), true
	}
	return netip.Addr{}, false
}
