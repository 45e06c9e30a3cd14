package daemon

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow"
)

// Event reasons the daemon itself records.
const (
	ReasonInvalidNode   = "InvalidNodeAnnotations"
	ReasonInvalidObject = "InvalidObject"
	ReasonNBSyncFailed  = "NorthboundSyncFailed"
)

// ErrUnknownNode is returned by ComputeNode for a node the snapshot does
// not hold.
var ErrUnknownNode = errors.New("node not found")

// Params are the settings the desired state depends on besides the
// Kubernetes objects.
type Params struct {
	Egress egress.Cluster
	LB     lbsvc.Options
	// Pools are the LoadBalancer IP pools; none leaves every Service's
	// ingress as it is.
	Pools []*ipam.Pool
	// LBClass is the spec.loadBalancerClass whose Services the pools
	// serve; empty: Services without a class (see lbClassOurs).
	LBClass string
	// Bridge, Uplink and Patch name the external bridge and its NIC and
	// patch ports; Zone is its conntrack zone.
	Bridge, Uplink, Patch string
	Zone                  uint16
	EnableEgressIP        bool
	// GatewayFlows programs the shared gateway's base and Service flows
	// (else only the Services' ARP/NDP bypass); BridgeMAC is the bridge's
	// MAC for them, nil to take it from the node's
	// k8s.ovn.org/l3-gateway-config annotation.
	GatewayFlows bool
	BridgeMAC    net.HardwareAddr
	// LBSvc runs Kube-OVN's LoadBalancer Services (--enable-lb-svc):
	// Services kubeovn.Selected get their address from their provider's
	// Subnet (not from Pools) and an lb-svc Deployment; LBSvcImage is the
	// Deployments' image ("" takes the ovn-vpc-nat-config ConfigMap's).
	LBSvc      bool
	LBSvcImage string
	// LBCache, when not nil, keeps each Service's load balancers between
	// ComputeCluster calls over an informer's objects, so only the
	// Services that changed are computed again (see lbsvc.Cache).
	LBCache *lbsvc.Cache
	// Alive, when not nil, says whether a node is alive beside its Ready
	// condition (the fast failover heartbeat): the L2 VIP election only
	// counts nodes that are both.
	Alive func(node string) bool
	// BGP computes the routes the node announces (NodeState.Routes);
	// BGPEgressIPs adds the egress IPs assigned to it.
	BGP, BGPEgressIPs bool
	// Hold, when not nil, holds back the moves of egress IPs on host
	// interfaces until their old node has let them go (the leader's,
	// with the nodes' --egressip-host-lease).
	Hold *egress.HostHold
	// Underlay is --underlay-lb-mode (seed 003): with UnderlayMetalLB or
	// UnderlayStandalone the snapshot's Subnets with
	// enableExternalLBAddress are underlay subnets (LB.Underlay), whose
	// VIPs are served on their switches and steered into OVN on the
	// provider bridge; UnderlayStandalone also allocates them from the
	// Subnets' excludeIps and announces them (NodeState.UnderlayAnnounce).
	Underlay string
	// ProviderNIC and ProviderVLAN are the provider bridge's NIC port and
	// VLAN (0: any) of the steering flows; no NIC, no flows.
	// ProviderPorts, when not nil, says whether the provider bridge has a
	// port: steering flows through a missing patch port are left out.
	ProviderNIC   string
	ProviderVLAN  uint16
	ProviderPorts func(name string) bool
	// LastGood is the node's own last good parse of its k8s.ovn.org
	// annotations (NodeState.Self of the previous ComputeNode): when they
	// break, ComputeNode keeps computing the node's egress and gateway
	// flows from it, as ComputeCluster does with its prev.
	LastGood *egress.Node
}

// underlayOn reports whether the underlay mode is on.
func (p Params) underlayOn() bool { return p.Underlay != "" && p.Underlay != UnderlayOff }

// ReasonInvalidSubnet is the Warning event of a Subnet that cannot serve
// as an underlay subnet.
const ReasonInvalidSubnet = "InvalidSubnet"

// withUnderlay returns p with LB.Underlay (and LB.UnderlayNodes) from the
// snapshot's Subnets when the underlay mode is on; a Subnet that does not
// parse is a Warning event and is left out.
func withUnderlay(p Params, s Snapshot) (Params, []event.Event) {
	if !p.underlayOn() {
		return p, nil
	}
	var events []event.Event
	p.LB.Underlay = nil
	for _, sub := range s.Subnets {
		u, err := sub.Underlay()
		if err != nil {
			events = append(events, event.Warningf(subnetRef(sub), ReasonInvalidSubnet, "not an underlay subnet: %v", err))
			continue
		}
		p.LB.Underlay = append(p.LB.Underlay, u...)
	}
	p.LB.UnderlayNodes = make([]lbsvc.Node, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		p.LB.UnderlayNodes = append(p.LB.UnderlayNodes, lbNode(n))
	}
	return p, events
}

