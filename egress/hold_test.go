package egress_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// hosts is the node report mod: the node hosts ips, reported in its
// object's version v.
func hosts(v string, ips ...string) func(*ovnknode.Node) {
	return func(n *ovnknode.Node) {
		n.Reported, n.Version = true, v
		n.Host.Hosted = nil
		for _, ip := range ips {
			n.Host.Hosted = append(n.Host.Hosted, netip.MustParseAddr(ip))
		}
	}
}

// TestHostHold: an egress IP on a node's host interface that Assign
// moves is assigned to no node until the old node has let it go (its
// report, written after the release, no longer lists it; or it refuses
// it) or the host lease plus margin have passed; an OVN-hosted IP moves
// at once; a zero lease holds nothing.
func TestHostHold(t *testing.T) {
	const lease = 3 * time.Second
	hold := lease + egress.HostReleaseMargin
	w1 := func(mods ...func(*ovnknode.Node)) ovnknode.Node {
		return node("w1", 2, append([]func(*ovnknode.Node){secondary("10.10.10.2/24"), hosts("1", "10.10.10.50")}, mods...)...)
	}
	w2 := node("w2", 3, secondary("10.10.10.3/24"))
	moved := map[string][]egressv1.EgressIPStatusItem{"a": {{Node: "w2", EgressIP: "10.10.10.50"}}}
	type step struct {
		after  time.Duration // since the start
		nodes  []ovnknode.Node
		status map[string][]egressv1.EgressIPStatusItem // Assign's
		want   string                                   // "node=ip" of a, or ""
		wake   time.Duration
	}
	tests := []struct {
		name  string
		lease time.Duration
		old   []string // a's status before
		steps []step
	}{
		{
			name: "held until the lease and margin have passed (the old node is silent: dead or cut off)",
			old:  []string{"w1=10.10.10.50"}, lease: lease,
			steps: []step{
				{0, []ovnknode.Node{w1(), w2}, moved, "", hold},
				{time.Second, []ovnknode.Node{w1(), w2}, moved, "", hold - time.Second},
				{hold, []ovnknode.Node{w1(), w2}, moved, "w2=10.10.10.50", 0},
			},
		},
		{
			name: "moves once the old node reports, after the release, that it no longer hosts it",
			old:  []string{"w1=10.10.10.50"}, lease: lease,
			steps: []step{
				{0, []ovnknode.Node{w1(), w2}, moved, "", hold},
				// a report of the same version is not an answer
				{100 * time.Millisecond, []ovnknode.Node{w1(hosts("1")), w2}, moved, "", hold - 100*time.Millisecond},
				{200 * time.Millisecond, []ovnknode.Node{w1(hosts("2")), w2}, moved, "w2=10.10.10.50", 0},
			},
		},
		{
			name: "a node that refuses the IP is silent at once",
			old:  []string{"w1=10.10.10.50"}, lease: lease,
			steps: []step{{0, []ovnknode.Node{w1(refuses("10.10.10.50")), w2}, moved, "w2=10.10.10.50", 0}},
		},
		{
			name: "back on the old node: nothing held",
			old:  []string{"w1=10.10.10.50"}, lease: lease,
			steps: []step{
				{0, []ovnknode.Node{w1(), w2}, moved, "", hold},
				{time.Second, []ovnknode.Node{w1(), w2}, map[string][]egressv1.EgressIPStatusItem{"a": {{Node: "w1", EgressIP: "10.10.10.50"}}}, "w1=10.10.10.50", 0},
			},
		},
		{
			name: "an OVN-hosted IP is not held",
			old:  []string{"w1=172.18.0.50"}, lease: lease,
			steps: []step{{0, []ovnknode.Node{w1(hosts("1")), w2}, map[string][]egressv1.EgressIPStatusItem{"a": {{Node: "w2", EgressIP: "172.18.0.50"}}}, "w2=172.18.0.50", 0}},
		},
		{
			// The previous leader released the IP (the status names no
			// node) and died: the new one reads the hold back from w1's
			// report, and holds from its first pass.
			name:  "a new leader holds what a node still reports hosting until it lets it go",
			lease: lease,
			steps: []step{
				{0, []ovnknode.Node{w1(), w2}, moved, "", hold},
				{100 * time.Millisecond, []ovnknode.Node{w1(hosts("2")), w2}, moved, "w2=10.10.10.50", 0},
			},
		},
		{
			name:  "a new leader holds what a silent node reports hosting for a whole lease",
			lease: lease,
			steps: []step{
				{0, []ovnknode.Node{w1(), w2}, moved, "", hold},
				{hold, []ovnknode.Node{w1(), w2}, moved, "w2=10.10.10.50", 0},
			},
		},
		{
			// w1 died hosting the IP, which went to w2 after its hold;
			// w1 comes back with its old report: the IP stays on w2.
			name: "a stale report does not take back an IP the status gives another node",
			old:  []string{"w2=10.10.10.50"}, lease: lease,
			steps: []step{{0, []ovnknode.Node{w1(), w2}, moved, "w2=10.10.10.50", 0}},
		},
		{
			name: "a node hosting what the status gives it: nothing held",
			old:  []string{"w1=10.10.10.50"}, lease: lease,
			steps: []step{{0, []ovnknode.Node{w1(), w2}, map[string][]egressv1.EgressIPStatusItem{"a": {{Node: "w1", EgressIP: "10.10.10.50"}}}, "w1=10.10.10.50", 0}},
		},
		{
			name:  "an IP no EgressIP requests is not held",
			lease: lease,
			steps: []step{{0, []ovnknode.Node{w1(hosts("1", "10.10.10.99")), w2}, moved, "w2=10.10.10.50", 0}},
		},
		{
			name:  "no lease: nothing held",
			old:   []string{"w1=10.10.10.50"},
			steps: []step{{0, []ovnknode.Node{w1(), w2}, moved, "w2=10.10.10.50", 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			now := start
			h := &egress.HostHold{Lease: tt.lease, Now: func() time.Time { return now }}
			e := eip("a", []string{"10.10.10.50", "172.18.0.50"}, tt.old...)
			for i, s := range tt.steps {
				now = start.Add(s.after)
				got, wake := h.Apply([]*egressv1.EgressIP{e}, s.status, s.nodes)
				var item string
				for _, it := range got["a"] {
					item = it.Node + "=" + it.EgressIP
				}
				if item != s.want || wake != s.wake {
					t.Errorf("step %d: a=%q wake %v, want %q wake %v", i, item, wake, s.want, s.wake)
				}
				if holding := h.Holding("w1"); holding != (s.want == "" && wake > 0) {
					t.Errorf("step %d: Holding(w1) = %v", i, holding)
				}
				e.Status.Items = got["a"] // as the leader writes it
			}
		})
	}
}

// TestHostHoldAssign: HostHold.Assign offers a held egress IP back to
// the node it was released from, so that the IP returns to that node as
// soon as it is a candidate again (here w2, whom the tie by name would
// not pick) rather than going to another node once the hold runs out;
// while that node is no candidate, the IP is held as Apply holds it.
func TestHostHoldAssign(t *testing.T) {
	const lease = 3 * time.Second
	hold := lease + egress.HostReleaseMargin
	nodes := []ovnknode.Node{node("w1", 2, secondary("10.10.10.2/24")), node("w2", 3, secondary("10.10.10.3/24"), hosts("1", "10.10.10.50"))}
	down := func(n string) bool { return n != "w2" }
	up := func(string) bool { return true }
	type step struct {
		after     time.Duration // since the start
		reachable func(string) bool
		want      string // "node=ip" of a, or ""
		wake      time.Duration
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"back on its node once reachable", []step{{0, down, "", hold}, {time.Second, down, "", hold - time.Second},
			{1500 * time.Millisecond, up, "w2=10.10.10.50", 0}}},
		{"to another node after the hold while its node stays down", []step{{0, down, "", hold}, {hold, down, "w1=10.10.10.50", 0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			now := start
			h := &egress.HostHold{Lease: lease, Now: func() time.Time { return now }}
			e := eip("a", []string{"10.10.10.50"}, "w2=10.10.10.50")
			for i, s := range c.steps {
				now = start.Add(s.after)
				res, wake := h.Assign([]*egressv1.EgressIP{e}, nodes, s.reachable, nil)
				var item string
				for _, it := range res.Status["a"] {
					item = it.Node + "=" + it.EgressIP
				}
				if item != s.want || wake != s.wake {
					t.Errorf("step %d: a=%q wake %v, want %q wake %v", i, item, wake, s.want, s.wake)
				}
				e.Status.Items = res.Status["a"] // as the leader writes it
			}
		})
	}
	if res, wake := (*egress.HostHold)(nil).Assign([]*egressv1.EgressIP{eip("a", []string{"10.10.10.50"})}, nodes, up, nil); len(res.Status["a"]) != 1 || wake != 0 {
		t.Errorf("a nil HostHold's Assign: %v, wake %v; want Assign's", res.Status, wake)
	}
}

// TestHostHoldClone: a clone starts with the holds of its original, and
// what the clone then holds or lets go leaves the original as it was.
func TestHostHoldClone(t *testing.T) {
	if (*egress.HostHold)(nil).Clone() != nil {
		t.Fatal("a nil HostHold clones to a HostHold")
	}
	start := time.Unix(1000, 0)
	now := start
	h := &egress.HostHold{Lease: 3 * time.Second, Now: func() time.Time { return now }}
	w1 := node("w1", 2, secondary("10.10.10.2/24"), hosts("1", "10.10.10.50", "10.10.10.51"))
	w2 := node("w2", 3, secondary("10.10.10.3/24"))
	moved := map[string][]egressv1.EgressIPStatusItem{"a": {{Node: "w2", EgressIP: "10.10.10.50"}}}
	a := eip("a", []string{"10.10.10.50"}, "w1=10.10.10.50")
	if _, wake := h.Apply([]*egressv1.EgressIP{a}, moved, []ovnknode.Node{node("w1", 2, secondary("10.10.10.2/24"), hosts("1", "10.10.10.50")), w2}); wake == 0 {
		t.Fatal("the original holds nothing")
	}
	c := h.Clone()
	if got := c.Held(); len(got) != 1 || got[0].IP != netip.MustParseAddr("10.10.10.50") {
		t.Fatalf("the clone holds %v", got)
	}
	// The clone holds a second IP and lets the first go (w1 reports,
	// after the release, that it hosts neither).
	b := eip("b", []string{"10.10.10.51"}, "w1=10.10.10.51")
	movedB := map[string][]egressv1.EgressIPStatusItem{"b": {{Node: "w2", EgressIP: "10.10.10.51"}}}
	c.Apply([]*egressv1.EgressIP{b}, movedB, []ovnknode.Node{w1, w2})
	now = start.Add(time.Second)
	c.Apply([]*egressv1.EgressIP{a}, moved, []ovnknode.Node{node("w1", 2, secondary("10.10.10.2/24"), hosts("2", "10.10.10.51")), w2})
	if got := c.Held(); len(got) != 1 || got[0].IP != netip.MustParseAddr("10.10.10.51") {
		t.Fatalf("the clone holds %v, want 10.10.10.51 alone", got)
	}
	if got := h.Held(); len(got) != 1 || got[0].IP != netip.MustParseAddr("10.10.10.50") || !got[0].At.Equal(start) {
		t.Fatalf("the original holds %v after its clone changed, want 10.10.10.50 from the start", got)
	}
}
