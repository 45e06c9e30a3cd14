package egresssvc_test

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/egresssvc"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// policy is egressServiceRouterPolicy of OVN-Kubernetes'
// go-controller/pkg/ovn/egressservices_test.go.
func policy(key, addr, nexthop string) ovsdbnb.RouterPolicy {
	fam := "ip4"
	if netip.MustParseAddr(addr).Is6() {
		fam = "ip6"
	}
	return ovsdbnb.RouterPolicy{Router: "ovn_cluster_router", Priority: 101, Action: "reroute",
		Match: fam + ".src == " + addr, Nexthops: []string{nexthop}, ExternalIDs: map[string]string{"EgressSVC": key}}
}

// TestCompute ports the rows OVN-Kubernetes' egressservices_test.go
// expects, with every node in the one Northbound: an endpoint on another
// node than the host gets the host's management IP as nexthop where
// upstream's ":ic" policy of the host's zone has it, and is in
// egresssvc-served-pods.
func TestCompute(t *testing.T) {
	dual := func(eps ...string) []string { return eps }
	for _, c := range []struct {
		name   string
		w      world
		nb     map[ovsdbnb.Owner]ovsdbnb.State
		served []string
	}{
		{"host node1, endpoints on both nodes, dual-stack", world{nodes: []node{{"node1", nil, false}, {"node2", nil, false}},
			ess: []esvc{{name: "svc1", host: "node1", eps: dual("10.128.1.5@node1", "10.128.2.5@node2", "fe00:10:128:1::5@node1", "fe00:10:128:2::5@node2")}}},
			map[ovsdbnb.Owner]ovsdbnb.State{egresssvc.Owner("testns/svc1"): {Policies: []ovsdbnb.RouterPolicy{
				policy("testns/svc1", "10.128.1.5", "10.128.1.2"), policy("testns/svc1", "10.128.2.5", "10.128.1.2"),
				policy("testns/svc1", "fe00:10:128:1::5", "fe00:10:128:1::2"), policy("testns/svc1", "fe00:10:128:2::5", "fe00:10:128:1::2")}}},
			[]string{"10.128.1.5", "10.128.2.5", "fe00:10:128:1::5", "fe00:10:128:2::5"}},
		{"host moved to node2", world{nodes: []node{{"node1", map[string]string{"x": "1"}, false}, {"node2", map[string]string{"x": "2"}, false}},
			ess: []esvc{{name: "svc1", host: "node1", selector: map[string]string{"x": "2"}, eps: dual("10.128.1.5@node1", "fe00:10:128:1::5@node1")}}},
			map[ovsdbnb.Owner]ovsdbnb.State{egresssvc.Owner("testns/svc1"): {Policies: []ovsdbnb.RouterPolicy{
				policy("testns/svc1", "10.128.1.5", "10.128.2.2"), policy("testns/svc1", "fe00:10:128:1::5", "fe00:10:128:2::2")}}},
			[]string{"10.128.1.5", "fe00:10:128:1::5"}},
		{"sourceIPBy Network: no rows", world{nodes: []node{{"node1", nil, false}},
			ess: []esvc{{name: "svc1", sourceIPBy: egressv1.SourceIPNetwork, host: "node1", eps: dual("10.128.1.5@node1")}}},
			map[ovsdbnb.Owner]ovsdbnb.State{}, nil},
		{"endpoint of no node and a host endpoint left out; two Services", world{nodes: []node{{"node1", nil, false}, {"node2", nil, false}},
			ess: []esvc{{name: "svc1", host: "node1", eps: dual("10.128.1.7@node1", "10.128.1.9@", "172.18.0.2@node1")},
				{name: "svc2", host: "node2", eps: dual("10.128.1.6@node1")}}},
			map[ovsdbnb.Owner]ovsdbnb.State{
				egresssvc.Owner("testns/svc1"): {Policies: []ovsdbnb.RouterPolicy{policy("testns/svc1", "10.128.1.7", "10.128.1.2")}},
				egresssvc.Owner("testns/svc2"): {Policies: []ovsdbnb.RouterPolicy{policy("testns/svc2", "10.128.1.6", "10.128.2.2")}}},
			[]string{"10.128.1.6", "10.128.1.7"}},
		{"no endpoints: no host, no rows", world{nodes: []node{{"node1", nil, false}}, ess: []esvc{{name: "svc1", host: "node1"}}},
			map[ovsdbnb.Owner]ovsdbnb.State{}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := egresssvc.Compute(c.w.input(), egresssvc.Options{ClusterSubnets: cluster})
			if !reflect.DeepEqual(d.NB, c.nb) {
				t.Errorf("rows:\n got %+v\nwant %+v", d.NB, c.nb)
			}
			var served []string
			for _, a := range d.Served {
				served = append(served, a.String())
			}
			if !reflect.DeepEqual(served, c.served) {
				t.Errorf("served = %v, want %v", served, c.served)
			}
		})
	}
}

