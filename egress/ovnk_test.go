package egress_test

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The unit-test vectors of OVN-Kubernetes' EgressIP controller
// (go-controller/pkg/ovn/egressip_test.go at commit 8871cd9cec9c, the
// expectedDatabaseState of a few tests), as table cases for egress'
// pure functions: the rows are transcribed from the vectors, field by
// field, with their external_ids written out.
//
// The vectors run OVN-Kubernetes with interconnect: its NB is one zone's,
// holding the local node's rows only. ovnedge programs a single-zone NB
// holding every node (doc.go, "Deviations"); where that makes a row
// differ, the case lists the vector's row and ovnedge's side by side.

const ovnkController = "default-network-controller"

// ids are external_ids as OVN-Kubernetes' GetExternalIDs builds them:
// owner controller and type, the values, and k8s.ovn.org/id (given
// verbatim).
func ids(ownerType, id string, kv ...string) map[string]string {
	m := map[string]string{"k8s.ovn.org/owner-controller": ovnkController, "k8s.ovn.org/owner-type": ownerType, "k8s.ovn.org/id": id}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func kvString(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func intKVString(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// The one-line forms of the rows a case compares.
func lrpRow(p ovsdbnb.RouterPolicy) string {
	return fmt.Sprintf("policy %s %d %q %s nexthops=%q options=%s ids=%s",
		p.Router, p.Priority, p.Match, p.Action, p.Nexthops, kvString(p.Options), kvString(p.ExternalIDs))
}

func natRow(n ovsdbnb.NAT) string {
	return fmt.Sprintf("nat %s %s %s %s port=%s options=%s ids=%s",
		n.Router, n.Type, n.ExternalIP, n.LogicalIP, n.LogicalPort, kvString(n.Options), kvString(n.ExternalIDs))
}

func qosRow(q ovsdbnb.QoS) string {
	return fmt.Sprintf("qos %q %d %s %q action=%s bandwidth=%s ids=%s",
		q.Switches, q.Priority, q.Direction, q.Match, intKVString(q.Action), intKVString(q.Bandwidth), kvString(q.ExternalIDs))
}

func asRow(name string, addrs []string, ids map[string]string) string {
	a := slices.Sorted(slices.Values(addrs))
	return fmt.Sprintf("address_set %s %q ids=%s", name, a, kvString(ids))
}

// ovnkRows renders the rows of desired that OVN-Kubernetes' EgressIP
// controller writes, sorted. The 1004 policies (owner Node) are left out:
// its gateway code writes them, and the vectors do not hold them.
func ovnkRows(desired map[ovsdbnb.Owner]ovsdbnb.State) []string {
	var out []string
	for o, st := range desired {
		if o.Type == egress.OwnerNode {
			continue
		}
		for _, p := range st.Policies {
			out = append(out, lrpRow(p))
		}
		for _, n := range st.NATs {
			out = append(out, natRow(n))
		}
		for _, q := range st.QoSRules {
			out = append(out, qosRow(q))
		}
		for _, a := range st.AddressSets {
			out = append(out, asRow(a.Name(), a.Addresses, a.ExternalIDs))
		}
	}
	slices.Sort(out)
	return out
}

// ovnkNode is a node with the annotations of the vector's node (given
// verbatim) and, as k8s.ovn.org/node-gateway-router-lrp-ifaddr, the
// networks of its rtoj-GR_<node> port in the vector's NB.
func ovnkNode(name, primary, subnets, hostCIDRs, join string, assignable bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{
		ovnknode.AnnotationPrimaryIfAddr:   primary,
		ovnknode.AnnotationNodeSubnets:     subnets,
		ovnknode.AnnotationHostCIDRs:       hostCIDRs,
		ovnknode.AnnotationGatewayJoinAddr: join,
	}}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if assignable {
		n.Labels[ovnknode.LabelEgressAssignable] = ""
	}
	return n
}

// A single-zone deviation: the vector's row, as OVN-Kubernetes' zone of
// the local node writes it, and ovnedge's ("" for none).
type zoneDiff struct{ vector, ovnedge, why string }

// The rows the vectors share. The served-pods, egress-service-pods and
// node-IPs address sets are "a8519615025667110816",
// "a13607449821398607916" and "a1042611113178530741" in the vectors.
var (
	ovnkPodToPod = lrpRow(ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 102,
		Match: "ip4.src == 10.128.0.0/14 && ip4.dst == 10.128.0.0/14", Action: "allow",
		ExternalIDs: ids("EgressIP", "default-network-controller:EgressIP:102:EIP-No-Reroute-Pod-To-Pod:ip4:default",
			"priority", "102", "k8s.ovn.org/name", "EIP-No-Reroute-Pod-To-Pod", "ip-family", "ip4", "network", "default")})
	ovnkPodToJoin = lrpRow(ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 102,
		Match: "ip4.src == 10.128.0.0/14 && ip4.dst == 100.64.0.0/16", Action: "allow",
		ExternalIDs: ids("EgressIP", "default-network-controller:EgressIP:102:EIP-No-Reroute-Pod-To-Join:ip4:default",
			"priority", "102", "k8s.ovn.org/name", "EIP-No-Reroute-Pod-To-Join", "ip-family", "ip4", "network", "default")})
	ovnkPodToNode = lrpRow(ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 102,
		Match:  "(ip4.src == $a8519615025667110816 || ip4.src == $a13607449821398607916) && ip4.dst == $a1042611113178530741",
		Action: "allow", Options: map[string]string{"pkt_mark": "1008"},
		ExternalIDs: ids("EgressIP", "default-network-controller:EgressIP:102:EIP-No-Reroute-Pod-To-Node:ip4:default",
			"priority", "102", "k8s.ovn.org/name", "EIP-No-Reroute-Pod-To-Node", "ip-family", "ip4", "network", "default")})
	// getNoReRouteReplyTrafficPolicy
	ovnkReplyPolicy = lrpRow(ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 102,
		Match: "pkt.mark == 42", Action: "allow",
		ExternalIDs: ids("EgressIP", "default-network-controller:EgressIP:102:EIP-No-Reroute-reply-traffic:ip:default",
			"priority", "102", "k8s.ovn.org/name", "EIP-No-Reroute-reply-traffic", "ip-family", "ip", "network", "default")})
	// buildEgressServiceAddressSets(nil), v4
	ovnkSvcSet = asRow("a13607449821398607916", nil, ids("EgressService",
		"default-network-controller:EgressService:egresssvc-served-pods:v4",
		"k8s.ovn.org/name", "egresssvc-served-pods", "ip-family", "v4"))
	// buildEgressIPServedPodsAddressSets([]string{podV4IP}), v4
	ovnkServedSet = asRow("a8519615025667110816", []string{"10.128.0.15"}, ids("EgressIP",
		"default-network-controller:EgressIP:egressip-served-pods:v4:default",
		"k8s.ovn.org/name", "egressip-served-pods", "ip-family", "v4", "network", "default"))
	// The reroute policy and SNAT of pod egressip-namespace/egress-pod.
	ovnkRerouteIDs = ids("EgressIP", "default-network-controller:EgressIP:100:egressip_egressip-namespace/egress-pod:ip4:default",
		"priority", "100", "k8s.ovn.org/name", "egressip_egressip-namespace/egress-pod", "ip-family", "ip4", "network", "default")
	ovnkNATIDs = ids("EgressIP", "default-network-controller:EgressIP:egressip_egressip-namespace/egress-pod:ip4",
		"k8s.ovn.org/name", "egressip_egressip-namespace/egress-pod", "ip-family", "ip4")
)

