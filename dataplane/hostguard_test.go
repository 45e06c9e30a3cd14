package dataplane

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/egress/hostspec"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestHostGuardWrites: the HostEgress writer keeps the leak guard of a
// node with a secondary host network from its first Write, before any
// egress IP is assigned to it; a Write without one removes it, and a
// restarted writer's first Write removes a table a previous process
// left.
func TestHostGuardWrites(t *testing.T) {
	testbed.Require(t, "ip", "nft")
	node := testbed.NewNetns(t, "dguard")
	host := testbed.NewNetns(t, "dguardh")
	testbed.Link(t, node, "eth2", []string{"172.19.0.3/24"}, host, "eth0", []string{"172.19.0.100/24"})
	listing := func() string {
		out, _ := node.RunErr("nft", "list", "table", "inet", hostnet.GuardTable)
		return out
	}
	ctx := context.Background()
	guarded := &desired.NodeState{HostGuard: hostspec.Guard{
		PodSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		Networks:   []netip.Prefix{netip.MustParsePrefix("172.19.0.0/24")}}}
	write := func(h *HostEgress, ns *desired.NodeState) {
		t.Helper()
		if _, err := h.Write(ctx, desired.Snapshot{}, ns); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	open := func() *HostEgress {
		h := NewHostEgress(HostOptions{Node: "n1", Netns: "/var/run/netns/" + node.Name, Backend: "auto", Logger: quiet})
		t.Cleanup(h.Close)
		return h
	}

	h := open()
	write(h, guarded)
	if got := listing(); !strings.Contains(got, `ip saddr 10.244.0.0/16 oifname "eth2" ct direction original counter packets 0 bytes 0 drop`) {
		t.Fatalf("guard after the first Write:\n%s", got)
	}
	if h.m != nil {
		t.Error("the guard opened the egress IP Manager: nothing is assigned")
	}
	write(h, &desired.NodeState{})
	if got := listing(); got != "" {
		t.Fatalf("guard left by a Write without secondary networks:\n%s", got)
	}
	write(h, guarded)
	h.Close()

	restarted := open()
	write(restarted, &desired.NodeState{})
	if got := listing(); got != "" {
		t.Errorf("a previous process's guard left by the first Write:\n%s", got)
	}

	// A guard that cannot be read (here a cancelled context; on a node,
	// no nftables) fails a Write only when there is something to guard:
	// looking for a previous process's table is not retried.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	failing := open()
	for i, tc := range []struct {
		ns      *desired.NodeState
		wantErr bool
	}{{&desired.NodeState{}, false}, {&desired.NodeState{}, false}, {guarded, true}} {
		if _, err := failing.Write(cancelled, desired.Snapshot{}, tc.ns); (err != nil) != tc.wantErr {
			t.Errorf("Write %d with the guard failing: %v, want an error: %t", i, err, tc.wantErr)
		}
	}
	if failing.guard == nil {
		t.Error("the guard was closed while it has something to guard")
	}
}
