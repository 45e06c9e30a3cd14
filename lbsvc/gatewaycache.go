package lbsvc

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// GatewayCache remembers the shared gateway flows NodeGatewayFlows built
// for each Service, so that a node's pass builds again only the Services
// whose object or EndpointSlices changed (at 10,000 Services, building
// every Service's flows was most of a node's pass, and every Service or
// EndpointSlice event of the cluster is a pass on every node). Objects
// are told apart by identity, as in Cache: an informer never changes one
// in place; and so are the lists of Services and EndpointSlices: a
// caller passes a new list once an object changed (kubewatch's lists
// are), never one changed in place. Another bridge or node forgets
// everything. The zero GatewayCache is ready to use, a nil *GatewayCache
// remembers nothing, and a GatewayCache is not safe for concurrent use.
// The flows it returns are shared with later calls: read only.
type GatewayCache struct {
	g    brex.Gateway
	node Node
	svcs map[serviceKey]serviceFlows
	// The last call's lists, told apart by identity too (an informer's
	// lists are new slices once an object changed), and what was made of
	// them: the slices by Service, the Services sorted.
	eps    []*discoveryv1.EndpointSlice
	bySvc  map[serviceKey][]*discoveryv1.EndpointSlice
	list   []*corev1.Service
	sorted []*corev1.Service
}

// serviceFlows is what a Service's gateway flows were built from and what
// they were: ok is GatewayService's, err brex.ServiceFlows'.
type serviceFlows struct {
	svc    *corev1.Service
	eps    []*discoveryv1.EndpointSlice
	owner  string
	ok     bool
	flows  []ovsflow.Flow
	err    error
	events []event.Event
}

// serviceKey is a Service's namespace and name: a map key built without
// building a string (10,000 of them on every pass).
type serviceKey struct{ namespace, name string }

// slicesByService is SlicesByService(eps) by serviceKey, again only for
// another list.
func (c *GatewayCache) slicesByService(eps []*discoveryv1.EndpointSlice) map[serviceKey][]*discoveryv1.EndpointSlice {
	if c != nil && c.bySvc != nil && sameList(c.eps, eps) {
		return c.bySvc
	}
	bySvc := slicesBy(eps, func(namespace, name string) serviceKey { return serviceKey{namespace, name} })
	if c != nil {
		c.eps, c.bySvc = eps, bySvc
	}
	return bySvc
}

// sortedServices is sortServices(svcs), sorted again only for another
// list.
func (c *GatewayCache) sortedServices(svcs []*corev1.Service) []*corev1.Service {
	if c != nil && c.sorted != nil && sameList(c.list, svcs) {
		return c.sorted
	}
	sorted := sortServices(svcs)
	if c != nil {
		c.list, c.sorted = svcs, sorted
	}
	return sorted
}

// sameList reports whether a and b are the same list (the same elements
// in the same memory), not merely equal.
func sameList[T any](a, b []*T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// use forgets everything unless the flows are for bridge g of node again.
func (c *GatewayCache) use(g brex.Gateway, node Node) {
	if c != nil && (c.svcs == nil || !reflect.DeepEqual(g, c.g) || !reflect.DeepEqual(node, c.node)) {
		c.g, c.node, c.svcs = g, node, map[serviceKey]serviceFlows{}
	}
}

// service returns svc's flows, built again unless svc and eps are those
// they were built from.
func (c *GatewayCache) service(g brex.Gateway, svc *corev1.Service, eps []*discoveryv1.EndpointSlice, node Node) serviceFlows {
	key := serviceKey{svc.Namespace, svc.Name}
	if c != nil {
		if sf, ok := c.svcs[key]; ok && sf.svc == svc && samePointers(sf.eps, eps) {
			return sf
		}
	}
	sf := serviceFlows{svc: svc, eps: eps}
	var gs brex.GatewayService
	gs, sf.ok, sf.events = GatewayService(svc, eps, node)
	if sf.ok {
		sf.owner = gs.Owner()
		sf.flows, sf.err = brex.ServiceFlows(g, gs)
	}
	if c != nil {
		c.svcs[key] = sf
	}
	return sf
}

// forget drops the Services not in svcs: they are gone.
func (c *GatewayCache) forget(svcs []*corev1.Service) {
	if c == nil || len(c.svcs) <= len(svcs) {
		return
	}
	keep := make(map[serviceKey]bool, len(svcs))
	for _, s := range svcs {
		keep[serviceKey{s.Namespace, s.Name}] = true
	}
	for k := range c.svcs {
		if !keep[k] {
			delete(c.svcs, k)
		}
	}
}
