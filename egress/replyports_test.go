package egress

import (
	"net/netip"
	"testing"
)

func TestReplyPortPolicies(t *testing.T) {
	c := Cluster{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	st := ReplyPortPolicies(c, []ServedPort{
		{netip.MustParseAddr("10.244.1.4"), "tcp", 8080},
		{netip.MustParseAddr("fd00:10:244:1::4"), "udp", 53},
		{netip.MustParseAddr("10.244.1.4"), "tcp", 8080}, // a second Service on the same port
		{netip.MustParseAddr("10.244.1.5"), "icmp", 1},   // no port: left out
		{netip.Addr{}, "tcp", 80},                        // no address: left out
	})
	want := []string{
		"ip4.src == 10.244.1.4 && tcp.src == 8080",
		"ip6.src == fd00:10:244:1::4 && udp.src == 53",
	}
	if len(st.Policies) != len(want) {
		t.Fatalf("policies %+v", st.Policies)
	}
	for i, p := range st.Policies {
		if p.Match != want[i] || p.Priority != PriorityNoReroute || p.Action != "allow" || p.Router != ClusterRouter {
			t.Errorf("policy %d: %+v, want 102 %q allow", i, p, want[i])
		}
		if p.ExternalIDs["k8s.ovn.org/name"] == "" {
			t.Errorf("policy %d has no name: %v", i, p.ExternalIDs)
		}
	}
}
