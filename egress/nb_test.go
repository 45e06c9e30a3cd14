package egress_test

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovnknode/ovnknodetest"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	corev1 "k8s.io/api/core/v1"
)

// seedNodesPlusWorker3 adds an egress-assignable ovn-worker3.
func seedNodesPlusWorker3(t *testing.T) []ovnknode.Node {
	w3, err := ovnknode.Parse(ovnknodetest.Node("ovn-worker3", "10.244.3.0/24", "172.18.0.5/16", "100.64.0.5/16", true))
	if err != nil {
		t.Fatal(err)
	}
	return append(seedNodes(t), w3)
}

// An egress node becomes unreachable: Assign moves its IP in one pass, and
// MakeBeforeBreak orders the NB changes so the new SNAT exists before the
// reroute moves and the old SNAT goes last.
func TestFailoverMakeBeforeBreak(t *testing.T) {
	e, nodes, compute := seedFailover(t)
	e.Status.Items = []egressv1.EgressIPStatusItem{{Node: "ovn-worker", EgressIP: "172.18.0.33"}, {Node: "ovn-worker2", EgressIP: "172.18.0.44"}}
	old := compute(e.Status.Items)

	res := egress.Assign([]*egressv1.EgressIP{e}, nodes, func(n string) bool { return n != "ovn-worker" }, nil)
	want := []egressv1.EgressIPStatusItem{{Node: "ovn-worker3", EgressIP: "172.18.0.33"}, {Node: "ovn-worker2", EgressIP: "172.18.0.44"}}
	if !reflect.DeepEqual(res.Status[e.Name], want) || len(res.Events) > 0 {
		t.Fatalf("failover assignment = %v, events %v", res.Status, res.Events)
	}
	next := compute(res.Status[e.Name])

	steps := egress.MakeBeforeBreak(old, next)
	if len(steps) != 3 {
		t.Fatalf("%d steps", len(steps))
	}
	reroute := func(m map[ovsdbnb.Owner]ovsdbnb.State) string {
		for _, l := range policyList(m) {
			if strings.HasPrefix(l, "100 ") {
				return l
			}
		}
		return ""
	}
	const (
		w1NAT = "GR_ovn-worker snat 172.18.0.33 10.244.1.3"
		w2NAT = "GR_ovn-worker2 snat 172.18.0.44 10.244.1.3"
		w3NAT = "GR_ovn-worker3 snat 172.18.0.33 10.244.1.3"
	)
	wantSteps := []struct{ reroute, nats string }{
		{"100 ip4.src == 10.244.1.3 reroute 100.64.0.3, 100.64.0.4", strings.Join([]string{w1NAT, w2NAT, w3NAT}, "|")},
		{"100 ip4.src == 10.244.1.3 reroute 100.64.0.4, 100.64.0.5", strings.Join([]string{w1NAT, w2NAT, w3NAT}, "|")},
		{"100 ip4.src == 10.244.1.3 reroute 100.64.0.4, 100.64.0.5", strings.Join([]string{w2NAT, w3NAT}, "|")},
	}
	for i, w := range wantSteps {
		if got := reroute(steps[i]); got != w.reroute {
			t.Errorf("step %d reroute = %q, want %q", i+1, got, w.reroute)
		}
		if got := strings.Join(natList(steps[i]), "|"); got != w.nats {
			t.Errorf("step %d NATs = %q, want %q", i+1, got, w.nats)
		}
	}
	if !reflect.DeepEqual(steps[2], next) {
		t.Error("the last step is not the new state")
	}
	// Nothing moves: every step is the state itself.
	for i, s := range egress.MakeBeforeBreak(next, next) {
		if !reflect.DeepEqual(renderNB(s), renderNB(next)) {
			t.Errorf("no-op step %d differs", i+1)
		}
	}
	// An EgressIP deleted: its owner is empty in the last step.
	gone := egress.MakeBeforeBreak(next, map[ovsdbnb.Owner]ovsdbnb.State{})
	o := ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: e.Name}
	if st, ok := gone[2][o]; !ok || len(st.Policies)+len(st.NATs) > 0 {
		t.Errorf("deleted owner in last step: %+v, %v", st, ok)
	}
	if len(gone[0][o].NATs) != 2 {
		t.Errorf("deleted owner's NATs removed before the reroute: %+v", gone[0][o])
	}
}

