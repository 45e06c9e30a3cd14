package lbsvc

import (
	"cmp"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// Service is a Kubernetes Service and its endpoints as plain values, for
// a caller that has no corev1 objects (the counterpart of
// brex.Service). [BuildServices] builds load balancers from them;
// [Service.Objects] converts one to the Service and EndpointSlices that
// Build, ServiceState, L2VIPs and GatewayService take. Zero fields are
// unset: a ClusterIP Service, protocol TCP, target port = port, cluster
// traffic policies, no session affinity, ready endpoints.
type Service struct {
	Namespace, Name string
	// Type is "ClusterIP" (when empty), "NodePort" or "LoadBalancer".
	Type string
	// ClusterIPs are spec.clusterIPs, one per family.
	ClusterIPs []netip.Addr
	// ExternalIPs are spec.externalIPs.
	ExternalIPs []netip.Addr
	// LoadBalancerIPs are status.loadBalancer.ingress[].ip.
	LoadBalancerIPs []netip.Addr
	Ports           []Port
	// ExternalTrafficLocal and InternalTrafficLocal are the traffic
	// policies "Local".
	ExternalTrafficLocal, InternalTrafficLocal bool
	// AffinitySeconds is the ClientIP session affinity timeout; 0 is no
	// affinity.
	AffinitySeconds int32
	Endpoints       []Endpoint
}

// Port is a service port.
type Port struct {
	// Name is the port's name, needed when a Service has several.
	Name string
	// Protocol is "TCP" (when empty), "UDP" or "SCTP".
	Protocol string
	Port     int32
	// NodePort is the node port of a NodePort or LoadBalancer Service (0:
	// none).
	NodePort int32
	// TargetPort is the endpoints' port (0: Port).
	TargetPort int32
}

// Endpoint is one endpoint address of a Service.
type Endpoint struct {
	Addr netip.Addr
	// Node is the node the endpoint runs on ("" unknown).
	Node string
	// Terminating is set while the pod shuts down; NotServing when it
	// does not pass its readiness probe. An endpoint is ready without
	// either.
	Terminating, NotServing bool
}

// Objects returns s as a corev1 Service and one EndpointSlice per address
// family of its endpoints, labelled with its name.
func (s Service) Objects() (*corev1.Service, []*discoveryv1.EndpointSlice) {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceType(cmp.Or(s.Type, string(corev1.ServiceTypeClusterIP)))},
	}
	for _, a := range s.ClusterIPs {
		svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, a.String())
		fam := corev1.IPv4Protocol
		if a.Is6() {
			fam = corev1.IPv6Protocol
		}
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, fam)
	}
	if len(svc.Spec.ClusterIPs) > 0 {
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	}
	for _, a := range s.ExternalIPs {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, a.String())
	}
	for _, a := range s.LoadBalancerIPs {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: a.String()})
	}
	if s.ExternalTrafficLocal {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	} else if svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	itp := corev1.ServiceInternalTrafficPolicyCluster
	if s.InternalTrafficLocal {
		itp = corev1.ServiceInternalTrafficPolicyLocal
	}
	svc.Spec.InternalTrafficPolicy = &itp
	svc.Spec.SessionAffinity = corev1.ServiceAffinityNone
	if s.AffinitySeconds > 0 {
		timeout := s.AffinitySeconds
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}}
	}
	var ports []discoveryv1.EndpointPort
	for _, p := range s.Ports {
		proto := corev1.Protocol(cmp.Or(p.Protocol, string(corev1.ProtocolTCP)))
		target := cmp.Or(p.TargetPort, p.Port)
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: proto, Port: p.Port,
			NodePort: p.NodePort, TargetPort: intstr.FromInt32(target)})
		ports = append(ports, discoveryv1.EndpointPort{Name: &p.Name, Protocol: &proto, Port: &target})
	}
	var slices []*discoveryv1.EndpointSlice
	for _, v6 := range []bool{false, true} {
		sl := &discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name + "-ipv4",
				Labels: map[string]string{discoveryv1.LabelServiceName: s.Name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       ports,
		}
		if v6 {
			sl.Name, sl.AddressType = s.Name+"-ipv6", discoveryv1.AddressTypeIPv6
		}
		for _, e := range s.Endpoints {
			if e.Addr.Unmap().Is6() != v6 {
				continue
			}
			ready, serving, terminating := !e.NotServing && !e.Terminating, !e.NotServing, e.Terminating
			ep := discoveryv1.Endpoint{Addresses: []string{e.Addr.Unmap().String()},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating}}
			if e.Node != "" {
				node := e.Node
				ep.NodeName = &node
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		if len(sl.Endpoints) > 0 {
			slices = append(slices, sl)
		}
	}
	return svc, slices
}

// BuildServices is Build for plain-value Services.
func BuildServices(services []Service, nodes []Node, opts Options) (map[ovsdbnb.Owner]ovsdbnb.State, []event.Event) {
	in := Input{Nodes: nodes}
	for _, s := range services {
		svc, eps := s.Objects()
		in.Services = append(in.Services, svc)
		in.EndpointSlices = append(in.EndpointSlices, eps...)
	}
	return Build(in, opts)
}
