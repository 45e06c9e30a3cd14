package desired

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// Supported reports whether the incremental path computes
// what ComputeCluster does with these Params: not with Kube-OVN's
// LoadBalancer Services nor the underlay modes, whose inputs (Subnets,
// NADs, Deployments) it does not index.
func Supported(p Params) bool { return !p.LBSvc && !p.UnderlayOn() }

// nodeParse is one node's parse of its k8s.ovn.org annotations.
type nodeParse struct {
	obj    *corev1.Node
	parsed ovnknode.Node
	err    error
}

// Index is the leader's incremental desired state: the objects of
// the last reconcile, indexes from each object to what depends on it, and
// the desired pieces by owner. apply recomputes only the pieces the
// changed objects reach (see the package doc); a new Index given
// SnapshotChanges computes everything.
type Index struct {
	p         Params
	reachable func(string) bool
	// giveWay, when not nil, is called between objects (an audit's
	// index: it waits while a cluster pass runs).
	giveWay func()
	built   bool // the first apply is done
	nodeIndex
	egressIndex
	lbIndex
	esvcIndex
}

// nodeIndex are the nodes as the index keeps them.
type nodeIndex struct {
	nodes    map[string]*nodeParse
	eNodes   []ovnknode.Node
	byName   map[string]*ovnknode.Node
	broken   map[string]error
	nodeEvts []event.Event
}

// egressIndex is the EgressIPs' part: the pods they serve (egress.Selection),
// their assignment and rows.
type egressIndex struct {
	sel       *egress.Selection
	hosts     map[string][]egress.HostAssignment // by EgressIP
	statusRef map[string]int                     // pod -> EgressIPs with status serving it
	anyRef    map[netip.Addr]int                 // served pod IP -> (EgressIP, pod) pairs
	assignEvt []event.Event
	status    map[string][]egressv1.EgressIPStatusItem
	cluster   map[ovsdbnb.Owner]ovsdbnb.State // ClusterState's owners
	reply     ovsdbnb.State
	egressNB  map[ovsdbnb.Owner]ovsdbnb.State
}

// lbIndex is the load balancers' part.
type lbIndex struct {
	svcs     map[string]*corev1.Service
	slices   map[string]*discoveryv1.EndpointSlice
	slicesBy map[string]map[string]*discoveryv1.EndpointSlice // by "<namespace>/<service>"
	local    map[string]bool                                  // external Services with externalTrafficPolicy=Local
	vipSvcs  map[string]bool                                  // Services with VIPs (hasVIPs)
	lbNodes  []lbsvc.Node
	view     map[string]*corev1.Service // Services as IPAM and the VIP dedup changed them
	ingress  map[string][]corev1.LoadBalancerIngress
	vipEvts  []event.Event
	lbEvents map[ovsdbnb.Owner][]event.Event
	lb       map[ovsdbnb.Owner]ovsdbnb.State
	// wide counts the applies that recomputed every Service's load
	// balancers (a node's addresses changed).
	wide int
}

// NewIndex returns an empty Index computing with p (reachable nil: every
// node is reachable); prev are the egress nodes of a previous computation
// (ClusterState.Nodes), whose last good parses broken nodes keep. Given
// SnapshotChanges, its first Apply computes everything.
func NewIndex(p Params, reachable func(string) bool, prev []ovnknode.Node) *Index {
	p.Egress.EgressServices = p.EnableEgressService
	return &Index{p: p, reachable: reachable,
		nodeIndex: nodeIndex{nodes: map[string]*nodeParse{}, eNodes: prev},
		egressIndex: egressIndex{sel: egress.NewSelection(), hosts: map[string][]egress.HostAssignment{},
			statusRef: map[string]int{}, anyRef: map[netip.Addr]int{}, status: map[string][]egressv1.EgressIPStatusItem{},
			cluster: map[ovsdbnb.Owner]ovsdbnb.State{}, egressNB: map[ovsdbnb.Owner]ovsdbnb.State{}},
		lbIndex: lbIndex{svcs: map[string]*corev1.Service{}, slices: map[string]*discoveryv1.EndpointSlice{},
			slicesBy: map[string]map[string]*discoveryv1.EndpointSlice{}, local: map[string]bool{}, vipSvcs: map[string]bool{},
			view: map[string]*corev1.Service{}, ingress: map[string][]corev1.LoadBalancerIngress{},
			lbEvents: map[ovsdbnb.Owner][]event.Event{}, lb: map[ovsdbnb.Owner]ovsdbnb.State{}},
		esvcIndex: esvcIndex{ess: map[string]*unstructured.Unstructured{}, esServed: map[netip.Addr]bool{}}}
}