// ovnkReplyQoS is getDefaultQoSRule(false, "default", controller) on the
// given switches.
func ovnkReplyQoS(switches ...string) string {
	return qosRow(ovsdbnb.QoS{Switches: switches, Priority: 103, Direction: "from-lport",
		Match: "ip4.src == $a8519615025667110816 && ct.trk && ct.rpl", Action: map[string]int{"mark": 42},
		ExternalIDs: ids("EgressIP", "default-network-controller:EgressIP:103:EgressIP-Mark-Reply-Traffic:ip4:default",
			"priority", "103", "k8s.ovn.org/name", "EgressIP-Mark-Reply-Traffic", "ip-family", "ip4", "network", "default")})
}

// ovnkNodeIPs is buildEgressIPNodeAddressSets(ips), v4.
func ovnkNodeIPs(ips ...string) string {
	return asRow("a1042611113178530741", ips, ids("ClusterNodeIPs", "default-network-controller:ClusterNodeIPs:node-ips:v4",
		"k8s.ovn.org/name", "node-ips", "ip-family", "v4"))
}

// The egress pod of the vectors: egressip-namespace/egress-pod, 10.128.0.15
// on node1, selected by the EgressIP "egressip".
var ovnkPod = egress.Pod{Namespace: "egressip-namespace", Name: "egress-pod", Node: "node1",
	IPs: []netip.Addr{netip.MustParseAddr("10.128.0.15")}}

