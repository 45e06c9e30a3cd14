package egress_test

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	"github.com/ovnedge/ovnedge/testbed"
)

// topologyOf is the OVN-Kubernetes NB topology of nodes: their pod
// subnets, gateway routers with join IPs in 100.64.0.0/16 and external
// addresses on the primary network, with gateway as external next hop
// (none when empty).
func topologyOf(clusterSubnet string, nodes []ovnknode.Node, gateway string) ovsdbnb.Topology {
	topo := ovsdbnb.Topology{ClusterSubnet: clusterSubnet, JoinRouterIP: "100.64.0.1/16"}
	for _, n := range nodes {
		topo.Nodes = append(topo.Nodes, ovsdbnb.Node{Name: n.Name, Subnet: n.Subnets[0].String(),
			JoinIP: netip.PrefixFrom(n.GatewayJoin[0], 16).String(), ExternalIP: n.Primary[0].String(), Gateway: gateway})
	}
	return topo
}

// realNB is a real OVN central (NB, SB, northd) holding the example cluster's
// topology, and an ovsdbnb client on it. Its NB schema has the QoS "mark"
// action of OVN 24.03 (testbed.OVNOptions.QoSMark), so the reply-traffic
// QoS rules are written too.
type realNB struct {
	ovn *testbed.OVN
	c   *ovsdbnb.Client
}

func startRealNB(t testing.TB, topo ovsdbnb.Topology) *realNB {
	t.Helper()
	return startRealNBWith(t, topo, ovsdbnb.Options{})
}