// pass is the work one apply collects before computing.
type pass struct {
	first        bool
	assign       bool                // the assignment again
	nodes        bool                // a node changed
	touched      map[string]bool     // nodes changed beyond a quiet update (added, deleted or not)
	changedNodes map[string]bool     // egress nodes whose parse changed
	clusterRows  bool                // ClusterState again
	reply        bool                // ReplyFallback again
	vip          bool                // IPAM and the VIP dedup again
	esvc         bool                // an EgressService changed
	allLB        bool                // every Service's load balancers again
	podsBefore   map[string]bool     // whether a pod counted was served with an assignment before the pass
	ipsBefore    map[netip.Addr]bool // whether an address counted was served before the pass
	eips         map[string]bool     // EgressIPs whose rows to compute
	svcs         map[string]bool     // Services whose load balancers to compute
	dirty        map[ovsdbnb.Owner]bool
}

// Apply brings the index up to date with ch and returns the desired
// cluster state, as ComputeCluster returns it for the objects the index
// now holds, with Dirty the owners whose state may have changed. The
// maps of the state are shared with the index: read only, until the
// next apply.
func (x *Index) Apply(ch *Changes) (ClusterState, error) {
	ps := &pass{first: !x.built, changedNodes: map[string]bool{}, touched: map[string]bool{},
		eips: map[string]bool{}, svcs: map[string]bool{}, dirty: map[ovsdbnb.Owner]bool{},
		podsBefore: map[string]bool{}, ipsBefore: map[netip.Addr]bool{}}
	ps.assign = ch.Reassign
	if ps.first {
		ps.nodes, ps.clusterRows, ps.reply, ps.vip, ps.allLB = true, true, true, true, true
	}
	for k, n := range ch.Nodes {
		x.yield()
		x.setNode(ps, k, n)
	}
	if ps.nodes {
		x.nodesChanged(ps)
	}
	for k, ns := range ch.Namespaces {
		x.yield()
		x.setNamespace(ps, k, ns)
	}
	for k, e := range ch.EgressIPs {
		x.yield()
		x.setEIP(ps, k, e)
	}
	for k, pod := range ch.Pods {
		x.yield()
		x.setPod(ps, k, pod)
	}
	for k, es := range ch.EgressServices {
		x.setEgressService(ps, k, es)
	}
	for k, svc := range ch.Services {
		x.yield()
		x.setService(ps, k, svc)
	}
	for k, sl := range ch.EndpointSlices {
		x.yield()
		x.setSlice(ps, k, sl)
	}
	var cs ClusterState
	if x.p.EnableEgressIP {
		if err := x.computeEgress(ps, &cs); err != nil {
			return cs, err
		}
	}
	if err := x.computeLB(ps); err != nil {
		return cs, err
	}
	if x.p.EnableEgressService {
		if err := x.indexEgressServices(ps); err != nil {
			return cs, fmt.Errorf("egress services: %w", err)
		}
	}
	if ps.reply && (x.p.EnableEgressIP || x.p.EnableEgressService) {
		x.reply = egress.ReplyPortPolicies(x.p.Egress, x.localPorts())
	}
	cs = x.state(cs.HoldWake)
	cs.Dirty = ps.dirty
	x.built = true
	if ps.first {
		cs.Dirty = nil
	}
	return cs, nil
}

// Params are the settings x computes with.
func (x *Index) Params() Params { return x.p }

// State is x's desired state as the last Apply left it (Dirty and
// HoldWake not set). Its maps are x's: read only, until the next Apply.
func (x *Index) State() ClusterState { return x.state(0) }

// GiveWay has x call f between two objects of an Apply: an index built
// beside a running one (an audit's) waits there while the other works.
func (x *Index) GiveWay(f func()) { x.giveWay = f }

// yield calls giveWay, if any.
func (x *Index) yield() {
	if x.giveWay != nil {
		x.giveWay()
	}
}

