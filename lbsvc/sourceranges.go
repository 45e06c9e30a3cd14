package lbsvc

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// ReasonInvalidSourceRange is the event reason of a
// spec.loadBalancerSourceRanges entry that is not a CIDR: it is
// skipped, so it admits nobody.
const ReasonInvalidSourceRange = "InvalidLoadBalancerSourceRange"

// SourceRangeACLPriority is the priority of the ACLs enforcing
// loadBalancerSourceRanges: above OVN-Kubernetes' network policy and
// admin network policy ACLs (at most 30,000), as kube-proxy's firewall
// comes before any policy.
const SourceRangeACLPriority = 32000

// Firewall is a LoadBalancer ingress IP that only some sources may reach
// (kube-proxy's firewall): the Service's loadBalancerSourceRanges of
// the VIP's family.
type Firewall struct {
	VIP     netip.Addr
	Allowed []netip.Prefix
}

// Firewalls returns the ingress IPs of svc that spec.loadBalancerSourceRanges
// restricts, as kube-proxy reads the field (pkg/proxy/serviceport.go,
// nftables/proxier.go): a LoadBalancer Service's status ingress IPs (VIP
// mode), each restricted to the ranges of its own family (entries
// trimmed, host bits masked); a family without ranges is not restricted.
// ExternalIPs and NodePorts never are. An entry that is not a CIDR is
// skipped with a Warning event.
func Firewalls(svc *corev1.Service) ([]Firewall, []event.Event) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.LoadBalancerSourceRanges) == 0 {
		return nil, nil
	}
	var ranges [2][]netip.Prefix
	var events []event.Event
	for _, s := range svc.Spec.LoadBalancerSourceRanges {
		p, ok := parseRange(s)
		if !ok {
			events = append(events, event.Warningf(serviceRef(svc), ReasonInvalidSourceRange,
				"spec.loadBalancerSourceRanges entry %q is not a CIDR: skipped", s))
			continue
		}
		ranges[b2i(p.Addr().Is6())] = append(ranges[b2i(p.Addr().Is6())], p)
	}
	var out []Firewall
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IPMode != nil && *in.IPMode != corev1.LoadBalancerIPModeVIP {
			continue // the load balancer proxies: kube-proxy does not filter
		}
		a, err := netip.ParseAddr(in.IP)
		if err != nil { // parseIPs' events
			continue
		}
		a = a.Unmap()
		if r := ranges[b2i(a.Is6())]; len(r) > 0 && !slices.ContainsFunc(out, func(f Firewall) bool { return f.VIP == a }) {
			out = append(out, Firewall{VIP: a, Allowed: r})
		}
	}
	slices.SortFunc(out, func(a, b Firewall) int { return a.VIP.Compare(b.VIP) })
	return out, events
}

// parseRange parses a source range as kube-proxy does: space-trimmed,
// with the legacy leading zeros the API server accepted
// (ParseCIDRSloppy), host bits masked.
func parseRange(s string) (netip.Prefix, bool) {
	_, n, err := netutils.ParseCIDRSloppy(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	bits, _ := n.Mask.Size()
	if !ok {
		return netip.Prefix{}, false
	}
	if a.Is4In6() && len(n.Mask) == 16 {
		bits -= 96
	}
	return netip.PrefixFrom(a.Unmap(), bits).Masked(), true
}

// sourceRangeACLs are the ACLs enforcing fws for svc's ports: per
// protocol and family one drop ACL, from-lport, on every node's external
// switch (clients outside the cluster, before the gateway router's DNAT)
// and logical switch (pods, before the switch's load balancer):
//
//	ip4.dst == {VIPs} && tcp.dst == {ports} && ip4.src != {ranges}
//
// Each VIP of a family has the same ranges (Firewalls), so one ACL
// serves all of them.
func sourceRangeACLs(svc *corev1.Service, fws []Firewall, nodes []Node) []ovsdbnb.ACL {
	if len(fws) == 0 || len(nodes) == 0 {
		return nil
	}
	var switches []string
	for _, n := range nodes {
		switches = append(switches, ExternalSwitch(n.Name), NodeSwitch(n.Name))
	}
	slices.Sort(switches)
	var out []ovsdbnb.ACL
	for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
		var ports []string
		for _, sp := range svc.Spec.Ports {
			if cmpProto(sp.Protocol) == proto && sp.Port > 0 && sp.Port <= 65535 {
				ports = append(ports, strconv.Itoa(int(sp.Port)))
			}
		}
		for _, v6 := range []bool{false, true} {
			if a, ok := sourceRangeACL(svc, fws, proto, ports, v6); ok {
				a.Switches = switches
				out = append(out, a)
			}
		}
	}
	return out
}

// sourceRangeACL is the drop ACL of svc's VIPs of a family among fws on
// its ports of proto; ok is false when it has none of either.
func sourceRangeACL(svc *corev1.Service, fws []Firewall, proto corev1.Protocol, ports []string, v6 bool) (ovsdbnb.ACL, bool) {
	var vips, srcs []string
	for _, f := range fws {
		if f.VIP.Is6() == v6 {
			vips = append(vips, f.VIP.String())
			if srcs == nil { // every VIP of a family has the same ranges
				for _, p := range f.Allowed {
					srcs = append(srcs, p.String())
				}
			}
		}
	}
	if len(vips) == 0 || len(ports) == 0 {
		return ovsdbnb.ACL{}, false
	}
	ip, l4 := "ip4", strings.ToLower(string(proto))
	if v6 {
		ip = "ip6"
	}
	key := svc.Namespace + "/" + svc.Name + ":" + l4 + ":" + familyName(v6)
	return ovsdbnb.ACL{Priority: SourceRangeACLPriority, Direction: "from-lport", Action: "drop", Name: aclName(svc),
		Match: fmt.Sprintf("%s.dst == {%s} && %s.dst == {%s} && %s.src != {%s}", ip, strings.Join(vips, ", "),
			l4, strings.Join(ports, ", "), ip, strings.Join(srcs, ", ")),
		ExternalIDs: map[string]string{
			ovsdbnb.KeyOwnerController: Controller, ovsdbnb.KeyOwnerType: "LoadBalancerSourceRanges",
			ovsdbnb.KeyName: svc.Namespace + "/" + svc.Name, ovsdbnb.KeyID: Controller + ":LoadBalancerSourceRanges:" + key,
		}}, true
}

// Controller is the owner-controller of the NB rows ovnedge defines and
// OVN-Kubernetes does not (the loadBalancerSourceRanges ACLs): not
// OVN-Kubernetes' default network controller, whose syncs delete the
// rows of its own they do not know.
const Controller = "ovnedge"

// aclName is the ACL name of a Service's source ranges, at most 63 bytes.
func aclName(svc *corev1.Service) string {
	n := "lb-src:" + svc.Namespace + "/" + svc.Name
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}

// ExternalSwitch is the name of a node's external logical switch,
// "ext_<node>", between its gateway router and the physical network.
func ExternalSwitch(node string) string { return "ext_" + node }
