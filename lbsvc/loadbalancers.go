package lbsvc

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// Owner types of the NB rows lbsvc computes.
const (
	// OwnerService owns a Service's load balancers; Owner.Name is
	// "<namespace>/<name>".
	OwnerService = "Service"
	// OwnerLoadBalancerGroup owns the cluster-wide Load_Balancer_Group.
	OwnerLoadBalancerGroup = "LoadBalancerGroup"
)

// DefaultClusterLBGroup is OVN-Kubernetes' Load_Balancer_Group holding the
// cluster-wide load balancers, attached to every node switch and gateway
// router.
const DefaultClusterLBGroup = "clusterLBGroup"

// OVN-Kubernetes' Load_Balancer_Groups: clusterLBGroup holds the
// cluster-wide load balancers and is attached to every node switch and
// gateway router; clusterSwitchLBGroup (node switches) and
// clusterRouterLBGroup (gateway routers) hold the template load
// balancers of NodePorts.
const (
	ClusterSwitchLBGroup = "clusterSwitchLBGroup"
	ClusterRouterLBGroup = "clusterRouterLBGroup"
)

// OVN-Kubernetes' default masquerade subnets (its
// --gateway-v4-masquerade-subnet and --gateway-v6-masquerade-subnet).
// Their addresses are allocated in order from the network address: .1 the
// OVN masquerade IP, .2 the host's (it stands for host-network endpoints on
// the gateway routers), .3 the ETP=Local masquerade VIP of NodePorts on the
// node switches, .4 a dummy next hop, .5 the Service hairpin SNAT IP
// (options:hairpin_snat_ip).
var (
	DefaultMasqueradeSubnetV4 = netip.MustParsePrefix("169.254.169.0/29")
	DefaultMasqueradeSubnetV6 = netip.MustParsePrefix("fd69::/125")
)

// DefaultHairpinSNATIP is options:hairpin_snat_ip with the default
// masquerade subnets: their .5 addresses.
const DefaultHairpinSNATIP = "169.254.169.5 fd69::5"

