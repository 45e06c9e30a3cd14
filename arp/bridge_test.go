package arp

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/ovnedge/ovnedge/testbed"
)

// TestOVSBridge answers on the LOCAL interface of a real OVS bridge
// (br-ex, userspace datapath, NORMAL switching) for a VIP the host does not
// have, as a node does for LoadBalancer and ExternalIP VIPs: the external
// host behind the bridge's uplink gets one reply per request, from br-ex.
func TestOVSBridge(t *testing.T) {
	testbed.Require(t, "arping", "ndisc6")
	s := testbed.StartOVS(t, testbed.OVSOptions{NoPatch: true})
	node, ext := &testbed.Netns{Name: s.NS}, &testbed.Netns{Name: s.ExtNS}
	ext.Run(t, "ip", "addr", "add", "2001:db8::1/64", "dev", "eth0", "nodad")
	vip := netip.MustParseAddr("172.18.0.50") // in the bridge's subnet, not on the host
	r := newResponder(t, s.Bridge)
	if err := r.SetAddresses([]netip.Addr{vip, vip6}); err != nil {
		t.Fatal(err)
	}
	startResponder(t, node, r)
	brMAC := node.Run(t, "cat", "/sys/class/net/"+s.Bridge+"/address")
	if got := arping(t, ext, "eth0", vip, 2); !slices.Equal(got, []string{brMAC, brMAC}) {
		t.Errorf("arping %s across %s: replies from %v, want 2 from %s", vip, s.Bridge, got, brMAC)
	}
	if got := ndisc(t, ext, "eth0", vip6); !slices.Equal(got, []string{brMAC}) {
		t.Errorf("ndisc6 %s across %s: advertisements from %v, want one from %s", vip6, s.Bridge, got, brMAC)
	}
	waitStats(t, r, vip, "2 requests seen and 2 replies sent", func(st Stats) bool {
		return st.RequestsSeen == 2 && st.RepliesSent == 2
	})
}
