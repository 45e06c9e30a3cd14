package egress_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/egress/hostspec"
)

// Seed 002's secondary host network: each worker turns its
// HostAssignments into the hostnet State of its own links, and a network
// it has no link for, or an assignment hostnet rejects, becomes an event
// on the EgressIP.
func TestHostState(t *testing.T) {
	nodes := seedSecondaryNodes(t)
	_, d := seedDesired(t, nodes, "10.10.10.100", "10.10.10.101")
	eg0 := func(n netip.Prefix) (string, error) {
		if n == netip.MustParsePrefix("10.10.10.0/24") {
			return "eg0", nil
		}
		return "", fmt.Errorf("no link in %s", n)
	}
	none := func(n netip.Prefix) (string, error) { return "", fmt.Errorf("no link in %s", n) }
	pod := []netip.Addr{netip.MustParseAddr("10.244.1.3")}
	tests := []struct {
		node   string
		linkOf func(netip.Prefix) (string, error)
		want   hostspec.State
		events []string
	}{
		{"ovn-worker", eg0, hostspec.State{{Link: "eg0", EgressIP: netip.MustParseAddr("10.10.10.100"), PodIPs: pod}}, nil},
		{"ovn-worker2", eg0, hostspec.State{{Link: "eg0", EgressIP: netip.MustParseAddr("10.10.10.101"), PodIPs: pod}}, nil},
		{"ovn-control-plane", eg0, nil, nil},
		{"ovn-worker", none, nil, []string{"egressip-prod EgressIPHostRequirement"}},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			s, evs := egress.HostState(tc.node, d.Host, tc.linkOf)
			if !reflect.DeepEqual(s, tc.want) {
				t.Errorf("state %+v, want %+v", s, tc.want)
			}
			var got []string
			for _, e := range evs {
				got = append(got, e.Object.Name+" "+e.Reason)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.events) {
				t.Errorf("events %v, want %v", evs, tc.events)
			}
		})
	}

	rejected := []*hostspec.RequirementError{
		{Link: "eg0", EgressIP: netip.MustParseAddr("10.10.10.100"), Reason: hostspec.ReasonForwardingDisabled},
		{Link: "eg0", EgressIP: netip.MustParseAddr("10.10.10.101"), Reason: hostspec.ReasonLinkDown}, // not this node's
	}
	evs := egress.HostEvents("ovn-worker", d.Host, rejected)
	if len(evs) != 1 || evs[0].Object.Name != "egressip-prod" || evs[0].Object.Kind != "EgressIP" ||
		evs[0].Message != `node ovn-worker: egress IP 10.10.10.100 on link "eg0": ForwardingDisabled` {
		t.Errorf("HostEvents = %+v", evs)
	}
}
