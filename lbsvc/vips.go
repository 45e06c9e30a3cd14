package lbsvc

import (
	"cmp"
	"fmt"
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
)

// Allocate runs LB IPAM over svcs, oldest first, and returns the Services
// as the load balancers see them: with the ingress IPAM gives them. New
// ingress lists are stored in ingress by "<namespace>/<name>". Services
// skip reports (nil: none) are left as they are: their addresses come
// from elsewhere. poolOf (nil, or nil for a Service: every pool) names
// the pools a Service's address comes from.
func Allocate(svcs []*corev1.Service, pools []*ipam.Pool, ingress map[string][]corev1.LoadBalancerIngress,
	skip func(*corev1.Service) bool, poolOf func(*corev1.Service) []string) ([]*corev1.Service, []event.Event, error) {
	if len(pools) == 0 {
		return svcs, nil, nil
	}
	alloc, err := ipam.NewAllocator(pools...)
	if err != nil {
		return nil, nil, fmt.Errorf("lb pools: %w", err)
	}
	if skip == nil {
		skip = func(*corev1.Service) bool { return false }
	}
	events := alloc.Rebuild(slices.DeleteFunc(slices.Clone(svcs), skip))
	sorted := slices.Clone(svcs)
	slices.SortFunc(sorted, OlderFirst)
	for i, svc := range sorted {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || skip(svc) {
			continue
		}
		var names []string
		if poolOf != nil {
			names = poolOf(svc)
		}
		res := alloc.Allocate(svc, names...)
		events = append(events, res.Events...)
		if ipam.IngressEqual(res.Ingress, svc.Status.LoadBalancer.Ingress) {
			continue
		}
		ingress[svc.Namespace+"/"+svc.Name] = res.Ingress
		c := svc.DeepCopy()
		c.Status.LoadBalancer.Ingress = res.Ingress
		sorted[i] = c
	}
	return sorted, events, nil
}

// ClassAssigned reports whether ovnedge's LB IPAM assigns svc's address,
// as MetalLB decides with its --lb-class: with class set, the Services of
// that spec.loadBalancerClass; without, the Services without a class,
// except with --underlay-lb-mode=metallb, where those are MetalLB's (both
// would assign them, one after the other). ovnedge programs every
// Service's VIPs whoever assigned them.
func ClassAssigned(svc *corev1.Service, class string, metallb bool) bool {
	if svc.Spec.LoadBalancerClass != nil {
		return class != "" && *svc.Spec.LoadBalancerClass == class
	}
	return class == "" && !metallb
}

// ReasonDuplicateExternalIP is the Warning event on a Service whose
// ExternalIP an older Service already serves on one of its ports.
const ReasonDuplicateExternalIP = "DuplicateExternalIP"

