package egress_test

import (
	"fmt"
	"net/netip"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovnknode/ovnknodetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// exampleNodes are the example cluster's two egress-assignable workers.
func exampleNodes() []*corev1.Node {
	return []*corev1.Node{
		ovnknodetest.Node("ovn-worker", "10.244.1.0/24", "172.18.0.2/16", "100.64.0.3/16", true),
		ovnknodetest.Node("ovn-worker2", "10.244.2.0/24", "172.18.0.3/16", "100.64.0.4/16", true),
	}
}

// Seed 002's EgressIP over its two workers: each IP on its own node,
// least loaded first; an invalid IP and a node's own address are refused
// with an event and do not stop the others.
func ExampleAssign() {
	nodes, broken := ovnknode.ParseAll(exampleNodes())
	eip := &egressv1.EgressIP{
		ObjectMeta: metav1.ObjectMeta{Name: "egressip-prod"},
		Spec:       egressv1.EgressIPSpec{EgressIPs: []string{"172.18.0.33", "172.18.0.44", "172.18.0.300", "172.18.0.3"}},
	}
	res := egress.Assign([]*egressv1.EgressIP{eip}, nodes, nil, broken)
	for _, it := range res.Status[eip.Name] {
		fmt.Println(it.Node, it.EgressIP)
	}
	for _, e := range res.Events {
		fmt.Println(e.Reason+":", e.Message)
	}
	// Output:
	// ovn-worker 172.18.0.33
	// ovn-worker2 172.18.0.44
	// InvalidEgressIP: egress IP "172.18.0.300": not an IP address
	// EgressIPConflict: egress IP 172.18.0.3 is an address of node ovn-worker2
}

// The egress node ovn-worker stops answering its reachability probe: its
// IP moves to the other candidate in the same pass.
func ExampleAssign_failover() {
	nodes, _ := ovnknode.ParseAll(append(exampleNodes(),
		ovnknodetest.Node("ovn-worker3", "10.244.3.0/24", "172.18.0.5/16", "100.64.0.5/16", true)))
	eip := &egressv1.EgressIP{
		ObjectMeta: metav1.ObjectMeta{Name: "egressip-prod"},
		Spec:       egressv1.EgressIPSpec{EgressIPs: []string{"172.18.0.33", "172.18.0.44"}},
		Status: egressv1.EgressIPStatus{Items: []egressv1.EgressIPStatusItem{
			{Node: "ovn-worker", EgressIP: "172.18.0.33"}, {Node: "ovn-worker2", EgressIP: "172.18.0.44"},
		}},
	}
	reachable := func(node string) bool { return node != "ovn-worker" }
	res := egress.Assign([]*egressv1.EgressIP{eip}, nodes, reachable, nil)
	fmt.Println(res.Status[eip.Name])
	// Output:
	// [{ovn-worker3 172.18.0.33} {ovn-worker2 172.18.0.44}]
}

// The NB rows of the example EgressIP: the pod's reroute to both gateway
// routers (ECMP) and one SNAT per egress node.
func ExampleCompute() {
	nodes, _ := ovnknode.ParseAll(exampleNodes())
	status := []egressv1.EgressIPStatusItem{{Node: "ovn-worker", EgressIP: "172.18.0.33"}, {Node: "ovn-worker2", EgressIP: "172.18.0.44"}}
	pod := egress.Pod{Namespace: "default", Name: "web", Node: "ovn-worker", IPs: []netip.Addr{netip.MustParseAddr("10.244.1.3")}}
	c := egress.Cluster{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	d, err := egress.Compute(c, nodes, []egress.Served{{Name: "egressip-prod", Status: status, Pods: []egress.Pod{pod}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for o, st := range d.NB {
		if o.Type != egress.OwnerEgressIP {
			continue
		}
		for _, p := range st.Policies {
			fmt.Println(p.Priority, p.Match, p.Action, p.Nexthops)
		}
		for _, n := range st.NATs {
			fmt.Println(n.Router, n.Type, n.ExternalIP, n.LogicalIP)
		}
	}
	// Output:
	// 100 ip4.src == 10.244.1.3 reroute [100.64.0.3 100.64.0.4]
	// GR_ovn-worker snat 172.18.0.33 10.244.1.3
	// GR_ovn-worker2 snat 172.18.0.44 10.244.1.3
}

// Seed 002's selectors: pods labelled app=web in namespaces without
// environment=development.
func ExampleSelectPods() {
	pods, err := egress.SelectPods(seedEgressIP("172.18.0.33"), seedNamespaces, egress.PodInfos(seedPods))
	fmt.Println(pods, err)
	// Output:
	// [{default web ovn-worker [10.244.1.3]}] <nil>
}

// A node whose annotation turns bad keeps its last good parse: its egress
// IPs and rows stay, and it gets no new egress IP until it parses again.
func ExampleKeepLastGood() {
	prev, _ := ovnknode.ParseAll(exampleNodes())
	bad := exampleNodes()
	bad[0].Annotations[ovnknode.AnnotationNodeSubnets] = "{not json"
	parsed, broken := ovnknode.ParseAll(bad)
	var names []string
	for _, n := range ovnknode.KeepLastGood(prev, parsed, broken) {
		names = append(names, n.Name)
	}
	fmt.Println(len(parsed), names)
	fmt.Println(broken["ovn-worker"] != nil)
	// Output:
	// 1 [ovn-worker ovn-worker2]
	// true
}

// A Pod as egress keeps it: a leader holds one PodInfo for every pod of
// the cluster, the label sets of pods labelled alike shared.
func ExampleNewPodInfo() {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, Labels: map[string]string{"app": "web"}},
			Spec:   corev1.PodSpec{NodeName: "ovn-worker"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.244.1.3"}, {IP: "fd00:10:244:1::3"}}}}
	}
	a, b := egress.NewPodInfo(pod("web-0")), egress.NewPodInfo(pod("web-1"))
	p, served := a.Served()
	fmt.Println(p.Key(), p.Node, p.IPs, served)
	fmt.Println("labels shared:", a.Labels == b.Labels, a.Labels.Get("app"))
	// Output:
	// prod/web-0 ovn-worker [10.244.1.3 fd00:10:244:1::3] true
	// labels shared: true web
}