// ovnkCluster is the vectors' cluster: 10.128.0.0/14, join 100.64.0.0/16.
var ovnkCluster = egress.Cluster{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.128.0.0/14")}}

func TestOVNKubernetesVectors(t *testing.T) {
	// node1 of "On node UPDATE": OVN network 192.168.126.202/24, secondary
	// host networks 10.10.10.4/24 and 5.5.5.10/24, subnet 10.128.0.0/16,
	// rtoj-GR_node1 100.64.0.2/29.
	node1 := ovnkNode("node1", `{"ipv4": "192.168.126.202/24", "ipv6": ""}`, `{"default":"10.128.0.0/16"}`,
		`["192.168.126.202/24","10.10.10.4/24","5.5.5.10/24"]`, `{"ipv4":"100.64.0.2/29"}`, true)
	tests := []struct {
		name   string // OVN-Kubernetes' test
		nodes  []*corev1.Node
		status []egressv1.EgressIPStatusItem
		want   []string
		zone   []zoneDiff
		// skip names rows of the vector left out of want, and why.
		skip map[string]string
	}{{
		name:   "On node UPDATE: OVN network does not depend on EgressIP status for assignment",
		nodes:  []*corev1.Node{node1},
		status: []egressv1.EgressIPStatusItem{{Node: "node1", EgressIP: "192.168.126.101"}},
		want: []string{
			ovnkPodToPod, ovnkReplyPolicy, ovnkPodToJoin, ovnkPodToNode,
			lrpRow(ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 100, Match: "ip4.src == 10.128.0.15",
				Action: "reroute", Nexthops: []string{"100.64.0.2"}, ExternalIDs: ovnkRerouteIDs}),
			natRow(ovsdbnb.NAT{Router: "GR_node1", Type: "snat", ExternalIP: "192.168.126.101", LogicalIP: "10.128.0.15",
				LogicalPort: "k8s-node1", Options: map[string]string{"stateless": "false"}, ExternalIDs: ovnkNATIDs}),
			ovnkReplyQoS("node1"),
			ovnkSvcSet, ovnkServedSet, ovnkNodeIPs("192.168.126.202", "10.10.10.4", "5.5.5.10"),
		},
	}, {
		name:   "On node UPDATE: Secondary host network does not depend on EgressIP status for assignment",
		nodes:  []*corev1.Node{node1},
		status: []egressv1.EgressIPStatusItem{{Node: "node1", EgressIP: "10.10.10.10"}},
		want: []string{
			ovnkPodToPod, ovnkReplyPolicy, ovnkPodToJoin, ovnkPodToNode,
			// getSwitchManagementPortIP(node1), pkt_mark EgressIPSecondaryInterfaceMark; no SNAT.
			lrpRow(ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 100, Match: "ip4.src == 10.128.0.15",
				Action: "reroute", Nexthops: []string{"10.128.0.2"}, Options: map[string]string{"pkt_mark": "1009"},
				ExternalIDs: ovnkRerouteIDs}),
			ovnkReplyQoS("node1"),
			ovnkSvcSet, ovnkServedSet, ovnkNodeIPs("192.168.126.202", "10.10.10.4", "5.5.5.10"),
		},
	}, {
		// The last expectedDatabaseState: node3 deleted, the EgressIP's two
		// IPs on node1 (local zone) and node2 (remote zone): ECMP.
		name: "WatchEgressNodes running with WatchEgressIP: should re-balance EgressIPs when their node is removed",
		nodes: []*corev1.Node{
			ovnkNode("node1", `{"ipv4": "192.168.126.12/24", "ipv6": "::feff:c0a8:8e0c/64"}`, `{"default":["10.128.0.0/16", "ae70::66/64"]}`,
				`["192.168.126.12/24","::feff:c0a8:8e0c/64"]`, `{"ipv4":"100.64.0.2/29","ipv6":"fd98::2/125"}`, true),
			ovnkNode("node2", `{"ipv4": "192.168.126.51/24", "ipv6": ""}`, `{"default":"10.128.0.0/16"}`,
				`["192.168.126.51/24"]`, `{"ipv4":"100.64.0.3/29"}`, true),
		},
		status: []egressv1.EgressIPStatusItem{{Node: "node1", EgressIP: "192.168.126.101"}, {Node: "node2", EgressIP: "192.168.126.102"}},
		want: []string{
			ovnkPodToNode, ovnkReplyPolicy, ovnkPodToPod, ovnkPodToJoin,
			lrpRow(ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 100, Match: "ip4.src == 10.128.0.15",
				Action: "reroute", Nexthops: []string{"100.64.0.2", "100.88.0.3"}, ExternalIDs: ovnkRerouteIDs}),
			natRow(ovsdbnb.NAT{Router: "GR_node1", Type: "snat", ExternalIP: "192.168.126.101", LogicalIP: "10.128.0.15",
				LogicalPort: "k8s-node1", Options: map[string]string{"stateless": "false"}, ExternalIDs: ovnkNATIDs}),
			ovnkReplyQoS("node1"),
			ovnkSvcSet, ovnkServedSet, ovnkNodeIPs("192.168.126.12", "192.168.126.51"),
		},
		zone: []zoneDiff{{
			vector: lrpRow(ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 100, Match: "ip4.src == 10.128.0.15",
				Action: "reroute", Nexthops: []string{"100.64.0.2", "100.88.0.3"}, ExternalIDs: ovnkRerouteIDs}),
			ovnedge: lrpRow(ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 100, Match: "ip4.src == 10.128.0.15",
				Action: "reroute", Nexthops: []string{"100.64.0.2", "100.64.0.3"}, ExternalIDs: ovnkRerouteIDs}),
			why: "node2 is in a remote zone: reached over the transit switch (100.88.0.3) there, at its gateway router's join IP here",
		}, {
			ovnedge: natRow(ovsdbnb.NAT{Router: "GR_node2", Type: "snat", ExternalIP: "192.168.126.102", LogicalIP: "10.128.0.15",
				LogicalPort: "k8s-node2", Options: map[string]string{"stateless": "false"}, ExternalIDs: ovnkNATIDs}),
			why: "node2's SNAT is written by node2's zone there, in the one NB here",
		}, {
			vector:  ovnkReplyQoS("node1"),
			ovnedge: ovnkReplyQoS("node1", "node2"),
			why:     "the QoS rule goes on the local zone's switches there, on every node's switch here",
		}},
		skip: map[string]string{
			"IPv6 rows": "the vector runs IPv6Mode with no IPv6 cluster subnet, so OVN-Kubernetes adds the IPv6 Pod-To-Node " +
				"policy, QoS rule and address sets; ovnedge takes the families of the cluster rows from the cluster subnets",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes, broken := ovnknode.ParseAll(tc.nodes)
			if len(broken) > 0 {
				t.Fatal(broken)
			}
			for rows, why := range tc.skip {
				t.Logf("not compared: %s: %s", rows, why)
			}
			d, err := egress.Compute(ovnkCluster, nodes, []egress.Served{{Name: "egressip", Status: tc.status, Pods: []egress.Pod{ovnkPod}}})
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(tc.want)
			for _, z := range tc.zone {
				if z.vector != "" {
					i := slices.Index(want, z.vector)
					if i < 0 {
						t.Fatalf("zone deviation %q: its vector row is not in the vector", z.why)
					}
					want = slices.Delete(want, i, i+1)
				}
				if z.ovnedge != "" {
					want = append(want, z.ovnedge)
				}
			}
			slices.Sort(want)
			got := ovnkRows(d.NB)
			if !slices.Equal(got, want) {
				t.Errorf("rows differ from the vector:\n%s", flowtest.Diff(strings.Join(want, "\n")+"\n", strings.Join(got, "\n")+"\n"))
			}
		})
	}
}

