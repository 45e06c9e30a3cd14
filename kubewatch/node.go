package kubewatch

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/desired"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/lbsvc"
)

// ForNode makes the Watcher a node instance's, on node: its
// EndpointSlices, Services and EgressIPs keep only what that node reads
// (TrimForNode, and sliceStubs for the slices of stubbed Services). A
// node instance needs every Service with an external IP, ingress or
// NodePort and their EndpointSlices, but of the endpoints on other nodes
// only which nodes have one ready.
func ForNode(node string) WatchOption {
	return func(w *Watcher) { w.node = node }
}

// transform is the typed informers' and the EgressIPs' transform:
// stripManagedFields, and on a node instance's Watcher TrimForNode.
func (w *Watcher) transform(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if w.node != "" {
		obj = TrimForNode(w.stubSlice(obj), w.node) // a stubbed slice is not compacted first
	}
	return obj, err
}

// TrimForNode is what a node instance on node keeps of an informer's
// object: an EndpointSlice compacted (compactSlice, in place); a Service
// that no node has work for (lbsvc.NodeWork), or an EgressIP whose status
// does not name node (desired.StatusNames), replaced by its key (a stub,
// which Snapshot and Services leave out); anything else as it is. A
// node's desired state (desired.ComputeNode) is the same from the trimmed
// objects as from whole ones. It is idempotent.
func TrimForNode(obj any, node string) any {
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		compactSlice(o, node)
	case *corev1.Service:
		if !lbsvc.NodeWork(o) {
			return &stub{namespace: o.Namespace, name: o.Name, resourceVersion: o.ResourceVersion}
		}
	case *unstructured.Unstructured:
		if o.GroupVersionKind() == egressv1.SchemeGroupVersion.WithKind(egressv1.Kind) && !desired.StatusNames(o, node) {
			return &stub{name: o.GetName(), resourceVersion: o.GetResourceVersion()}
		}
	}
	return obj
}

// stub is what a node instance's informer keeps of an object that it has
// no work for: its key and version, so that the informer tells its
// changes and deletion apart. Such are a ClusterIP (or headless) Service
// with no external IP and no ingress (a node's bridge serves external
// IPs, ingress and NodePorts; OVN's load balancers, the leader's, serve
// cluster IPs), nine in ten of the scale benchmark's at 150,000 pods (a
// corev1.Service is 592 bytes before its strings and maps), and an
// EgressIP that gives the node no IP (about 3.5 KB each, unstructured).
type stub struct {
	namespace, name, resourceVersion string
	// service is an EndpointSlice's Service (sliceStubs).
	service string
}

// GetObjectMeta makes a stub an object to meta.Accessor (the informer's
// key and the version it compares on a relist).
func (s *stub) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: s.namespace, Name: s.name, ResourceVersion: s.resourceVersion}
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