func subnetRef(sub *kubeovn.Subnet) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "kubeovn.io/v1", Kind: "Subnet", Name: sub.Name, UID: sub.UID}
}

// underlayPools are the pools of standalone mode: each underlay Subnet's
// external LB addresses (its excludeIps), named after it, after pools. A
// Subnet whose pools overlap another pool is a Warning event and left
// out.
func underlayPools(pools []*ipam.Pool, subnets []*kubeovn.Subnet) ([]*ipam.Pool, []event.Event) {
	out := slices.Clone(pools)
	var events []event.Event
	for _, sub := range subnets {
		ext, err := sub.ExternalLBPools()
		if err == nil && len(ext) > 0 {
			_, err = ipam.NewAllocator(append(slices.Clone(out), ext...)...)
		}
		if err != nil {
			events = append(events, event.Warningf(subnetRef(sub), ReasonInvalidSubnet, "no LoadBalancer addresses from this subnet: %v", err))
			continue
		}
		out = append(out, ext...)
	}
	return out, events
}

// underlayPoolOf restricts a Service annotated
// ovn.kubernetes.io/service_external_ip_from_subnet to that Subnet's
// pools.
func underlayPoolOf(svc *corev1.Service) []string {
	if name := svc.Annotations[lbsvc.AnnotationExternalIPFromSubnet]; name != "" {
		return []string{name}
	}
	return nil
}

// ParamsFrom returns the Params of a configuration.
func ParamsFrom(cfg *Config) Params {
	p := Params{Pools: cfg.LBPools, LBClass: cfg.LBClass, Bridge: cfg.Bridge, Uplink: cfg.Uplink, Patch: cfg.Patch(),
		Zone: cfg.CTZone, EnableEgressIP: cfg.EnableEgressIP, GatewayFlows: cfg.GatewayFlows, BridgeMAC: cfg.BridgeMAC,
		LBSvc: cfg.EnableLBSvc, LBSvcImage: cfg.LBSvcImage,
		BGP: cfg.EnableBGP, BGPEgressIPs: cfg.EnableBGP && cfg.BGPEgressIPs,
		Underlay: cfg.UnderlayLBMode, ProviderVLAN: uint16(cfg.ProviderVLAN)}
	if cfg.ProviderBridge != "" {
		p.ProviderNIC = cfg.ProviderNIC
	}
	p.LB.PreferLocal, p.LB.LSCtSkipDstLportIPs = cfg.PreferLocal, cfg.LSCtSkipDstLportIPs
	for _, cs := range cfg.ClusterSubnets {
		p.Egress.ClusterSubnets = append(p.Egress.ClusterSubnets, cs.CIDR)
		p.LB.ClusterSubnets = append(p.LB.ClusterSubnets, cs.CIDR)
	}
	p.LB.MasqueradeSubnetV4, p.LB.MasqueradeSubnetV6 = cfg.MasqueradeSubnetV4, cfg.MasqueradeSubnetV6
	p.LB.PerNodeLBs = !cfg.LBTemplates
	for _, j := range []netip.Prefix{cfg.JoinSubnet, cfg.JoinSubnet6} {
		if j.IsValid() {
			p.Egress.JoinSubnets = append(p.Egress.JoinSubnets, j)
		}
	}
	return p
}

// ClusterState is the desired cluster-wide state: what the leader writes.
type ClusterState struct {
	// Egress are the EgressIP rows, LB the load balancer rows, by owner.
	Egress, LB map[ovsdbnb.Owner]ovsdbnb.State
	// Status is the new status of every EgressIP, by name.
	Status map[string][]egressv1.EgressIPStatusItem
	// Ingress is the status.loadBalancer.ingress of every LoadBalancer
	// Service LB IPAM gives addresses to, by "<namespace>/<name>".
	Ingress map[string][]corev1.LoadBalancerIngress
	// LBSvc is the plan of Kube-OVN's LoadBalancer Services (its Ingress
	// is in Ingress too), nil unless Params.LBSvc.
	LBSvc *kubeovn.Plan
	// Host are the egress IPs hosted on non-OVN host networks.
	Host []egress.HostAssignment
	// Keep are the owners of objects that could not be read this time:
	// their rows stay as they are.
	Keep []ovsdbnb.Owner
	// ReplyFallback replaces the rows of egress.ReplyQoSOwner where the
	// NB cannot hold them (no QoS mark action, OVN before 24.03): see
	// egress.ReplyPortPolicies.
	ReplyFallback ovsdbnb.State
	// Nodes are the parsed nodes used (a broken node's last good parse
	// included), for the next computation's prev.
	Nodes  []egress.Node
	Events []event.Event
	// Dirty, when not nil, are the owners of Egress and LB whose state
	// may differ from the previous computation's (the incremental path's,
	// clusterIndex); nil: any owner's may.
	Dirty map[ovsdbnb.Owner]bool
	// HoldWake, when not 0, is when Params.Hold's first hold runs out:
	// compute again then.
	HoldWake time.Duration
}

