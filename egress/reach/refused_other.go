//go:build !linux

package reach

import (
	"net"
	"net/netip"
)

// watchRefusals is Linux's error queue reader; elsewhere a target that
// stops answering is down after its misses, refused or not.
func watchRefusals(net.PacketConn) func(refused func(netip.Addr)) { return nil }
