package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/internal/clustermodel"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// TestClusterAudit runs the periodic audit against a real NB: with
// objects changing before and after it lists, a correct incremental
// state matches and is kept; an incremental state that went wrong (an
// egress IP's SNAT lost from the index, and so from the NB) is found
// (errDiverged, the owner named), and the full pass run then asks for
// writes the rows back.
func TestClusterAudit(t *testing.T) {
	ctx := context.Background()
	var logs lockedBuilder
	ovn, s, d, m := demoLeaderNB(t, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	list := func() (desired.Snapshot, error) { return s, nil }
	if err := d.Audit(ctx, list); !errors.Is(err, errNoIndex) {
		t.Fatalf("an audit before the first pass: %v, want errNoIndex", err)
	}
	if err := d.Cluster(ctx, s); err != nil {
		t.Fatal(err)
	}
	pass := func(what string, edit func(*desired.Snapshot, *desired.Changes)) {
		t.Helper()
		ch := &desired.Changes{}
		if edit != nil {
			edit(&s, ch)
		}
		inc := s
		inc.Changed = ch
		if err := d.Cluster(ctx, inc); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	ready, port, proto, portName, nodeName := true, int32(5432), corev1.ProtocolTCP, "pg", "ovn-worker2"
	addPod := func(s *desired.Snapshot, ch *desired.Changes) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db-0", Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{NodeName: "ovn-worker2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.2.7",
				PodIPs: []corev1.PodIP{{IP: "10.244.2.7"}}}}
		info := egress.NewPodInfo(p)
		replaceObj(&s.Pods, "prod/db-0", info)
		ch.Pods = map[string]*egress.PodInfo{"prod/db-0": info}
	}
	addService := func(s *desired.Snapshot, ch *desired.Changes) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.50", ClusterIPs: []string{"10.96.0.50"},
			Ports: []corev1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}}}}
		sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db-x",
			Labels: map[string]string{discoveryv1.LabelServiceName: "db"}}, AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.2.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &nodeName}},
			Ports:     []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}}}
		replaceObj(&s.Services, "prod/db", svc)
		replaceObj(&s.EndpointSlices, "prod/db-x", sl)
		ch.Services = map[string]*corev1.Service{"prod/db": svc}
		ch.EndpointSlices = map[string]*discoveryv1.EndpointSlice{"prod/db-x": sl}
	}
	count := func(result string) float64 {
		var v dto.Metric
		if err := m.Audits.WithLabelValues(result).Write(&v); err != nil {
			t.Fatal(err)
		}
		return v.GetCounter().GetValue()
	}

	// A match: a pod comes before the audit lists (a pass applies it
	// first); after its list, before the pass that checks, a Service
	// comes, the pod gets another IP and a node becomes an egress node
	// (each in a pass of its own; the passes that come while it computes
	// are no different).
	x := d.cluster.index
	if err := d.Audit(ctx, func() (desired.Snapshot, error) {
		pass("pod added", addPod)
		listed := s
		pass("Service added", addService)
		pass("pod IP changed", func(s *desired.Snapshot, ch *desired.Changes) {
			p := *s.Pods[slices.IndexFunc(s.Pods, func(p *egress.PodInfo) bool { return p.Name == "db-0" })]
			p.IPs = []netip.Addr{netip.MustParseAddr("10.244.2.8")}
			replaceObj(&s.Pods, "prod/db-0", &p)
			ch.Pods = map[string]*egress.PodInfo{"prod/db-0": &p}
		})
		pass("node labelled egress-assignable", func(s *desired.Snapshot, ch *desired.Changes) {
			n := s.Nodes[slices.IndexFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == "ovn-worker" })].DeepCopy()
			n.Labels = map[string]string{"k8s.ovn.org/egress-assignable": ""}
			replaceObj(&s.Nodes, n.Name, n)
			ch.Nodes = map[string]*corev1.Node{n.Name: n}
		})
		return listed, nil
	}); err != nil {
		t.Fatal(err)
	}
	if count("match") != 1 || count("differed") != 0 || d.cluster.index != x || d.cluster.audit != nil {
		t.Fatalf("audits: match %v, differed %v; index kept %v; audit left %v\n%s", count("match"), count("differed"),
			d.cluster.index == x, d.cluster.audit != nil, logs.String())
	}
	if err := d.Verify(ctx, s); err != nil {
		t.Fatal(err)
	}

	// The index loses the egress IP's SNAT, and a pass writes that to
	// the NB (as a bug of the incremental path would).
	owner := ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: "egress-prod"}
	st := x.State().Egress[owner] // the index's own map
	if len(st.NATs) == 0 {
		t.Fatalf("%s has no SNAT to lose: %+v", owner, st)
	}
	ip := st.NATs[0].ExternalIP
	st.NATs = nil
	x.State().Egress[owner] = st
	d.cluster.nb.Postpone(map[ovsdbnb.Owner]bool{owner: true})
	pass("nothing", nil)
	nats := func() string { return ovn.Nbctl("--bare", "--columns=external_ip", "list", "NAT") }
	if strings.Contains(nats(), ip) {
		t.Fatalf("the SNAT of %s stayed in the NB: the test does not break the incremental state", ip)
	}
	if err := d.Audit(ctx, list); !errors.Is(err, errDiverged) {
		t.Fatalf("the audit of a broken state: %v, want errDiverged", err)
	}
	if count("differed") != 1 || d.cluster.audit != nil {
		t.Fatalf("audits: match %v, differed %v; audit left %v\n%s", count("match"), count("differed"), d.cluster.audit != nil, logs.String())
	}
	if msg := missing(logs.String(), `msg="audit: the incremental state differs from a full recompute of the informers' caches; the cluster loop recomputes everything" owners=1 first=[EgressIP/egress-prod]`); msg != "" {
		t.Fatal(msg)
	}
	// As run does then: a full pass.
	if err := d.Cluster(ctx, s); err != nil {
		t.Fatal(err)
	}
	if msg := missing(nats(), ip); msg != "" {
		t.Fatalf("the audit did not write the SNAT back: %s", msg)
	}
	if err := d.Verify(ctx, s); err != nil {
		t.Fatal(err)
	}

	// A full pass while an audit is under way: nothing is left to check
	// (no other full pass is asked for, none counted).
	if err := d.Audit(ctx, func() (desired.Snapshot, error) {
		if err := d.Cluster(ctx, s); err != nil { // Changed nil: a full pass
			t.Fatal(err)
		}
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	if d.cluster.audit != nil || count("match")+count("differed")+count("failed") != 2 {
		t.Fatalf("after a full pass: audit left %v, %v counted", d.cluster.audit != nil, count("match")+count("differed")+count("failed"))
	}
}

// TestDiverged: every part of the desired state the leader writes or acts
// on is compared, and the owners that differ are named once, sorted.
func TestDiverged(t *testing.T) {
	eip := func(name string) ovsdbnb.Owner { return ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: name} }
	svc := ovsdbnb.Owner{Type: "Service", Name: "prod/web"}
	nat := func(ip string) ovsdbnb.State {
		return ovsdbnb.State{NATs: []ovsdbnb.NAT{{Router: "GR_a", Type: "snat", ExternalIP: ip, LogicalIP: "10.244.0.5"}}}
	}
	base := func() desired.ClusterState {
		return desired.ClusterState{
			Egress:  map[ovsdbnb.Owner]ovsdbnb.State{eip("a"): nat("172.18.0.44"), eip("b"): nat("172.18.0.45")},
			LB:      map[ovsdbnb.Owner]ovsdbnb.State{svc: {}},
			Status:  map[string][]egressv1.EgressIPStatusItem{"a": {{Node: "a", EgressIP: "172.18.0.44"}}},
			Ingress: map[string][]corev1.LoadBalancerIngress{"prod/web": {{IP: "172.18.0.200"}}},
			Keep:    []ovsdbnb.Owner{eip("a"), eip("b")},
			Nodes:   []ovnknode.Node{{Name: "a"}},
			Events:  []event.Event{{Reason: "one"}, {Reason: "two"}},
		}
	}
	for _, tc := range []struct {
		name   string
		edit   func(*desired.ClusterState)
		owners []string
		other  []string
	}{
		{"equal", func(*desired.ClusterState) {}, nil, nil},
		{"the same, in another order", func(cs *desired.ClusterState) {
			cs.Keep = []ovsdbnb.Owner{eip("b"), eip("a")}
			cs.Events = []event.Event{{Reason: "two"}, {Reason: "one"}}
		}, nil, nil},
		{"rows differ", func(cs *desired.ClusterState) { cs.Egress[eip("b")] = nat("172.18.0.46") }, []string{"EgressIP/b"}, nil},
		{"an owner on one side only", func(cs *desired.ClusterState) {
			delete(cs.Egress, eip("a"))
			cs.LB[ovsdbnb.Owner{Type: "Service", Name: "prod/db"}] = ovsdbnb.State{}
		}, []string{"EgressIP/a", "Service/prod/db"}, nil},
		{"an owner in both maps", func(cs *desired.ClusterState) { cs.LB[eip("a")] = nat("172.18.0.44") }, []string{"EgressIP/a"}, nil},
		{"status", func(cs *desired.ClusterState) { cs.Status["a"] = nil }, nil, []string{"status"}},
		{"ingress", func(cs *desired.ClusterState) { cs.Ingress["prod/web"] = nil }, nil, []string{"ingress"}},
		{"reply fallback", func(cs *desired.ClusterState) { cs.ReplyFallback = nat("172.18.0.1") }, nil, []string{"reply fallback"}},
		{"keep", func(cs *desired.ClusterState) { cs.Keep = cs.Keep[:1] }, nil, []string{"keep"}},
		{"host", func(cs *desired.ClusterState) { cs.Host = []egress.HostAssignment{{Node: "a"}} }, nil, []string{"host"}},
		{"nodes", func(cs *desired.ClusterState) { cs.Nodes = []ovnknode.Node{{Name: "b"}} }, nil, []string{"nodes"}},
		{"events", func(cs *desired.ClusterState) { cs.Events = cs.Events[1:] }, nil, []string{"events"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, inc := base(), base()
			tc.edit(&inc)
			v := desired.Diverged(full, inc)
			var owners []string
			for _, o := range v.Owners {
				owners = append(owners, o.String())
			}
			if !slices.Equal(owners, tc.owners) || !slices.Equal(v.Other, tc.other) {
				t.Errorf("owners %q other %q, want %q %q", owners, v.Other, tc.owners, tc.other)
			}
			if v.None() != (len(tc.owners) == 0 && len(tc.other) == 0) {
				t.Errorf("none() = %v", v.None())
			}
		})
	}
}

