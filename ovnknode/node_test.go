package ovnknode_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovnknode/ovnknodetest"
	corev1 "k8s.io/api/core/v1"
)

func TestParseNode(t *testing.T) {
	base := func(extra ...string) *corev1.Node {
		return ovnknodetest.Node("w1", "10.244.1.0/24", "172.18.0.2/16", "100.64.0.3/16", true, extra...)
	}
	tests := []struct {
		name    string
		node    *corev1.Node
		err     string // substring; "" = no error
		check   func(t *testing.T, n ovnknode.Node)
		mutate  func(n *corev1.Node)
		v6check bool
	}{
		{name: "seed worker", node: base(), check: func(t *testing.T, n ovnknode.Node) {
			if m, _ := n.MgmtIP(false); m != netip.MustParseAddr("10.244.1.2") {
				t.Errorf("mgmt IP %v", m)
			}
			if j, _ := n.JoinIP(false); j != netip.MustParseAddr("100.64.0.3") {
				t.Errorf("join IP %v", j)
			}
			if !n.Assignable || !n.Ready || n.Capacity != (ovnknode.Capacity{}) {
				t.Errorf("node %+v", n)
			}
		}},
		{name: "older node-subnets form", node: base(ovnknode.AnnotationNodeSubnets, `{"default":"10.244.1.0/24"}`)},
		{name: "dual stack", node: base(
			ovnknode.AnnotationNodeSubnets, `{"default":["10.244.1.0/24","fd00:10:244:2::/64"]}`,
			ovnknode.AnnotationPrimaryIfAddr, `{"ipv4":"172.18.0.2/16","ipv6":"fc00:f853:ccd:e793::2/64"}`),
			check: func(t *testing.T, n ovnknode.Node) {
				if m, _ := n.MgmtIP(true); m != netip.MustParseAddr("fd00:10:244:2::2") {
					t.Errorf("v6 mgmt IP %v", m)
				}
				if _, primary, ok := n.Network(netip.MustParseAddr("fc00:f853:ccd:e793::33")); !ok || !primary {
					t.Error("v6 egress IP not on the primary network")
				}
			}},
		{name: "cloud capacity", node: base(ovnknode.AnnotationCloudEgressConfig,
			`[{"interface":"eni-1","ifaddr":{"ipv4":"10.0.128.0/18"},"capacity":{"ipv4":14,"ipv6":15}}]`),
			check: func(t *testing.T, n ovnknode.Node) {
				if n.Capacity != (ovnknode.Capacity{IPv4: ovnknode.Max(14), IPv6: ovnknode.Max(15)}) {
					t.Errorf("capacity %+v", n.Capacity)
				}
				if _, _, ok := n.Network(netip.MustParseAddr("172.18.0.33")); ok {
					t.Error("a cloud node accepts an IP outside its cloud network")
				}
				if _, _, ok := n.Network(netip.MustParseAddr("10.0.130.1")); !ok {
					t.Error("a cloud node refuses an IP of its cloud network")
				}
			}},
		{name: "not ready, not labelled", node: base(), mutate: func(n *corev1.Node) {
			n.Status.Conditions[0].Status = corev1.ConditionFalse
			delete(n.Labels, ovnknode.LabelEgressAssignable)
		}, check: func(t *testing.T, n ovnknode.Node) {
			if n.Ready || n.Assignable {
				t.Errorf("node %+v", n)
			}
		}},
		{name: "no host-cidrs: primary", node: base(), mutate: func(n *corev1.Node) { delete(n.Annotations, ovnknode.AnnotationHostCIDRs) },
			check: func(t *testing.T, n ovnknode.Node) {
				if len(n.HostCIDRs) != 1 || n.HostCIDRs[0] != netip.MustParsePrefix("172.18.0.2/16") {
					t.Errorf("host cidrs %v", n.HostCIDRs)
				}
			}},
		{name: "secondary host networks", node: base(ovnknode.AnnotationHostCIDRs, `["172.18.0.2/16","172.19.0.3/24","172.19.0.4/24","192.168.5.2/24","fd00:19::3/64"]`),
			check: func(t *testing.T, n ovnknode.Node) {
				want := []netip.Prefix{netip.MustParsePrefix("172.19.0.0/24"), netip.MustParsePrefix("192.168.5.0/24"), netip.MustParsePrefix("fd00:19::/64")}
				if got := n.SecondaryNetworks(); !slices.Equal(got, want) {
					t.Errorf("secondary networks %v, want %v", got, want)
				}
			}},
		{name: "missing node-subnets", node: base(), mutate: func(n *corev1.Node) { delete(n.Annotations, ovnknode.AnnotationNodeSubnets) },
			err: "node w1: annotation k8s.ovn.org/node-subnets: missing"},
		{name: "bad JSON", node: base(ovnknode.AnnotationNodeSubnets, `{"default":[`), err: "node-subnets"},
		{name: "bad CIDR", node: base(ovnknode.AnnotationPrimaryIfAddr, `{"ipv4":"172.18.0.300/16"}`), err: "node-primary-ifaddr"},
		{name: "wrong family", node: base(ovnknode.AnnotationGatewayJoinAddr, `{"ipv4":"fd98::3/64"}`), err: "wrong family"},
		{name: "bad host-cidrs", node: base(ovnknode.AnnotationHostCIDRs, `"172.18.0.2/16"`), err: "host-cidrs"},
		{name: "bad cloud config", node: base(ovnknode.AnnotationCloudEgressConfig, `[{"capacity":{"ipv4":-1},"ifaddr":{"ipv4":"10.0.0.0/8"}}]`), err: "negative"},
		{name: "other network only", node: base(ovnknode.AnnotationNodeSubnets, `{"blue":["10.1.0.0/24"]}`), err: `no "default" network`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mutate != nil {
				tc.mutate(tc.node)
			}
			n, err := ovnknode.Parse(tc.node)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, n)
			}
		})
	}
	if _, err := ovnknode.Parse(nil); err == nil {
		t.Error("nil node parsed")
	}
}

// One node with a broken annotation is skipped; the others are parsed.
func TestParseNodesSkipsBroken(t *testing.T) {
	bad := ovnknodetest.Node("bad", "10.244.9.0/24", "172.18.0.9/16", "100.64.0.9/16", true, ovnknode.AnnotationNodeSubnets, "garbage")
	nodes, broken := ovnknode.ParseAll([]*corev1.Node{
		ovnknodetest.Node("w2", "10.244.2.0/24", "172.18.0.3/16", "100.64.0.4/16", true), bad,
		ovnknodetest.Node("w1", "10.244.1.0/24", "172.18.0.2/16", "100.64.0.3/16", true),
	})
	if len(nodes) != 2 || nodes[0].Name != "w1" || nodes[1].Name != "w2" {
		t.Errorf("nodes = %+v", nodes)
	}
	if len(broken) != 1 || broken["bad"] == nil {
		t.Errorf("broken = %v", broken)
	}
}
