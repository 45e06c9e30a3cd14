package lbsvc

import (
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// Cache remembers the load balancers Build computed for each Service, so
// that building again recomputes only the Services whose object or
// EndpointSlices changed. Objects are told apart by identity: an
// informer's store replaces the objects it updates and never changes one
// in place, so the same pointers mean the same content (a caller that
// edits objects in place must not use a Cache). Other nodes or options
// forget everything. The zero Cache is ready to use, a nil *Cache
// remembers nothing, and a Cache is not safe for concurrent use. The
// states it returns share their maps and slices with later calls: they
// are read only.
type Cache struct {
	nodes []Node
	opts  Options
	svcs  map[ovsdbnb.Owner]cachedService
}

// cachedService is what one Service's load balancers were computed from
// and what they were.
type cachedService struct {
	svc    *corev1.Service
	eps    []*discoveryv1.EndpointSlice
	st     ovsdbnb.State
	events []event.Event
}

// Build is the package's Build, reusing the states of unchanged Services.
func (c *Cache) Build(in Input, opts Options) (map[ovsdbnb.Owner]ovsdbnb.State, []event.Event) {
	bySvc := SlicesByService(in.EndpointSlices)
	nodes := sortedNodes(in.Nodes)
	if c != nil && (!reflect.DeepEqual(nodes, c.nodes) || !reflect.DeepEqual(opts, c.opts) || c.svcs == nil) {
		c.nodes, c.opts, c.svcs = nodes, opts, map[ovsdbnb.Owner]cachedService{}
	}
	out := make(map[ovsdbnb.Owner]ovsdbnb.State, len(in.Services)+1)
	var events []event.Event
	for _, svc := range in.Services {
		if svc == nil {
			continue
		}
		owner := ServiceOwner(svc.Namespace, svc.Name)
		eps := bySvc[svc.Namespace+"/"+svc.Name]
		cs, ok := cachedService{}, false
		if c != nil {
			cs, ok = c.svcs[owner]
		}
		if !ok || cs.svc != svc || !samePointers(cs.eps, eps) {
			cs.svc, cs.eps = svc, eps
			cs.st, cs.events = serviceState(svc, eps, nodes, opts)
			if c != nil {
				c.svcs[owner] = cs
			}
		}
		out[owner] = cs.st
		events = append(events, cs.events...)
	}
	if c != nil && len(c.svcs) > len(out) {
		for o := range c.svcs {
			if _, ok := out[o]; !ok {
				delete(c.svcs, o) // the Service is gone
			}
		}
	}
	owner, st := GroupState(in.Nodes, opts)
	out[owner] = st
	// The node IP template variables (none with per-node load balancers:
	// an empty state removes them).
	var tv ovsdbnb.State
	if !opts.PerNodeLBs {
		tv = NodeIPTemplatesState(nodes)
	}
	out[NodeIPTemplatesOwner] = tv
	return out, events
}

// samePointers reports whether a and b hold the same objects, in any
// order (a store lists them in no fixed order).
func samePointers[T any](a, b []*T) bool {
	if len(a) != len(b) {
		return false
	}
	for _, p := range a {
		if !slices.Contains(b, p) {
			return false
		}
	}
	return true
}
