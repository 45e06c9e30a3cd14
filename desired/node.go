package desired

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnedge/ovnedge/egress/egresssvc"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/hostspec"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// lbNode is a node as its load balancers see it (lbsvc.ParseNode).
func lbNode(n *corev1.Node) lbsvc.Node { return lbsvc.ParseNode(n) }

// Flow program owners of the node work; each Service's flows are owned by
// "service/<namespace>/<name>" (brex.Service.Owner).
const (
	OwnerEgressFlows = "egress"
	// OwnerBaseFlows owns the shared gateway's base flows
	// (brex.BaseFlows), with Params.GatewayFlows.
	OwnerBaseFlows = "base"
	// OwnerEgressFence owns the fence flows of the OVN-hosted egress IPs
	// the node lost (egress.Fence, brex.EgressFence).
	OwnerEgressFence = "egress-fence"
	ownerServicePfx  = "service/"
)

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
	// HostGuard is the leak guard of the node's secondary host networks
	// (Params.HostGuard): the cluster's pod subnets, never leaving them
	// unSNATed.
	HostGuard hostspec.Guard
	// Held are the OVN-hosted egress IPs the EgressIPs' status assigns
	// to this node (served by its gateway router), sorted: what an
	// egress.Fence is told the node holds.
	Held []netip.Addr
	// Provider are the provider bridge's flow sets by owner (the
	// underlay steering flows of each Service);
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
	Self *ovnknode.Node
	// EgressService is what the node programs for the EgressServices it
	// hosts (Params.EnableEgressService), nil when there are none.
	EgressService *egresssvc.Host
	Events        []event.Event
}