// TestHostState ports the nftables elements and ip rules OVN-Kubernetes'
// go-controller/pkg/node/egress_service_test.go expects of node "node".
func TestHostState(t *testing.T) {
	svc := func(name, lb string, local bool, clusterIP string) *corev1.Service {
		s := lbService(name, local, false)
		s.Namespace = "namespace1"
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lb}}
		s.Spec.ClusterIPs = []string{clusterIP}
		return s
	}
	es := func(name, host, network string) *egressv1.EgressService {
		e := &egressv1.EgressService{Spec: egressv1.EgressServiceSpec{Network: network}, Status: egressv1.EgressServiceStatus{Host: host}}
		e.Namespace, e.Name = "namespace1", name
		return e
	}
	sl := func(name string, eps ...string) []*discoveryv1.EndpointSlice {
		return []*discoveryv1.EndpointSlice{slice(name, eps)}
	}
	cl := []netip.Prefix{netip.MustParsePrefix("10.128.0.0/14")}
	a := netip.MustParseAddr
	for _, c := range []struct {
		name   string
		ess    []*egressv1.EgressService
		svcs   map[string]*corev1.Service
		slices map[string][]*discoveryv1.EndpointSlice
		want   egresssvc.Host
	}{
		{"cluster networked pods, a host endpoint left out",
			[]*egressv1.EgressService{es("service1", "node", "")},
			map[string]*corev1.Service{"namespace1/service1": svc("service1", "5.5.5.5", false, "10.129.0.2")},
			map[string][]*discoveryv1.EndpointSlice{"namespace1/service1": sl("service1", "10.128.0.3@node", "192.168.18.15@node")},
			egresssvc.Host{SNAT: []egresssvc.SNAT{{Pod: a("10.128.0.3"), Source: a("5.5.5.5"), Service: "namespace1/service1"}}}},
		{"with Network",
			[]*egressv1.EgressService{es("service1", "node", "mynetwork"), es("service2", "node", "mynetwork")},
			map[string]*corev1.Service{"namespace1/service1": svc("service1", "5.5.5.5", false, "10.129.0.2"),
				"namespace1/service2": svc("service2", "5.5.5.6", true, "10.129.0.10")},
			map[string][]*discoveryv1.EndpointSlice{"namespace1/service1": sl("service1", "10.128.0.3@node"),
				"namespace1/service2": sl("service2", "10.128.0.11@node")},
			egresssvc.Host{SNAT: []egresssvc.SNAT{{Pod: a("10.128.0.3"), Source: a("5.5.5.5"), Service: "namespace1/service1"},
				{Pod: a("10.128.0.11"), Source: a("5.5.5.6"), Service: "namespace1/service2"}},
				Rules: []egresssvc.Rule{{From: a("10.128.0.3"), Table: "mynetwork", Service: "namespace1/service1"},
					{From: a("10.128.0.11"), Table: "mynetwork", Service: "namespace1/service2"},
					{From: a("10.129.0.2"), Table: "mynetwork", Service: "namespace1/service1"},
					{From: a("10.129.0.10"), Table: "mynetwork", Service: "namespace1/service2"}}}},
		{"with Network and host ALL: local endpoints, no SNAT",
			[]*egressv1.EgressService{es("service1", "ALL", "mynetwork")},
			map[string]*corev1.Service{"namespace1/service1": svc("service1", "5.5.5.5", false, "10.129.0.2")},
			map[string][]*discoveryv1.EndpointSlice{"namespace1/service1": sl("service1", "10.128.0.3@node", "10.128.1.5@someOtherNode")},
			egresssvc.Host{Rules: []egresssvc.Rule{{From: a("10.128.0.3"), Table: "mynetwork", Service: "namespace1/service1"},
				{From: a("10.129.0.2"), Table: "mynetwork", Service: "namespace1/service1"}}}},
		{"another node's Service", []*egressv1.EgressService{es("service1", "other", "mynetwork")},
			map[string]*corev1.Service{"namespace1/service1": svc("service1", "5.5.5.5", false, "10.129.0.2")},
			map[string][]*discoveryv1.EndpointSlice{"namespace1/service1": sl("service1", "10.128.0.3@node")}, egresssvc.Host{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := egresssvc.HostState("node", c.ess, func(k string) *corev1.Service { return c.svcs[k] },
				func(k string) []*discoveryv1.EndpointSlice { return c.slices[k] }, cl)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}
