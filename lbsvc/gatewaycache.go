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
// in place. Another bridge or node forgets everything. The zero
// GatewayCache is ready to use, a nil *GatewayCache remembers nothing,
// and a GatewayCache is not safe for concurrent use. The flows it returns
// are shared with later calls: read only.
type GatewayCache struct {
	g    brex.Gateway
	node Node
	svcs map[string]serviceFlows // by namespace/name
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

// use forgets everything unless the flows are for bridge g of node again.
func (c *GatewayCache) use(g brex.Gateway, node Node) {
	if c != nil && (c.svcs == nil || !reflect.DeepEqual(g, c.g) || !reflect.DeepEqual(node, c.node)) {
		c.g, c.node, c.svcs = g, node, map[string]serviceFlows{}
	}
}

// service returns svc's flows, built again unless svc and eps are those
// they were built from.
func (c *GatewayCache) service(g brex.Gateway, svc *corev1.Service, eps []*discoveryv1.EndpointSlice, node Node) serviceFlows {
	key := svc.Namespace + "/" + svc.Name
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
	keep := make(map[string]bool, len(svcs))
	for _, s := range svcs {
		keep[s.Namespace+"/"+s.Name] = true
	}
	for k := range c.svcs {
		if !keep[k] {
			delete(c.svcs, k)
		}
	}
}