// ComputeNode returns the desired bridge state of node: the EgressIP flows
// (109/105/104/100); with p.GatewayFlows the shared gateway's base flows
// (owner "base") and every Service's gateway flows (NodePorts and VIPs to
// OVN and back, the VIPs' ARP/NDP bypass, host-network endpoints of
// externalTrafficPolicy=Local Services), else no Service flow: ovnkube-node
// programs the gateway then, the ARP/NDP bypass included, and ovnedge adds
// only flows it does not define, with ovnedge's own cookies (the egress
// flows with brex.EgressCookie); and, with p.L2Announce, the VIPs it
// answers ARP/NDP for (NodeState.Announce). It is a pure
// function of its inputs.
func ComputeNode(s Snapshot, p Params, node string) (NodeState, error) {
	ns := NodeState{Sets: map[string][]ovsflow.Flow{}}
	i := slices.IndexFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == node })
	if i < 0 {
		return ns, fmt.Errorf("%w: %q", ErrUnknownNode, node)
	}
	self, broken := selfNode(&ns, s.Nodes[i], p)
	if p.EnableEgressIP {
		var e brex.Egress
		var flows []ovsflow.Flow
		err := broken
		if self != nil {
			e, err = egress.NodeFlows(p.Egress, self, p.Uplink, p.Patch)
		}
		if err == nil {
			e.Zone = p.Zone
			if !p.GatewayFlows {
				e.Cookie = brex.EgressCookie // ovnkube-node's gateway owns BaseCookie
			}
			flows, err = brex.EgressFlows(e)
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
		if p.HostGuard && self != nil {
			if nets := self.SecondaryNetworks(); len(nets) > 0 {
				ns.HostGuard = hostspec.Guard{PodSubnets: p.Egress.ClusterSubnets, Networks: nets}
			}
		}
	}
	if p.GatewayFlows {
		gatewayFlows(&ns, s, p, s.Nodes[i], self)
	}
	var healthy []string
	for _, n := range s.Nodes {
		if ovnknode.Ready(n) && (p.Alive == nil || p.Alive(n.Name)) {
			healthy = append(healthy, n.Name)
		}
	}
	p, _ = withUnderlay(p, s) // a bad Subnet is the leader's to report
	if p.L2Announce {
		ns.Announce = p.Elections.VIPOwners(s.Services, s.EndpointSlices, healthy)[node]
	}
	if p.UnderlayOn() {
		ns.Announce = slices.DeleteFunc(ns.Announce, p.LB.UnderlayVIP)
		if p.Underlay == UnderlayStandalone {
			ns.UnderlayAnnounce = p.Elections.UnderlayOwners(s.Services, s.EndpointSlices, healthy, p.LB)[node]
		}
		providerFlows(&ns, s, p)
	}
	if p.BGP {
		bgpRoutes(&ns, s, p, s.Nodes[i], slices.Contains(healthy, node))
	}
	if p.EnableEgressService {
		nodeEgressServices(&ns, s, p, node, slices.Contains(healthy, node))
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
func selfNode(ns *NodeState, n *corev1.Node, p Params) (self *ovnknode.Node, broken error) {
	parsed, err := ovnknode.Parse(n)
	if err == nil {
		ns.Self = &parsed
		return ns.Self, nil
	}
	if !p.EnableEgressIP && !ovnknode.HasAnnotations(n) {
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
		owner := brex.Service{Namespace: svc.Namespace, Name: svc.Name}.Owner()
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
	for _, a := range ovnknode.StatusIPs(n) {
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
func gatewayFlows(ns *NodeState, s Snapshot, p Params, n *corev1.Node, self *ovnknode.Node) {
	g, node, err := nodeGateway(n, self, p)
	var base []ovsflow.Flow
	if err == nil {
		base, err = brex.BaseFlows(g.Base)
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
	gf := p.GatewayCache.NodeGatewayFlows(g, s.Services, s.EndpointSlices, node)
	maps.Copy(ns.Sets, gf.Sets)
	ns.Keep = append(ns.Keep, gf.Failed...)
	ns.Events = append(ns.Events, gf.Events...)
}

// nodeGateway returns node n's gateway bridge and the node as its Service
// flows see it. The bridge's addresses are the node-primary-ifaddr ones
// (of self, n's parse or last good parse, when not nil), else its
// InternalIP/ExternalIP; its host addresses (where host-network endpoints
// live) add host-cidrs; the families are those of the bridge's addresses.
func nodeGateway(n *corev1.Node, self *ovnknode.Node, p Params) (brex.Gateway, lbsvc.Node, error) {
	g := brex.Gateway{Base: brex.Base{Uplink: p.Uplink, Patch: p.Patch, BridgeMAC: p.BridgeMAC, Zone: p.Zone},
		SourceRanges: p.LB.SourceRanges}
	node := lbsvc.Node{Name: n.Name}
	if parsed := self; parsed != nil {
		for _, pr := range parsed.Primary {
			g.NodeIPs = append(g.NodeIPs, pr.Addr())
		}
		for _, pr := range parsed.HostCIDRs {
			node.IPs = append(node.IPs, pr.Addr())
		}
	}
	status := ovnknode.StatusIPs(n)
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
		mac, err := ovnknode.L3GatewayMAC(n)
		if err != nil {
			return g, node, err
		}
		g.BridgeMAC = mac
	}
	return g, node, nil
}

// nodeEgressIPs are node's egress IPs as the EgressIPs' status (the
// leader's assignment) says: host, those on its secondary host networks,
// and held, the others (OVN-hosted, served by its gateway router),
// sorted. self is the node's parse (or last good parse).
func nodeEgressIPs(s Snapshot, p Params, node string, self *ovnknode.Node) (host []egress.HostAssignment, held []netip.Addr) {
	mine := egressIPsOn(s, node)
	parse := map[string]bool{} // the nodes of their status
	for _, e := range mine {
		for _, it := range e.Status.Items {
			parse[it.Node] = true
		}
	}
	nodes := make(map[string]*ovnknode.Node, len(parse))
	for _, n := range s.Nodes { // only those: parsing every node's annotations on every pass was a third of it at 2,000 nodes
		if n != nil && parse[n.Name] {
			if parsed, err := ovnknode.Parse(n); err == nil {
				nodes[n.Name] = &parsed
			}
		}
	}
	if self != nil {
		nodes[node] = self
	}
	for _, e := range mine {
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

// egressIPsOn are the EgressIPs whose status gives node an egress IP,
// converted; bad objects are left out (the leader's to report).
func egressIPsOn(s Snapshot, node string) []*egressv1.EgressIP {
	var out []*egressv1.EgressIP
	for _, u := range s.EgressIPs {
		if !StatusNames(u, node) {
			continue // other nodes' work
		}
		if e, err := egressv1.FromUnstructured(u); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// StatusNames reports whether EgressIP u's status gives node an egress
// IP, read from the object as it is (converting every EgressIP on every
// pass cost more than the rest of it).
func StatusNames(u *unstructured.Unstructured, node string) bool {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "items")
	items, _ := v.([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["node"] == node {
			return true
		}
	}
	return false
}

// PodWatch is a watch of the pods a node reads: those of Namespace (""
// for every namespace) that LabelSelector selects (the API server's
// syntax; "" selects every pod).
type PodWatch struct{ Namespace, LabelSelector string }

// Compare orders watches by namespace, then label selector.
func (a PodWatch) Compare(b PodWatch) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.LabelSelector, b.LabelSelector))
}

// MaxNamespacedPodWatches is how many namespaces an EgressIP's pods are
// watched in, one watch each; an EgressIP whose namespaceSelector matches
// more is watched in every namespace by its podSelector alone.
const MaxNamespacedPodWatches = 8

// HostEgressPodWatches are the pod watches (sorted, distinct) of the
// EgressIPs whose status gives node an egress IP on one of its secondary
// host networks: the only pods ComputeNode reads. An EgressIP's pods are
// watched in the namespaces its namespaceSelector matches (a watch each,
// by its podSelector), or in every namespace when those are more than
// MaxNamespacedPodWatches. A node instance watches just these
// (kubewatch.PodsOnDemand), none when the node hosts no such IP. ok is
// false when node's annotations cannot be parsed: the caller keeps the
// pods it watches, so that the node's last good state stays.
func HostEgressPodWatches(s Snapshot, node string) (watches []PodWatch, ok bool) {
	i := slices.IndexFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == node })
	if i < 0 {
		return nil, false
	}
	self, err := ovnknode.Parse(s.Nodes[i])
	if err != nil {
		return nil, false
	}
	onHost := func(it egressv1.EgressIPStatusItem) bool {
		ip, err := netip.ParseAddr(it.EgressIP)
		if it.Node != node || err != nil {
			return false
		}
		_, primary, ok := self.Network(ip.Unmap())
		return ok && !primary
	}
	for _, e := range egressIPsOn(s, node) {
		if !slices.ContainsFunc(e.Status.Items, onHost) {
			continue
		}
		if sel, err := egress.NewSelector(&e.Spec); err == nil { // a bad one is the leader's to report
			watches = append(watches, podWatches(sel, s.Namespaces)...)
		}
	}
	return compactWatches(watches), true
}

// podWatches are the pod watches of one EgressIP's selector.
func podWatches(sel *egress.Selector, namespaces []*corev1.Namespace) []PodWatch {
	var out []PodWatch
	for _, ns := range namespaces {
		if sel.SelectsNamespace(ns) {
			out = append(out, PodWatch{ns.Name, sel.PodLabelSelector()})
		}
	}
	if len(out) > MaxNamespacedPodWatches {
		return []PodWatch{{"", sel.PodLabelSelector()}}
	}
	return out
}

// compactWatches sorts and dedupes watches, dropping a namespace's watch
// that an every-namespace watch of the same selector covers.
func compactWatches(watches []PodWatch) []PodWatch {
	every := map[string]bool{}
	for _, w := range watches {
		if w.Namespace == "" {
			every[w.LabelSelector] = true
		}
	}
	watches = slices.DeleteFunc(watches, func(w PodWatch) bool { return w.Namespace != "" && every[w.LabelSelector] })
	slices.SortFunc(watches, PodWatch.Compare)
	return slices.Compact(watches)
}

// Fence sets the fence flows of the egress IPs the node lost
// (egress.Fence) on the patch port: owner OwnerEgressFence, none when
// fenced is empty.
func (ns *NodeState) Fence(patch string, fenced []netip.Addr) error {
	delete(ns.Sets, OwnerEgressFence)
	flows, err := brex.EgressFence(patch, fenced)
	if err != nil {
		return err
	}
	if len(flows) > 0 {
		ns.Sets[OwnerEgressFence] = flows
	}
	return nil
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
