package lbsvc

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/internal/event"
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

// DefaultHairpinSNATIP is OVN-Kubernetes' options:hairpin_snat_ip: the
// masquerade addresses a pod reaching itself through a VIP appears from.
const DefaultHairpinSNATIP = "169.254.0.5 fd69::5"

// Node is a cluster node as its per-node load balancers need it.
type Node struct {
	// Name is the Kubernetes node name; its gateway router is
	// GatewayRouter(Name) and its logical switch NodeSwitch(Name).
	Name string
	// IPs are the node's host addresses, the VIPs of its NodePorts.
	IPs []netip.Addr
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
	// HairpinSNATIP is options:hairpin_snat_ip; DefaultHairpinSNATIP when
	// empty.
	HairpinSNATIP string
	// PreferLocal is Kube-OVN's --enable-ovn-lb-prefer-local (seed 003).
	// Kube-OVN's patched OVN honours externalTrafficPolicy=Local for VIPs
	// of an underlay subnet (enableExternalLBAddress) by preferring local
	// backends on the switch; without the flag those VIPs reach every
	// backend, SNATed. Here, on stock OVN: with PreferLocal, an underlay
	// VIP of an externalTrafficPolicy=Local Service gets the per-node
	// local-only load balancers (node_local_router, skip_snat=true) that
	// every other externalTrafficPolicy=Local VIP gets; without it the
	// underlay VIP is load-balanced cluster-wide, as Kube-OVN does without
	// the flag. VIPs outside underlay subnets are not affected.
	PreferLocal bool
	// LSCtSkipDstLportIPs is Kube-OVN's --ls-ct-skip-dst-lport-ips (on by
	// default there): its patched OVN skips conntrack on a logical switch
	// for traffic to a logical port's IP. An underlay VIP is an address of
	// the switch's subnet, so with the skip its packets miss the load
	// balancer; seed 003 therefore sets it false. Stock OVN has no such
	// skip and ovnedge never requests one: the field only records the
	// setting, and true together with an underlay subnet that enables
	// external LB addresses yields a warning event (the combination breaks
	// VIPs on Kube-OVN's OVN).
	LSCtSkipDstLportIPs bool
	// Underlay are the underlay subnets (seed 003).
	Underlay []UnderlaySubnet
}

func (o Options) group() string { return cmp.Or(o.ClusterLBGroup, DefaultClusterLBGroup) }

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
// switch and gateway router (reference §3). EndpointSlices belong to the
// Service their kubernetes.io/service-name label names in their namespace.
// A Cache builds again faster.
func Build(in Input, opts Options) (map[ovsdbnb.Owner]ovsdbnb.State, []event.Event) {
	return (*Cache)(nil).Build(in, opts)
}

// SlicesByService indexes EndpointSlices by "<namespace>/<service>" from
// their kubernetes.io/service-name label; slices without it are left out.
func SlicesByService(eps []*discoveryv1.EndpointSlice) map[string][]*discoveryv1.EndpointSlice {
	m := make(map[string][]*discoveryv1.EndpointSlice)
	for _, s := range eps {
		if s == nil {
			continue
		}
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			k := s.Namespace + "/" + name
			m[k] = append(m[k], s)
		}
	}
	return m
}

// GroupState is the cluster Load_Balancer_Group attached to every node's
// switch and gateway router.
func GroupState(nodes []Node, opts Options) (ovsdbnb.Owner, ovsdbnb.State) {
	g := ovsdbnb.LoadBalancerGroup{Name: opts.group()}
	for _, n := range sortedNodes(nodes) {
		g.Switches = append(g.Switches, NodeSwitch(n.Name))
		g.Routers = append(g.Routers, GatewayRouter(n.Name))
	}
	return ovsdbnb.Owner{Type: OwnerLoadBalancerGroup, Name: g.Name}, ovsdbnb.State{Groups: []ovsdbnb.LoadBalancerGroup{g}}
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

func sortedNodes(nodes []Node) []Node {
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b Node) bool { return a.Name == b.Name })
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

// lbSet accumulates a Service's load balancers by name.
type lbSet struct {
	svc    *corev1.Service
	opts   Options
	byName map[string]*ovsdbnb.LoadBalancer
}

