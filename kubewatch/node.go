package kubewatch

import (
	"net/netip"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// ForNode makes the Watcher a node instance's, on node: its
// EndpointSlices keep only what that node reads (compactSlice). A node
// instance needs every Service and EndpointSlice of the cluster, but of
// the endpoints on other nodes only which nodes have one ready.
func ForNode(node string) WatchOption {
	return func(w *Watcher) { w.node = node }
}

// transform is the typed informers' transform: stripManagedFields, and
// on a node instance's Watcher compactSlice.
func (w *Watcher) transform(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok && w.node != "" {
		compactSlice(s, w.node)
	}
	return obj, err
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
