package egresssvc

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
)

// RulePriority is the priority of the ip rules of spec.network
// (OVN-Kubernetes' node controller; its host-interface EgressIPs use 6000).
const RulePriority = 5000

// SNAT is one endpoint leaving the host node with its Service's ingress IP.
type SNAT struct {
	Pod, Source netip.Addr
	// Service is the EgressService's key (the element's comment).
	Service string
}

// Rule is `ip rule add prio RulePriority from From table Table`, for the
// EgressService Service ("<namespace>/<name>").
type Rule struct {
	From           netip.Addr
	Table, Service string
}

// Host is what a node programs for the EgressServices it hosts.
type Host struct {
	SNAT  []SNAT
	Rules []Rule
}

// HostState is node's part, as OVN-Kubernetes' node controller
// (go-controller/pkg/node/controllers/egressservice) computes it: for each
// EgressService whose status.host is node (or HostAll) and whose Service
// is a LoadBalancer with an ingress IP, an SNAT of every endpoint on the
// pod network to the Service's ingress IP of its family (the last one,
// none for HostAll) and, with spec.network, a rule per endpoint and
// ClusterIP to its table. Endpoints of a HostAll Service are the node's
// own.
func HostState(node string, ess []*egressv1.EgressService, service func(key string) *corev1.Service,
	slicesOf func(key string) []*discoveryv1.EndpointSlice, cluster []netip.Prefix) Host {
	var h Host
	for _, es := range ess {
		key, host := Key(es), es.Status.Host
		svc := service(key)
		if (host != node && host != egressv1.HostAll) || svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) == 0 {
			continue
		}
		sl := slicesOf(key)
		if host == egressv1.HostAll {
			sl = localSlices(sl, node)
		}
		eps := Endpoints(sl, cluster)
		var lb [2]netip.Addr
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil && host != egressv1.HostAll {
				lb[b2i(a.Unmap().Is6())] = a.Unmap()
			}
		}
		for _, ip := range eps {
			if src := lb[b2i(ip.Is6())]; src.IsValid() {
				h.SNAT = append(h.SNAT, SNAT{Pod: ip, Source: src, Service: key})
			}
		}
		if es.Spec.Network == "" {
			continue
		}
		from := slices.Clone(eps)
		for _, c := range svc.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(c); err == nil {
				from = append(from, a.Unmap())
			}
		}
		for _, ip := range from {
			h.Rules = append(h.Rules, Rule{From: ip, Table: es.Spec.Network, Service: key})
		}
	}
	slices.SortFunc(h.SNAT, func(a, b SNAT) int { return a.Pod.Compare(b.Pod) })
	h.SNAT = slices.CompactFunc(h.SNAT, func(a, b SNAT) bool { return a.Pod == b.Pod })
	slices.SortFunc(h.Rules, func(a, b Rule) int {
		return cmp.Or(a.From.Compare(b.From), cmp.Compare(a.Table, b.Table), cmp.Compare(a.Service, b.Service))
	})
	h.Rules = slices.CompactFunc(h.Rules, func(a, b Rule) bool { return a.From == b.From && a.Table == b.Table })
	return h
}

// localSlices are the slices with only node's endpoints (and those of no
// node, kept as upstream does).
func localSlices(in []*discoveryv1.EndpointSlice, node string) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, 0, len(in))
	for _, sl := range in {
		c := *sl
		c.Endpoints = nil
		for _, ep := range sl.Endpoints {
			if ep.NodeName == nil || *ep.NodeName == node {
				c.Endpoints = append(c.Endpoints, ep)
			}
		}
		out = append(out, &c)
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