// NB returns the Egress and LB rows in one map.
func (c *ClusterState) NB() map[ovsdbnb.Owner]ovsdbnb.State {
	out := make(map[ovsdbnb.Owner]ovsdbnb.State, len(c.Egress)+len(c.LB))
	for o, s := range c.Egress {
		out[o] = s
	}
	for o, s := range c.LB {
		out[o] = s
	}
	return out
}

// ComputeCluster returns the cluster-wide desired state of a snapshot:
// the EgressIP assignment and NB rows, the LoadBalancer addresses and the
// load balancers. It is a pure function of its inputs (reachable nil means
// every node is reachable). prev are the egress nodes of the previous
// computation (ClusterState.Nodes): a node whose annotations turn bad keeps
// its last good parse for its egress IPs and its load balancers, so
// nothing programmed for it is lost (a Warning event on the node names the
// annotation). Bad objects become
// events and are skipped; the error is reserved for bad Params.
func ComputeCluster(s Snapshot, p Params, reachable func(node string) bool, prev []egress.Node) (ClusterState, error) {
	cs := ClusterState{Status: map[string][]egressv1.EgressIPStatusItem{}, Ingress: map[string][]corev1.LoadBalancerIngress{}}
	nodes, broken := egress.ParseNodes(s.Nodes)
	// Every consumer of the annotations (egress IPs, load balancers) gets
	// a broken node's last good parse, so nothing programmed for it is
	// lost; a node never parsed is skipped.
	cs.Nodes = egress.KeepLastGood(prev, nodes, broken)
	lastGood := map[string]egress.Node{}
	for _, n := range cs.Nodes {
		if broken[n.Name] != nil {
			lastGood[n.Name] = n
		}
	}
	for _, n := range s.Nodes {
		err := broken[n.Name]
		if err == nil || (!p.EnableEgressIP && !hasOVNKAnnotations(n)) {
			// Without EgressIPs, a node that carries none of
			// OVN-Kubernetes' annotations (a Kube-OVN node) is not broken:
			// its load balancers use its status addresses.
			continue
		}
		msg := "node %s skipped for egress IPs and load balancers until its annotations are fixed: %v"
		if _, ok := lastGood[n.Name]; ok {
			msg = "node %s keeps its last good annotations for egress IPs and load balancers until they are fixed: %v"
		}
		cs.Events = append(cs.Events, event.Warningf(event.Ref("v1", "Node", n), ReasonInvalidNode, msg, n.Name, err))
	}

	if p.EnableEgressIP {
		eips := make([]*egressv1.EgressIP, 0, len(s.EgressIPs))
		for _, u := range s.EgressIPs {
			e, err := egressv1.FromUnstructured(u)
			if err != nil {
				cs.Events = append(cs.Events, event.Warningf(event.Ref(u.GetAPIVersion(), u.GetKind(), u),
					ReasonInvalidObject, "EgressIP skipped, its rows stay as they are: %v", err))
				cs.Keep = append(cs.Keep, ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: u.GetName()})
				continue
			}
			eips = append(eips, e)
		}
		eNodes := cs.Nodes
		res := egress.Assign(eips, eNodes, reachable, broken)
		cs.Events = append(cs.Events, res.Events...)
		cs.Status = res.Status
		if p.Hold != nil {
			cs.Status, cs.HoldWake = p.Hold.Apply(eips, res.Status, eNodes)
		}
		served, events := egress.Serve(eips, cs.Status, s.Namespaces, s.Pods)
		cs.Events = append(cs.Events, events...)
		for _, e := range eips {
			if !slices.ContainsFunc(served, func(sv egress.Served) bool { return sv.Name == e.Name }) {
				cs.Keep = append(cs.Keep, ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: e.Name})
			}
		}
		d, err := egress.Compute(p.Egress, eNodes, served)
		if err != nil {
			return cs, fmt.Errorf("egress: %w", err)
		}
		cs.Egress, cs.Host = d.NB, d.Host
		cs.ReplyFallback = egress.ReplyPortPolicies(p.Egress, servedLocalPorts(served, s.Services, s.EndpointSlices))
	}

	p, events := withUnderlay(p, s)
	cs.Events = append(cs.Events, events...)
	pools, poolOf := p.Pools, func(*corev1.Service) []string { return nil }
	if p.Underlay == UnderlayStandalone {
		pools, events = underlayPools(pools, s.Subnets)
		cs.Events = append(cs.Events, events...)
		poolOf = underlayPoolOf
	}
	svcs := s.Services
	var kubeOVN func(*corev1.Service) bool // Services whose address is not the pools'
	if p.LBSvc {
		opts := kubeovn.OptionsFromConfigMap(kubeovn.Options{Image: p.LBSvcImage}, s.LBSvcConfig)
		plan := kubeovn.Desired(kubeovn.Input{Services: s.Services, Subnets: s.Subnets, NADs: kubeovn.NADs(s.NADs)}, opts)
		cs.LBSvc = &plan
		cs.Events = append(cs.Events, plan.Events...)
		maps.Copy(cs.Ingress, plan.Ingress)
		svcs = withIngress(svcs, plan.Ingress)
		kubeOVN = kubeovn.Selected
	}
	if p.Underlay == UnderlayMetalLB {
		// MetalLB's addresses in underlay subnets are MetalLB's.
		lbOpts, other := p.LB, kubeOVN
		kubeOVN = func(svc *corev1.Service) bool {
			return (other != nil && other(svc)) || slices.ContainsFunc(svc.Status.LoadBalancer.Ingress, func(in corev1.LoadBalancerIngress) bool {
				a, err := netip.ParseAddr(in.IP)
				return err == nil && lbOpts.UnderlayVIP(a)
			})
		}
	}
	notOurs := func(svc *corev1.Service) bool {
		return !lbClassOurs(svc, p.LBClass, p.Underlay == UnderlayMetalLB) || (kubeOVN != nil && kubeOVN(svc))
	}
	svcs, events, err := allocate(svcs, pools, cs.Ingress, notOurs, poolOf)
	if err != nil {
		return cs, err
	}
	cs.Events = append(cs.Events, events...)
	svcs, events = dedupVIPs(svcs)
	cs.Events = append(cs.Events, events...)
	// A node without the OVN-Kubernetes annotations has no gateway router
	// or switch yet: it gets no per-node load balancers. One whose
	// annotations broke keeps those of its last good annotations.
	lbNodes := make([]lbsvc.Node, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		if broken[n.Name] == nil {
			lbNodes = append(lbNodes, lbNode(n))
		} else if last, ok := lastGood[n.Name]; ok {
			lbNodes = append(lbNodes, lbsvc.NodeOf(n, last))
		}
	}
	var lbEvents []event.Event
	cs.LB, lbEvents = p.LBCache.Build(lbsvc.Input{Services: svcs, EndpointSlices: s.EndpointSlices, Nodes: lbNodes}, p.LB)
	cs.Events = append(cs.Events, lbEvents...)
	return cs, nil
}