// TestGiveWay: an audit waits while a pass runs, until it ends or for
// max at most, and not again before it has run for run.
func TestGiveWay(t *testing.T) {
	d := &Dataplane{cluster: &clusterWork{}}
	returned := func(f func()) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			f()
			close(done)
		}()
		return done
	}
	g := d.cluster.giveWay(time.Hour, time.Hour)
	<-returned(g) // no pass: on at once
	d.cluster.passing.Add(1)
	done := returned(g)
	select {
	case <-done:
		t.Fatal("did not wait for the pass")
	case <-time.After(30 * time.Millisecond):
	}
	d.cluster.passing.Add(-1)
	<-done
	d.cluster.passing.Add(1)
	<-returned(g)                                         // it waited less than an hour ago: on at once
	<-returned(d.cluster.giveWay(0, 20*time.Millisecond)) // the pass runs on: on after max
}

// TestAuditHoldsApart: the audit applies a copy of the leader's egress IP
// holds. Its list shows a status the leader's passes never saw (an egress
// IP on a host interface of a node that may not hold it): the copy holds
// the IP back, the leader's holds stay empty.
func TestAuditHoldsApart(t *testing.T) {
	ctx := context.Background()
	m := clustermodel.New(1, 3, 2, 6, 0, 0)
	m.PutNode(m.Node(0, true, false, 1)) // has the secondary network, may not hold egress IPs
	m.PutNode(m.Node(1, true, true, 1))
	eip := func(status bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
			"metadata": map[string]any{"name": "host"},
			"spec": map[string]any{"egressIPs": []any{"192.168.50.100"},
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"tenant": "0"}}}}}
		if status {
			u.Object["status"] = map[string]any{"items": []any{map[string]any{"node": "node0", "egressIP": "192.168.50.100"}}}
		}
		return u
	}
	m.PutEIP(eip(false))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{egressv1.Resource: "EgressIPList"}, eip(false))
	d := NewDataplane(demoConfig(t), &Clients{Typed: kubefake.NewClientset(), Dynamic: dyn}, record.NewFakeRecorder(100), NewMetrics(), quiet)
	t.Cleanup(d.Close)
	if err := d.Cluster(ctx, m.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if held := d.cluster.params.Hold.Held(); len(held) != 0 {
		t.Fatalf("the leader holds %v before the audit", held)
	}
	err := d.Audit(ctx, func() (desired.Snapshot, error) {
		m.PutEIP(eip(true))
		return m.Snapshot(), nil
	})
	if !errors.Is(err, errDiverged) {
		t.Fatalf("audit: %v, want errDiverged (the held IP is in no status of the audit's)", err)
	}
	if held := d.cluster.params.Hold.Held(); len(held) != 0 {
		t.Fatalf("the audit changed the leader's holds: %v", held)
	}
}
