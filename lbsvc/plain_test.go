package lbsvc_test

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
)

// Dual stack, UDP, a NodePort, affinity and endpoints in every state give
// the same rows as the objects the conversion returns, and the objects say
// what the plain values say.
func TestServiceObjects(t *testing.T) {
	a := netip.MustParseAddr
	s := lbsvc.Service{
		Namespace: "ns", Name: "dns", Type: "NodePort",
		ClusterIPs:      []netip.Addr{a("10.96.0.53"), a("fd00:10:96::53")},
		ExternalIPs:     []netip.Addr{a("172.18.0.60")},
		Ports:           []lbsvc.Port{{Name: "dns", Protocol: "UDP", Port: 53, NodePort: 30053, TargetPort: 5353}},
		AffinitySeconds: 60, InternalTrafficLocal: true,
		Endpoints: []lbsvc.Endpoint{
			{Addr: a("10.244.1.3"), Node: "node1"},
			{Addr: a("fd00:10:244:1::3"), Node: "node1"},
			{Addr: a("10.244.2.3"), Node: "node2", Terminating: true},
			{Addr: a("10.244.2.4"), Node: "node2", NotServing: true},
		},
	}
	svc, eps := s.Objects()
	if svc.Spec.ClusterIP != "10.96.0.53" || len(svc.Spec.IPFamilies) != 2 || svc.Spec.SessionAffinityConfig == nil ||
		*svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 60 || svc.Spec.Ports[0].TargetPort.IntVal != 5353 ||
		string(*svc.Spec.InternalTrafficPolicy) != "Local" || string(svc.Spec.ExternalTrafficPolicy) != "Cluster" {
		t.Errorf("service %+v", svc.Spec)
	}
	if len(eps) != 2 || len(eps[0].Endpoints) != 3 || len(eps[1].Endpoints) != 1 {
		t.Fatalf("slices %+v", eps)
	}
	term := eps[0].Endpoints[1].Conditions
	if *term.Ready || !*term.Serving || !*term.Terminating {
		t.Errorf("terminating endpoint conditions %+v", term)
	}
	down := eps[0].Endpoints[2].Conditions
	if *down.Ready || *down.Serving || *down.Terminating {
		t.Errorf("not serving endpoint conditions %+v", down)
	}
	nodes := []lbsvc.Node{{Name: "node1", IPs: []netip.Addr{a("172.18.0.2")}}, {Name: "node2", IPs: []netip.Addr{a("172.18.0.3")}}}
	got, gotEv := lbsvc.BuildServices([]lbsvc.Service{s}, nodes, lbsvc.Options{})
	want, wantEv := lbsvc.Build(lbsvc.Input{Services: []*corev1.Service{svc}, EndpointSlices: eps, Nodes: nodes}, lbsvc.Options{})
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotEv, wantEv) {
		t.Errorf("BuildServices differs from Build of Objects:\n%+v\n%+v", got, want)
	}
	lbs := got[lbsvc.ServiceOwner("ns", "dns")].LoadBalancers
	if len(lbs) == 0 {
		t.Fatal("no load balancers")
	}
	routers := 0
	for _, lb := range lbs {
		if strings.Contains(lb.Name, "router") {
			routers++
		}
		for vip, backends := range lb.VIPs {
			// node2's switch (internalTrafficPolicy=Local) falls back to its
			// serving terminating endpoint; the gateway routers take the
			// ready one only.
			if strings.Contains(lb.Name, "router") && vip == "10.96.0.53:53" && backends != "10.244.1.3:5353" {
				t.Errorf("%s: %s -> %s, want the ready endpoint only", lb.Name, vip, backends)
			}
		}
		if lb.Protocol != "udp" {
			t.Errorf("%s: protocol %q", lb.Name, lb.Protocol)
		}
	}
	if routers != 2 {
		t.Errorf("%d gateway router load balancers, want 2 (node1's merged with its switch, node2's)", routers)
	}
	if got := lbs[len(lbs)-1].VIPs["172.18.0.3:30053"]; got != "10.244.1.3:5353" {
		t.Errorf("node2's NodePort: %q", got)
	}
}
