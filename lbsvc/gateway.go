package lbsvc

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// Event reasons of the shared gateway flows.
const (
	// ReasonHostTargetPorts: an externalTrafficPolicy=Local port has
	// host-network endpoints on the node listening on several target
	// ports; only the lowest gets the traffic (no OpenFlow select group).
	ReasonHostTargetPorts = "SeveralHostTargetPorts"
	// ReasonGatewayFlows: a Service's shared gateway flows could not be
	// built or clash with another Service's; what the bridge holds for it
	// stays.
	ReasonGatewayFlows = "GatewayFlowsNotProgrammed"
)

var l4Protos = map[corev1.Protocol]ovsflow.Proto{
	corev1.ProtocolTCP: ovsflow.ProtoTCP, "": ovsflow.ProtoTCP,
	corev1.ProtocolUDP: ovsflow.ProtoUDP, corev1.ProtocolSCTP: ovsflow.ProtoSCTP,
}

// GatewayService returns what node's shared gateway flows need of a
// Service (brex.ServiceFlows' input): its ExternalIPs and LoadBalancer
// ingress IPs, its ports with their NodePorts and, for
// externalTrafficPolicy=Local, the target port of a ready host-network
// endpoint on node per family (an endpoint on node whose address is one
// of node.IPs; when none is ready, a serving and terminating one). ok is
// false for a Service that needs no flows on the bridge (ExternalName,
// or neither a VIP nor a NodePort). It is a pure function of one Service
// and its EndpointSlices, so a Service change recomputes that Service's
// owner only.
func GatewayService(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, node Node) (gs brex.GatewayService, ok bool, events []event.Event) {
	if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return gs, false, nil
	}
	ips, _ := parseIPs(svc) // bad addresses are the leader's events
	gs = brex.GatewayService{Namespace: svc.Namespace, Name: svc.Name, VIPs: ips.external}
	fws, _ := Firewalls(svc) // the events are the leader's
	for _, f := range fws {
		if gs.SourceRanges == nil {
			gs.SourceRanges = map[netip.Addr][]netip.Prefix{}
		}
		gs.SourceRanges[f.VIP] = f.Allowed
	}
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	hasNodePort := false
	for _, sp := range svc.Spec.Ports {
		proto, known := l4Protos[sp.Protocol]
		if !known || sp.Port <= 0 || sp.Port > 65535 {
			continue
		}
		p := brex.ServicePort{Protocol: proto, Port: sp.Port}
		if sp.NodePort > 0 && sp.NodePort <= 65535 {
			p.NodePort = sp.NodePort
			hasNodePort = true
		}
		if local {
			var evs []event.Event
			p.HostPort4, evs = hostTargetPort(svc, sp, eps, node, false)
			events = append(events, evs...)
			p.HostPort6, evs = hostTargetPort(svc, sp, eps, node, true)
			events = append(events, evs...)
		}
		gs.Ports = append(gs.Ports, p)
	}
	if len(gs.Ports) == 0 || (len(gs.VIPs) == 0 && !hasNodePort) {
		return brex.GatewayService{}, false, nil
	}
	return gs, true, events
}

// hostTargetPort is the target port of the service port's host-network
// endpoints on node of a family, the lowest when there are several (with
// an event), 0 for none.
func hostTargetPort(svc *corev1.Service, sp corev1.ServicePort, eps []*discoveryv1.EndpointSlice, node Node, v6 bool) (int32, []event.Event) {
	var ready, fallback []int32
	for _, e := range portEndpoints(sp, eps) {
		if e.addr.Is6() != v6 || e.node != node.Name || !slices.Contains(node.IPs, e.addr) {
			continue
		}
		switch {
		case e.ready:
			ready = append(ready, e.port)
		case e.serving && e.terminating:
			fallback = append(fallback, e.port)
		}
	}
	if len(ready) == 0 {
		ready = fallback
	}
	slices.Sort(ready)
	ready = slices.Compact(ready)
	switch len(ready) {
	case 0:
		return 0, nil
	case 1:
		return ready[0], nil
	}
	family := "IPv4"
	if v6 {
		family = "IPv6"
	}
	return ready[0], []event.Event{event.Warningf(serviceRef(svc), ReasonHostTargetPorts,
		"port %s: host-network endpoints on node %s listen on %s target ports %v; NodePort and VIP traffic entering %s goes to %d only (no OpenFlow select group)",
		portName(sp), node.Name, family, ready, node.Name, ready[0])}
}

