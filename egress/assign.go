package egress

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// Event reasons, as OVN-Kubernetes records them on the EgressIP.
const (
	ReasonInvalidEgressIP     = "InvalidEgressIP"
	ReasonEgressIPConflict    = "EgressIPConflict"
	ReasonUnsupportedRequest  = "UnsupportedRequest"
	ReasonNoMatchingNodeFound = "NoMatchingNodeFound"
	// ReasonInvalidSelector is ours: a selector the API server would
	// normally refuse (e.g. an unknown operator).
	ReasonInvalidSelector = "InvalidSelector"
)

// Result is the outcome of one assignment pass.
type Result struct {
	// Status holds the new status items of every EgressIP, by name, in the
	// order of its spec; an EgressIP with nothing assigned has an empty
	// (non-nil) list.
	Status map[string][]egressv1.EgressIPStatusItem
	// Events are in EgressIP name order, then spec order.
	Events []event.Event
}

// Assign decides which node hosts each egress IP (as OVN-Kubernetes' cluster manager does:
// go-controller/pkg/clustermanager/egressip_controller.go). It is
// a pure, deterministic function of its inputs, run by the leader on
// every change and reachability report:
//
//   - candidates are nodes labelled egress-assignable, Ready and reachable
//     (reachable nil means every node is);
//   - an invalid IP is refused (InvalidEgressIP), as is an IP equal to a
//     node's host address (EgressIPConflict) or requested by an older
//     EgressIP (UnsupportedRequest; the holder in status, else the oldest,
//     else the first by name, keeps it);
//   - a valid existing assignment is kept; items on a node that lost its
//     label, went NotReady, disappeared or became unreachable are dropped
//     and their IPs reassigned in the same pass;
//   - the other IPs go to the least-loaded candidate (ties by name) that
//     holds no other IP of the same EgressIP, has a network containing the
//     IP (primary, else the longest matching host-cidrs network) and has
//     capacity left, and that does not report that it cannot host the
//     IP on its host interface (Node.Refuses: an item there moves like
//     one on an unreachable node); none is NoMatchingNodeFound.
//
// Nodes in broken (those ParseNodes could not parse) are left alone: their
// items are kept as they are and they get no new ones, so one bad
// annotation never empties other EgressIPs' status. nodes may hold their
// last good parse (KeepLastGood), so that their addresses still count as
// conflicts and Compute keeps their rows.
func Assign(eips []*egressv1.EgressIP, nodes []ovnknode.Node, reachable func(node string) bool, broken map[string]error) Result {
	eips = slices.Clone(eips)
	slices.SortFunc(eips, func(a, b *egressv1.EgressIP) int { return cmp.Compare(a.Name, b.Name) })
	a := newAssigner(nodes, reachable, broken)
	a.request(eips)
	a.resolve()
	a.keepStatus()
	return a.place()
}

// assigner is one Assign: run on every change at 2,000 nodes and 1,000
// EgressIPs, its maps are sized once and an EgressIP's few IPs are
// slices, not maps.
type assigner struct {
	res       Result
	nodes     []ovnknode.Node
	reachable func(node string) bool
	broken    map[string]error
	index     map[string]int        // nodes by name
	hostIPs   map[netip.Addr]string // the nodes' own addresses
	reqs      []request
	requested int // IPs requested, before the conflicts took some out
	loads     []load
	// assigned[i][k] is the node of reqs[i].ips[k] ("": none yet), all in
	// one array.
	assigned [][]string
}

// request is one EgressIP's request: its valid IPs, deduplicated, in spec
// order.
type request struct {
	eip *egressv1.EgressIP
	ips []netip.Addr
}

// load is a node's use per family, counting what is kept.
type load struct{ v4, v6 int }

func newAssigner(nodes []ovnknode.Node, reachable func(node string) bool, broken map[string]error) *assigner {
	a := &assigner{nodes: nodes, reachable: reachable, broken: broken, index: make(map[string]int, len(nodes)),
		hostIPs: make(map[netip.Addr]string, 2*len(nodes)), loads: make([]load, len(nodes))}
	for i := range nodes {
		n := &nodes[i]
		a.index[n.Name] = i
		for h := range n.HostAddrs() {
			a.hostIPs[h] = n.Name
		}
	}
	return a
}