// servedLocalPorts are the ports on which pods served by an EgressIP back
// a Service that keeps the client's address (externalTrafficPolicy=Local,
// reachable from outside: a LoadBalancer or NodePort Service, or one with
// ExternalIPs).
func servedLocalPorts(served []egress.Served, svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice) []egress.ServedPort {
	podIPs := map[netip.Addr]bool{}
	for _, sv := range served {
		for _, p := range sv.Pods {
			for _, ip := range p.IPs {
				podIPs[ip] = true
			}
		}
	}
	if len(podIPs) == 0 {
		return nil
	}
	local := map[string]bool{}
	for _, svc := range svcs {
		if localExternal(svc) {
			local[svc.Namespace+"/"+svc.Name] = true
		}
	}
	var out []egress.ServedPort
	for _, sl := range eps {
		if local[sl.Namespace+"/"+sl.Labels[discoveryv1.LabelServiceName]] {
			out = append(out, slicePorts(sl, func(ip netip.Addr) bool { return podIPs[ip] })...)
		}
	}
	return out
}

// slicePorts are the ports of sl's endpoints whose address served says
// is a served pod's.
func slicePorts(sl *discoveryv1.EndpointSlice, served func(netip.Addr) bool) []egress.ServedPort {
	var out []egress.ServedPort
	for _, ep := range sl.Endpoints {
		for _, a := range ep.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil || !served(ip) {
				continue
			}
			for _, port := range sl.Ports {
				if port.Port == nil {
					continue
				}
				proto := "tcp"
				if port.Protocol != nil {
					proto = strings.ToLower(string(*port.Protocol))
				}
				out = append(out, egress.ServedPort{IP: ip, Protocol: proto, Port: *port.Port})
			}
		}
	}
	return out
}

// withIngress returns svcs with the ingress lists of ingress (by
// "<namespace>/<name>") in copies of the Services they change.
func withIngress(svcs []*corev1.Service, ingress map[string][]corev1.LoadBalancerIngress) []*corev1.Service {
	if len(ingress) == 0 {
		return svcs
	}
	out := slices.Clone(svcs)
	for i, svc := range out {
		if ing, ok := ingress[svc.Namespace+"/"+svc.Name]; ok {
			c := svc.DeepCopy()
			c.Status.LoadBalancer.Ingress = ing
			out[i] = c
		}
	}
	return out
}

