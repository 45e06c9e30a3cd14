package daemon

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// TestReachTargets: the egress-assignable nodes are probed on their
// management port address (ovn-k8s-mp0, .2 of the node subnet), as
// OVN-Kubernetes does, never on the node IP.
func TestReachTargets(t *testing.T) {
	node := func(name, subnet, ip string, assignable bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{
			ovnknode.AnnotationNodeSubnets:     `{"default":["` + subnet + `"]}`,
			ovnknode.AnnotationPrimaryIfAddr:   `{"ipv4":"` + ip + `/24"}`,
			ovnknode.AnnotationGatewayJoinAddr: `{"ipv4":"100.64.0.3/16"}`,
		}}}
		if assignable {
			n.Labels[ovnknode.LabelEgressAssignable] = ""
		}
		return n
	}
	nodes := []*corev1.Node{
		node("a", "10.244.1.0/24", "172.18.0.2", false),
		node("b", "10.244.2.0/24", "172.18.0.3", true),
		node("c", "10.244.3.0/24", "172.18.0.4", true),
	}
	got := mgmtTargets(nodes, true, "")
	if len(got) != 2 || got[0] != (reach.Target{Node: "b", Addr: mustAddr("10.244.2.2")}) {
		t.Errorf("targets %v, want [b 10.244.2.2, c 10.244.3.2]", got)
	}
	// The heartbeat among nodes: every node but oneself.
	got = mgmtTargets(nodes, false, "b")
	if len(got) != 2 || got[0].Node != "a" || got[1].Node != "c" {
		t.Errorf("node targets of b: %v, want a and c", got)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestClusterSetsTargets: the leader sets the reachability targets on its
// first pass, again when a node changes (here one going NotReady: its
// ready state is the assignment's, its target stays) and after it led
// again (the heartbeat drops its targets with the leadership), and not on
// a pass whose nodes are unchanged (parsing every node's annotations for
// them cost every pass 7-10 ms at 2,000 nodes).
func TestClusterSetsTargets(t *testing.T) {
	cfg := demoConfig(t)
	s, c := loadDemo(t, cfg, nil)
	d := NewDataplane(cfg, c, record.NewFakeRecorder(100), NewMetrics(), quiet)
	defer d.Close()
	var got [][]reach.Target
	d.hooks.targets = func(t []reach.Target) { got = append(got, t) }
	ctx := context.Background()
	notReady := func(s *desired.Snapshot) *desired.Changes {
		i := slices.IndexFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == "ovn-worker2" })
		n := s.Nodes[i].DeepCopy()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		s.Nodes = slices.Clone(s.Nodes)
		s.Nodes[i] = n
		return &desired.Changes{Nodes: map[string]*corev1.Node{n.Name: n}}
	}
	for i, step := range []struct {
		name  string
		edit  func(s *desired.Snapshot) *desired.Changes
		calls int
	}{
		{"first pass", func(*desired.Snapshot) *desired.Changes { return nil }, 1},
		{"nothing changed", func(*desired.Snapshot) *desired.Changes { return &desired.Changes{} }, 1},
		{"a node NotReady", notReady, 2},
		{"nothing changed again", func(*desired.Snapshot) *desired.Changes { return &desired.Changes{} }, 2},
		{"leading again", func(*desired.Snapshot) *desired.Changes { d.Leading(false); d.Leading(true); return &desired.Changes{} }, 3},
	} {
		s.Changed = step.edit(&s)
		if err := d.Cluster(ctx, s); err != nil {
			t.Fatalf("step %d (%s): %v", i, step.name, err)
		}
		if len(got) != step.calls {
			t.Fatalf("step %d (%s): targets set %d times, want %d", i, step.name, len(got), step.calls)
		}
	}
	if last := got[len(got)-1]; len(last) == 0 || !slices.Equal(last, got[0]) {
		t.Errorf("targets %v, then %v: want the same, not empty", got[0], last)
	}
}

// TestAliveWithoutHeartbeat: without a heartbeat every node is alive; a
// node whose uplink cannot be found counts as alive.
func TestAliveWithoutHeartbeat(t *testing.T) {
	l := &nodeLiveness{self: "n1", uplink: func() string { return "no-such-link" }}
	if !l.Alive("n1") || !l.Alive("n2") {
		t.Error("without a heartbeat every node is alive")
	}
}