// get returns the load balancer named Service_<ns>/<name>_<PROTO>_<suffix>,
// creating it with the Service's options.
func (s *lbSet) get(proto corev1.Protocol, suffix string, skipSNAT bool) *ovsdbnb.LoadBalancer {
	name := "Service_" + s.svc.Namespace + "/" + s.svc.Name + "_" + string(proto) + "_" + suffix
	if lb, ok := s.byName[name]; ok {
		return lb
	}
	opts := map[string]string{
		"reject":             "true",
		"event":              "false",
		"skip_snat":          fmt.Sprint(skipSNAT),
		"neighbor_responder": "none",
		"hairpin_snat_ip":    cmp.Or(s.opts.HairpinSNATIP, DefaultHairpinSNATIP),
	}
	if t := affinityTimeout(s.svc); t != "" {
		opts["affinity_timeout"] = t
	}
	lb := &ovsdbnb.LoadBalancer{
		Name:     name,
		Protocol: strings.ToLower(string(proto)),
		VIPs:     map[string]string{},
		Options:  opts,
		ExternalIDs: map[string]string{
			ovsdbnb.KeyKind:  OwnerService,
			ovsdbnb.KeyOwner: s.svc.Namespace + "/" + s.svc.Name,
		},
	}
	s.byName[name] = lb
	return lb
}

func serviceState(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, nodes []Node, opts Options) (ovsdbnb.State, []event.Event) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return ovsdbnb.State{}, nil
	}
	ips, events := parseIPs(svc)
	events = append(events, underlayEvents(svc, ips.external, opts)...)
	set := &lbSet{svc: svc, opts: opts, byName: map[string]*ovsdbnb.LoadBalancer{}}
	etpLocal := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	group := opts.group()
	// Cluster-wide: ClusterIPs, and the external VIPs unless they are
	// externalTrafficPolicy=Local (an underlay VIP only with PreferLocal).
	var local []netip.Addr
	clusterVIPs := slices.Clone(ips.cluster)
	for _, vip := range ips.external {
		if etpLocal && (opts.PreferLocal || !inUnderlay(vip, opts)) {
			local = append(local, vip)
		} else {
			clusterVIPs = append(clusterVIPs, vip)
		}
	}
	for _, sp := range svc.Spec.Ports {
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP && proto != corev1.ProtocolSCTP {
			events = append(events, event.Warningf(serviceRef(svc), "UnsupportedProtocol", "port %d: protocol %q skipped", sp.Port, proto))
			continue
		}
		if sp.Port <= 0 || sp.Port > 65535 {
			continue // rejected by the API server; never a VIP
		}
		pe := portEndpoints(sp, eps)
		all := [2]string{selectBackends(pe, false, anyNode), selectBackends(pe, true, anyNode)}
		if len(clusterVIPs) > 0 {
			lb := set.get(proto, "cluster", false)
			lb.Groups = []string{group}
			for _, vip := range clusterVIPs {
				lb.VIPs[hostPort(vip, sp.Port)] = all[b2i(vip.Is6())]
			}
		}

		// Per node: NodePorts on the node IPs and externalTrafficPolicy=Local
		// VIPs. Router: all backends, or with ETP=Local only the node's own,
		// unSNATed. Switch (pods): all backends.
		if sp.NodePort == 0 && len(local) == 0 {
			continue
		}
		for _, n := range nodes {
			var nodeVIPs []netip.Addr
			if sp.NodePort != 0 {
				for _, a := range n.IPs {
					if a.IsValid() && ips.families[b2i(a.Is6())] {
						nodeVIPs = append(nodeVIPs, a.Unmap())
					}
				}
			}
			var mine [2]string
			if etpLocal {
				keep := onNode(n.Name)
				mine = [2]string{selectBackends(pe, false, keep), selectBackends(pe, true, keep)}
			}
			sw := set.get(proto, "node_switch_"+n.Name, false)
			sw.Switches = []string{NodeSwitch(n.Name)}
			for _, vip := range nodeVIPs {
				fam := b2i(vip.Is6())
				sw.VIPs[hostPort(vip, sp.NodePort)] = all[fam]
				if etpLocal {
					lr := set.get(proto, "node_local_router_"+n.Name, true)
					lr.Routers = []string{GatewayRouter(n.Name)}
					lr.VIPs[hostPort(vip, sp.NodePort)] = mine[fam]
				} else {
					r := set.get(proto, "node_router_"+n.Name, false)
					r.Routers = []string{GatewayRouter(n.Name)}
					r.VIPs[hostPort(vip, sp.NodePort)] = all[fam]
				}
			}
			for _, vip := range local {
				fam := b2i(vip.Is6())
				sw.VIPs[hostPort(vip, sp.Port)] = all[fam]
				lr := set.get(proto, "node_local_router_"+n.Name, true)
				lr.Routers = []string{GatewayRouter(n.Name)}
				lr.VIPs[hostPort(vip, sp.Port)] = mine[fam]
			}
		}
	}
	var st ovsdbnb.State
	for _, lb := range set.byName {
		if len(lb.VIPs) > 0 {
			st.LoadBalancers = append(st.LoadBalancers, *lb)
		}
	}
	slices.SortFunc(st.LoadBalancers, func(a, b ovsdbnb.LoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	return st, events
}

// serviceRef refers to svc in events.
func serviceRef(svc *corev1.Service) corev1.ObjectReference {
	return event.Ref("v1", "Service", svc)
}