// MasqueradeIP returns address n (1-5, see DefaultMasqueradeSubnetV4) of
// a masquerade subnet.
func MasqueradeIP(subnet netip.Prefix, n int) netip.Addr {
	a := subnet.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// Node is a cluster node as its per-node load balancers need it.
type Node struct {
	// Name is the Kubernetes node name; its gateway router is
	// GatewayRouter(Name) and its logical switch NodeSwitch(Name).
	Name string
	// IPs are the node's host addresses (OVN-Kubernetes'
	// k8s.ovn.org/host-cidrs), the VIPs of its NodePorts.
	IPs []netip.Addr
	// Chassis is the node's chassis (its system-id, OVN-Kubernetes'
	// k8s.ovn.org/node-chassis-id): the chassis its template variables
	// are set for. A node without one serves no template NodePorts.
	Chassis string
}

// GatewayRouter is the name of a node's gateway router, "GR_<node>".
func GatewayRouter(node string) string { return "GR_" + node }

// NodeSwitch is the name of a node's logical switch: the node name.
func NodeSwitch(node string) string { return node }

// Options tune the load balancers. The zero value is OVN-Kubernetes'
// behaviour.
type Options struct {
	// ClusterLBGroup names the Load_Balancer_Group of the cluster-wide
	// load balancers; DefaultClusterLBGroup when empty.
	ClusterLBGroup string
	// HairpinSNATIP is options:hairpin_snat_ip; when empty the .5
	// addresses of the masquerade subnets.
	HairpinSNATIP string
	// MasqueradeSubnetV4 and MasqueradeSubnetV6 are OVN-Kubernetes'
	// masquerade subnets (DefaultMasqueradeSubnetV4/V6 when not valid).
	MasqueradeSubnetV4, MasqueradeSubnetV6 netip.Prefix
	// PerNodeLBs gives NodePorts per-node load balancers (VIPs the node's
	// addresses) instead of OVN-Kubernetes' template load balancers, one
	// per Service, protocol and family whatever the number of nodes
	// (Chassis_Template_Var, OVN 22.12+): for older OVN, or by choice.
	PerNodeLBs bool
	// ClusterSubnets are the pod networks: an endpoint outside them is a
	// host-network one, which makes the Service's ClusterIP load balancers
	// per node (the node's own address becomes the host masquerade IP on
	// its gateway router), as OVN-Kubernetes does. None: every endpoint
	// counts as a pod.
	ClusterSubnets []netip.Prefix
	// PreferLocal is Kube-OVN's --enable-ovn-lb-prefer-local.
	// Kube-OVN's patched OVN honours externalTrafficPolicy=Local for VIPs
	// of an underlay subnet (enableExternalLBAddress) by preferring local
	// backends on the switch; without the flag those VIPs reach every
	// backend. Here, on stock OVN: with PreferLocal, an underlay IPv4 VIP
	// of an externalTrafficPolicy=Local Service is a template load
	// balancer on the underlay switch whose backends are, per chassis, the
	// node's own endpoints (all of them where it has none); see
	// docs/deviations.md. VIPs outside underlay subnets are not
	// affected.
	PreferLocal bool
	// LSCtSkipDstLportIPs is Kube-OVN's --ls-ct-skip-dst-lport-ips (on by
	// default there): its patched OVN skips conntrack on a logical switch
	// for traffic to a logical port's IP. An underlay VIP is an address of
	// the switch's subnet, so with the skip its packets miss the load
	// balancer; Kube-OVN's MetalLB underlay guide therefore sets it false. Stock OVN has no such
	// skip and ovnedge never requests one: the field only records the
	// setting, and true together with an underlay subnet that enables
	// external LB addresses yields a warning event (the combination breaks
	// VIPs on Kube-OVN's OVN).
	LSCtSkipDstLportIPs bool
	// SourceRanges enforces LoadBalancer Services'
	// spec.loadBalancerSourceRanges as kube-proxy does (see Firewalls),
	// with drop ACLs on every node's external and logical switch. OVN-Kubernetes
	// ignores the field: a deviation that coexists with it (the ACLs are
	// ovnedge's own rows, on switches OVN-Kubernetes writes no ACL to
	// the same effect).
	SourceRanges bool
	// EmptyLBEvents is OVN-Kubernetes' --ovn-empty-lb-events: the load
	// balancers of an idled Service (an "*/idled-at" annotation), or of
	// one unidled less than UnidleGracePeriod ago, have reject=false and
	// event=true, so ovn-controller reports a connection to them
	// without backends (package lbsvc/unidle turns that into NeedPods).
	// The grace period is read when the Service's state is computed, as
	// OVN-Kubernetes does: it ends with the Service's next change.
	EmptyLBEvents bool
	// Underlay are the underlay subnets (Kube-OVN's MetalLB integration).
	Underlay []UnderlaySubnet
	// UnderlayNodes are the nodes whose chassis get the underlay
	// template variables: every node with a chassis, OVN-Kubernetes'
	// annotations or not (a Kube-OVN node has none); nil: Input.Nodes.
	UnderlayNodes []Node
}

// UnderlayVIP reports whether vip is an external LB address of an
// underlay subnet (one with EnableExternalLBAddress): it is served on
// that subnet's switch, not by the gateway routers.
func (o Options) UnderlayVIP(vip netip.Addr) bool { return inUnderlay(vip.Unmap(), o) }

func (o Options) group() string { return cmp.Or(o.ClusterLBGroup, DefaultClusterLBGroup) }

// masq returns masquerade address n of the family.
func (o Options) masq(v6 bool, n int) netip.Addr {
	if v6 {
		if o.MasqueradeSubnetV6.IsValid() {
			return MasqueradeIP(o.MasqueradeSubnetV6, n)
		}
		return MasqueradeIP(DefaultMasqueradeSubnetV6, n)
	}
	if o.MasqueradeSubnetV4.IsValid() {
		return MasqueradeIP(o.MasqueradeSubnetV4, n)
	}
	return MasqueradeIP(DefaultMasqueradeSubnetV4, n)
}

// hairpin is options:hairpin_snat_ip.
func (o Options) hairpin() string {
	if o.HairpinSNATIP != "" {
		return o.HairpinSNATIP
	}
	return o.masq(false, 5).String() + " " + o.masq(true, 5).String()
}

// Input is the cluster as the load balancers see it.
type Input struct {
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Nodes          []Node
}

// ServiceOwner is the ovsdbnb owner of a Service's load balancers.
func ServiceOwner(namespace, name string) ovsdbnb.Owner {
	return ovsdbnb.Owner{Type: OwnerService, Name: namespace + "/" + name}
}

// Build returns the desired load balancers of every Service (an owner per
// Service, with an empty State for a Service that needs none, so its old
// rows go) and the cluster Load_Balancer_Group attached to every node
// switch and gateway router. EndpointSlices belong to the
// Service their kubernetes.io/service-name label names in their namespace.
// A Cache builds again faster.
func Build(in Input, opts Options) (map[ovsdbnb.Owner]ovsdbnb.State, []event.Event) {
	return (*Cache)(nil).Build(in, opts)
}

// compareNamespaced orders "ans/aname" and "bns/bname" as strings.Compare
// orders them, without building them: sorting 10,000 Services by their
// keys built them 270,000 times on every node pass.
func compareNamespaced(ans, aname, bns, bname string) int {
	n := min(len(ans), len(bns))
	if c := strings.Compare(ans[:n], bns[:n]); c != 0 {
		return c
	}
	switch {
	case len(ans) < len(bns): // '/' against the longer namespace's next byte
		return cmp.Compare('/', bns[n])
	case len(ans) > len(bns):
		return cmp.Compare(ans[n], '/')
	}
	return strings.Compare(aname, bname)
}

// SlicesByService indexes EndpointSlices by "<namespace>/<service>" from
// their kubernetes.io/service-name label; slices without it are left out.
func SlicesByService(eps []*discoveryv1.EndpointSlice) map[string][]*discoveryv1.EndpointSlice {
	return slicesBy(eps, func(namespace, name string) string { return namespace + "/" + name })
}

// slicesBy indexes EndpointSlices by key(namespace, service) of their
// kubernetes.io/service-name label (those without are left out).
func slicesBy[K comparable](eps []*discoveryv1.EndpointSlice, key func(namespace, name string) K) map[K][]*discoveryv1.EndpointSlice {
	m := make(map[K][]*discoveryv1.EndpointSlice, len(eps))
	for _, s := range eps {
		if s == nil {
			continue
		}
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			k := key(s.Namespace, name)
			m[k] = append(m[k], s)
		}
	}
	return m
}