// allocate runs LB IPAM over svcs, oldest first, and returns the Services
// as the load balancers see them: with the ingress IPAM gives them. New
// ingress lists are stored in ingress by "<namespace>/<name>". Services
// skip reports (nil: none) are left as they are: their addresses come
// from elsewhere. poolOf (nil, or nil for a Service: every pool) names
// the pools a Service's address comes from.
func allocate(svcs []*corev1.Service, pools []*ipam.Pool, ingress map[string][]corev1.LoadBalancerIngress,
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
	slices.SortFunc(sorted, olderFirst)
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

// lbClassOurs reports whether ovnedge's LB IPAM assigns svc's address,
// as MetalLB decides with its --lb-class: with class set, the Services of
// that spec.loadBalancerClass; without, the Services without a class,
// except with --underlay-lb-mode=metallb, where those are MetalLB's (both
// would assign them, one after the other). ovnedge programs every
// Service's VIPs whoever assigned them.
func lbClassOurs(svc *corev1.Service, class string, metallb bool) bool {
	if svc.Spec.LoadBalancerClass != nil {
		return class != "" && *svc.Spec.LoadBalancerClass == class
	}
	return class == "" && !metallb
}

// ReasonDuplicateExternalIP is the Warning event on a Service whose
// ExternalIP an older Service already serves on one of its ports.
const ReasonDuplicateExternalIP = "DuplicateExternalIP"

// dedupVIPs gives every VIP to one Service, first come first served: the
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
func dedupVIPs(svcs []*corev1.Service) ([]*corev1.Service, []event.Event) {
	order := slices.Clone(svcs)
	slices.SortStableFunc(order, olderFirst)
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

// olderFirst orders Services by creationTimestamp, then namespace/name.
func olderFirst(a, b *corev1.Service) int {
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

// AnnotationNodeChassisID is OVN-Kubernetes' node annotation naming the
// node's chassis (its system-id).
const AnnotationNodeChassisID = lbsvc.AnnotationNodeChassisID

// lbNode is a node as its load balancers see it (lbsvc.ParseNode).
func lbNode(n *corev1.Node) lbsvc.Node { return lbsvc.ParseNode(n) }

// nodeIPs returns a node's InternalIP and ExternalIP addresses.
func nodeIPs(n *corev1.Node) []netip.Addr { return lbsvc.StatusIPs(n) }

// Flow program owners of the node work; each Service's flows are owned by
// "service/<namespace>/<name>" (ovsflow.Service.Owner).
const (
	OwnerEgressFlows = "egress"
	// OwnerBaseFlows owns the shared gateway's base flows
	// (ovsflow.BaseFlows), with Params.GatewayFlows.
	OwnerBaseFlows = "base"
	// OwnerEgressFence owns the fence flows of the OVN-hosted egress IPs
	// the node lost (egress.Fence, ovsflow.EgressFence).
	OwnerEgressFence = "egress-fence"
	ownerServicePfx  = "service/"
)

// AnnotationL3Gateway is OVN-Kubernetes' node annotation describing the
// node's gateway; its "default" network's "mac-address" is the bridge
// MAC.
const AnnotationL3Gateway = "k8s.ovn.org/l3-gateway-config"

// NodeState is the desired state of one node's bridge.
type NodeState struct {
	// Sets are the flow sets by program owner; an owner of the program
	// not listed here (and not in Keep) is deleted.
	Sets map[string][]ovsflow.Flow
	// Keep are owners whose input was bad this time: what is programmed
	// for them stays.
	Keep []string
	// Announce are the VIPs this node answers ARP/NDP for (L2 announce).
	Announce []netip.Addr
	// Host are the egress IPs the leader assigned to this node on a
	// secondary (non-OVN) host network.
	Host []egress.HostAssignment
	// Held are the OVN-hosted egress IPs the EgressIPs' status assigns
	// to this node (served by its gateway router), sorted: what an
	// egress.Fence is told the node holds.
	Held []netip.Addr
	// Provider are the provider bridge's flow sets by owner (the
	// underlay steering flows of each Service, seed 003);
	// ProviderMissing the patch ports they wait for (no flows through a
	// port the bridge lacks yet).
	Provider        map[string][]ovsflow.Flow
	ProviderMissing []string
	// UnderlayAnnounce are the underlay VIPs this node answers ARP/NDP
	// for on the underlay interface (standalone mode); they are never in
	// Announce.
	UnderlayAnnounce []netip.Addr
	// Routes are the host routes (/32, /128) the node announces over BGP
	// (Params.BGP): the VIPs it can serve while it is ready, and with
	// Params.BGPEgressIPs the egress IPs assigned to it. RouterID is its
	// first IPv4 InternalIP/ExternalIP, the default BGP identifier.
	Routes   []netip.Prefix
	RouterID netip.Addr
	// Self is the parse of the node's k8s.ovn.org annotations its flows
	// were computed from: this snapshot's, or when they broke
	// Params.LastGood; nil when there is neither (or the node carries
	// none and needs none).
	Self   *egress.Node
	Events []event.Event
}

// ComputeNode returns the desired bridge state of node: the EgressIP flows
// (109/105/104/100); with p.GatewayFlows the shared gateway's base flows
// (owner "base") and every Service's gateway flows (NodePorts and VIPs to
// OVN and back, the VIPs' ARP/NDP bypass, host-network endpoints of
// externalTrafficPolicy=Local Services), else the Services' ARP/NDP bypass
// only; and the VIPs it announces. It is a pure function of its inputs.
func ComputeNode(s Snapshot, p Params, node string) (NodeState, error) {
	ns := NodeState{Sets: map[string][]ovsflow.Flow{}}
	i := slices.IndexFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == node })
	if i < 0 {
		return ns, fmt.Errorf("%w: %q", ErrUnknownNode, node)
	}
	self, broken := selfNode(&ns, s.Nodes[i], p)
	if p.EnableEgressIP {
		var e ovsflow.Egress
		var flows []ovsflow.Flow
		err := broken
		if self != nil {
			e, err = egress.NodeFlows(p.Egress, self, p.Uplink, p.Patch)
		}
		if err == nil {
			e.Zone = p.Zone
			flows, err = ovsflow.EgressFlows(e)
		}
		if err != nil {
			ns.Keep = append(ns.Keep, OwnerEgressFlows)
			if err != broken { // a broken node has its event
				ns.Events = append(ns.Events, event.Warningf(event.Ref("v1", "Node", s.Nodes[i]), ReasonInvalidNode,
					"egress flows of %s kept as they are: %v", node, err))
			}
		} else {
			ns.Sets[OwnerEgressFlows] = flows
		}
		ns.Host, ns.Held = nodeEgressIPs(s, p, node, self)
	}
	if p.GatewayFlows {
		gatewayFlows(&ns, s, p, s.Nodes[i], self)
	} else {
		bypass, err := lbsvc.BypassFlows(ovsflow.Bypass{Uplink: p.Uplink}, s.Services)
		if err != nil {
			return ns, fmt.Errorf("vip bypass flows: %w", err)
		}
		for owner, flows := range bypass {
			ns.Sets[owner] = flows
		}
	}
	var healthy []string
	for _, n := range s.Nodes {
		if nodeReady(n) && (p.Alive == nil || p.Alive(n.Name)) {
			healthy = append(healthy, n.Name)
		}
	}
	p, _ = withUnderlay(p, s) // a bad Subnet is the leader's to report
	ns.Announce = lbsvc.VIPOwners(s.Services, s.EndpointSlices, healthy)[node]
	if p.underlayOn() {
		ns.Announce = slices.DeleteFunc(ns.Announce, p.LB.UnderlayVIP)
		if p.Underlay == UnderlayStandalone {
			ns.UnderlayAnnounce = lbsvc.UnderlayOwners(s.Services, s.EndpointSlices, healthy, p.LB)[node]
		}
		providerFlows(&ns, s, p)
	}
	if p.BGP {
		bgpRoutes(&ns, s, p, s.Nodes[i], slices.Contains(healthy, node))
	}
	return ns, nil
}

// selfNode parses n's k8s.ovn.org annotations for ComputeNode and sets
// ns.Self. Annotations that break (while egress IPs are on, or on a node
// that carries some) give a Warning event naming the bad annotation and
// the node's last good parse (p.LastGood), when there is one, so that its
// flows stay as they are; broken is the parse error then, nil otherwise.
// A node that carries none and needs none (a Kube-OVN node) has no Self:
// its gateway flows use its status addresses.
func selfNode(ns *NodeState, n *corev1.Node, p Params) (self *egress.Node, broken error) {
	parsed, err := egress.ParseNode(n)
	if err == nil {
		ns.Self = &parsed
		return ns.Self, nil
	}
	if !p.EnableEgressIP && !hasOVNKAnnotations(n) {
		return nil, nil
	}
	if p.LastGood != nil && p.LastGood.Name == n.Name {
		ns.Self = p.LastGood
		ns.Events = append(ns.Events, event.Warningf(event.Ref("v1", "Node", n), ReasonInvalidNode,
			"node %s keeps its last good annotations for its egress and gateway flows until they are fixed: %v", n.Name, err))
		return ns.Self, err
	}
	ns.Events = append(ns.Events, event.Warningf(event.Ref("v1", "Node", n), ReasonInvalidNode,
		"node %s has no good annotations yet: its egress flows are kept as they are and its gateway flows use its status addresses: %v",
		n.Name, err))
	return nil, err
}

// providerFlows sets the node's provider bridge flows: every Service's
// underlay steering flows (lbsvc.SteeringFlows), none without a provider
// NIC.
func providerFlows(ns *NodeState, s Snapshot, p Params) {
	if p.ProviderNIC == "" {
		return
	}
	ns.Provider = map[string][]ovsflow.Flow{}
	st := lbsvc.Steering{NIC: p.ProviderNIC, VLAN: p.ProviderVLAN, HasPort: p.ProviderPorts}
	for _, svc := range s.Services {
		flows, missing, events, err := lbsvc.SteeringFlows(st, svc, p.LB)
		owner := ovsflow.Service{Namespace: svc.Namespace, Name: svc.Name}.Owner()
		if err != nil {
			ns.Events = append(ns.Events, event.Warningf(event.Ref("v1", "Service", svc), lbsvc.ReasonGatewayFlows,
				"provider bridge flows kept as they are: %v", err))
			continue
		}
		ns.Events = append(ns.Events, events...)
		for _, m := range missing {
			if !slices.Contains(ns.ProviderMissing, m) {
				ns.ProviderMissing = append(ns.ProviderMissing, m)
			}
		}
		if len(flows) > 0 {
			ns.Provider[owner] = flows
		}
	}
	slices.Sort(ns.ProviderMissing)
}

// UpdateProvider makes p, the provider bridge's program, hold exactly the
// Provider sets (as Update: owners not ovnedge's node work are left
// alone).
func (ns *NodeState) UpdateProvider(p *ovsflow.Program) error {
	return (&NodeState{Sets: ns.Provider}).Update(p)
}

// bgpRoutes sets the node's BGP routes and router ID: the VIPs it can
// serve (every ready node those of externalTrafficPolicy=Cluster, nodes
// with a ready local endpoint those of Local) and, with
// p.BGPEgressIPs, the egress IPs its EgressIPs' status assigns to it.
// A node that is not ready (or not alive) announces no VIP.
func bgpRoutes(ns *NodeState, s Snapshot, p Params, n *corev1.Node, ready bool) {
	for _, a := range nodeIPs(n) {
		if a.Is4() {
			ns.RouterID = a
			break
		}
	}
	var addrs []netip.Addr
	if ready {
		addrs = lbsvc.ServedVIPs(s.Services, s.EndpointSlices, n.Name)
	}
	if p.BGPEgressIPs {
		for _, u := range s.EgressIPs {
			e, err := egressv1.FromUnstructured(u)
			if err != nil {
				continue // the leader's to report
			}
			for _, it := range e.Status.Items {
				if a, err := netip.ParseAddr(it.EgressIP); err == nil && it.Node == n.Name {
					addrs = append(addrs, a.Unmap())
				}
			}
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	for _, a := range slices.Compact(addrs) {
		ns.Routes = append(ns.Routes, netip.PrefixFrom(a, a.BitLen()))
	}
}

// gatewayFlows adds node's shared gateway flows to ns: the base and every
// Service's. Without a bridge MAC or a node IP the base and the Services'
// flows stay as they are (an event says why); a Service whose flows fail
// stays as it is alone.
func gatewayFlows(ns *NodeState, s Snapshot, p Params, n *corev1.Node, self *egress.Node) {
	g, node, err := nodeGateway(n, self, p)
	var base []ovsflow.Flow
	if err == nil {
		base, err = ovsflow.BaseFlows(g.Base)
	}
	if err != nil {
		ns.Keep = append(ns.Keep, OwnerBaseFlows)
		for _, svc := range s.Services {
			if gs, ok, _ := lbsvc.GatewayService(svc, nil, node); ok {
				ns.Keep = append(ns.Keep, gs.Owner())
			}
		}
		ns.Events = append(ns.Events, event.Warningf(event.Ref("v1", "Node", n), lbsvc.ReasonGatewayFlows,
			"gateway flows of %s kept as they are: %v", n.Name, err))
		return
	}
	ns.Sets[OwnerBaseFlows] = base
	gf := lbsvc.NodeGatewayFlows(g, s.Services, s.EndpointSlices, node)
	maps.Copy(ns.Sets, gf.Sets)
	ns.Keep = append(ns.Keep, gf.Failed...)
	ns.Events = append(ns.Events, gf.Events...)
}

// nodeGateway returns node n's gateway bridge and the node as its Service
// flows see it. The bridge's addresses are the node-primary-ifaddr ones
// (of self, n's parse or last good parse, when not nil), else its
// InternalIP/ExternalIP; its host addresses (where host-network endpoints
// live) add host-cidrs; the families are those of the bridge's addresses.
func nodeGateway(n *corev1.Node, self *egress.Node, p Params) (ovsflow.Gateway, lbsvc.Node, error) {
	g := ovsflow.Gateway{Base: ovsflow.Base{Uplink: p.Uplink, Patch: p.Patch, BridgeMAC: p.BridgeMAC, Zone: p.Zone}}
	node := lbsvc.Node{Name: n.Name}
	if parsed := self; parsed != nil {
		for _, pr := range parsed.Primary {
			g.NodeIPs = append(g.NodeIPs, pr.Addr())
		}
		for _, pr := range parsed.HostCIDRs {
			node.IPs = append(node.IPs, pr.Addr())
		}
	}
	status := nodeIPs(n)
	for _, a := range status {
		if !slices.ContainsFunc(g.NodeIPs, func(b netip.Addr) bool { return b.Is6() == a.Is6() }) {
			g.NodeIPs = append(g.NodeIPs, a)
		}
	}
	node.IPs = append(append(node.IPs, g.NodeIPs...), status...)
	slices.SortFunc(node.IPs, netip.Addr.Compare)
	node.IPs = slices.Compact(node.IPs)
	for _, a := range g.NodeIPs {
		g.IPv4, g.IPv6 = g.IPv4 || a.Is4(), g.IPv6 || a.Is6()
	}
	if len(g.NodeIPs) == 0 {
		return g, node, fmt.Errorf("node %s has no address (node-primary-ifaddr, InternalIP or ExternalIP)", n.Name)
	}
	if g.BridgeMAC == nil {
		mac, err := l3GatewayMAC(n)
		if err != nil {
			return g, node, err
		}
		g.BridgeMAC = mac
	}
	return g, node, nil
}

// l3GatewayMAC is the bridge MAC in the node's l3-gateway-config annotation.
func l3GatewayMAC(n *corev1.Node) (net.HardwareAddr, error) {
	v, ok := n.Annotations[AnnotationL3Gateway]
	if !ok {
		return nil, fmt.Errorf("no bridge MAC: neither --bridge-mac, the bridge's mac_in_use nor the %s annotation", AnnotationL3Gateway)
	}
	var cfg map[string]struct {
		MAC string `json:"mac-address"`
	}
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationL3Gateway, err)
	}
	mac, err := parseMAC(cfg["default"].MAC)
	if err == nil && mac == nil {
		err = fmt.Errorf("no default mac-address")
	}
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationL3Gateway, err)
	}
	return mac, nil
}

