package lbsvc

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// BypassServices returns the ARP/NDP bypass input of every Service with
// ExternalIPs or LoadBalancer ingress IPs: its VIPs and
// service port numbers, sorted by namespace and name. Every node installs
// the same bypass; brex.ARPBypass turns each into flows.
func BypassServices(svcs []*corev1.Service) []brex.Service {
	var out []brex.Service
	for _, svc := range svcs {
		if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		ips, _ := parseIPs(svc)
		if len(ips.external) == 0 {
			continue
		}
		s := brex.Service{Namespace: svc.Namespace, Name: svc.Name, VIPs: ips.external}
		for _, sp := range svc.Spec.Ports {
			if sp.Port > 0 && sp.Port <= 65535 {
				s.Ports = append(s.Ports, sp.Port)
			}
		}
		if len(s.Ports) > 0 {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b brex.Service) int {
		return compareNamespaced(a.Namespace, a.Name, b.Namespace, b.Name)
	})
	return out
}

// BypassFlows returns a node's bypass program by owner
// (brex.Service.Owner(), "service/<ns>/<name>"): set each owner's flows
// in the bridge's ovsflow.Program and delete the owners no longer listed.
func BypassFlows(b brex.Bypass, svcs []*corev1.Service) (map[string][]ovsflow.Flow, error) {
	out := map[string][]ovsflow.Flow{}
	for _, s := range BypassServices(svcs) {
		flows, err := brex.ARPBypass(b, s)
		if err != nil {
			return nil, fmt.Errorf("bypass flows: %w", err)
		}
		out[s.Owner()] = flows
	}
	return out, nil
}

// L2VIPs returns the opt-in L2 mode's VIPs (default off, as upstream):
// every ExternalIP and LoadBalancer ingress VIP, answered on iface (e.g.
// "br-ex", where the bypass sends their ARP/NDP requests). For an
// externalTrafficPolicy=Local Service only the nodes with a ready endpoint
// of it are Eligible (a non-nil empty slice when there is none: no node
// answers). A VIP two Services share goes with the first by
// namespace/name. Every node computes the same owners from it (Elect),
// so exactly one healthy node answers each VIP, the node VIPOwners names
// (its dataplane.L2 writer hands them to an arp.Responder).
func L2VIPs(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, iface string) []VIP {
	return l2VIPs(svcs, eps, iface, func(svc *corev1.Service) bool {
		return svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	})
}

// l2VIPs is L2VIPs where only nodes with a ready endpoint are eligible
// for the Services local says.
func l2VIPs(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, iface string, local func(*corev1.Service) bool) []VIP {
	bySvc := SlicesByService(eps)
	sorted := sortServices(svcs)
	seen := map[netip.Addr]bool{}
	var out []VIP
	for _, svc := range sorted {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		ips, _ := parseIPs(svc)
		var eligible []string
		if local(svc) {
			eligible = readyNodes(svc, bySvc[svc.Namespace+"/"+svc.Name])
		}
		for _, vip := range ips.external {
			if !seen[vip] {
				seen[vip] = true
				out = append(out, VIP{Addr: vip, Interface: iface, Eligible: eligible})
			}
		}
	}
	return out
}

// VIPOwners is the opt-in VIP reachability OVN-Kubernetes leaves to the
// administrator (default off, as upstream): for every ExternalIP and
// LoadBalancer ingress VIP, the one node that announces it (answers ARP/NDP
// for it in L2 mode, or holds it on its host stack), elected with
// Elect among the healthy nodes; for an externalTrafficPolicy=Local
// Service only among healthy nodes with a ready endpoint of it (see
// L2VIPs). The result maps each owner node to its sorted VIPs; a VIP
// without a candidate has no owner.
func VIPOwners(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, healthy []string) map[string][]netip.Addr {
	return (*Elections)(nil).VIPOwners(svcs, eps, healthy)
}

// VIPOwners is the package's VIPOwners, electing again only the VIPs
// whose candidates changed.
func (e *Elections) VIPOwners(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, healthy []string) map[string][]netip.Addr {
	return e.owners(L2VIPs(svcs, eps, ""), healthy, e.kind(false))
}

// UnderlayOwners is VIPOwners for the underlay VIPs (Options.UnderlayVIP)
// of ovnedge's standalone underlay mode: whatever the Service's
// externalTrafficPolicy, only healthy nodes with a ready endpoint are
// candidates. The underlay switch has a port on their chassis, so
// ovn-controller has made the provider bridge's patch port the steering
// flows go through (and with PreferLocal the node serves the VIP itself).
func UnderlayOwners(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, healthy []string, opts Options) map[string][]netip.Addr {
	return (*Elections)(nil).UnderlayOwners(svcs, eps, healthy, opts)
}

// UnderlayOwners is the package's UnderlayOwners, electing again only the
// VIPs whose candidates changed.
func (e *Elections) UnderlayOwners(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, healthy []string, opts Options) map[string][]netip.Addr {
	vips := l2VIPs(svcs, eps, "", func(*corev1.Service) bool { return true })
	vips = slices.DeleteFunc(vips, func(v VIP) bool { return !opts.UnderlayVIP(v.Addr) })
	return e.owners(vips, healthy, e.kind(true))
}

// kind is the elections of the underlay VIPs or of the L2 ones (nil for
// a nil Elections).
func (e *Elections) kind(underlay bool) *elections {
	switch {
	case e == nil:
		return nil
	case underlay:
		return &e.underlay
	}
	return &e.l2
}

// owners elects the owner of each VIP among the healthy nodes eligible
// for it, remembered in kind's elections.
func (e *Elections) owners(vips []VIP, healthy []string, kind *elections) map[string][]netip.Addr {
	healthy = slices.Clone(healthy)
	slices.Sort(healthy)
	healthy = slices.Compact(healthy)
	won := e.use(kind, healthy, len(vips))
	out := map[string][]netip.Addr{}
	for _, v := range vips {
		var eligible []string // nil: every healthy node
		if v.Eligible != nil {
			eligible = slices.DeleteFunc(slices.Clone(healthy), func(n string) bool { return !slices.Contains(v.Eligible, n) })
		}
		if node, ok := won.elect(v.Addr, healthy, eligible); ok {
			out[node] = append(out[node], v.Addr)
		}
	}
	for _, vips := range out {
		slices.SortFunc(vips, netip.Addr.Compare)
	}
	return out
}

// readyNodes returns the sorted nodes hosting a ready endpoint of the
// Service, never nil.
func readyNodes(svc *corev1.Service, eps []*discoveryv1.EndpointSlice) []string {
	nodes := []string{}
	for _, sp := range svc.Spec.Ports {
		for _, e := range portEndpoints(sp, eps) {
			if e.ready && e.node != "" {
				nodes = append(nodes, e.node)
			}
		}
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// ServedVIPs is what node announces in BGP mode (ECMP: every node that
// can serve a VIP announces it): every ExternalIP and LoadBalancer
// ingress VIP, except those of externalTrafficPolicy=Local Services
// without a ready endpoint on node. Whether node itself is ready is the
// caller's question. The result is sorted.
func ServedVIPs(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, node string) []netip.Addr {
	var out []netip.Addr
	for _, v := range L2VIPs(svcs, eps, "") {
		if v.Eligible == nil || slices.Contains(v.Eligible, node) {
			out = append(out, v.Addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
