package lbsvc_test

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
)

// A LoadBalancer Service with externalTrafficPolicy=Local: its ingress VIP
// is only on the per-node load balancers: on the gateway router of a node
// with an endpoint the node's own endpoints and skip_snat=true, on one
// without a rejecting VIP; the node switches, equal on both nodes, share
// one merged load balancer, as OVN-Kubernetes writes them.
func ExampleBuild() {
	web := svc("web", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.10"}, port("http", corev1.ProtocolTCP, 80, 0, "8080"))
	web.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	web.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.50"}}
	eps := slice("web-a", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("http", corev1.ProtocolTCP, 8080)},
		ready("10.244.1.3", "node1"))
	states, _ := lbsvc.Build(lbsvc.Input{
		Services: []*corev1.Service{web}, EndpointSlices: []*discoveryv1.EndpointSlice{eps},
		Nodes: []lbsvc.Node{{Name: "node1"}, {Name: "node2"}},
	}, lbsvc.Options{})
	for _, lb := range states[lbsvc.ServiceOwner("default", "web")].LoadBalancers {
		fmt.Println(lb.Name, lb.VIPs, "skip_snat="+lb.Options["skip_snat"])
	}
	// Output:
	// Service_default/web_TCP_cluster map[10.96.0.10:80:10.244.1.3:8080] skip_snat=false
	// Service_default/web_TCP_node_local_router_node1 map[172.18.0.50:80:10.244.1.3:8080] skip_snat=true
	// Service_default/web_TCP_node_router_node2 map[172.18.0.50:80:] skip_snat=false
	// Service_default/web_TCP_node_switch_node1_merged map[172.18.0.50:80:10.244.1.3:8080] skip_snat=false
}

// A controller keeps one Cache across reconciles: after an EndpointSlice
// changes (a new object, as an informer stores it), only its Service is
// computed again.
func ExampleCache() {
	web := svc("web", corev1.ServiceTypeClusterIP, []string{"10.96.0.10"}, port("http", corev1.ProtocolTCP, 80, 0, "8080"))
	db := svc("db", corev1.ServiceTypeClusterIP, []string{"10.96.0.20"}, port("pg", corev1.ProtocolTCP, 5432, 0, "5432"))
	in := lbsvc.Input{Services: []*corev1.Service{web, db}, EndpointSlices: []*discoveryv1.EndpointSlice{
		slice("web-a", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("http", corev1.ProtocolTCP, 8080)},
			ready("10.244.1.3", "node1")),
	}, Nodes: []lbsvc.Node{{Name: "node1"}}}
	var cache lbsvc.Cache
	cache.Build(in, lbsvc.Options{})

	in.EndpointSlices = []*discoveryv1.EndpointSlice{
		slice("web-a", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("http", corev1.ProtocolTCP, 8080)},
			ready("10.244.1.3", "node1"), ready("10.244.2.3", "node2")),
	}
	states, _ := cache.Build(in, lbsvc.Options{})
	fmt.Println(states[lbsvc.ServiceOwner("default", "web")].LoadBalancers[0].VIPs)
	// Output:
	// map[10.96.0.10:80:10.244.1.3:8080,10.244.2.3:8080]
}

// The L2 mode: every node computes the same VIPs and owners (Elect);
// exactly one healthy node answers each.
func ExampleL2VIPs() {
	web := svc("web", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.10"}, port("http", corev1.ProtocolTCP, 80, 0, "8080"))
	web.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.50"}}
	services := []*corev1.Service{web}
	for _, v := range lbsvc.L2VIPs(services, nil, "br-ex") {
		fmt.Println(v.Addr, v.Interface, v.Eligible == nil)
	}
	owners := lbsvc.VIPOwners(services, nil, []string{"node1", "node2", "node3"})
	fmt.Println(len(owners), "owner:", owners[firstKey(owners)])
	// Output:
	// 172.18.0.50 br-ex true
	// 1 owner: [172.18.0.50]
}

func firstKey(m map[string][]netip.Addr) string {
	for k := range m {
		return k
	}
	return ""
}

// The Service of ExampleBuild as plain values: the same load balancers.
func ExampleBuildServices() {
	web := lbsvc.Service{
		Namespace: "default", Name: "web", Type: "LoadBalancer",
		ClusterIPs:           []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		LoadBalancerIPs:      []netip.Addr{netip.MustParseAddr("172.18.0.50")},
		Ports:                []lbsvc.Port{{Name: "http", Port: 80, TargetPort: 8080}},
		ExternalTrafficLocal: true,
		Endpoints:            []lbsvc.Endpoint{{Addr: netip.MustParseAddr("10.244.1.3"), Node: "node1"}},
	}
	states, _ := lbsvc.BuildServices([]lbsvc.Service{web}, []lbsvc.Node{{Name: "node1"}, {Name: "node2"}}, lbsvc.Options{})
	for _, lb := range states[lbsvc.ServiceOwner("default", "web")].LoadBalancers {
		fmt.Println(lb.Name, lb.VIPs, "skip_snat="+lb.Options["skip_snat"])
	}
	// Output:
	// Service_default/web_TCP_cluster map[10.96.0.10:80:10.244.1.3:8080] skip_snat=false
	// Service_default/web_TCP_node_local_router_node1 map[172.18.0.50:80:10.244.1.3:8080] skip_snat=true
	// Service_default/web_TCP_node_router_node2 map[172.18.0.50:80:] skip_snat=false
	// Service_default/web_TCP_node_switch_node1_merged map[172.18.0.50:80:10.244.1.3:8080] skip_snat=false
}

func ExampleElect() {
	vip := netip.MustParseAddr("172.18.0.50")
	nodes := []string{"ovn-control-plane", "ovn-worker", "ovn-worker2"}
	owner, _ := lbsvc.Elect(vip, nodes)
	fmt.Println("owner:", owner)
	// Every node computes the same owner, whatever the order of its list.
	again, _ := lbsvc.Elect(vip, []string{nodes[2], nodes[0], nodes[1]})
	fmt.Println("same owner:", again == owner)
	// Output:
	// owner: ovn-control-plane
	// same owner: true
}