// nodeEgressIPs are node's egress IPs as the EgressIPs' status (the
// leader's assignment) says: host, those on its secondary host networks,
// and held, the others (OVN-hosted, served by its gateway router),
// sorted. self is the node's parse (or last good parse).
func nodeEgressIPs(s Snapshot, p Params, node string, self *egress.Node) (host []egress.HostAssignment, held []netip.Addr) {
	parsed, _ := egress.ParseNodes(s.Nodes)
	nodes := make(map[string]*egress.Node, len(parsed))
	for i := range parsed {
		nodes[parsed[i].Name] = &parsed[i]
	}
	if self != nil {
		nodes[node] = self
	}
	for _, u := range s.EgressIPs {
		e, err := egressv1.FromUnstructured(u)
		if err != nil || !slices.ContainsFunc(e.Status.Items, func(it egressv1.EgressIPStatusItem) bool { return it.Node == node }) {
			continue // bad objects are the leader's to report; the others, other nodes' work
		}
		pods, _ := egress.SelectPods(e, s.Namespaces, s.Pods)
		_, hs := egress.EgressIPState(p.Egress, egress.Served{Name: e.Name, Status: e.Status.Items, Pods: pods}, nodes)
		for _, h := range hs {
			if h.Node == node {
				host = append(host, h)
			}
		}
		for _, it := range e.Status.Items {
			if ip, err := netip.ParseAddr(it.EgressIP); err == nil && it.Node == node {
				held = append(held, ip.Unmap())
			}
		}
	}
	held = slices.DeleteFunc(held, func(ip netip.Addr) bool {
		return slices.ContainsFunc(host, func(h egress.HostAssignment) bool { return h.EgressIP == ip })
	})
	slices.SortFunc(held, netip.Addr.Compare)
	return host, slices.Compact(held)
}