// sortServices is svcs but nil, sorted by namespace and name.
func sortServices(svcs []*corev1.Service) []*corev1.Service {
	sorted := slices.DeleteFunc(slices.Clone(svcs), func(s *corev1.Service) bool { return s == nil })
	slices.SortFunc(sorted, func(a, b *corev1.Service) int {
		return compareNamespaced(a.Namespace, a.Name, b.Namespace, b.Name)
	})
	return sorted
}

// GroupState is OVN-Kubernetes' three Load_Balancer_Groups: the cluster
// group (Options.ClusterLBGroup) attached to every node's switch and
// gateway router, clusterSwitchLBGroup to every node switch and
// clusterRouterLBGroup to every gateway router.
func GroupState(nodes []Node, opts Options) (ovsdbnb.Owner, ovsdbnb.State) {
	g := ovsdbnb.LoadBalancerGroup{Name: opts.group()}
	sw := ovsdbnb.LoadBalancerGroup{Name: ClusterSwitchLBGroup}
	rt := ovsdbnb.LoadBalancerGroup{Name: ClusterRouterLBGroup}
	for _, n := range sortedNodes(nodes) {
		g.Switches = append(g.Switches, NodeSwitch(n.Name))
		g.Routers = append(g.Routers, GatewayRouter(n.Name))
	}
	sw.Switches, rt.Routers = g.Switches, g.Routers
	return ovsdbnb.Owner{Type: OwnerLoadBalancerGroup, Name: g.Name}, ovsdbnb.State{Groups: []ovsdbnb.LoadBalancerGroup{g, sw, rt}}
}