// state is the index's desired state, sharing its maps (Dirty not set).
func (x *Index) state(holdWake time.Duration) ClusterState {
	cs := ClusterState{Status: x.status, Ingress: x.ingress, LB: x.lb, Nodes: x.eNodes, HoldWake: holdWake}
	cs.Events = append(cs.Events, x.nodeEvts...)
	if x.p.EnableEgressIP {
		cs.Egress, cs.ReplyFallback = x.egressNB, x.reply
		cs.Events = append(cs.Events, x.assignEvt...)
		for _, name := range x.sel.Names() {
			e := x.sel.Get(name)
			cs.Events = append(cs.Events, e.Events...)
			if !e.Valid {
				cs.Keep = append(cs.Keep, ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: name})
			}
			cs.Host = append(cs.Host, x.hosts[name]...)
		}
	} else {
		cs.Status = map[string][]egressv1.EgressIPStatusItem{}
	}
	if x.p.EnableEgressService {
		cs.Egress, cs.ReplyFallback = x.egressNB, x.reply
		cs.EgressServices = x.part.status()
		cs.Events = append(cs.Events, x.part.events...)
		cs.Events = append(cs.Events, x.part.d.Events...)
		cs.Keep = append(cs.Keep, x.part.keep...)
	}
	cs.Events = append(cs.Events, x.vipEvts...)
	for _, evs := range x.lbEvents {
		cs.Events = append(cs.Events, evs...)
	}
	return cs
}

// setNode records a node's change.
func (x *Index) setNode(ps *pass, k string, n *corev1.Node) {
	old := x.nodes[k]
	if old != nil && old.obj == n {
		return
	}
	ps.nodes = true
	ps.touched[k] = true
	if n == nil {
		delete(x.nodes, k)
		ps.changedNodes[k] = true
		return
	}
	parsed, err := ovnknode.Parse(n)
	np := &nodeParse{obj: n, parsed: parsed, err: err}
	if old != nil && quietNodeUpdate(old, np) {
		// Only the resourceVersion (a heartbeat, a condition's times):
		// no other node, EgressIP or load balancer depends on it.
		x.nodes[k] = np
		if i, ok := slices.BinarySearchFunc(x.eNodes, k, func(n ovnknode.Node, name string) int { return strings.Compare(n.Name, name) }); ok {
			x.eNodes[i].Version = parsed.Version
		}
		return
	}
	x.nodes[k] = np
	if old == nil || (old.err == nil) != (err == nil) || !reflect.DeepEqual(old.parsed, parsed) {
		ps.changedNodes[k] = true
	}
}

// quietNodeUpdate reports whether a node's update changes nothing but
// the parse's Version: its annotations parse as before and its load
// balancers' view is the same.
func quietNodeUpdate(old, cur *nodeParse) bool {
	if old.err != nil || cur.err != nil {
		return false
	}
	a, b := old.parsed, cur.parsed
	a.Version = b.Version
	return reflect.DeepEqual(a, b) && reflect.DeepEqual(lbsvc.NodeOf(old.obj, old.parsed), lbsvc.NodeOf(cur.obj, cur.parsed))
}

