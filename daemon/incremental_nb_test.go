package daemon

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestClusterIncrementalNB runs the leader's work against a real NB
// through the incremental path (Snapshot.Changed): after every event the
// NB holds the rows of a full recompute (Verify: a full sync of
// ComputeCluster's state sends nothing), and the rows the event changes
// are there.
func TestClusterIncrementalNB(t *testing.T) {
	ctx := context.Background()
	ovn, s, d, m := demoLeaderNB(t, quiet)
	if err := d.Cluster(ctx, s); err != nil {
		t.Fatal(err)
	}
	incremental := func() float64 {
		n := 0.0
		if h, err := m.Reconcile.GetMetricWithLabelValues("compute-incremental", "ok"); err == nil {
			n = histogramCount(t, h)
		}
		return n
	}
	node := func(name string) *corev1.Node {
		i := slices.IndexFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == name })
		return s.Nodes[i].DeepCopy()
	}
	ready, port, proto, portName := true, int32(5432), corev1.ProtocolTCP, "pg"
	nodeName := "ovn-worker2"
	slice := func(ip string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db-x",
			Labels: map[string]string{discoveryv1.LabelServiceName: "db"}}, AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &nodeName}},
			Ports:     []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}}}
	}
	for _, step := range []struct {
		name  string
		edit  func(*desired.Snapshot, *desired.Changes)
		check func() string // "" when the NB shows the change
	}{
		{"node labelled egress-assignable", func(s *desired.Snapshot, ch *desired.Changes) {
			n := node("ovn-worker")
			n.Labels = map[string]string{"k8s.ovn.org/egress-assignable": ""}
			replaceObj(&s.Nodes, n.Name, n)
			ch.Nodes = map[string]*corev1.Node{n.Name: n}
		}, nil},
		{"pod added", func(s *desired.Snapshot, ch *desired.Changes) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db-0", Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{NodeName: "ovn-worker2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.2.7",
					PodIPs: []corev1.PodIP{{IP: "10.244.2.7"}}}}
			info := egress.NewPodInfo(p)
			replaceObj(&s.Pods, "prod/db-0", info)
			ch.Pods = map[string]*egress.PodInfo{"prod/db-0": info}
		}, func() string {
			return missing(ovn.Nbctl("lr-policy-list", ovsdbnb.ClusterRouter), "ip4.src == 10.244.2.7")
		}},
		{"Service added", func(s *desired.Snapshot, ch *desired.Changes) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db"}, Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.50", ClusterIPs: []string{"10.96.0.50"},
				Ports: []corev1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}}}}
			replaceObj(&s.Services, "prod/db", svc)
			sl := slice("10.244.2.7")
			replaceObj(&s.EndpointSlices, "prod/db-x", sl)
			ch.Services = map[string]*corev1.Service{"prod/db": svc}
			ch.EndpointSlices = map[string]*discoveryv1.EndpointSlice{"prod/db-x": sl}
		}, func() string { return missing(ovn.Nbctl("lb-list"), "10.96.0.50:5432") }},
		{"endpoint changed", func(s *desired.Snapshot, ch *desired.Changes) {
			sl := slice("10.244.1.3")
			replaceObj(&s.EndpointSlices, "prod/db-x", sl)
			ch.EndpointSlices = map[string]*discoveryv1.EndpointSlice{"prod/db-x": sl}
		}, func() string { return missing(ovn.Nbctl("lb-list"), "10.244.1.3:5432") }},
		{"egress node NotReady", func(s *desired.Snapshot, ch *desired.Changes) {
			n := node("ovn-worker2")
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
			replaceObj(&s.Nodes, n.Name, n)
			ch.Nodes = map[string]*corev1.Node{n.Name: n}
		}, func() string { return missing(ovn.Nbctl("lr-nat-list", "GR_ovn-worker"), "172.18.0.44") }},
		{"namespace relabelled", func(s *desired.Snapshot, ch *desired.Changes) {
			ns := s.Namespaces[slices.IndexFunc(s.Namespaces, func(n *corev1.Namespace) bool { return n.Name == "prod" })].DeepCopy()
			ns.Labels = map[string]string{"env": "dev"}
			replaceObj(&s.Namespaces, "prod", ns)
			ch.Namespaces = map[string]*corev1.Namespace{"prod": ns}
		}, func() string {
			if p := ovn.Nbctl("lr-policy-list", ovsdbnb.ClusterRouter); strings.Contains(p, "10.244.2.7") {
				return "a pod no longer served keeps its reroute:\n" + p
			}
			return ""
		}},
		{"Service deleted", func(s *desired.Snapshot, ch *desired.Changes) {
			replaceObj(&s.Services, "prod/db", (*corev1.Service)(nil))
			ch.Services = map[string]*corev1.Service{"prod/db": nil}
		}, func() string {
			if l := ovn.Nbctl("lb-list"); strings.Contains(l, "10.96.0.50") {
				return "the deleted Service's load balancer stays:\n" + l
			}
			return ""
		}},
		{"EgressIP deleted", func(s *desired.Snapshot, ch *desired.Changes) {
			replaceObj(&s.EgressIPs, "egress-prod", (*unstructured.Unstructured)(nil))
			ch.EgressIPs = map[string]*unstructured.Unstructured{"egress-prod": nil}
		}, func() string {
			if n := ovn.Nbctl("lr-nat-list", "GR_ovn-worker"); strings.Contains(n, "172.18.0.44") {
				return "the deleted EgressIP's SNAT stays:\n" + n
			}
			return ""
		}},
	} {
		before := incremental()
		ch := &desired.Changes{}
		step.edit(&s, ch)
		s.Changed = ch
		if err := d.Cluster(ctx, s); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if incremental() != before+1 {
			t.Fatalf("%s: not computed incrementally", step.name)
		}
		if step.check != nil {
			if msg := step.check(); msg != "" {
				t.Errorf("%s: %s", step.name, msg)
			}
		}
		full := s
		full.Changed = nil
		if err := d.Verify(ctx, full); err != nil {
			t.Errorf("%s: the NB does not hold the full recompute's rows: %v", step.name, err)
		}
	}
	// An owner the NB refuses is sent again by the next incremental
	// pass, once what it wanted is there: a node joins before its
	// gateway router exists (the node's owners are refused), then the
	// router is created and a pass with no change writes them.
	s3, _ := loadDemo(t, demoConfig(t), map[string]string{"node3.yaml": thirdNode})
	n3 := s3.Nodes[slices.IndexFunc(s3.Nodes, func(n *corev1.Node) bool { return n.Name == "ovn-worker3" })]
	s.Nodes = append(slices.Clone(s.Nodes), n3)
	s.Changed = &desired.Changes{Nodes: map[string]*corev1.Node{n3.Name: n3}}
	var se *ovsdbnb.SyncError
	if err := d.Cluster(ctx, s); !errors.As(err, &se) {
		t.Fatalf("a node without its gateway router: %v, want a SyncError", err)
	}
	topo := demoTopology
	topo.Nodes = append(slices.Clone(topo.Nodes), ovsdbnb.Node{Name: "ovn-worker3", Subnet: "10.244.3.0/24",
		JoinIP: "100.64.0.5/16", ExternalIP: "172.18.0.4/24"})
	nb, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{ovn.NB}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	err = ovsdbnb.EnsureTopology(ctx, nb, topo)
	nb.Close()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; { // until the leader's cache shows the router
		s.Changed = &desired.Changes{}
		err := d.Cluster(ctx, s)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the passes after the router was created: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	full := s
	full.Changed = nil
	if err := d.Verify(ctx, full); err != nil {
		t.Errorf("the refused owners were not written once they could be: %v", err)
	}

	// A pass that changes nothing plans nothing: no owner (not even one
	// desired without rows, as the reply fallback on this 23.03 NB) is
	// synced again on every pass.
	syncs := gathered(t, m, "ovnedge_nb_syncs_total")
	s.Changed = &desired.Changes{}
	if err := d.Cluster(ctx, s); err != nil {
		t.Fatal(err)
	}
	if n := gathered(t, m, "ovnedge_nb_syncs_total") - syncs; n != 0 {
		t.Errorf("a pass with no change ran %v NB syncs, want none", n)
	}
}

