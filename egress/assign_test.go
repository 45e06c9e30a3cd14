package egress_test

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// node is a parsed node for the assignment tables: primary 172.18.0.<i>/16.
func node(name string, i byte, mods ...func(*ovnknode.Node)) ovnknode.Node {
	n := ovnknode.Node{
		Name:        name,
		Subnets:     []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, i, 0}), 24)},
		Primary:     []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 18, 0, i}), 16)},
		GatewayJoin: []netip.Addr{netip.AddrFrom4([4]byte{100, 64, 0, i})},
		Assignable:  true, Ready: true,
	}
	n.HostCIDRs = n.Primary
	for _, m := range mods {
		m(&n)
	}
	return n
}

var (
	notAssignable = func(n *ovnknode.Node) { n.Assignable = false }
	notReady      = func(n *ovnknode.Node) { n.Ready = false }
	capacity      = func(v4 int) func(*ovnknode.Node) {
		return func(n *ovnknode.Node) { n.Capacity.IPv4 = ovnknode.Max(v4) }
	}
	capacityTotal = func(total int) func(*ovnknode.Node) {
		return func(n *ovnknode.Node) { n.Capacity.Total = ovnknode.Max(total) }
	}
	cloud = func(network string) func(*ovnknode.Node) {
		return func(n *ovnknode.Node) { n.Cloud = []netip.Prefix{netip.MustParsePrefix(network)} }
	}
	refuses = func(ips ...string) func(*ovnknode.Node) {
		return func(n *ovnknode.Node) {
			n.Reported = true
			n.Host.Refused = map[netip.Addr]string{}
			for _, ip := range ips {
				n.Host.Refused[netip.MustParseAddr(ip)] = "LinkDown: link eth2 is down"
			}
		}
	}
	secondary = func(cidrs ...string) func(*ovnknode.Node) {
		return func(n *ovnknode.Node) {
			n.HostCIDRs = append([]netip.Prefix{}, n.HostCIDRs...)
			for _, c := range cidrs {
				n.HostCIDRs = append(n.HostCIDRs, netip.MustParsePrefix(c))
			}
		}
	}
)

// eip is an EgressIP with the given IPs and status items "node=ip".
func eip(name string, ips []string, items ...string) *egressv1.EgressIP {
	e := &egressv1.EgressIP{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))},
		Spec: egressv1.EgressIPSpec{EgressIPs: ips}}
	for _, it := range items {
		n, ip, _ := strings.Cut(it, "=")
		e.Status.Items = append(e.Status.Items, egressv1.EgressIPStatusItem{Node: n, EgressIP: ip})
	}
	return e
}

func older(e *egressv1.EgressIP) *egressv1.EgressIP {
	e.CreationTimestamp = metav1.NewTime(time.Unix(10, 0))
	return e
}