// nodesChanged recomputes what every node counts for: the egress node
// list (with the broken nodes' last good parse), their events, and the
// nodes of the load balancers, which when they changed make every
// Service's load balancers change.
func (x *Index) nodesChanged(ps *pass) {
	if x.nodesUpdated(ps) {
		return
	}
	var parsed []ovnknode.Node
	broken := map[string]error{}
	for _, name := range slices.Sorted(maps.Keys(x.nodes)) {
		np := x.nodes[name]
		if np.err != nil {
			broken[name] = np.err
			continue
		}
		parsed = append(parsed, np.parsed)
	}
	if len(broken) == 0 {
		broken = nil
	}
	prevNodes := x.eNodes
	x.eNodes = ovnknode.KeepLastGood(prevNodes, parsed, broken)
	x.broken = broken
	lastGood := map[string]ovnknode.Node{}
	for _, n := range x.eNodes {
		if broken[n.Name] != nil {
			lastGood[n.Name] = n
		}
	}
	if !ps.first && !sameClusterNodes(prevNodes, x.eNodes) {
		ps.clusterRows = true
	}
	x.byName = make(map[string]*ovnknode.Node, len(x.eNodes))
	for i := range x.eNodes {
		x.byName[x.eNodes[i].Name] = &x.eNodes[i]
	}
	x.nodeEvts = nil
	lbNodes := make([]lbsvc.Node, 0, len(x.nodes))
	for _, name := range slices.Sorted(maps.Keys(x.nodes)) {
		np := x.nodes[name]
		n := np.obj
		if np.err == nil {
			lbNodes = append(lbNodes, lbsvc.NodeOf(n, np.parsed))
		} else if last, ok := lastGood[name]; ok {
			lbNodes = append(lbNodes, lbsvc.NodeOf(n, last))
		}
		err := np.err
		if err == nil || (!x.p.EnableEgressIP && !ovnknode.HasAnnotations(n)) {
			continue
		}
		msg := "node %s skipped for egress IPs and load balancers until its annotations are fixed: %v"
		if _, ok := lastGood[name]; ok {
			msg = "node %s keeps its last good annotations for egress IPs and load balancers until they are fixed: %v"
		}
		x.nodeEvts = append(x.nodeEvts, event.Warningf(event.Ref("v1", "Node", n), ReasonInvalidNode, msg, n.Name, err))
	}
	if !reflect.DeepEqual(lbNodes, x.lbNodes) {
		ps.allLB = true
	}
	x.lbNodes = lbNodes
}

// nodesUpdated is nodesChanged for the common case, in what the touched
// nodes cost rather than every node's: each touched node was in the
// lists before and still parses (as every node did), so its entries are
// replaced where they are. It reports false, having changed nothing,
// when the case does not apply (the first pass, a node added, deleted or
// with a broken parse, before or now).
func (x *Index) nodesUpdated(ps *pass) bool {
	if ps.first || len(x.broken) > 0 { // no broken node: no node's events either
		return false
	}
	type at struct{ e, lb int }
	idx := make(map[string]at, len(ps.touched))
	for k := range ps.touched {
		np := x.nodes[k]
		if np == nil || np.err != nil {
			return false
		}
		e, ok := slices.BinarySearchFunc(x.eNodes, k, func(n ovnknode.Node, name string) int { return strings.Compare(n.Name, name) })
		lb, ok2 := slices.BinarySearchFunc(x.lbNodes, k, func(n lbsvc.Node, name string) int { return strings.Compare(n.Name, name) })
		if !ok || !ok2 {
			return false
		}
		idx[k] = at{e, lb}
	}
	// New slices: the last ClusterState's Nodes are not changed under
	// whoever still reads them.
	eNodes, lbNodes := slices.Clone(x.eNodes), slices.Clone(x.lbNodes)
	for k, i := range idx {
		np := x.nodes[k]
		if !sameClusterNodes(eNodes[i.e:i.e+1], []ovnknode.Node{np.parsed}) {
			ps.clusterRows = true
		}
		eNodes[i.e] = np.parsed
		lb := lbsvc.NodeOf(np.obj, np.parsed)
		if !reflect.DeepEqual(lb, lbNodes[i.lb]) {
			ps.allLB = true
		}
		lbNodes[i.lb] = lb
	}
	x.eNodes, x.lbNodes = eNodes, lbNodes
	x.byName = make(map[string]*ovnknode.Node, len(x.eNodes))
	for i := range x.eNodes {
		x.byName[x.eNodes[i].Name] = &x.eNodes[i]
	}
	return true
}

// sameClusterNodes reports whether two egress node lists give the same
// ClusterState rows: the same names, subnets and addresses (readiness,
// labels and capacity only count for the assignment).
func sameClusterNodes(a, b []ovnknode.Node) bool {
	return slices.EqualFunc(a, b, func(m, n ovnknode.Node) bool {
		return m.Name == n.Name && slices.Equal(m.Subnets, n.Subnets) && slices.Equal(m.Primary, n.Primary) &&
			slices.Equal(m.HostCIDRs, n.HostCIDRs)
	})
}

// setNamespace records a namespace's change: the EgressIPs whose
// selection of it changes serve its pods, or stop serving them.
func (x *Index) setNamespace(ps *pass, k string, ns *corev1.Namespace) {
	x.sel.SetNamespace(k, ns, x.served(ps))
}