func (a *assigner) byName(name string) *ovnknode.Node {
	if i, ok := a.index[name]; ok {
		return &a.nodes[i]
	}
	return nil
}

// candidate reports whether a node may be given egress IPs.
func (a *assigner) candidate(name string) bool {
	n := a.byName(name)
	_, isBroken := a.broken[name]
	return n != nil && !isBroken && n.Assignable && n.Ready && (a.reachable == nil || a.reachable(name))
}

func (a *assigner) warn(eip *egressv1.EgressIP, reason, format string, args ...any) {
	a.res.Events = append(a.res.Events, warning(eip, reason, format, args...))
}

// request parses every EgressIP's IPs: invalid ones and the nodes' own
// addresses are events.
func (a *assigner) request(eips []*egressv1.EgressIP) {
	a.reqs = make([]request, len(eips))
	specIPs := 0
	for _, eip := range eips {
		specIPs += len(eip.Spec.EgressIPs)
	}
	ips := make([]netip.Addr, 0, specIPs) // every request's, in one array
	for i, eip := range eips {
		a.reqs[i].eip = eip
		start := len(ips)
		for _, s := range eip.Spec.EgressIPs {
			ip, err := parseEgressIP(s)
			switch {
			case err != nil:
				a.warn(eip, ReasonInvalidEgressIP, "egress IP %q: %v", s, err)
			case a.hostIPs[ip] != "":
				a.warn(eip, ReasonEgressIPConflict, "egress IP %s is an address of node %s", ip, a.hostIPs[ip])
			case !slices.Contains(ips[start:], ip):
				ips = append(ips, ip)
			}
		}
		a.reqs[i].ips = ips[start:len(ips):len(ips)]
	}
	a.requested = len(ips)
}

// holds reports whether eip's status has ip.
func holds(eip *egressv1.EgressIP, ip netip.Addr) bool {
	return slices.ContainsFunc(eip.Status.Items, func(it egressv1.EgressIPStatusItem) bool {
		b, err := netip.ParseAddr(it.EgressIP)
		return err == nil && b.Unmap() == ip
	})
}

// resolve gives an IP requested by several EgressIPs to the one whose
// status has it, else the oldest, else the first by name; the others lose
// it, with an event.
func (a *assigner) resolve() {
	owner := make(map[netip.Addr]*egressv1.EgressIP, a.requested)
	for _, r := range a.reqs {
		for _, ip := range r.ips {
			cur, ok := owner[ip]
			if !ok || (!holds(cur, ip) && (holds(r.eip, ip) || r.eip.CreationTimestamp.Before(&cur.CreationTimestamp))) {
				owner[ip] = r.eip
			}
		}
	}
	for i := range a.reqs {
		r := &a.reqs[i]
		r.ips = slices.DeleteFunc(r.ips, func(ip netip.Addr) bool {
			if o := owner[ip]; o != r.eip {
				a.warn(r.eip, ReasonUnsupportedRequest, "egress IP %s is already requested by EgressIP %s", ip, o.Name)
				return true
			}
			return false
		})
	}
}

// use counts ip on node.
func (a *assigner) use(node string, ip netip.Addr) {
	i, ok := a.index[node]
	if !ok {
		return // a broken node without a last good parse
	}
	if ip.Is6() {
		a.loads[i].v6++
	} else {
		a.loads[i].v4++
	}
}

// hasRoom reports whether node i can take one more IP of ip's family.
func (a *assigner) hasRoom(i int, ip netip.Addr) bool {
	l, c := a.loads[i], a.nodes[i].Capacity
	fam, famCap := l.v4, c.IPv4
	if ip.Is6() {
		fam, famCap = l.v6, c.IPv6
	}
	return famCap.Allows(fam) && c.Total.Allows(l.v4+l.v6)
}