func TestAssign(t *testing.T) {
	type want struct {
		status map[string]string // eip -> "node=ip,node=ip"
		events []string          // "eip Reason"
	}
	tests := []struct {
		name      string
		eips      []*egressv1.EgressIP
		nodes     []ovnknode.Node
		reachable map[string]bool // nil: all
		broken    map[string]error
		want      want
	}{
		{
			name:  "seed: two IPs over two workers, least loaded then by name",
			eips:  []*egressv1.EgressIP{eip("prod", []string{"172.18.0.33", "172.18.0.44"})},
			nodes: []ovnknode.Node{node("cp", 4, notAssignable), node("w1", 2), node("w2", 3)},
			want:  want{status: map[string]string{"prod": "w1=172.18.0.33,w2=172.18.0.44"}},
		},
		{
			name:  "one IP of an EgressIP per node",
			eips:  []*egressv1.EgressIP{eip("prod", []string{"172.18.0.33", "172.18.0.44"})},
			nodes: []ovnknode.Node{node("w1", 2)},
			want: want{status: map[string]string{"prod": "w1=172.18.0.33"},
				events: []string{"prod NoMatchingNodeFound"}},
		},
		{
			name:  "least loaded first across EgressIPs",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}), eip("b", []string{"172.18.0.32"}), eip("c", []string{"172.18.0.33"})},
			nodes: []ovnknode.Node{node("w1", 2), node("w2", 3)},
			want:  want{status: map[string]string{"a": "w1=172.18.0.31", "b": "w2=172.18.0.32", "c": "w1=172.18.0.33"}},
		},
		{
			name: "existing valid assignment kept even if not least loaded",
			eips: []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}, "w2=172.18.0.31"),
				eip("b", []string{"172.18.0.32"}, "w2=172.18.0.32")},
			nodes: []ovnknode.Node{node("w1", 2), node("w2", 3)},
			want:  want{status: map[string]string{"a": "w2=172.18.0.31", "b": "w2=172.18.0.32"}},
		},
		{
			name:  "invalid IPs refused, valid ones still assigned",
			eips:  []*egressv1.EgressIP{eip("a", []string{"not-an-ip", "224.0.0.1", "fe80::1", "172.18.0.31"})},
			nodes: []ovnknode.Node{node("w1", 2)},
			want: want{status: map[string]string{"a": "w1=172.18.0.31"},
				events: []string{"a InvalidEgressIP", "a InvalidEgressIP", "a InvalidEgressIP"}},
		},
		{
			name:  "IP of a node is a conflict",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.3"})},
			nodes: []ovnknode.Node{node("w1", 2), node("w2", 3, notAssignable)},
			want:  want{status: map[string]string{"a": ""}, events: []string{"a EgressIPConflict"}},
		},
		{
			name:  "same IP in two EgressIPs: the older keeps it",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}), older(eip("b", []string{"172.18.0.31"}))},
			nodes: []ovnknode.Node{node("w1", 2)},
			want:  want{status: map[string]string{"a": "", "b": "w1=172.18.0.31"}, events: []string{"a UnsupportedRequest"}},
		},
		{
			name:  "same IP in two EgressIPs: the holder keeps it",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}, "w1=172.18.0.31"), older(eip("b", []string{"172.18.0.31"}))},
			nodes: []ovnknode.Node{node("w1", 2)},
			want:  want{status: map[string]string{"a": "w1=172.18.0.31", "b": ""}, events: []string{"b UnsupportedRequest"}},
		},
		{
			name:  "IP in no node network",
			eips:  []*egressv1.EgressIP{eip("a", []string{"192.0.2.10"})},
			nodes: []ovnknode.Node{node("w1", 2)},
			want:  want{status: map[string]string{"a": ""}, events: []string{"a NoMatchingNodeFound"}},
		},
		{
			name:  "a node that reports it cannot host a host-interface IP is no candidate for it",
			eips:  []*egressv1.EgressIP{eip("a", []string{"10.10.10.50"})},
			nodes: []ovnknode.Node{node("w1", 2, secondary("10.10.10.2/24"), refuses("10.10.10.50")), node("w2", 3, secondary("10.10.10.3/24"))},
			want:  want{status: map[string]string{"a": "w2=10.10.10.50"}},
		},
		{
			name:  "an IP on a node that reports it cannot host it moves",
			eips:  []*egressv1.EgressIP{eip("a", []string{"10.10.10.50"}, "w1=10.10.10.50")},
			nodes: []ovnknode.Node{node("w1", 2, secondary("10.10.10.2/24"), refuses("10.10.10.50")), node("w2", 3, secondary("10.10.10.3/24"))},
			want:  want{status: map[string]string{"a": "w2=10.10.10.50"}},
		},
		{
			name: "every node refuses: NoMatchingNodeFound",
			eips: []*egressv1.EgressIP{eip("a", []string{"10.10.10.50"}, "w1=10.10.10.50")},
			nodes: []ovnknode.Node{node("w1", 2, secondary("10.10.10.2/24"), refuses("10.10.10.50")),
				node("w2", 3, secondary("10.10.10.3/24"), refuses("10.10.10.50"))},
			want: want{status: map[string]string{"a": ""}, events: []string{"a NoMatchingNodeFound"}},
		},
		{
			name:  "secondary host network, longest prefix over host-cidrs",
			eips:  []*egressv1.EgressIP{eip("a", []string{"10.10.10.100"})},
			nodes: []ovnknode.Node{node("w1", 2, secondary("10.0.0.1/8")), node("w2", 3, secondary("10.10.10.3/24"))},
			want:  want{status: map[string]string{"a": "w1=10.10.10.100"}},
		},
		{
			name:  "no capacity left",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}), eip("b", []string{"172.18.0.32"})},
			nodes: []ovnknode.Node{node("w1", 2, capacity(1))},
			want:  want{status: map[string]string{"a": "w1=172.18.0.31", "b": ""}, events: []string{"b NoMatchingNodeFound"}},
		},
		{
			name:  "a capacity of zero (cloud config) hosts nothing; the zero Capacity is unlimited",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}), eip("b", []string{"172.18.0.32"}), eip("c", []string{"172.18.0.33"})},
			nodes: []ovnknode.Node{node("w1", 2, capacity(0)), node("w2", 3, capacityTotal(0)), node("w3", 4)},
			want:  want{status: map[string]string{"a": "w3=172.18.0.31", "b": "w3=172.18.0.32", "c": "w3=172.18.0.33"}},
		},
		{
			name:  "failover: label removed",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}, "w1=172.18.0.31")},
			nodes: []ovnknode.Node{node("w1", 2, notAssignable), node("w2", 3)},
			want:  want{status: map[string]string{"a": "w2=172.18.0.31"}},
		},
		{
			name:  "failover: NotReady",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}, "w1=172.18.0.31")},
			nodes: []ovnknode.Node{node("w1", 2, notReady), node("w2", 3)},
			want:  want{status: map[string]string{"a": "w2=172.18.0.31"}},
		},
		{
			name:  "failover: node deleted",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}, "gone=172.18.0.31")},
			nodes: []ovnknode.Node{node("w2", 3)},
			want:  want{status: map[string]string{"a": "w2=172.18.0.31"}},
		},
		{
			name:      "failover: unreachable",
			eips:      []*egressv1.EgressIP{eip("a", []string{"172.18.0.31", "172.18.0.32"}, "w1=172.18.0.31", "w2=172.18.0.32")},
			nodes:     []ovnknode.Node{node("w1", 2), node("w2", 3), node("w3", 5)},
			reachable: map[string]bool{"w1": false, "w2": true, "w3": true},
			want:      want{status: map[string]string{"a": "w3=172.18.0.31,w2=172.18.0.32"}},
		},
		{
			name:      "failover with nowhere to go",
			eips:      []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}, "w1=172.18.0.31")},
			nodes:     []ovnknode.Node{node("w1", 2)},
			reachable: map[string]bool{"w1": false},
			want:      want{status: map[string]string{"a": ""}, events: []string{"a NoMatchingNodeFound"}},
		},
		{
			name: "broken node: its items kept, no new ones, others unaffected",
			eips: []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}, "bad=172.18.0.31"),
				eip("b", []string{"172.18.0.32"}, "w1=172.18.0.32")},
			nodes:  []ovnknode.Node{node("w1", 2)},
			broken: map[string]error{"bad": nil},
			want:   want{status: map[string]string{"a": "bad=172.18.0.31", "b": "w1=172.18.0.32"}},
		},
		{
			name: "broken node with its last good parse: kept, never a new candidate, its address still a conflict",
			eips: []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}, "bad=172.18.0.31"),
				eip("b", []string{"172.18.0.32", "172.18.0.9"}), eip("c", []string{"172.18.0.33"})},
			nodes:  []ovnknode.Node{node("bad", 9), node("w1", 2), node("w2", 3)},
			broken: map[string]error{"bad": nil},
			want: want{status: map[string]string{"a": "bad=172.18.0.31", "b": "w1=172.18.0.32", "c": "w2=172.18.0.33"},
				events: []string{"b EgressIPConflict"}},
		},
		{
			name: "node losing its label mid-assignment: its IPs move in the same pass, least loaded first, others stay",
			eips: []*egressv1.EgressIP{
				eip("a", []string{"172.18.0.31", "172.18.0.32"}, "w1=172.18.0.31", "w2=172.18.0.32"),
				eip("b", []string{"172.18.0.41"}, "w1=172.18.0.41"),
				eip("c", []string{"172.18.0.51"}, "w3=172.18.0.51"),
			},
			nodes: []ovnknode.Node{node("w1", 2, notAssignable), node("w2", 3), node("w3", 5), node("w4", 6)},
			want: want{status: map[string]string{
				"a": "w4=172.18.0.31,w2=172.18.0.32", // w4 is empty; a already has w2
				"b": "w2=172.18.0.41",                // w2, w3, w4 hold one each: by name
				"c": "w3=172.18.0.51",
			}},
		},
		{
			name:  "total capacity over both families",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}), eip("b", []string{"fc00::31"})},
			nodes: []ovnknode.Node{node("w1", 2, capacityTotal(1), secondary("fc00::2/64"))},
			want:  want{status: map[string]string{"a": "w1=172.18.0.31", "b": ""}, events: []string{"b NoMatchingNodeFound"}},
		},
		{
			name:  "cloud node: only IPs of its cloud egress network",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"}), eip("b", []string{"10.0.128.5"})},
			nodes: []ovnknode.Node{node("w1", 2, cloud("10.0.128.0/18"))},
			want:  want{status: map[string]string{"a": "", "b": "w1=10.0.128.5"}, events: []string{"a NoMatchingNodeFound"}},
		},
		{
			name:  "a not assignable node is never chosen",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31"})},
			nodes: []ovnknode.Node{node("w1", 2, notAssignable), node("w2", 3, notReady)},
			want:  want{status: map[string]string{"a": ""}, events: []string{"a NoMatchingNodeFound"}},
		},
		{
			name:  "status item for an IP no longer in spec is dropped",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.32"}, "w1=172.18.0.31")},
			nodes: []ovnknode.Node{node("w1", 2), node("w2", 3)},
			want:  want{status: map[string]string{"a": "w1=172.18.0.32"}},
		},
		{
			name:  "IPv6 egress IP on the node's v6 network",
			eips:  []*egressv1.EgressIP{eip("a", []string{"fc00:f853:ccd:e793::33", "172.18.0.33"})},
			nodes: []ovnknode.Node{node("w1", 2, secondary("fc00:f853:ccd:e793::2/64")), node("w2", 3)},
			want:  want{status: map[string]string{"a": "w1=fc00:f853:ccd:e793::33,w2=172.18.0.33"}},
		},
		{
			name:  "duplicate IP in one spec is one request",
			eips:  []*egressv1.EgressIP{eip("a", []string{"172.18.0.31", "172.18.0.31"})},
			nodes: []ovnknode.Node{node("w1", 2), node("w2", 3)},
			want:  want{status: map[string]string{"a": "w1=172.18.0.31"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var reachable func(string) bool
			if tc.reachable != nil {
				reachable = func(n string) bool { return tc.reachable[n] }
			}
			res := egress.Assign(tc.eips, tc.nodes, reachable, tc.broken)
			got := want{status: map[string]string{}}
			for name, items := range res.Status {
				var parts []string
				for _, it := range items {
					parts = append(parts, it.Node+"="+it.EgressIP)
				}
				got.status[name] = strings.Join(parts, ",")
			}
			for _, e := range res.Events {
				got.events = append(got.events, e.Object.Name+" "+e.Reason)
				if e.Type != "Warning" || e.Message == "" || e.Object.Kind != "EgressIP" {
					t.Errorf("bad event %+v", e)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v\nevents: %+v", got, tc.want, res.Events)
			}
			// Deterministic, and stable: a second pass over its own
			// output changes nothing and raises only the same refusals.
			again := egress.Assign(withStatus(tc.eips, res), tc.nodes, reachable, tc.broken)
			if !reflect.DeepEqual(again.Status, res.Status) {
				t.Errorf("second pass moved IPs: %v -> %v", res.Status, again.Status)
			}
		})
	}
}

func withStatus(eips []*egressv1.EgressIP, res egress.Result) []*egressv1.EgressIP {
	out := make([]*egressv1.EgressIP, len(eips))
	for i, e := range eips {
		c := e.DeepCopy()
		c.Status.Items = res.Status[e.Name]
		out[i] = c
	}
	return out
}
