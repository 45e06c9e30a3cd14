package egress_test

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovnknode/ovnknodetest"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// seedCluster is the example kind cluster of OVN-Kubernetes' EgressIP docs: ovn-control-plane, ovn-worker and
// ovn-worker2 (the workers egress-assignable), cluster subnet
// 10.244.0.0/16, and the pod 10.244.1.3 labelled app=web in a namespace
// without environment=development.
var seedCluster = egress.Cluster{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}

func seedNodes(t testing.TB, extraWorker ...string) []ovnknode.Node {
	t.Helper()
	nodes, broken := ovnknode.ParseAll([]*corev1.Node{
		ovnknodetest.Node("ovn-control-plane", "10.244.0.0/24", "172.18.0.4/16", "100.64.0.2/16", false),
		ovnknodetest.Node("ovn-worker", "10.244.1.0/24", "172.18.0.2/16", "100.64.0.3/16", true, extraWorker...),
		ovnknodetest.Node("ovn-worker2", "10.244.2.0/24", "172.18.0.3/16", "100.64.0.4/16", true, extraWorker...),
	})
	if len(broken) > 0 {
		t.Fatal(broken)
	}
	return nodes
}

func seedEgressIP(ips ...string) *egressv1.EgressIP {
	return &egressv1.EgressIP{
		ObjectMeta: metav1.ObjectMeta{Name: "egressip-prod"},
		Spec: egressv1.EgressIPSpec{
			EgressIPs: ips,
			NamespaceSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "environment", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"development"}},
			}},
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func pod(ns, name, node string, labels map[string]string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

var (
	seedNamespaces = []*corev1.Namespace{
		namespace("default", nil),
		namespace("dev", map[string]string{"environment": "development"}),
	}
	seedPods = []*corev1.Pod{
		pod("default", "web", "ovn-worker", map[string]string{"app": "web"}, "10.244.1.3"),
		pod("default", "db", "ovn-worker", map[string]string{"app": "db"}, "10.244.1.4"),
		pod("dev", "web", "ovn-worker2", map[string]string{"app": "web"}, "10.244.2.5"),
	}
)

// seedDesired runs the whole pipeline on the seed cluster: select, assign,
// compute.
func seedDesired(t testing.TB, nodes []ovnknode.Node, ips ...string) (egress.Result, egress.Desired) {
	t.Helper()
	eip := seedEgressIP(ips...)
	pods, err := egress.SelectPods(eip, seedNamespaces, egress.PodInfos(seedPods))
	if err != nil {
		t.Fatal(err)
	}
	res := egress.Assign([]*egressv1.EgressIP{eip}, nodes, nil, nil)
	d, err := egress.Compute(seedCluster, nodes, []egress.Served{{Name: eip.Name, Status: res.Status[eip.Name], Pods: pods}})
	if err != nil {
		t.Fatal(err)
	}
	return res, d
}

// policyList renders the policies as `ovn-nbctl lr-policy-list` prints
// them: priority, match, action, nexthops (and options), by descending
// priority then match.
func policyList(d map[ovsdbnb.Owner]ovsdbnb.State) []string {
	type row struct {
		prio int
		line string
	}
	var rows []row
	for _, st := range d {
		for _, p := range st.Policies {
			l := fmt.Sprintf("%d %s %s", p.Priority, p.Match, p.Action)
			if len(p.Nexthops) > 0 {
				l += " " + strings.Join(p.Nexthops, ", ")
			}
			for _, k := range slices.Sorted(maps.Keys(p.Options)) {
				if k != "pkt_mark" || p.Action != "allow" {
					l += fmt.Sprintf(" %s=%s", k, p.Options[k])
				}
			}
			if p.Options["pkt_mark"] != "" && p.Action == "allow" {
				l += " pkt_mark=" + p.Options["pkt_mark"]
			}
			rows = append(rows, row{p.Priority, l})
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.prio != b.prio {
			return b.prio - a.prio
		}
		return strings.Compare(a.line, b.line)
	})
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.line
	}
	return out
}