// "IPv6 on pod UPDATE: should not treat pod update if pod already had
// assigned IP when it got the ADD": the rows of one IPv6 pod of an
// EgressIP on node2, whose rtoj-GR_node2 port is fd98::2/125 in the
// vector. The vector holds no cluster-wide rows (its node watcher is not
// started): only the EgressIP's rows are compared.
func TestOVNKubernetesVectorIPv6(t *testing.T) {
	nodes, broken := ovnknode.ParseAll([]*corev1.Node{
		ovnkNode("node1", `{"ipv4": "", "ipv6": "0:0:0:0:0:fedf:c0a8:8e0c/64"}`, `{"default":"ae70::66/64"}`,
			`["0:0:0:0:0:fedf:c0a8:8e0c/64"]`, `{"ipv6":"fd98::2/125"}`, false),
		ovnkNode("node2", `{"ipv4": "", "ipv6": "0:0:0:0:0:feff:c0a8:8e0c/64"}`, `{"default":"ae70::66/64"}`,
			`["0:0:0:0:0:feff:c0a8:8e0c/64"]`, `{"ipv6":"fd98::2/125"}`, true),
	})
	if len(broken) > 0 {
		t.Fatal(broken)
	}
	byName := map[string]*ovnknode.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	pod := egress.Pod{Namespace: "egressip-namespace", Name: "egress-pod", Node: "node1", IPs: []netip.Addr{netip.MustParseAddr("ae70::66")}}
	st, host := egress.EgressIPState(egress.Cluster{}, egress.Served{Name: "egressip",
		Status: []egressv1.EgressIPStatusItem{{Node: "node2", EgressIP: "::feff:c0a8:8e0d"}}, Pods: []egress.Pod{pod}}, byName)
	if len(host) > 0 {
		t.Errorf("host assignments on the OVN network: %+v", host)
	}
	want := []string{
		lrpRow(ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 100, Match: "ip6.src == ae70::66",
			Action: "reroute", Nexthops: []string{"fd98::2"},
			ExternalIDs: ids("EgressIP", "default-network-controller:EgressIP:100:egressip_egressip-namespace/egress-pod:ip6:default",
				"priority", "100", "k8s.ovn.org/name", "egressip_egressip-namespace/egress-pod", "ip-family", "ip6", "network", "default")}),
		natRow(ovsdbnb.NAT{Router: "GR_node2", Type: "snat", ExternalIP: "::feff:c0a8:8e0d", LogicalIP: "ae70::66",
			LogicalPort: "k8s-node2", Options: map[string]string{"stateless": "false"},
			ExternalIDs: ids("EgressIP", "default-network-controller:EgressIP:egressip_egressip-namespace/egress-pod:ip6",
				"k8s.ovn.org/name", "egressip_egressip-namespace/egress-pod", "ip-family", "ip6")}),
	}
	slices.Sort(want)
	got := ovnkRows(map[ovsdbnb.Owner]ovsdbnb.State{{Type: egress.OwnerEgressIP, Name: "egressip"}: st})
	if !slices.Equal(got, want) {
		t.Errorf("rows differ from the vector:\n%s", flowtest.Diff(strings.Join(want, "\n")+"\n", strings.Join(got, "\n")+"\n"))
	}
}