// served returns the pass's observer of changes of the served pods: the
// EgressIP's rows are computed again, the pod counted in or out of the
// served pods and, with an assignment, the cluster-wide address set.
func (x *Index) served(ps *pass) func(egress.PodChange) {
	return func(c egress.PodChange) {
		ps.eips[c.EgressIP] = true
		withStatus := len(x.status[c.EgressIP]) > 0
		if c.Had && c.Has && withStatus && !slices.Equal(c.Old.IPs, c.New.IPs) {
			ps.clusterRows = true // the pod's count does not change, its addresses do
		}
		if c.Had {
			x.refPod(ps, c.Old, -1, withStatus)
		}
		if c.Has {
			x.refPod(ps, c.New, 1, withStatus)
		}
	}
}

// refPod counts pod in (d = 1) or out of (d = -1) the served pods of
// every EgressIP and, withStatus, of those with an assignment (the
// cluster-wide address set).
func (x *Index) refPod(ps *pass, pod egress.Pod, d int, withStatus bool) {
	for _, ip := range pod.IPs {
		if _, ok := ps.ipsBefore[ip]; !ok {
			ps.ipsBefore[ip] = x.anyRef[ip] > 0
		}
		x.anyRef[ip] += d
		if x.anyRef[ip] == 0 {
			delete(x.anyRef, ip)
		}
	}
	if withStatus {
		x.refStatus(ps, pod.Key(), d)
	}
}

// refStatus counts pod k in or out of the pods of the EgressIPs with an
// assignment.
func (x *Index) refStatus(ps *pass, k string, d int) {
	if _, ok := ps.podsBefore[k]; !ok {
		ps.podsBefore[k] = x.statusRef[k] > 0
	}
	x.statusRef[k] += d
	if x.statusRef[k] == 0 {
		delete(x.statusRef, k)
	}
}

// servedChanged notes which cluster-wide rows the pass's pods changed:
// those of the address set when a pod joined or left the pods with an
// assignment, the reply fallback when a served address came or went
// (counts that went down and up again in the pass change nothing).
func (x *Index) servedChanged(ps *pass) {
	for k, before := range ps.podsBefore {
		if before != (x.statusRef[k] > 0) {
			ps.clusterRows = true
			break
		}
	}
	for ip, before := range ps.ipsBefore {
		if before != (x.anyRef[ip] > 0) {
			ps.reply = true
			break
		}
	}
}

// setEIP records an EgressIP's change: parsed, its selector compiled and
// its pods selected again (unless only its status changed).
func (x *Index) setEIP(ps *pass, k string, u *unstructured.Unstructured) {
	switch x.sel.SetEgressIP(k, u, x.served(ps)) {
	case egress.SetUnchanged:
		return
	case egress.SetReplaced:
		ps.dirty[ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: k}] = true
	}
	ps.eips[k] = true
	ps.assign = true
}

// setPod records a pod's change: the EgressIPs of its namespace, and
// those serving it, select it again.
func (x *Index) setPod(ps *pass, k string, pod *egress.PodInfo) {
	x.sel.SetPod(k, pod, x.served(ps))
}

// hasVIPs reports whether svc takes part in LB IPAM or the VIP dedup: a
// LoadBalancer Service or one with ExternalIPs.
func hasVIPs(svc *corev1.Service) bool {
	return svc != nil && (svc.Spec.Type == corev1.ServiceTypeLoadBalancer || len(svc.Spec.ExternalIPs) > 0)
}