// SilenceFirst: the down node's SNAT (the ARP answer for its egress IP)
// goes in a step of its own before the new node's SNAT appears; the live
// node's SNAT stays in every step, and the rest is make-before-break.
func TestFailoverSilenceFirst(t *testing.T) {
	_, _, compute := seedFailover(t)
	old := compute([]egressv1.EgressIPStatusItem{{Node: "ovn-worker", EgressIP: "172.18.0.33"}, {Node: "ovn-worker2", EgressIP: "172.18.0.44"}})
	next := compute([]egressv1.EgressIPStatusItem{{Node: "ovn-worker3", EgressIP: "172.18.0.33"}, {Node: "ovn-worker2", EgressIP: "172.18.0.44"}})
	steps := egress.SilenceFirst(old, next, func(r string) bool { return r == "GR_ovn-worker" })
	const (
		w1NAT = "GR_ovn-worker snat 172.18.0.33 10.244.1.3"
		w2NAT = "GR_ovn-worker2 snat 172.18.0.44 10.244.1.3"
		w3NAT = "GR_ovn-worker3 snat 172.18.0.33 10.244.1.3"
	)
	want := []string{w2NAT, w2NAT + "|" + w3NAT, w2NAT + "|" + w3NAT, w2NAT + "|" + w3NAT}
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(steps), len(want))
	}
	for i, w := range want {
		if got := strings.Join(natList(steps[i]), "|"); got != w {
			t.Errorf("step %d NATs = %q, want %q", i+1, got, w)
		}
		for _, n := range natList(steps[i]) {
			if n == w1NAT {
				t.Errorf("step %d: the down node's SNAT is back", i+1)
			}
		}
	}
	if !reflect.DeepEqual(steps[len(steps)-1], next) {
		t.Error("the last step is not the new state")
	}
	// Nobody silenced: the first step is old, then make-before-break.
	plain := egress.SilenceFirst(old, next, nil)
	if !reflect.DeepEqual(renderNB(plain[0]), renderNB(old)) || strings.Join(natList(plain[1]), "|") != strings.Join([]string{w1NAT, w2NAT, w3NAT}, "|") {
		t.Errorf("SilenceFirst without silenced routers: %v then %v", natList(plain[0]), natList(plain[1]))
	}
}