// Fence sets the fence flows of the egress IPs the node lost
// (egress.Fence) on the patch port: owner OwnerEgressFence, none when
// fenced is empty.
func (ns *NodeState) Fence(patch string, fenced []netip.Addr) error {
	delete(ns.Sets, OwnerEgressFence)
	flows, err := ovsflow.EgressFence(patch, fenced)
	if err != nil {
		return err
	}
	if len(flows) > 0 {
		ns.Sets[OwnerEgressFence] = flows
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Update makes p hold the state: every set of Sets, and no other owner of
// the node work except those in Keep. Owners of others (not "egress",
// "base" nor "service/...") are left alone. On error p may hold part of the update.
func (ns *NodeState) Update(p *ovsflow.Program) error {
	p.DeleteFunc(func(owner string) bool {
		if _, ok := ns.Sets[owner]; ok || slices.Contains(ns.Keep, owner) {
			return false
		}
		return owner == OwnerEgressFlows || owner == OwnerBaseFlows || owner == OwnerEgressFence || strings.HasPrefix(owner, ownerServicePfx)
	})
	var errs []error
	for _, owner := range slices.Sorted(maps.Keys(ns.Sets)) {
		if err := p.Set(owner, ns.Sets[owner]); err != nil {
			errs = append(errs, fmt.Errorf("flows of %s: %w", owner, err))
		}
	}
	return errors.Join(errs...)
}

// hasOVNKAnnotations reports whether n carries any of OVN-Kubernetes'
// k8s.ovn.org/ annotations.
func hasOVNKAnnotations(n *corev1.Node) bool {
	for k := range n.Annotations {
		if strings.HasPrefix(k, "k8s.ovn.org/") {
			return true
		}
	}
	return false
}