// localExternal reports whether svc keeps its clients' addresses from
// outside (servedLocalPorts).
func localExternal(svc *corev1.Service) bool {
	external := svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort || len(svc.Spec.ExternalIPs) > 0
	return external && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// setService records a Service's change.
func (x *Index) setService(ps *pass, k string, svc *corev1.Service) {
	old := x.svcs[k]
	if old == svc {
		return
	}
	if hasVIPs(old) || hasVIPs(svc) {
		ps.vip = true
	}
	if x.local[k] || (svc != nil && localExternal(svc)) {
		ps.reply = true
	}
	delete(x.local, k)
	delete(x.vipSvcs, k)
	if svc == nil {
		delete(x.svcs, k)
	} else {
		x.svcs[k] = svc
		if localExternal(svc) {
			x.local[k] = true
		}
		if hasVIPs(svc) {
			x.vipSvcs[k] = true
		}
	}
	ps.svcs[k] = true
}

// setSlice records an EndpointSlice's change: its Service (before and
// after) is computed again.
func (x *Index) setSlice(ps *pass, k string, sl *discoveryv1.EndpointSlice) {
	old := x.slices[k]
	if old == sl {
		return
	}
	for _, s := range []*discoveryv1.EndpointSlice{old, sl} {
		if s == nil {
			continue
		}
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			sk := s.Namespace + "/" + name
			if s == old {
				delete(x.slicesBy[sk], k)
				if len(x.slicesBy[sk]) == 0 {
					delete(x.slicesBy, sk)
				}
			} else {
				if x.slicesBy[sk] == nil {
					x.slicesBy[sk] = map[string]*discoveryv1.EndpointSlice{}
				}
				x.slicesBy[sk][k] = s
			}
			ps.svcs[sk] = true
			if x.local[sk] {
				ps.reply = true
			}
		}
	}
	if sl == nil {
		delete(x.slices, k)
	} else {
		x.slices[k] = sl
	}
}

// computeEgress assigns the egress IPs again (a pass over every EgressIP
// and node, no pod) and computes the rows of the EgressIPs whose pods,
// status or nodes changed, and the cluster-wide rows when the served pods
// or the nodes' addresses did.
func (x *Index) computeEgress(ps *pass, cs *ClusterState) error {
	if ps.assign || ps.nodes || (x.p.Hold != nil && len(x.p.Hold.Held()) > 0) {
		x.assign(ps, cs)
	}
	x.servedChanged(ps)
	for name := range ps.eips {
		x.yield()
		owner := ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: name}
		e := x.sel.Get(name)
		if e == nil || !e.Valid {
			if _, ok := x.egressNB[owner]; ok || e == nil {
				delete(x.egressNB, owner)
				ps.dirty[owner] = true
			}
			delete(x.hosts, name)
			continue
		}
		pods := slices.SortedFunc(maps.Values(e.Pods), func(a, b egress.Pod) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		st, host := egress.EgressIPState(x.p.Egress, egress.Served{Name: name, Status: x.status[name], Pods: pods}, x.byName)
		x.egressNB[owner] = st
		if len(host) > 0 {
			x.hosts[name] = host
		} else {
			delete(x.hosts, name)
		}
		ps.dirty[owner] = true
	}
	if ps.clusterRows {
		all := make([]egress.Pod, 0, len(x.statusRef))
		for k := range x.statusRef {
			all = append(all, x.sel.ServedAs(k))
		}
		cl, err := egress.ClusterState(x.p.Egress, x.eNodes, all)
		if err != nil {
			return fmt.Errorf("egress: %w", err)
		}
		for o := range x.cluster {
			if _, ok := cl[o]; !ok {
				delete(x.egressNB, o)
				ps.dirty[o] = true
			}
		}
		for o, st := range cl {
			x.egressNB[o] = st
			ps.dirty[o] = true
		}
		x.cluster = cl
	}
	return nil
}

// assign runs the EgressIPs' assignment again (a pass over every
// EgressIP and node, no pod) and marks those whose status changed, or
// whose status names a node whose parse changed.
func (x *Index) assign(ps *pass, cs *ClusterState) {
	names := x.sel.Names()
	eips := make([]*egressv1.EgressIP, 0, len(names))
	for _, name := range names {
		if e := x.sel.Get(name); e.EgressIP != nil {
			eips = append(eips, e.EgressIP)
		}
	}
	var res egress.Result
	res, cs.HoldWake = x.p.Hold.Assign(eips, x.eNodes, x.reachable, x.broken)
	x.assignEvt = res.Events
	status := res.Status
	for _, name := range names {
		e := x.sel.Get(name)
		if e.EgressIP == nil {
			continue
		}
		old, had := x.status[name]
		st := status[name]
		if !had || !slices.Equal(old, st) {
			ps.eips[name] = true
			if e.Valid && (len(old) > 0) != (len(st) > 0) {
				d := 1
				if len(st) == 0 {
					d = -1
				}
				for k := range e.Pods {
					x.refStatus(ps, k, d)
				}
			}
		}
		if len(ps.changedNodes) > 0 && !ps.eips[name] {
			for _, it := range slices.Concat(old, st) {
				if ps.changedNodes[it.Node] {
					ps.eips[name] = true
					break
				}
			}
		}
	}
	for name := range x.status {
		if _, ok := status[name]; !ok {
			ps.eips[name] = true
		}
	}
	x.status = status
}

