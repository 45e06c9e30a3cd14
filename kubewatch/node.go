package kubewatch

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ForNode makes the Watcher a node instance's, on node: its
// EndpointSlices and Services keep only what that node reads
// (TrimForNode). A node instance needs every Service with an external IP,
// ingress or NodePort and every EndpointSlice, but of the endpoints on
// other nodes only which nodes have one ready.
func ForNode(node string) WatchOption {
	return func(w *Watcher) { w.node = node }
}

// transform is the typed informers' transform: stripManagedFields, and
// on a node instance's Watcher TrimForNode.
func (w *Watcher) transform(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if w.node != "" {
		obj = TrimForNode(obj, w.node)
	}
	return obj, err
}

// TrimForNode is what a node instance on node keeps of an informer's
// object (in place): an EndpointSlice compacted (compactSlice), a Service
// that no node has work for reduced to a stub (stubService), anything else
// as it is. A node's desired state (desired.ComputeNode) is the same from
// trimmed objects as from whole ones.
func TrimForNode(obj any, node string) any {
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		compactSlice(o, node)
	case *corev1.Service:
		stubService(o)
	}
	return obj
}

// stubService keeps of a Service that no node has work for, a ClusterIP
// (or headless) Service with no external IP and no ingress, what the
// Watcher and a node's work read of it: its identity, type and cluster
// IPs. Its flows, announcements and routes are none: a node's bridge
// serves external IPs, ingress and NodePorts, and OVN's load balancers,
// the leader's, serve cluster IPs. At 150,000 pods nine Services in ten
// of the scale benchmark's are such. It is idempotent.
func stubService(s *corev1.Service) {
	if (s.Spec.Type != corev1.ServiceTypeClusterIP && s.Spec.Type != "") || len(s.Spec.ExternalIPs) > 0 ||
		len(s.Status.LoadBalancer.Ingress) > 0 {
		return
	}
	*s = corev1.Service{TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion,
			Generation: s.Generation, CreationTimestamp: s.CreationTimestamp},
		Spec: corev1.ServiceSpec{Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, ClusterIPs: s.Spec.ClusterIPs}}
}

// compactSlice keeps of s what a node instance on node reads: its
// endpoints on node whole and, of those on other nodes, one per node and
// set of conditions, with one address of the slice's family. What a node
// reads of another node's endpoints is whether it has a ready (or a
// serving and terminating) one: the candidates of the L2 election and of
// the BGP routes of externalTrafficPolicy=Local Services (lbsvc.L2VIPs).
// It is idempotent.
func compactSlice(s *discoveryv1.EndpointSlice, node string) {
	type kind struct {
		node                        string
		ready, serving, terminating bool
		set                         [3]bool
	}
	seen := map[kind]bool{}
	out := s.Endpoints[:0]
	for _, e := range s.Endpoints {
		if on := ptr.Deref(e.NodeName, ""); on != node {
			c := e.Conditions
			k := kind{on, ptr.Deref(c.Ready, false), ptr.Deref(c.Serving, false), ptr.Deref(c.Terminating, false),
				[3]bool{c.Ready != nil, c.Serving != nil, c.Terminating != nil}}
			addr, ok := familyAddress(e.Addresses, s.AddressType)
			if !ok || seen[k] {
				continue
			}
			seen[k] = true
			e.Addresses = []string{addr}
		}
		out = append(out, e)
	}
	if len(out) < len(s.Endpoints) {
		s.Endpoints = slices.Clone(out) // the decoded array is let go
	}
}

// familyAddress is the first of addrs of the slice's address type.
func familyAddress(addrs []string, t discoveryv1.AddressType) (string, bool) {
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil && ip.Is6() == (t == discoveryv1.AddressTypeIPv6) {
			return a, true
		}
	}
	return "", false
}