// DedupVIPs gives every VIP to one Service, first come first served: the
// oldest Service claiming it keeps it (creationTimestamp, which the
// manifests source sets in the order objects appear: file name order,
// then position in the file; equal timestamps, possible within one second
// of an API server, fall back to namespace/name). A younger Service loses
// only the duplicated VIP, with a Warning event: its ClusterIP and its
// other VIPs are programmed as usual, so a duplicate never fails the
// whole sync nor takes the VIP's traffic from its holder.
//   - A LoadBalancer ingress IP belongs to one LoadBalancer Service
//     whatever the ports (LB IPAM's rule).
//   - An ExternalIP (or an ingress IP) is refused when an older Service
//     serves the same protocol, address and port on it; Services with
//     disjoint ports share an address, as Kubernetes allows.
func DedupVIPs(svcs []*corev1.Service) ([]*corev1.Service, []event.Event) {
	order := slices.Clone(svcs)
	slices.SortStableFunc(order, OlderFirst)
	ingressHolder := map[string]*corev1.Service{}
	portHolder := map[string]*corev1.Service{} // "<protocol> <ip>:<port>"
	replaced := map[*corev1.Service]*corev1.Service{}
	var events []event.Event
	// taken is the older Service serving one of svc's ports on ip.
	taken := func(svc *corev1.Service, ip string) (*corev1.Service, string) {
		for _, p := range svc.Spec.Ports {
			k := fmt.Sprintf("%s %s", cmp.Or(p.Protocol, corev1.ProtocolTCP), net.JoinHostPort(ip, fmt.Sprint(p.Port)))
			if h, ok := portHolder[k]; ok && h != svc {
				return h, k
			}
		}
		return nil, ""
	}
	claim := func(svc *corev1.Service, ip string) {
		for _, p := range svc.Spec.Ports {
			portHolder[fmt.Sprintf("%s %s", cmp.Or(p.Protocol, corev1.ProtocolTCP), net.JoinHostPort(ip, fmt.Sprint(p.Port)))] = svc
		}
	}
	for _, svc := range order {
		var keepIngress []corev1.LoadBalancerIngress
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			for _, ing := range svc.Status.LoadBalancer.Ingress {
				if ing.IP == "" {
					keepIngress = append(keepIngress, ing)
					continue
				}
				if h, ok := ingressHolder[ing.IP]; ok && h != svc {
					events = append(events, event.Warningf(event.Ref("v1", "Service", svc), ipam.ReasonDuplicate,
						"LoadBalancer IP %s belongs to Service %s/%s; it is not programmed for this Service", ing.IP, h.Namespace, h.Name))
					continue
				}
				if h, k := taken(svc, ing.IP); h != nil {
					events = append(events, event.Warningf(event.Ref("v1", "Service", svc), ipam.ReasonDuplicate,
						"LoadBalancer IP %s: %s is served by the older Service %s/%s; the IP is not programmed for this Service", ing.IP, k, h.Namespace, h.Name))
					continue
				}
				ingressHolder[ing.IP] = svc
				claim(svc, ing.IP)
				keepIngress = append(keepIngress, ing)
			}
		}
		var keepExternal []string
		for _, ip := range svc.Spec.ExternalIPs {
			if h, k := taken(svc, ip); h != nil {
				events = append(events, event.Warningf(event.Ref("v1", "Service", svc), ReasonDuplicateExternalIP,
					"ExternalIP %s: %s is served by the older Service %s/%s; the ExternalIP is not programmed for this Service (its other addresses are)", ip, k, h.Namespace, h.Name))
				continue
			}
			claim(svc, ip)
			keepExternal = append(keepExternal, ip)
		}
		lostIngress := svc.Spec.Type == corev1.ServiceTypeLoadBalancer && len(keepIngress) != len(svc.Status.LoadBalancer.Ingress)
		if lostIngress || len(keepExternal) != len(svc.Spec.ExternalIPs) {
			c := svc.DeepCopy()
			if lostIngress {
				c.Status.LoadBalancer.Ingress = keepIngress
			}
			c.Spec.ExternalIPs = keepExternal
			replaced[svc] = c
		}
	}
	if len(replaced) == 0 {
		return svcs, events
	}
	out := slices.Clone(svcs)
	for i, svc := range out {
		if c, ok := replaced[svc]; ok {
			out[i] = c
		}
	}
	return out, events
}

// OlderFirst orders Services by creationTimestamp, then namespace/name.
func OlderFirst(a, b *corev1.Service) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return compareKeys(a.Namespace, a.Name, b.Namespace, b.Name)
}

// compareKeys compares "<ans>/<an>" with "<bns>/<bn>" as strings, without
// building them (Services are sorted on every VIP pass).
func compareKeys(ans, an, bns, bn string) int {
	at := func(ns, n string, i int) byte {
		switch {
		case i < len(ns):
			return ns[i]
		case i == len(ns):
			return '/'
		}
		return n[i-len(ns)-1]
	}
	la, lb := len(ans)+1+len(an), len(bns)+1+len(bn)
	for i := range min(la, lb) {
		if c := cmp.Compare(at(ans, an, i), at(bns, bn, i)); c != 0 {
			return c
		}
	}
	return cmp.Compare(la, lb)
}