// natList renders the NATs as `ovn-nbctl lr-nat-list GR_<node>` rows:
// router, type, external IP, logical IP.
func natList(d map[ovsdbnb.Owner]ovsdbnb.State) []string {
	var out []string
	for _, st := range d {
		for _, n := range st.NATs {
			out = append(out, fmt.Sprintf("%s %s %s %s", n.Router, n.Type, n.ExternalIP, n.LogicalIP))
		}
	}
	slices.Sort(out)
	return out
}

// seedSets maps the seed's address set names (OVN-Kubernetes before the
// k8s.ovn.org/id scheme hashed "<name>_v4") to the names the id scheme of
// OVN-Kubernetes writes (go-controller/pkg/ovn/egressip.go).
var seedSets = strings.NewReplacer(
	"$a12749576804119081385", "$"+ovsdbnb.AddressSetName("default-network-controller:EgressIP:egressip-served-pods:v4:default"),
	"$a16335301576733828072", "$"+ovsdbnb.AddressSetName("default-network-controller:EgressService:egresssvc-served-pods:v4"),
	"$a11079093880111560446", "$"+ovsdbnb.AddressSetName("default-network-controller:ClusterNodeIPs:node-ips:v4"),
)

// The seed's policy table, verbatim but for the address set names. The
// seed's OVN-Kubernetes predates the reply-traffic policy (replyPolicy)
// that ovnedge writes besides, as OVN-Kubernetes does today.
const seedPolicies = `1004 inport == "rtos-ovn-control-plane" && ip4.dst == 172.18.0.4 /* ovn-control-plane */ reroute 10.244.0.2
1004 inport == "rtos-ovn-worker" && ip4.dst == 172.18.0.2 /* ovn-worker */ reroute 10.244.1.2
1004 inport == "rtos-ovn-worker2" && ip4.dst == 172.18.0.3 /* ovn-worker2 */ reroute 10.244.2.2
102 (ip4.src == $a12749576804119081385 || ip4.src == $a16335301576733828072) && ip4.dst == $a11079093880111560446 allow pkt_mark=1008
102 ip4.src == 10.244.0.0/16 && ip4.dst == 10.244.0.0/16 allow
102 ip4.src == 10.244.0.0/16 && ip4.dst == 100.64.0.0/16 allow
`

// replyPolicy is the 102 policy keeping the (QoS-marked) replies of the
// served pods' connections off the egress nodes: it is not in the seed's
// table, and sorts after the seed's 102 policies.
const replyPolicy = "102 pkt.mark == 42 allow\n"

func TestSeed002PrimaryNetwork(t *testing.T) {
	res, d := seedDesired(t, seedNodes(t), "172.18.0.33", "172.18.0.44")
	if len(res.Events) > 0 {
		t.Errorf("events: %+v", res.Events)
	}
	want := seedSets.Replace(seedPolicies + replyPolicy + "100 ip4.src == 10.244.1.3 reroute 100.64.0.3, 100.64.0.4\n")
	if got := strings.Join(policyList(d.NB), "\n") + "\n"; got != want {
		t.Errorf("policies:\n%s", flowtest.Diff(want, got))
	}
	wantNATs := []string{"GR_ovn-worker snat 172.18.0.33 10.244.1.3", "GR_ovn-worker2 snat 172.18.0.44 10.244.1.3"}
	if got := natList(d.NB); !slices.Equal(got, wantNATs) {
		t.Errorf("NATs = %q, want %q", got, wantNATs)
	}
	if len(d.Host) > 0 {
		t.Errorf("host assignments on the primary network: %+v", d.Host)
	}
	flowtest.Golden(t, filepath.Join("..", "testdata", "egress", "seed002-primary.nb"), renderNB(d.NB))
}

// seedSecondaryNodes are the seed's nodes with a secondary host network
// 10.10.10.0/24 on the workers (ovn-worker 10.10.10.1, ovn-worker2
// 10.10.10.2).
func seedSecondaryNodes(t testing.TB) []ovnknode.Node {
	t.Helper()
	nodes := seedNodes(t)
	for i := range nodes {
		if nodes[i].Assignable {
			last := nodes[i].Subnets[0].Addr().As4()[2]
			nodes[i].HostCIDRs = append(nodes[i].HostCIDRs, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 10, 10, last}), 24))
		}
	}
	return nodes
}