func portName(sp corev1.ServicePort) string {
	if sp.Name != "" {
		return sp.Name
	}
	return fmt.Sprint(sp.Port)
}

// GatewayFlows are a node's shared gateway Service flows.
type GatewayFlows struct {
	// Sets are the flows by program owner ("service/<ns>/<name>", as
	// BypassFlows): set each in the bridge's ovsflow.Program and delete
	// the Service owners neither listed here nor in Failed.
	Sets map[string][]ovsflow.Flow
	// Failed are owners whose flows could not be built or clash with an
	// earlier Service's (by namespace/name) on the same flow: keep what
	// the bridge holds for them.
	Failed []string
	Events []event.Event
}

// NodeWork reports whether a node may have work for svc: NodePorts or
// load balancers (types NodePort and LoadBalancer; ExternalName is kept
// too), an external IP or a load balancer ingress. A ClusterIP Service
// without them is served by OVN's load balancers alone, the leader's: no
// node's bridge flows, announcements or routes serve it.
func NodeWork(svc *corev1.Service) bool {
	return (svc.Spec.Type != corev1.ServiceTypeClusterIP && svc.Spec.Type != "") || len(svc.Spec.ExternalIPs) > 0 ||
		len(svc.Status.LoadBalancer.Ingress) > 0
}

// NodeGatewayFlows returns node's shared gateway flows of every Service
// (brex.ServiceFlows of GatewayService), by owner. g describes node's
// bridge. A Service whose flows cannot be built, or would program a flow
// another Service programs differently (two Services on one VIP and port,
// one of them to a host-network endpoint), is an event and Failed; the
// other Services are unaffected.
func NodeGatewayFlows(g brex.Gateway, svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, node Node) GatewayFlows {
	return (*GatewayCache)(nil).NodeGatewayFlows(g, svcs, eps, node)
}

// NodeGatewayFlows is the package's NodeGatewayFlows, reusing the flows
// of unchanged Services.
func (c *GatewayCache) NodeGatewayFlows(g brex.Gateway, svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, node Node) GatewayFlows {
	out := GatewayFlows{Sets: map[string][]ovsflow.Flow{}}
	c.use(g, node)
	bySvc := c.slicesByService(eps)
	sorted := c.sortedServices(svcs)
	var check ovsflow.Program // finds clashes between Services
	for _, svc := range sorted {
		if !NodeWork(svc) {
			continue // nothing to build or remember
		}
		sf := c.service(g, svc, bySvc[serviceKey{svc.Namespace, svc.Name}], node)
		out.Events = append(out.Events, sf.events...)
		if !sf.ok {
			continue
		}
		err := sf.err
		if err == nil {
			err = check.Set(sf.owner, sf.flows)
		}
		if err != nil {
			var ce *ovsflow.ConflictError
			if errors.As(err, &ce) {
				err = fmt.Errorf("flow %q is %s's already", ce.Key, strings.TrimPrefix(ce.Other, "service/"))
			}
			out.Failed = append(out.Failed, sf.owner)
			out.Events = append(out.Events, event.Warningf(serviceRef(svc), ReasonGatewayFlows,
				"bridge flows on node %s not updated: %v", node.Name, err))
			continue
		}
		out.Sets[sf.owner] = sf.flows
	}
	c.forget(sorted)
	return out
}
