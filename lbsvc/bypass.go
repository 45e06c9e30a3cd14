package lbsvc

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/arp"
	"github.com/ovnedge/ovnedge/ovsflow"
)

// BypassServices returns the ARP/NDP bypass input of every Service with
// ExternalIPs or LoadBalancer ingress IPs (reference §1.1): its VIPs and
// service port numbers, sorted by namespace and name. Every node installs
// the same bypass; ovsflow.ARPBypass turns each into flows.
func BypassServices(svcs []*corev1.Service) []ovsflow.Service {
	var out []ovsflow.Service
	for _, svc := range svcs {
		if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		ips, _ := parseIPs(svc)
		if len(ips.external) == 0 {
			continue
		}
		s := ovsflow.Service{Namespace: svc.Namespace, Name: svc.Name, VIPs: ips.external}
		for _, sp := range svc.Spec.Ports {
			if sp.Port > 0 && sp.Port <= 65535 {
				s.Ports = append(s.Ports, sp.Port)
			}
		}
		if len(s.Ports) > 0 {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b ovsflow.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// BypassFlows returns a node's bypass program by owner
// (ovsflow.Service.Owner(), "service/<ns>/<name>"): set each owner's flows
// in the bridge's ovsflow.Program and delete the owners no longer listed.
func BypassFlows(b ovsflow.Bypass, svcs []*corev1.Service) (map[string][]ovsflow.Flow, error) {
	out := map[string][]ovsflow.Flow{}
	for _, s := range BypassServices(svcs) {
		flows, err := ovsflow.ARPBypass(b, s)
		if err != nil {
			return nil, fmt.Errorf("bypass flows: %w", err)
		}
		out[s.Owner()] = flows
	}
	return out, nil
}

// VIPOwners is the opt-in VIP reachability the seeds leave to the
// administrator (default off, as upstream): for every ExternalIP and
// LoadBalancer ingress VIP, the one node that announces it (answers ARP/NDP
// for it in L2 mode, or holds it on its host stack), elected with
// arp.Elect among the healthy nodes; for an externalTrafficPolicy=Local
// Service only among healthy nodes with a ready endpoint of it. The result
// maps each owner node to its sorted VIPs; a VIP without a candidate has no
// owner.
func VIPOwners(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, healthy []string) map[string][]netip.Addr {
	bySvc := SlicesByService(eps)
	healthy = slices.Clone(healthy)
	slices.Sort(healthy)
	healthy = slices.Compact(healthy)
	owners := map[netip.Addr]string{}
	out := map[string][]netip.Addr{}
	sorted := slices.DeleteFunc(slices.Clone(svcs), func(s *corev1.Service) bool { return s == nil })
	slices.SortFunc(sorted, func(a, b *corev1.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, svc := range sorted {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		ips, _ := parseIPs(svc)
		if len(ips.external) == 0 {
			continue
		}
		candidates := healthy
		if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
			candidates = readyNodes(svc, bySvc[svc.Namespace+"/"+svc.Name], healthy)
		}
		for _, vip := range ips.external {
			if _, done := owners[vip]; done {
				continue // a VIP two Services share goes with the first by namespace/name
			}
			if node, ok := arp.Elect(vip, candidates); ok {
				owners[vip] = node
				out[node] = append(out[node], vip)
			}
		}
	}
	for _, vips := range out {
		slices.SortFunc(vips, netip.Addr.Compare)
	}
	return out
}

// readyNodes returns the nodes of healthy hosting a ready endpoint of the
// Service.
func readyNodes(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, healthy []string) []string {
	has := map[string]bool{}
	for _, sp := range svc.Spec.Ports {
		for _, e := range portEndpoints(sp, eps) {
			if e.ready {
				has[e.node] = true
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(healthy), func(n string) bool { return !has[n] })
}