// ServiceState returns one Service's desired load balancers from its
// EndpointSlices (those labelled with its name) and the nodes: what Build
// computes for it, for recomputing a single Service when it or one of its
// slices changes.
func ServiceState(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, nodes []Node, opts Options) (ovsdbnb.State, []event.Event) {
	if svc == nil {
		return ovsdbnb.State{}, nil
	}
	return serviceState(svc, eps, sortedNodes(nodes), opts)
}

// sortedNodes returns nodes sorted by name without duplicates: nodes
// itself when it already is (the callers only read it), so the helpers
// of one Service cost no copy and no sort of a 2,000-node list.
func sortedNodes(nodes []Node) []Node {
	if strictlySorted(nodes) {
		return nodes
	}
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b Node) bool { return a.Name == b.Name })
}

// strictlySorted reports whether each node's name sorts after the one
// before it (sorted, no duplicates).
func strictlySorted(nodes []Node) bool {
	for i := 1; i < len(nodes); i++ {
		if nodes[i-1].Name >= nodes[i].Name {
			return false
		}
	}
	return true
}

// svcIPs are a Service's parsed addresses.
type svcIPs struct {
	cluster []netip.Addr
	// external are spec.externalIPs and, for type LoadBalancer,
	// status.loadBalancer.ingress[].ip.
	external []netip.Addr
	// families holds the service's families (false = IPv4, true = IPv6).
	families [2]bool
}

// parseIPs parses the Service's ClusterIPs, ExternalIPs and ingress IPs;
// unparseable ones become Warning events.
func parseIPs(svc *corev1.Service) (svcIPs, []event.Event) {
	var ips svcIPs
	var events []event.Event
	parse := func(field, s string) (netip.Addr, bool) {
		a, err := netip.ParseAddr(s)
		if err == nil && (a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback()) {
			err = fmt.Errorf("not a unicast address")
		}
		if err != nil {
			events = append(events, event.Warningf(serviceRef(svc), "InvalidServiceIP", "%s %q skipped: %v", field, s, err))
			return a, false
		}
		return a.Unmap(), true
	}
	cips := svc.Spec.ClusterIPs
	if len(cips) == 0 && svc.Spec.ClusterIP != "" {
		cips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range cips {
		if s == "" || s == corev1.ClusterIPNone {
			continue
		}
		if a, ok := parse("spec.clusterIPs", s); ok {
			ips.cluster = append(ips.cluster, a)
			ips.families[b2i(a.Is6())] = true
		}
	}
	for _, s := range svc.Spec.ExternalIPs {
		if a, ok := parse("spec.externalIPs", s); ok {
			ips.external = append(ips.external, a)
		}
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP == "" {
				continue // hostname-only ingress
			}
			if a, ok := parse("status.loadBalancer.ingress", in.IP); ok {
				ips.external = append(ips.external, a)
			}
		}
	}
	slices.SortFunc(ips.external, netip.Addr.Compare)
	ips.external = slices.Compact(ips.external)
	return ips, events
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// serviceRef refers to svc in events.
func serviceRef(svc *corev1.Service) corev1.ObjectReference {
	return event.Ref("v1", "Service", svc)
}