// startRealNBWith is startRealNB with client options (Endpoints is set).
func startRealNBWith(t testing.TB, topo ovsdbnb.Topology, opts ovsdbnb.Options) *realNB {
	t.Helper()
	o := testbed.StartOVNWith(t, testbed.OVNOptions{QoSMark: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts.Endpoints = []string{o.NB}
	c, err := ovsdbnb.Dial(ctx, opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(c.Close)
	if err := ovsdbnb.EnsureTopology(ctx, c, topo); err != nil {
		t.Fatalf("EnsureTopology: %v", err)
	}
	return &realNB{ovn: o, c: c}
}

// sync writes desired and fails the test on error.
func (r *realNB) sync(t testing.TB, desired map[ovsdbnb.Owner]ovsdbnb.State) ovsdbnb.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.c.Sync(ctx, desired)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return res
}

// policies is `ovn-nbctl lr-policy-list ovn_cluster_router` with blanks
// collapsed, without its header.
func (r *realNB) policies(t testing.TB) string {
	t.Helper()
	out := testbed.Blanks(r.ovn.Nbctl("lr-policy-list", egress.ClusterRouter))
	return strings.TrimPrefix(strings.TrimPrefix(out, "Routing Policies"), "\n")
}

// nats is `ovn-nbctl lr-nat-list <router>` rows (type, external IP,
// logical IP) with blanks collapsed, sorted, without the header.
func (r *realNB) nats(t testing.TB, router string) string {
	t.Helper()
	var rows []string
	for _, l := range strings.Split(testbed.Blanks(r.ovn.Nbctl("lr-nat-list", router)), "\n") {
		if l != "" && !strings.HasPrefix(l, "TYPE ") {
			rows = append(rows, l)
		}
	}
	slices.Sort(rows)
	return strings.Join(rows, "\n")
}

// checkNATs compares each router's nats with want's.
func (r *realNB) checkNATs(t testing.TB, when string, want map[string]string) {
	t.Helper()
	for router, w := range want {
		if got := r.nats(t, router); got != w {
			t.Errorf("%s: lr-nat-list %s:\n%s\nwant:\n%s", when, router, got, w)
		}
	}
}

// checkReplyQoS checks that the NB holds one reply-traffic QoS row of the
// family fam ("ip4"/"ip6"), as OVN-Kubernetes writes it, and that it is in
// the qos_rules of exactly the given switches.
func (r *realNB) checkReplyQoS(t testing.TB, fam string, switches ...string) {
	t.Helper()
	set := ovsdbnb.AddressSetName("default-network-controller:EgressIP:egressip-served-pods:v" + fam[2:] + ":default")
	match := fam + ".src == $" + set + " && ct.trk && ct.rpl"
	row := r.ovn.Nbctl("--bare", "--columns=_uuid", "find", "QoS", "priority=103", "match="+strconv.Quote(match))
	if row == "" || strings.Contains(row, "\n") {
		t.Fatalf("reply-traffic QoS rows with match %q: %q, want one", match, row)
	}
	dump := r.ovn.Dump("QoS", "_uuid", "action", "direction", "external_ids")
	for _, w := range []string{row, "{mark=42}", "from-lport",
		`"k8s.ovn.org/id"="default-network-controller:EgressIP:103:EgressIP-Mark-Reply-Traffic:` + fam + `:default"`,
		`"k8s.ovn.org/name"=EgressIP-Mark-Reply-Traffic`, `"k8s.ovn.org/owner-type"=EgressIP`, `ip-family=` + fam,
		`priority="103"`, `network=default`} {
		if !strings.Contains(dump, w) {
			t.Errorf("QoS table has no %q:\n%s", w, dump)
		}
	}
	for _, sw := range strings.Fields(r.ovn.Nbctl("--bare", "--columns=name", "list", "Logical_Switch")) {
		has := strings.Contains(r.ovn.Nbctl("--bare", "--columns=qos_rules", "find", "Logical_Switch", "name="+sw), row)
		if want := slices.Contains(switches, sw); has != want {
			t.Errorf("switch %s holds the reply-traffic QoS rule: %v, want %v", sw, has, want)
		}
	}
}

// addSeedPod adds the seed's pod 10.244.1.3 on ovn-worker and tells both
// gateway routers the external gateway's MAC (ovn-trace ignores
// Static_MAC_Binding), so a trace follows the packet out.
func (r *realNB) addSeedPod(t testing.TB) {
	t.Helper()
	r.ovn.Nbctl("lsp-add", "ovn-worker", "pod1", "--", "lsp-set-addresses", "pod1", "0a:58:0a:f4:01:03 10.244.1.3")
	r.ovn.Nbctl("--wait=sb", "--timeout=20", "sync")
	for _, gr := range []string{"GR_ovn-worker", "GR_ovn-worker2"} {
		dp := r.ovn.Sbctl("--bare", "--columns=_uuid", "find", "Datapath_Binding", "external_ids:name="+gr)
		r.ovn.Sbctl("create", "MAC_Binding", "logical_port=rtoe-"+gr, "ip=172.18.0.1", `mac="02:00:00:00:00:01"`, "datapath="+dp)
	}
}

// trace runs `ovn-trace --ct=new` of a TCP packet from the seed pod to
// 8.8.8.8 once northd has caught up.
func (r *realNB) trace(t testing.TB) string {
	t.Helper()
	r.ovn.Nbctl("--wait=sb", "--timeout=20", "sync")
	flow := `inport == "pod1" && eth.src == 0a:58:0a:f4:01:03 && eth.dst == ` + ovsdbnb.MAC(netip.MustParseAddr("10.244.1.1")) +
		` && ip4.src == 10.244.1.3 && ip4.dst == 8.8.8.8 && ip.ttl == 64 && tcp && tcp.src == 40000 && tcp.dst == 443`
	return r.ovn.Trace("--ct=new", "ovn-worker", flow)
}

// TestSeed002RealNB runs the whole pipeline (ParseNodes, SelectPods,
// Assign, Compute) on the example cluster and writes the result with
// ovsdbnb.Sync into a real NB with northd: `lr-policy-list` is exactly the
// seed's table, `lr-nat-list` shows its two SNATs, and ovn-trace of the
// pod's first packet shows the reroute and ct_snat to an egress IP. Then
// the egress IPs move to a secondary host network (reroute to the
// management IPs, pkt_mark=1009, no SNAT), and back.
func TestSeed002RealNB(t *testing.T) {
	nb := startRealNB(t, topologyOf("10.244.0.0/16", seedNodes(t), "172.18.0.1"))
	_, d := seedDesired(t, seedNodes(t), "172.18.0.33", "172.18.0.44")
	if res := nb.sync(t, d.NB); res.Inserts == 0 {
		t.Fatalf("first sync inserted nothing: %+v", res)
	}
	if res := nb.sync(t, d.NB); res.Ops() != 0 {
		t.Errorf("second sync: %+v, want no operations", res)
	}

	want := seedSets.Replace(seedPolicies + replyPolicy + "100 ip4.src == 10.244.1.3 reroute 100.64.0.3, 100.64.0.4")
	if got := nb.policies(t); got != strings.TrimSpace(want) {
		t.Errorf("lr-policy-list %s:\n%s", egress.ClusterRouter, flowtest.Diff(want, got+"\n"))
	}
	nb.checkNATs(t, "seed", map[string]string{
		"GR_ovn-worker":        "snat 172.18.0.33 10.244.1.3",
		"GR_ovn-worker2":       "snat 172.18.0.44 10.244.1.3",
		"GR_ovn-control-plane": "",
	})

	nb.checkReplyQoS(t, "ip4", "ovn-control-plane", "ovn-worker", "ovn-worker2")

	nb.addSeedPod(t)
	out := nb.trace(t)
	// The reroute policy matches, ECMP picks one of the two gateway
	// routers' join IPs as next hop, and that router SNATs to its egress IP.
	for _, w := range [][]string{
		{"lr_in_policy (", "ip4.src == 10.244.1.3, priority 100"},
		{"lr_in_policy_ecmp"},
		{"reg0 == 100.64.0.3", "reg0 == 100.64.0.4"},
		{"ct_snat(172.18.0.33)", "ct_snat(172.18.0.44)"},
	} {
		if !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(out, s) }) {
			t.Errorf("ovn-trace: none of %q in\n%s", w, out)
		}
	}

	// The same EgressIP on a secondary host network of the workers.
	nodes := seedSecondaryNodes(t)
	_, sec := seedDesired(t, nodes, "10.10.10.100", "10.10.10.101")
	nb.sync(t, sec.NB)
	want = seedSets.Replace(sortLines(seedPolicies+secondary1004) + replyPolicy + "100 ip4.src == 10.244.1.3 reroute 10.244.1.2, 10.244.2.2 pkt_mark=1009")
	if got := nb.policies(t); got != strings.TrimSpace(want) {
		t.Errorf("lr-policy-list on a secondary host network:\n%s", flowtest.Diff(want, got+"\n"))
	}
	nb.checkNATs(t, "secondary host network", map[string]string{"GR_ovn-worker": "", "GR_ovn-worker2": ""})
	if out := nb.trace(t); !strings.Contains(out, "ip4.src == 10.244.1.3, priority 100") || strings.Contains(out, "ct_snat(10.10.10.") {
		t.Errorf("ovn-trace on a secondary host network: want the reroute and no ct_snat to the egress IP:\n%s", out)
	}

	nb.sync(t, d.NB)
	if got := nb.policies(t); !strings.Contains(got, "100 ip4.src == 10.244.1.3 reroute 100.64.0.3, 100.64.0.4") {
		t.Errorf("back on the primary network:\n%s", got)
	}
}

