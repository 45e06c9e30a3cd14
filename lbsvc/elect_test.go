package lbsvc

import (
	"net/netip"
	"testing"
)

func TestElect(t *testing.T) {
	vip := netip.MustParseAddr("172.18.0.50")
	nodes := []string{"ovn-control-plane", "ovn-worker", "ovn-worker2"}
	owner, ok := Elect(vip, nodes)
	if !ok {
		t.Fatal("no owner among three candidates")
	}
	// Every permutation of the same candidates agrees.
	for _, perm := range [][]string{{nodes[2], nodes[1], nodes[0]}, {nodes[1], nodes[2], nodes[0]}} {
		if got, _ := Elect(vip, perm); got != owner {
			t.Errorf("Elect(%v) = %s, want %s", perm, got, owner)
		}
	}
	// Removing a node other than the owner keeps the owner.
	var rest []string
	for _, n := range nodes {
		if n != owner {
			rest = append(rest, n)
		}
	}
	if got, _ := Elect(vip, append(rest[:1:1], owner)); got != owner {
		t.Errorf("owner changed to %s when a non-owner left", got)
	}
	// Removing the owner elects another node.
	if got, _ := Elect(vip, rest); got == owner || got == "" {
		t.Errorf("Elect without the owner = %q", got)
	}
	if _, ok := Elect(vip, nil); ok {
		t.Error("Elect with no candidates reported an owner")
	}
}
