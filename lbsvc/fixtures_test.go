package lbsvc_test

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovnedge/ovnedge/lbsvc"
)

func ptr[T any](v T) *T { return &v }

// svc builds a Service; mutate it further in the test.
func svc(name string, typ corev1.ServiceType, clusterIPs []string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: typ, ClusterIPs: clusterIPs, Ports: ports,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster},
	}
	if len(clusterIPs) > 0 {
		s.Spec.ClusterIP = clusterIPs[0]
	}
	if typ == corev1.ServiceTypeClusterIP || typ == corev1.ServiceTypeExternalName {
		s.Spec.ExternalTrafficPolicy = ""
	}
	return s
}

func port(name string, proto corev1.Protocol, p, nodePort int32, target string) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: p, NodePort: nodePort, TargetPort: intstr.Parse(target)}
}

// ep is an endpoint: address, node, and its conditions (ready, serving,
// terminating; nil = unset).
type ep struct {
	addr, node                  string
	ready, serving, terminating *bool
}

func ready(addr, node string) ep { return ep{addr: addr, node: node, ready: ptr(true)} }
func notReady(addr, node string) ep {
	return ep{addr: addr, node: node, ready: ptr(false), serving: ptr(false)}
}
func terminating(addr, node string) ep {
	return ep{addr: addr, node: node, ready: ptr(false), serving: ptr(true), terminating: ptr(true)}
}

// slice builds an EndpointSlice of service svcName.
func slice(name, svcName string, at discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: at,
		Ports:       ports,
	}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.addr},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.node != "" {
			x.NodeName = ptr(e.node)
		}
		s.Endpoints = append(s.Endpoints, x)
	}
	return s
}

func sport(name string, proto corev1.Protocol, p int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr(name), Protocol: ptr(proto), Port: ptr(p)}
}

func nodes() []lbsvc.Node {
	return []lbsvc.Node{
		{Name: "node2", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.3"), netip.MustParseAddr("fc00:f853:ccd:e793::3")}, Chassis: "chassis-node2"},
		{Name: "node1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2"), netip.MustParseAddr("fc00:f853:ccd:e793::2")}, Chassis: "chassis-node1"},
	}
}

// cluster is the golden scenario: every kind of Service the peers' examples name.
func cluster() lbsvc.Input {
	web := svc("web", corev1.ServiceTypeClusterIP, []string{"10.96.0.10"}, port("http", corev1.ProtocolTCP, 80, 0, "http"))

	lbCluster := svc("lb-cluster", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.20"},
		port("http", corev1.ProtocolTCP, 80, 30080, "8080"), port("dns", corev1.ProtocolUDP, 53, 30053, "5353"))
	lbCluster.Spec.ExternalIPs = []string{"172.18.0.50"}
	lbCluster.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.60"}, {Hostname: "lb.example.com"}}
	lbCluster.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	lbCluster.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(600))}}

	lbLocal := svc("lb-local", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.30", "fd00:10:96::30"},
		port("https", corev1.ProtocolTCP, 443, 30443, "8443"))
	lbLocal.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	lbLocal.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.70"}, {IP: "2001:db8::70"}}

	term := svc("draining", corev1.ServiceTypeClusterIP, []string{"10.96.0.40"}, port("", corev1.ProtocolTCP, 80, 0, "80"))
	headless := svc("headless", corev1.ServiceTypeClusterIP, []string{corev1.ClusterIPNone}, port("", corev1.ProtocolTCP, 80, 0, "80"))
	fqdn := svc("fqdn", corev1.ServiceTypeClusterIP, []string{"10.96.0.50"}, port("", corev1.ProtocolTCP, 80, 0, "80"))

	return lbsvc.Input{
		Services: []*corev1.Service{web, lbCluster, lbLocal, term, headless, fqdn},
		EndpointSlices: []*discoveryv1.EndpointSlice{
			slice("web-a", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("http", corev1.ProtocolTCP, 8080)},
				ready("10.244.1.3", "node1"), ready("10.244.2.3", "node2"), notReady("10.244.2.4", "node2"),
				ep{addr: "10.244.1.5", node: "node1"}), // no conditions: ready
			slice("lb-cluster-a", "lb-cluster", discoveryv1.AddressTypeIPv4,
				[]discoveryv1.EndpointPort{sport("http", corev1.ProtocolTCP, 8080), sport("dns", corev1.ProtocolUDP, 5353)},
				ready("10.244.1.10", "node1"), ready("10.244.2.10", "node2")),
			slice("lb-local-v4", "lb-local", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("https", corev1.ProtocolTCP, 8443)},
				ready("10.244.1.20", "node1")),
			slice("lb-local-v6", "lb-local", discoveryv1.AddressTypeIPv6, []discoveryv1.EndpointPort{sport("https", corev1.ProtocolTCP, 8443)},
				ready("fd00:10:244:2::20", "node2")),
			slice("draining-a", "draining", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("", corev1.ProtocolTCP, 80)},
				terminating("10.244.1.30", "node1"), notReady("10.244.2.30", "node2")),
			slice("fqdn-a", "fqdn", discoveryv1.AddressTypeFQDN, []discoveryv1.EndpointPort{sport("", corev1.ProtocolTCP, 80)},
				ready("db.example.com", "")),
		},
		Nodes: nodes(),
	}
}
