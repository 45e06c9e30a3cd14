package desired

import (
	"maps"
	"net/netip"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/egresssvc"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// EgressServices is what the leader writes back of the EgressServices.
type EgressServices struct {
	// Hosts is the status.host of every EgressService, by
	// "<namespace>/<name>" (one that does not parse is left out).
	Hosts map[string]string
	// Labels are the egresssvc.Label keys each node carries (value "");
	// a node missing carries none.
	Labels map[string][]string
}

// esvcPart is the EgressServices' desired state: the egresssvc result,
// the events and owners of objects that do not parse, and the hosts those
// keep.
type esvcPart struct {
	d      egresssvc.Desired
	events []event.Event
	keep   []ovsdbnb.Owner
}

// computeEgressServices is the EgressServices' part over objs: valid ones
// get hosts and rows from egresssvc.Compute; one that does not parse is
// an event, keeps its rows, its host and its node's label.
func computeEgressServices(p Params, objs []*unstructured.Unstructured, in egresssvc.Input) esvcPart {
	var part esvcPart
	kept := map[string]string{}
	for _, u := range objs {
		es, err := egressv1.ServiceFromUnstructured(u)
		if err != nil {
			part.events = append(part.events, event.Warningf(event.Ref(u.GetAPIVersion(), u.GetKind(), u),
				ReasonInvalidObject, "EgressService skipped, its rows stay as they are: %v", err))
			key := Key(u.GetNamespace(), u.GetName())
			part.keep = append(part.keep, egresssvc.Owner(key))
			kept[key], _, _ = unstructured.NestedString(u.Object, "status", "host")
			continue
		}
		in.EgressServices = append(in.EgressServices, es)
	}
	part.d = egresssvc.Compute(in, egresssvc.Options{ClusterSubnets: p.Egress.ClusterSubnets, SharedGateway: true})
	for key, h := range kept {
		if h != "" && h != egressv1.HostAll {
			part.d.Labels[h] = append(part.d.Labels[h], egresssvc.Label(key))
			slices.Sort(part.d.Labels[h])
		}
	}
	return part
}

// status is the part's EgressServices.
func (part *esvcPart) status() EgressServices {
	return EgressServices{Hosts: part.d.Hosts, Labels: part.d.Labels}
}

// clusterEgressServices adds the EgressServices' part to cs, over the
// Services as LB IPAM left them (svcs), and returns the pods served.
func clusterEgressServices(cs *ClusterState, p Params, s Snapshot, svcs []*corev1.Service, reachable func(string) bool) ([]netip.Addr, error) {
	if !p.EnableEgressIP {
		cl, err := egress.ClusterState(p.Egress, cs.Nodes, nil)
		if err != nil {
			return nil, err
		}
		cs.Egress = cl
	}
	byKey, slicesBy := servicesOf(svcs, s.EndpointSlices, nil)
	parsed := map[string]*ovnknode.Node{}
	for i := range cs.Nodes {
		parsed[cs.Nodes[i].Name] = &cs.Nodes[i]
	}
	part := computeEgressServices(p, s.EgressServices, egresssvc.Input{
		Service: func(k string) *corev1.Service { return byKey[k] },
		Slices:  func(k string) []*discoveryv1.EndpointSlice { return slicesBy[k] },
		Nodes:   s.Nodes, Parsed: parsed, Reachable: reachable})
	maps.Copy(cs.Egress, part.d.NB)
	egress.WithEgressServicePods(cs.Egress, part.d.Served)
	cs.EgressServices = part.status()
	cs.Events = append(cs.Events, part.events...)
	cs.Events = append(cs.Events, part.d.Events...)
	cs.Keep = append(cs.Keep, part.keep...)
	return part.d.Served, nil
}

// esvcIndex is the Index's EgressServices' part, computed again over
// every EgressService when one of them, a node, the reachability, or the
// Service or slices of one changed (they are few).
type esvcIndex struct {
	ess      map[string]*unstructured.Unstructured
	part     esvcPart
	esServed map[netip.Addr]bool // part.d.Served
}

// setEgressService records an EgressService's change.
func (x *Index) setEgressService(ps *pass, k string, u *unstructured.Unstructured) {
	if x.ess[k] == u {
		return
	}
	if u == nil {
		delete(x.ess, k)
	} else {
		x.ess[k] = u
	}
	ps.esvc = true
}

// indexEgressServices brings the EgressServices' part up to date: the
// owners of their rows that changed are dirty, and the cluster-wide rows
// when the pods served changed or those rows were computed again.
func (x *Index) indexEgressServices(ps *pass) error {
	if !x.p.EnableEgressIP && (ps.first || ps.clusterRows) {
		cl, err := egress.ClusterState(x.p.Egress, x.eNodes, nil)
		if err != nil {
			return err
		}
		for o, st := range cl {
			x.egressNB[o] = st
			ps.dirty[o] = true
		}
	}
	changed := ps.first || ps.esvc
	if len(x.ess) > 0 { // without any, a node's or a Service's change reaches none
		changed = changed || ps.nodes || ps.assign
		for k := range ps.svcs {
			changed = changed || x.ess[k] != nil
		}
	}
	served := x.part.d.Served
	if changed {
		x.recomputeEgressServices(ps)
	}
	if ps.first || ps.clusterRows || !slices.Equal(served, x.part.d.Served) {
		egress.WithEgressServicePods(x.egressNB, x.part.d.Served)
		ps.dirty[egress.ClusterOwner] = true
		ps.reply = true
	}
	return nil
}

// recomputeEgressServices computes the part again, marking the owners
// whose rows changed.
func (x *Index) recomputeEgressServices(ps *pass) {
	objs := slices.Collect(maps.Values(x.ess))
	part := computeEgressServices(x.p, objs, egresssvc.Input{
		Service: func(k string) *corev1.Service {
			if v := x.view[k]; v != nil {
				return v
			}
			return x.svcs[k]
		},
		Slices: func(k string) []*discoveryv1.EndpointSlice { return slices.Collect(maps.Values(x.slicesBy[k])) },
		Nodes:  x.nodeObjects(), Parsed: x.byName, Reachable: x.reachable})
	for o := range x.part.d.NB {
		if _, ok := part.d.NB[o]; !ok {
			delete(x.egressNB, o)
			ps.dirty[o] = true
		}
	}
	for o, st := range part.d.NB {
		if old, ok := x.part.d.NB[o]; !ok || !reflect.DeepEqual(old, st) {
			x.egressNB[o] = st
			ps.dirty[o] = true
		}
	}
	x.part = part
	clear(x.esServed)
	for _, ip := range part.d.Served {
		x.esServed[ip] = true
	}
}

// nodeObjects are the index's Node objects, by name.
func (x *Index) nodeObjects() []*corev1.Node {
	out := make([]*corev1.Node, 0, len(x.nodes))
	for _, name := range slices.Sorted(maps.Keys(x.nodes)) {
		out = append(out, x.nodes[name].obj)
	}
	return out
}

// nodeEgressServices adds node's part of the EgressServices to ns: what
// it programs as a host (egresssvc.HostState), and the ingress IPs of
// the Services with a host node, which only that node announces (L2 and
// BGP) while it is healthy: their replies must come back to it.
func nodeEgressServices(ns *NodeState, s Snapshot, p Params, node string, healthy bool) {
	var ess []*egressv1.EgressService
	keys := map[string]bool{}
	for _, u := range s.EgressServices {
		if es, err := egressv1.ServiceFromUnstructured(u); err == nil {
			ess = append(ess, es) // one that does not parse is the leader's to report
			keys[egresssvc.Key(es)] = true
		}
	}
	ns.EgressService = &egresssvc.Host{}
	if len(ess) == 0 {
		return
	}
	svcs, slicesBy := servicesOf(s.Services, s.EndpointSlices, keys)
	h := egresssvc.HostState(node, ess, func(k string) *corev1.Service { return svcs[k] },
		func(k string) []*discoveryv1.EndpointSlice { return slicesBy[k] }, p.Egress.ClusterSubnets)
	ns.EgressService = &h
	hostOf := map[netip.Addr]string{}
	for _, es := range ess {
		svc := svcs[egresssvc.Key(es)]
		if h := es.Status.Host; svc == nil || h == "" || h == egressv1.HostAll {
			continue
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil {
				hostOf[a.Unmap()] = es.Status.Host
			}
		}
	}
	announceHosted(ns, p, hostOf, func(a netip.Addr) bool { return hostOf[a] == node && healthy })
}

// servicesOf are the Services and their slices by key, of the keys only
// (nil: all).
func servicesOf(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, keys map[string]bool) (map[string]*corev1.Service, map[string][]*discoveryv1.EndpointSlice) {
	byKey, slicesBy := map[string]*corev1.Service{}, map[string][]*discoveryv1.EndpointSlice{}
	for _, svc := range svcs {
		if k := Key(svc.Namespace, svc.Name); keys == nil || keys[k] {
			byKey[k] = svc
		}
	}
	for _, sl := range eps {
		if name := sl.Labels[discoveryv1.LabelServiceName]; name != "" {
			if k := Key(sl.Namespace, name); keys == nil || keys[k] {
				slicesBy[k] = append(slicesBy[k], sl)
			}
		}
	}
	return byKey, slicesBy
}

// announceHosted makes ns announce (L2, BGP) the hosted addresses (hostOf)
// that are mine only.
func announceHosted(ns *NodeState, p Params, hostOf map[netip.Addr]string, mine func(netip.Addr) bool) {
	if p.L2Announce {
		ns.Announce = withHosted(ns.Announce, hostOf, mine)
	}
	if p.BGP {
		var addrs []netip.Addr
		for _, r := range ns.Routes {
			addrs = append(addrs, r.Addr())
		}
		ns.Routes = nil
		for _, a := range withHosted(addrs, hostOf, mine) {
			ns.Routes = append(ns.Routes, netip.PrefixFrom(a, a.BitLen()))
		}
	}
}

// withHosted is addrs without the hosted addresses of other nodes and
// with those of this one, sorted.
func withHosted(addrs []netip.Addr, hostOf map[netip.Addr]string, mine func(netip.Addr) bool) []netip.Addr {
	out := slices.DeleteFunc(slices.Clone(addrs), func(a netip.Addr) bool { return hostOf[a] != "" && !mine(a) })
	for a := range hostOf {
		if mine(a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