// The seed's address set names are those of the vectors: OVN-Kubernetes'
// ids hash to the names its tests write out.
func TestOVNKubernetesAddressSetNames(t *testing.T) {
	for id, name := range map[string]string{
		"default-network-controller:EgressIP:egressip-served-pods:v4:default": "a8519615025667110816",
		"default-network-controller:EgressService:egresssvc-served-pods:v4":   "a13607449821398607916",
		"default-network-controller:ClusterNodeIPs:node-ips:v4":               "a1042611113178530741",
	} {
		if got := ovsdbnb.AddressSetName(id); got != name {
			t.Errorf("AddressSetName(%q) = %s, want %s", id, got, name)
		}
	}
}

// Two cluster subnets: a pod-to-pod 102 policy for every ordered pair of
// them, then the pod-to-join ones, as OVN-Kubernetes'
// createDefaultNoReroutePodPoliciesOps and
// createDefaultNoRerouteServicePoliciesOps (egressip_ops.go) write them.
func TestNoReroutePodToPodPairs(t *testing.T) {
	pfx := netip.MustParsePrefix
	out, err := egress.ClusterState(egress.Cluster{ClusterSubnets: []netip.Prefix{pfx("10.128.0.0/14"), pfx("10.244.0.0/16")}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range out[ovsdbnb.Owner{Type: egress.OwnerClusterPolicies, Name: "egressip"}].Policies {
		if n := p.ExternalIDs[ovsdbnb.KeyName]; n == "EIP-No-Reroute-Pod-To-Pod" || n == "EIP-No-Reroute-Pod-To-Join" {
			got = append(got, p.Match)
		}
	}
	want := []string{
		"ip4.src == 10.128.0.0/14 && ip4.dst == 10.128.0.0/14",
		"ip4.src == 10.128.0.0/14 && ip4.dst == 10.244.0.0/16",
		"ip4.src == 10.244.0.0/16 && ip4.dst == 10.128.0.0/14",
		"ip4.src == 10.244.0.0/16 && ip4.dst == 10.244.0.0/16",
		"ip4.src == 10.128.0.0/14 && ip4.dst == 100.64.0.0/16",
		"ip4.src == 10.244.0.0/16 && ip4.dst == 100.64.0.0/16",
	}
	if !slices.Equal(got, want) {
		t.Errorf("no-reroute matches:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