func TestSeed002SecondaryHostNetwork(t *testing.T) {
	nodes := seedSecondaryNodes(t)
	_, d := seedDesired(t, nodes, "10.10.10.100", "10.10.10.101")
	want := seedSets.Replace(sortLines(seedPolicies+secondary1004) + replyPolicy + "100 ip4.src == 10.244.1.3 reroute 10.244.1.2, 10.244.2.2 pkt_mark=1009\n")
	if got := strings.Join(policyList(d.NB), "\n") + "\n"; got != want {
		t.Errorf("policies:\n%s", flowtest.Diff(want, got))
	}
	if got := natList(d.NB); len(got) > 0 {
		t.Errorf("NATs on a secondary host network: %q", got)
	}
	wantHost := []egress.HostAssignment{
		{Node: "ovn-worker", EgressIP: netip.MustParseAddr("10.10.10.100"), Network: netip.MustParsePrefix("10.10.10.0/24"),
			EgressIPName: "egressip-prod", PodIPs: []netip.Addr{netip.MustParseAddr("10.244.1.3")}},
		{Node: "ovn-worker2", EgressIP: netip.MustParseAddr("10.10.10.101"), Network: netip.MustParsePrefix("10.10.10.0/24"),
			EgressIPName: "egressip-prod", PodIPs: []netip.Addr{netip.MustParseAddr("10.244.1.3")}},
	}
	if !equalJSON(d.Host, wantHost) {
		t.Errorf("host assignments = %+v, want %+v", d.Host, wantHost)
	}
	flowtest.Golden(t, filepath.Join("..", "testdata", "egress", "seed002-secondary.nb"), renderNB(d.NB))
}

// renderNB prints every row, one per line with all its columns, sorted:
// the golden form of a desired NB state.
func renderNB(d map[ovsdbnb.Owner]ovsdbnb.State) []byte {
	kvs := func(m map[string]string) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	var lines []string
	for o, st := range d {
		for _, s := range st.AddressSets {
			lines = append(lines, fmt.Sprintf("%s address_set name=%s addresses=%q external_ids=%s", o, s.Name(), s.Addresses, kvs(s.ExternalIDs)))
		}
		for _, p := range st.Policies {
			lines = append(lines, fmt.Sprintf("%s policy router=%s priority=%d match=%q action=%s nexthops=%q options=%s external_ids=%s",
				o, p.Router, p.Priority, p.Match, p.Action, p.Nexthops, kvs(p.Options), kvs(p.ExternalIDs)))
		}
		for _, n := range st.NATs {
			lines = append(lines, fmt.Sprintf("%s nat router=%s type=%s external_ip=%s logical_ip=%s logical_port=%s options=%s external_ids=%s",
				o, n.Router, n.Type, n.ExternalIP, n.LogicalIP, n.LogicalPort, kvs(n.Options), kvs(n.ExternalIDs)))
		}
		for _, q := range st.QoSRules {
			lines = append(lines, fmt.Sprintf("%s qos switches=%q priority=%d direction=%s match=%q action=%v bandwidth=%v external_ids=%s",
				o, q.Switches, q.Priority, q.Direction, q.Match, q.Action, q.Bandwidth, kvs(q.ExternalIDs)))
		}
	}
	slices.Sort(lines)
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	return b.Bytes()
}

// sortLines sorts the lines of s (each ending in a newline).
func sortLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// secondary1004 are the 1004 policies of the workers' secondary host
// addresses: OVN-Kubernetes' AddSameNodeIPPolicy writes one for every host
// address of the node (host-cidrs), not only the primary one.
const secondary1004 = `1004 inport == "rtos-ovn-worker" && ip4.dst == 10.10.10.1 /* ovn-worker */ reroute 10.244.1.2
1004 inport == "rtos-ovn-worker2" && ip4.dst == 10.10.10.2 /* ovn-worker2 */ reroute 10.244.2.2
`