// keepStatus keeps every IP on the node its status names while that node
// can still hold it (a broken node keeps them all).
func (a *assigner) keepStatus() {
	a.assigned = make([][]string, len(a.reqs))
	nodeOf := make([]string, a.requested)
	for i, r := range a.reqs {
		a.assigned[i], nodeOf = nodeOf[:len(r.ips):len(r.ips)], nodeOf[len(r.ips):]
		for _, it := range r.eip.Status.Items {
			ip, err := netip.ParseAddr(it.EgressIP)
			if err != nil {
				continue
			}
			ip = ip.Unmap()
			k := slices.Index(r.ips, ip)
			if k < 0 || a.assigned[i][k] != "" || slices.Contains(a.assigned[i], it.Node) || !a.mayKeep(it.Node, ip) {
				continue
			}
			a.assigned[i][k] = it.Node
			a.use(it.Node, ip)
		}
	}
}

// mayKeep reports whether node may keep ip its status names: a broken
// node may; another must be a candidate with a network for it, room and
// no refusal.
func (a *assigner) mayKeep(node string, ip netip.Addr) bool {
	if _, isBroken := a.broken[node]; isBroken {
		return true
	}
	if !a.candidate(node) {
		return false
	}
	n := a.byName(node)
	_, _, ok := n.Network(ip)
	return ok && a.hasRoom(a.index[node], ip) && !n.Refuses(ip)
}

// place gives every IP not kept to the least loaded eligible candidate
// and returns the result.
func (a *assigner) place() Result {
	a.res.Status = make(map[string][]egressv1.EgressIPStatusItem, len(a.reqs))
	var candidates []int // indexes into nodes
	for i := range a.nodes {
		if a.candidate(a.nodes[i].Name) {
			candidates = append(candidates, i)
		}
	}
	for i, r := range a.reqs {
		var used []int // indexes of the nodes holding an IP of r
		for _, node := range a.assigned[i] {
			if j, ok := a.index[node]; ok {
				used = append(used, j)
			}
		}
		for k, ip := range r.ips {
			if a.assigned[i][k] != "" {
				continue
			}
			chosen := a.choose(candidates, used, ip)
			if chosen < 0 {
				a.warn(r.eip, ReasonNoMatchingNodeFound, "no egress-assignable, ready and reachable node without another IP of this EgressIP has a network containing %s and room for it", ip)
				continue
			}
			a.assigned[i][k] = a.nodes[chosen].Name
			used = append(used, chosen)
			a.use(a.nodes[chosen].Name, ip)
		}
		items := []egressv1.EgressIPStatusItem{}
		for k, ip := range r.ips {
			if node := a.assigned[i][k]; node != "" {
				items = append(items, egressv1.EgressIPStatusItem{Node: node, EgressIP: ip.String()})
			}
		}
		a.res.Status[r.eip.Name] = items
	}
	return a.res
}

// choose is the least loaded candidate (ties by name) not in used that
// has room, no refusal and a network for ip: one scan, no sort per IP;
// -1 when there is none.
func (a *assigner) choose(candidates, used []int, ip netip.Addr) int {
	total := func(i int) int { return a.loads[i].v4 + a.loads[i].v6 }
	chosen := -1
	for _, c := range candidates {
		if chosen >= 0 {
			if t, tc := total(c), total(chosen); t > tc || (t == tc && a.nodes[c].Name > a.nodes[chosen].Name) {
				continue
			}
		}
		if !a.hasRoom(c, ip) || slices.Contains(used, c) || a.nodes[c].Refuses(ip) {
			continue
		}
		if _, _, ok := a.nodes[c].Network(ip); ok {
			chosen = c
		}
	}
	return chosen
}

// warning is a Warning event on eip.
func warning(eip *egressv1.EgressIP, reason, format string, args ...any) event.Event {
	return event.Warningf(event.Ref(egressv1.SchemeGroupVersion.String(), egressv1.Kind, eip), reason, format, args...)
}

// parseEgressIP accepts a unicast IPv4 or IPv6 address.
func parseEgressIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("not an IP address")
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("has a zone")
	}
	a = a.Unmap()
	if !a.IsGlobalUnicast() {
		return netip.Addr{}, fmt.Errorf("not a global unicast address")
	}
	return a, nil
}
