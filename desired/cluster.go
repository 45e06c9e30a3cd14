package desired

import (
	"cmp"
	"fmt"
	"maps"
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
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

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
	Nodes []ovnknode.Node
	// EgressServices are the hosts and node labels of the
	// EgressServices (Params.EnableEgressService); their rows are in
	// Egress.
	EgressServices EgressServices
	Events         []event.Event
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
func ComputeCluster(s Snapshot, p Params, reachable func(node string) bool, prev []ovnknode.Node) (ClusterState, error) {
	p.Egress.EgressServices = p.EnableEgressService
	replyIPs := map[netip.Addr]bool{} // the pods whose replies stay off the reroutes
	cs := ClusterState{Status: map[string][]egressv1.EgressIPStatusItem{}, Ingress: map[string][]corev1.LoadBalancerIngress{}}
	nodes, broken := ovnknode.ParseAll(s.Nodes)
	// Every consumer of the annotations (egress IPs, load balancers) gets
	// a broken node's last good parse, so nothing programmed for it is
	// lost; a node never parsed is skipped.
	cs.Nodes = ovnknode.KeepLastGood(prev, nodes, broken)
	lastGood := map[string]ovnknode.Node{}
	for _, n := range cs.Nodes {
		if broken[n.Name] != nil {
			lastGood[n.Name] = n
		}
	}
	for _, n := range s.Nodes {
		err := broken[n.Name]
		if err == nil || (!p.EnableEgressIP && !ovnknode.HasAnnotations(n)) {
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
		if err := clusterEgressIPs(&cs, p, s, reachable, broken, replyIPs); err != nil {
			return cs, err
		}
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
		return !lbsvc.ClassAssigned(svc, p.LBClass, p.Underlay == UnderlayMetalLB) || (kubeOVN != nil && kubeOVN(svc))
	}
	svcs, events, err := lbsvc.Allocate(svcs, pools, cs.Ingress, notOurs, poolOf)
	if err != nil {
		return cs, err
	}
	cs.Events = append(cs.Events, events...)
	svcs, events = lbsvc.DedupVIPs(svcs)
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
	if p.EnableEgressService {
		served, err := clusterEgressServices(&cs, p, s, svcs, reachable)
		if err != nil {
			return cs, fmt.Errorf("egress services: %w", err)
		}
		for _, ip := range served {
			replyIPs[ip] = true
		}
	}
	if p.EnableEgressIP || p.EnableEgressService {
		cs.ReplyFallback = egress.ReplyPortPolicies(p.Egress, servedLocalPorts(replyIPs, s.Services, s.EndpointSlices))
	}
	return cs, nil
}

// clusterEgressIPs adds the EgressIPs' part to cs: their assignment and
// statuses, rows and host assignments, and their served pods to replyIPs
// (whose replies stay off the reroutes). An EgressIP that does not parse
// is an event and keeps its rows.
func clusterEgressIPs(cs *ClusterState, p Params, s Snapshot, reachable func(string) bool, broken map[string]error, replyIPs map[netip.Addr]bool) error {
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
	var res egress.Result
	res, cs.HoldWake = p.Hold.Assign(eips, eNodes, reachable, broken)
	cs.Events = append(cs.Events, res.Events...)
	cs.Status = res.Status
	served, events := egress.Serve(eips, cs.Status, s.Namespaces, s.Pods)
	cs.Events = append(cs.Events, events...)
	for _, e := range eips {
		if !slices.ContainsFunc(served, func(sv egress.Served) bool { return sv.Name == e.Name }) {
			cs.Keep = append(cs.Keep, ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: e.Name})
		}
	}
	d, err := egress.Compute(p.Egress, eNodes, served)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	cs.Egress, cs.Host = d.NB, d.Host
	for _, sv := range served {
		for _, pod := range sv.Pods {
			for _, ip := range pod.IPs {
				replyIPs[ip] = true
			}
		}
	}
	return nil
}

// servedLocalPorts are the ports on which served pods (podIPs: those of
// an EgressIP, or of an EgressService) back a Service that keeps the
// client's address (externalTrafficPolicy=Local, reachable from outside:
// a LoadBalancer or NodePort Service, or one with ExternalIPs).
func servedLocalPorts(podIPs map[netip.Addr]bool, svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice) []egress.ServedPort {
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

// GatewayChassis are the chassis of routers (GR_<node>: the node's
// chassis, ovnknode.Chassis, else its name), in their order; other
// routers are left out.
func GatewayChassis(s Snapshot, routers []string) []string {
	var chassis []string
	for _, r := range routers {
		node, ok := strings.CutPrefix(r, lbsvc.GatewayRouter(""))
		if !ok {
			continue
		}
		name := node
		if i := slices.IndexFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == node }); i >= 0 {
			name = cmp.Or(ovnknode.Chassis(s.Nodes[i]), node)
		}
		chassis = append(chassis, name)
	}
	return chassis
}