// Dual stack: IPv6 egress IPs serve IPv6 pod IPs with ip6 rows, IPv4 ones
// IPv4 pod IPs; several egress IPs of a family give ECMP nexthops.
func TestDualStack(t *testing.T) {
	mk := func(name, v4sub, v6sub, v4, v6, j4, j6 string) *corev1.Node {
		return ovnknodetest.Node(name, "", "", "", true,
			ovnknode.AnnotationNodeSubnets, `{"default":["`+v4sub+`","`+v6sub+`"]}`,
			ovnknode.AnnotationPrimaryIfAddr, `{"ipv4":"`+v4+`","ipv6":"`+v6+`"}`,
			ovnknode.AnnotationHostCIDRs, `["`+v4+`","`+v6+`"]`,
			ovnknode.AnnotationGatewayJoinAddr, `{"ipv4":"`+j4+`","ipv6":"`+j6+`"}`)
	}
	nodes, broken := ovnknode.ParseAll([]*corev1.Node{
		mk("w1", "10.244.1.0/24", "fd00:10:244:2::/64", "172.18.0.2/16", "fc00::2/64", "100.64.0.3/16", "fd98::3/64"),
		mk("w2", "10.244.2.0/24", "fd00:10:244:3::/64", "172.18.0.3/16", "fc00::3/64", "100.64.0.4/16", "fd98::4/64"),
		mk("w3", "10.244.3.0/24", "fd00:10:244:4::/64", "172.18.0.5/16", "fc00::5/64", "100.64.0.5/16", "fd98::5/64"),
	})
	if broken != nil {
		t.Fatal(broken)
	}
	e := seedEgressIP("fc00::33", "fc00::44", "172.18.0.33")
	res := egress.Assign([]*egressv1.EgressIP{e}, nodes, nil, nil)
	if len(res.Events) > 0 {
		t.Fatalf("events %+v", res.Events)
	}
	pods := []egress.Pod{{Namespace: "default", Name: "web", Node: "w1",
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.3"), netip.MustParseAddr("fd00:10:244:2::3")}}}
	c := egress.Cluster{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")}}
	d, err := egress.Compute(c, nodes, []egress.Served{{Name: e.Name, Status: res.Status[e.Name], Pods: pods}})
	if err != nil {
		t.Fatal(err)
	}
	got := policyList(d.NB)
	for _, want := range []string{
		"100 ip4.src == 10.244.1.3 reroute 100.64.0.5",
		"100 ip6.src == fd00:10:244:2::3 reroute fd98::3, fd98::4",
		"102 ip6.src == fd00:10:244::/48 && ip6.dst == fd98::/64 allow",
		`1004 inport == "rtos-w2" && ip6.dst == fc00::3 /* w2 */ reroute fd00:10:244:3::2`,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, strings.Join(got, "\n"))
		}
	}
	nats := natList(d.NB)
	wantNATs := []string{"GR_w1 snat fc00::33 fd00:10:244:2::3", "GR_w2 snat fc00::44 fd00:10:244:2::3", "GR_w3 snat 172.18.0.33 10.244.1.3"}
	if !slices.Equal(nats, wantNATs) {
		t.Errorf("NATs = %q, want %q", nats, wantNATs)
	}
	if _, err := egress.Compute(egress.Cluster{}, nodes, nil); err == nil {
		t.Error("no cluster subnet accepted")
	}
}

// Status items that name unknown nodes or IPs outside the node's networks
// yield no rows; an EgressIP with no assignment has none either.
func TestEgressIPStateSkipsBadItems(t *testing.T) {
	nodes := seedNodes(t)
	byName := map[string]*ovnknode.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	pods := []egress.Pod{{Namespace: "default", Name: "web", IPs: []netip.Addr{netip.MustParseAddr("10.244.1.3")}}}
	for _, items := range [][]egressv1.EgressIPStatusItem{
		nil,
		{{Node: "gone", EgressIP: "172.18.0.33"}},
		{{Node: "ovn-worker", EgressIP: "192.0.2.1"}},
		{{Node: "ovn-worker", EgressIP: "bogus"}},
	} {
		st, host := egress.EgressIPState(seedCluster, egress.Served{Name: "e", Status: items, Pods: pods}, byName)
		if len(st.Policies)+len(st.NATs)+len(host) > 0 {
			t.Errorf("items %v gave %+v %+v", items, st, host)
		}
	}
}

// The br-ex egress configuration computed from the example cluster's ovn-worker2 is
// the one the ovsflow goldens (testdata/flows/egress-seed.flows) hold.
func TestNodeFlowsSeed(t *testing.T) {
	nodes := seedNodes(t)
	w2 := &nodes[2]
	e, err := egress.NodeFlows(seedCluster, w2, brextest.Uplink, brextest.Patch)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(e, brextest.Egress()) {
		t.Errorf("egress config\n got %+v\nwant %+v", e, brextest.Egress())
	}
	flows, err := brex.EgressFlows(e)
	if err != nil || len(flows) != 4 {
		t.Errorf("flows %v, %v", flows, err)
	}
	if _, err := egress.NodeFlows(egress.Cluster{}, w2, brextest.Uplink, brextest.Patch); err == nil {
		t.Error("no cluster subnet accepted")
	}
	if _, err := egress.NodeFlows(seedCluster, w2, "", brextest.Patch); err == nil {
		t.Error("no uplink accepted")
	}
}

// seedFailover is the example EgressIP over the example nodes plus
// ovn-worker3, and its NB rows for a given status.
func seedFailover(t *testing.T) (*egressv1.EgressIP, []ovnknode.Node, func([]egressv1.EgressIPStatusItem) map[ovsdbnb.Owner]ovsdbnb.State) {
	t.Helper()
	nodes := seedNodesPlusWorker3(t)
	e := seedEgressIP("172.18.0.33", "172.18.0.44")
	pods, err := egress.SelectPods(e, seedNamespaces, egress.PodInfos(seedPods))
	if err != nil {
		t.Fatal(err)
	}
	return e, nodes, func(status []egressv1.EgressIPStatusItem) map[ovsdbnb.Owner]ovsdbnb.State {
		d, err := egress.Compute(seedCluster, nodes, []egress.Served{{Name: e.Name, Status: status, Pods: pods}})
		if err != nil {
			t.Fatal(err)
		}
		return d.NB
	}
}

// TestEgressServicePods: with Cluster.EgressServices the reply-traffic
// QoS rules mark the replies of egresssvc-served-pods too (one rule per
// family beside EgressIP's), and WithEgressServicePods fills that set
// without changing the state it was given.
func TestEgressServicePods(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	nodes := []ovnknode.Node{{Name: "n1", Subnets: []netip.Prefix{pfx("10.244.1.0/24")}}}
	for _, on := range []bool{false, true} {
		out, err := egress.ClusterState(egress.Cluster{ClusterSubnets: []netip.Prefix{pfx("10.244.0.0/16"), pfx("fd00:10:244::/48")}, EgressServices: on}, nodes, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range out[egress.ReplyQoSOwner].QoSRules {
			names = append(names, q.ExternalIDs[ovsdbnb.KeyName]+" "+q.Match)
		}
		want := []string{"EgressIP-Mark-Reply-Traffic ip4.src == $a8519615025667110816 && ct.trk && ct.rpl",
			"EgressIP-Mark-Reply-Traffic ip6.src == $a3735740021425387998 && ct.trk && ct.rpl"}
		if on {
			want = []string{want[0], "EgressSVC-Mark-Reply-Traffic ip4.src == $a13607449821398607916 && ct.trk && ct.rpl",
				want[1], "EgressSVC-Mark-Reply-Traffic ip6.src == $a13607452020421864338 && ct.trk && ct.rpl"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("EgressServices %v: reply QoS rules\n%s\nwant\n%s", on, strings.Join(names, "\n"), strings.Join(want, "\n"))
		}
		before := out[egress.ClusterOwner]
		egress.WithEgressServicePods(out, []netip.Addr{addr("10.244.1.5"), addr("fd00:10:244:1::5")})
		for i, a := range out[egress.ClusterOwner].AddressSets {
			if a.ExternalIDs[ovsdbnb.KeyName] != "egresssvc-served-pods" {
				continue
			}
			if len(before.AddressSets[i].Addresses) != 0 || len(a.Addresses) != 1 {
				t.Errorf("set %s: %v (given state now %v)", a.ExternalIDs[ovsdbnb.KeyIPFamily], a.Addresses, before.AddressSets[i].Addresses)
			}
		}
	}
}