// localPorts is servedLocalPorts over the index: the ports of the
// external Services with externalTrafficPolicy=Local on which a served
// pod is an endpoint.
func (x *Index) localPorts() []egress.ServedPort {
	eip := x.p.EnableEgressIP && len(x.anyRef) > 0
	if !eip && len(x.esServed) == 0 {
		return nil
	}
	var out []egress.ServedPort
	for k := range x.local {
		for _, sl := range x.slicesBy[k] {
			out = append(out, slicePorts(sl, func(ip netip.Addr) bool { return eip && x.anyRef[ip] > 0 || x.esServed[ip] })...)
		}
	}
	return out
}

// computeLB runs LB IPAM and the VIP dedup again when a Service with
// VIPs changed, and computes the load balancers of the Services that
// changed (every Service's when the nodes' addresses did).
func (x *Index) computeLB(ps *pass) error {
	if ps.vip {
		if err := x.vips(ps); err != nil {
			return err
		}
	}
	if ps.allLB {
		x.wide++
		for o := range x.lb {
			ps.dirty[o] = true
		}
		clear(x.lb)
		clear(x.lbEvents)
		for k := range x.svcs {
			ps.svcs[k] = true
		}
		owner, st := lbsvc.GroupState(x.lbNodes, x.p.LB)
		x.lb[owner] = st
		var tv ovsdbnb.State
		if !x.p.LB.PerNodeLBs {
			tv = lbsvc.NodeIPTemplatesState(x.lbNodes)
		}
		x.lb[lbsvc.NodeIPTemplatesOwner] = tv
		ps.dirty[owner], ps.dirty[lbsvc.NodeIPTemplatesOwner] = true, true
	}
	for k := range ps.svcs {
		x.yield()
		svc := x.view[k]
		if svc == nil {
			svc = x.svcs[k]
		}
		ns, name, _ := cache.SplitMetaNamespaceKey(k)
		owner := lbsvc.ServiceOwner(ns, name)
		ps.dirty[owner] = true
		if svc == nil {
			delete(x.lb, owner)
			delete(x.lbEvents, owner)
			continue
		}
		eps := slices.Collect(maps.Values(x.slicesBy[k]))
		slices.SortFunc(eps, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
		st, evs := lbsvc.ServiceState(svc, eps, x.lbNodes, x.p.LB)
		x.lb[owner] = st
		if len(evs) > 0 {
			x.lbEvents[owner] = evs
		} else {
			delete(x.lbEvents, owner)
		}
	}
	return nil
}

// vips runs LB IPAM and the VIP dedup over the Services with VIPs, as
// ComputeCluster does over every Service (the others neither take nor
// lose an address there), and marks the Services whose view changed.
func (x *Index) vips(ps *pass) error {
	svcs := make([]*corev1.Service, 0, len(x.vipSvcs))
	for k := range x.vipSvcs {
		svcs = append(svcs, x.svcs[k])
	}
	notOurs := func(svc *corev1.Service) bool {
		return !lbsvc.ClassAssigned(svc, x.p.LBClass, x.p.Underlay == UnderlayMetalLB)
	}
	ingress := map[string][]corev1.LoadBalancerIngress{}
	out, events, err := lbsvc.Allocate(svcs, x.p.Pools, ingress, notOurs, nil)
	if err != nil {
		return err
	}
	out, dedup := lbsvc.DedupVIPs(out)
	x.vipEvts = append(events, dedup...)
	x.ingress = ingress
	view := map[string]*corev1.Service{}
	for _, svc := range out {
		k := svc.Namespace + "/" + svc.Name
		if svc != x.svcs[k] {
			view[k] = svc
		}
	}
	for k, v := range view {
		if old, ok := x.view[k]; !ok || !equality.Semantic.DeepEqual(old, v) {
			ps.svcs[k] = true
		} else {
			view[k] = old // the same content: keep the computed one
		}
	}
	for k := range x.view {
		if _, ok := view[k]; !ok {
			ps.svcs[k] = true
		}
	}
	x.view = view
	return nil
}