// TestFailoverRealNB moves an egress IP on a real NB when its node becomes
// unreachable: Assign moves it in one pass and one Sync of the new state
// moves the reroute nexthop and the SNAT together in one transaction
// (the old SNAT deleted, the new one inserted), while the IP that did not
// move keeps its row. Deleting the EgressIP then removes its rows, and the
// cluster policies follow (its pod leaves the served-pods address set).
//
// MakeBeforeBreak's steps are not applied here: their first step holds the
// old and the new SNAT of the moving IP under one owner, which ovsdbnb's
// insert guard (keyed by type, external_ip and logical_ip, not by router)
// refuses; see TestFailoverMakeBeforeBreak for the steps themselves.
func TestFailoverRealNB(t *testing.T) {
	nodes := seedNodesPlusWorker3(t)
	nb := startRealNB(t, topologyOf("10.244.0.0/16", nodes, "172.18.0.1"))
	e := seedEgressIP("172.18.0.33", "172.18.0.44")
	pods, err := egress.SelectPods(e, seedNamespaces, egress.PodInfos(seedPods))
	if err != nil {
		t.Fatal(err)
	}
	compute := func(eips ...*egressv1.EgressIP) map[ovsdbnb.Owner]ovsdbnb.State {
		var served []egress.Served
		for _, e := range eips {
			served = append(served, egress.Served{Name: e.Name, Status: e.Status.Items, Pods: pods})
		}
		d, err := egress.Compute(seedCluster, nodes, served)
		if err != nil {
			t.Fatal(err)
		}
		return d.NB
	}
	e.Status.Items = egress.Assign([]*egressv1.EgressIP{e}, nodes, nil, nil).Status[e.Name]
	nb.sync(t, compute(e))
	if got := nb.policies(t); !strings.Contains(got, "100 ip4.src == 10.244.1.3 reroute 100.64.0.3, 100.64.0.4") {
		t.Fatalf("before failover:\n%s", got)
	}

	res := egress.Assign([]*egressv1.EgressIP{e}, nodes, func(n string) bool { return n != "ovn-worker" }, nil)
	e.Status.Items = res.Status[e.Name]
	if r := nb.sync(t, compute(e)); r.Transactions != 1 {
		t.Errorf("failover took %d transactions, want 1: %+v", r.Transactions, r)
	}
	if got := nb.policies(t); !strings.Contains(got, "100 ip4.src == 10.244.1.3 reroute 100.64.0.4, 100.64.0.5") {
		t.Errorf("after failover:\n%s", got)
	}
	nb.checkNATs(t, "after failover", map[string]string{
		"GR_ovn-worker":  "",
		"GR_ovn-worker2": "snat 172.18.0.44 10.244.1.3",
		"GR_ovn-worker3": "snat 172.18.0.33 10.244.1.3",
	})

	// The EgressIP is deleted: its owner maps to an empty State.
	gone := compute()
	gone[ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: e.Name}] = ovsdbnb.State{}
	nb.sync(t, gone)
	if got := nb.policies(t); strings.Contains(got, "100 ") {
		t.Errorf("reroute left after deletion:\n%s", got)
	}
	nb.checkNATs(t, "after deletion", map[string]string{"GR_ovn-worker": "", "GR_ovn-worker2": "", "GR_ovn-worker3": ""})
	served := ovsdbnb.AddressSetName("default-network-controller:EgressIP:egressip-served-pods:v4:default")
	if got := nb.ovn.Nbctl("--bare", "--columns=addresses", "find", "Address_Set", "name="+served); got != "" {
		t.Errorf("served-pods address set after deletion: %q, want empty", got)
	}
}
