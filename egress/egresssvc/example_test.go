package egresssvc_test

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/egresssvc"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// The EgressService shop/web gets a host among the nodes it selects, one
// reroute policy per endpoint to that host, and the host SNATs them to
// the Service's ingress IP.
func Example() {
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "172.18.0.200"}}}}}
	node := "worker1"
	slice := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, NodeName: &node}}}
	es := &egressv1.EgressService{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	workers := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "worker2"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}}
	in := egresssvc.Input{
		EgressServices: []*egressv1.EgressService{es},
		Service:        func(string) *corev1.Service { return web },
		Slices:         func(string) []*discoveryv1.EndpointSlice { return []*discoveryv1.EndpointSlice{slice} },
		Nodes:          workers,
		Parsed:         map[string]*ovnknode.Node{"worker2": {Name: "worker2", Subnets: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")}}},
	}
	d := egresssvc.Compute(in, egresssvc.Options{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}})
	fmt.Println("host:", d.Hosts["shop/web"], d.Labels["worker2"])
	for _, p := range d.NB[egresssvc.Owner("shop/web")].Policies {
		fmt.Println(p.Priority, p.Match, p.Action, p.Nexthops)
	}
	es.Status.Host = d.Hosts["shop/web"]
	h := egresssvc.HostState("worker2", []*egressv1.EgressService{es}, in.Service, in.Slices, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")})
	fmt.Println("SNAT on worker2:", h.SNAT[0].Pod, "->", h.SNAT[0].Source)
	// Output:
	// host: worker2 [egress-service.k8s.ovn.org/shop-web]
	// 101 ip4.src == 10.244.1.5 reroute [10.244.2.2]
	// SNAT on worker2: 10.244.1.5 -> 172.18.0.200
}
