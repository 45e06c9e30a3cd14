package egress_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovnknode/ovnknodetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pass is one leader pass over the cluster as the daemon runs it:
// ParseNodes, Assign, Serve, Compute. It stores the new status in eips
// and returns the events as "<eip> <reason>", sorted.
func pass(t *testing.T, eips []*egressv1.EgressIP, nodes []*corev1.Node) (egress.Desired, []string) {
	t.Helper()
	parsed, broken := ovnknode.ParseAll(nodes)
	res := egress.Assign(eips, parsed, nil, broken)
	served, evs := egress.Serve(eips, res.Status, seedNamespaces, egress.PodInfos(seedPods))
	d, err := egress.Compute(seedCluster, parsed, served)
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, e := range append(res.Events, evs...) {
		if e.Type != corev1.EventTypeWarning || e.Message == "" {
			t.Errorf("bad event %+v", e)
		}
		events = append(events, e.Object.Name+" "+e.Reason)
	}
	slices.Sort(events)
	for _, e := range eips {
		e.Status.Items = res.Status[e.Name]
	}
	return d, events
}

// statusOf renders an EgressIP's status as "node=ip,...".
func statusOf(e *egressv1.EgressIP) string {
	var parts []string
	for _, it := range e.Status.Items {
		parts = append(parts, it.Node+"="+it.EgressIP)
	}
	return strings.Join(parts, ",")
}

// TestBadInputRealNB feeds bad input to the whole pipeline and a real NB:
// invalid IPs, an IP of no node network, the same IP in two EgressIPs, a
// selector that selects nothing, a selector made malformed after it was
// programmed, and then an egress node losing its label. Each gets its
// event and status, nothing panics, and the rows of the unaffected
// EgressIPs stay exactly as they were.
func TestBadInputRealNB(t *testing.T) {
	nb := startRealNB(t, topologyOf("10.244.0.0/16", seedNodesPlusWorker3(t), "172.18.0.1"))
	nodes := []*corev1.Node{
		ovnknodetest.Node("ovn-control-plane", "10.244.0.0/24", "172.18.0.4/16", "100.64.0.2/16", false),
		ovnknodetest.Node("ovn-worker", "10.244.1.0/24", "172.18.0.2/16", "100.64.0.3/16", true),
		ovnknodetest.Node("ovn-worker2", "10.244.2.0/24", "172.18.0.3/16", "100.64.0.4/16", true),
		ovnknodetest.Node("ovn-worker3", "10.244.3.0/24", "172.18.0.5/16", "100.64.0.5/16", true),
	}
	prod := seedEgressIP("172.18.0.33", "172.18.0.44")
	prod.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	dev := seedEgressIP("172.18.0.66")
	dev.Name = "egressip-dev"
	dev.Spec.NamespaceSelector = metav1.LabelSelector{MatchLabels: map[string]string{"environment": "development"}}

	d, events := pass(t, []*egressv1.EgressIP{prod, dev}, nodes)
	if len(events) > 0 {
		t.Fatalf("events for good input: %v", events)
	}
	nb.sync(t, d.NB)
	before := nb.policies(t)
	beforeNATs := map[string]string{}
	for _, gr := range []string{"GR_ovn-worker", "GR_ovn-worker2", "GR_ovn-worker3"} {
		beforeNATs[gr] = nb.nats(t, gr)
	}
	for _, w := range []string{"100 ip4.src == 10.244.1.3 reroute", "100 ip4.src == 10.244.2.5 reroute"} {
		if !strings.Contains(before, w) {
			t.Fatalf("good input: no %q in\n%s", w, before)
		}
	}

	// Bad input arrives; egressip-dev's selector turns malformed.
	mk := func(name string, ips ...string) *egressv1.EgressIP {
		e := seedEgressIP(ips...)
		e.Name = name
		e.CreationTimestamp = metav1.NewTime(time.Unix(200, 0))
		return e
	}
	invalid := mk("invalid", "not-an-ip", "172.18.0.300", "fe80::1")
	nonet := mk("nonet", "192.0.2.10")
	dup := mk("dup", "172.18.0.33")
	nothing := mk("nothing", "172.18.0.55")
	nothing.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "none"}}
	dev.Spec.NamespaceSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "environment", Operator: "Near"}}}
	eips := []*egressv1.EgressIP{prod, dev, invalid, nonet, dup, nothing}
	d, events = pass(t, eips, nodes)
	wantEvents := []string{"dup UnsupportedRequest", "egressip-dev InvalidSelector",
		"invalid InvalidEgressIP", "invalid InvalidEgressIP", "invalid InvalidEgressIP", "nonet NoMatchingNodeFound"}
	if !slices.Equal(events, wantEvents) {
		t.Errorf("events %q, want %q", events, wantEvents)
	}
	wantStatus := map[*egressv1.EgressIP]string{
		dev: "ovn-worker=172.18.0.66", prod: "ovn-worker2=172.18.0.33,ovn-worker3=172.18.0.44",
		invalid: "", nonet: "", dup: "", nothing: "ovn-worker=172.18.0.55",
	}
	for e, want := range wantStatus {
		if got := statusOf(e); got != want {
			t.Errorf("status of %s: %q, want %q", e.Name, got, want)
		}
	}
	nb.sync(t, d.NB)
	if got := nb.policies(t); got != before {
		t.Errorf("bad input changed the policies:\n%s\nwas:\n%s", got, before)
	}
	nb.checkNATs(t, "after bad input", beforeNATs)

	// egressip-dev's selector is fixed and ovn-worker loses its label: the
	// IPs there (egressip-dev's and nothing's) move to the least loaded
	// candidates in the same pass; prod is untouched.
	dev.Spec.NamespaceSelector = metav1.LabelSelector{MatchLabels: map[string]string{"environment": "development"}}
	delete(nodes[1].Labels, ovnknode.LabelEgressAssignable)
	d, events = pass(t, eips, nodes)
	wantStatus[dev], wantStatus[nothing] = "ovn-worker2=172.18.0.66", "ovn-worker3=172.18.0.55"
	for e, want := range wantStatus {
		if got := statusOf(e); got != want {
			t.Errorf("after ovn-worker lost its label, status of %s: %q, want %q (events %q)", e.Name, got, want, events)
		}
	}
	nb.sync(t, d.NB)
	after := nb.policies(t)
	for _, w := range []string{"100 ip4.src == 10.244.1.3 reroute 100.64.0.4, 100.64.0.5", "100 ip4.src == 10.244.2.5 reroute 100.64.0.4"} {
		if !strings.Contains(after, w) {
			t.Errorf("after the label change: no %q in\n%s", w, after)
		}
	}
	nb.checkNATs(t, "after the label change", map[string]string{
		"GR_ovn-worker":  "",
		"GR_ovn-worker2": "snat 172.18.0.33 10.244.1.3\nsnat 172.18.0.66 10.244.2.5",
		"GR_ovn-worker3": "snat 172.18.0.44 10.244.1.3",
	})
}