// demoLeaderNB returns a real NB, the demo's Snapshot and a leader's
// Dataplane over them (closed when t ends), logging to log, with its
// metrics.
func demoLeaderNB(t *testing.T, log *slog.Logger) (*testbed.OVN, desired.Snapshot, *Dataplane, *Metrics) {
	ovn := startNB(t)
	cfg := demoConfig(t, "--nb-address", ovn.NB)
	s, c := loadDemo(t, cfg, nil)
	m := NewMetrics()
	d := NewDataplane(cfg, c, record.NewFakeRecorder(1000), m, log)
	t.Cleanup(d.Close)
	return ovn, s, d, m
}

// missing is "" when out contains want, else says it does not.
func missing(out, want string) string {
	if strings.Contains(out, want) {
		return ""
	}
	return "no " + want + " in:\n" + out
}

// histogramCount is the number of observations of h.
func histogramCount(t *testing.T, h prometheus.Observer) float64 {
	t.Helper()
	var m dto.Metric
	if err := h.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return float64(m.GetHistogram().GetSampleCount())
}

// replaceObj makes *list hold obj (none when nil) in place of the object
// of key ("<namespace>/<name>", or the name), in a new slice.
func replaceObj[T interface {
	comparable
	GetNamespace() string
	GetName() string
}](list *[]T, key string, obj T) {
	*list = slices.DeleteFunc(slices.Clone(*list), func(o T) bool { return desired.Key(o.GetNamespace(), o.GetName()) == key })
	var none T
	if obj != none {
		*list = append(*list, obj)
	}
}
