package egress

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
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

// Assign decides which node hosts each egress IP (reference §2.5). It is
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
func Assign(eips []*egressv1.EgressIP, nodes []Node, reachable func(node string) bool, broken map[string]error) Result {
	res := Result{Status: make(map[string][]egressv1.EgressIPStatusItem, len(eips))}
	eips = slices.Clone(eips)
	slices.SortFunc(eips, func(a, b *egressv1.EgressIP) int { return cmp.Compare(a.Name, b.Name) })

	// Run on every change at 2,000 nodes and 1,000 EgressIPs: the maps
	// are sized once and an EgressIP's few IPs are slices, not maps.
	index := make(map[string]int, len(nodes))
	hostIPs := make(map[netip.Addr]string, 2*len(nodes))
	for i := range nodes {
		n := &nodes[i]
		index[n.Name] = i
		for a := range n.hostAddrs() {
			hostIPs[a] = n.Name
		}
	}
	byName := func(name string) *Node {
		if i, ok := index[name]; ok {
			return &nodes[i]
		}
		return nil
	}
	candidate := func(name string) bool {
		n := byName(name)
		_, isBroken := broken[name]
		return n != nil && !isBroken && n.Assignable && n.Ready && (reachable == nil || reachable(name))
	}

	type request struct {
		eip *egressv1.EgressIP
		ips []netip.Addr // valid, deduplicated, in spec order
	}
	reqs := make([]request, len(eips))
	warn := func(eip *egressv1.EgressIP, reason, format string, args ...any) {
		res.Events = append(res.Events, warning(eip, reason, format, args...))
	}
	specIPs := 0
	for _, eip := range eips {
		specIPs += len(eip.Spec.EgressIPs)
	}
	ips := make([]netip.Addr, 0, specIPs) // every request's, in one array
	for i, eip := range eips {
		reqs[i].eip = eip
		start := len(ips)
		for _, s := range eip.Spec.EgressIPs {
			a, err := parseEgressIP(s)
			switch {
			case err != nil:
				warn(eip, ReasonInvalidEgressIP, "egress IP %q: %v", s, err)
			case hostIPs[a] != "":
				warn(eip, ReasonEgressIPConflict, "egress IP %s is an address of node %s", a, hostIPs[a])
			case !slices.Contains(ips[start:], a):
				ips = append(ips, a)
			}
		}
		reqs[i].ips = ips[start:len(ips):len(ips)]
	}

	// Who owns an IP requested by several EgressIPs: the one whose status
	// has it, else the oldest, else the first by name.
	requested := len(ips) // before the conflicts below take some out
	owner := make(map[netip.Addr]*egressv1.EgressIP, requested)
	holds := func(eip *egressv1.EgressIP, a netip.Addr) bool {
		return slices.ContainsFunc(eip.Status.Items, func(it egressv1.EgressIPStatusItem) bool {
			b, err := netip.ParseAddr(it.EgressIP)
			return err == nil && b.Unmap() == a
		})
	}
	for _, r := range reqs {
		for _, a := range r.ips {
			cur, ok := owner[a]
			if !ok || (!holds(cur, a) && (holds(r.eip, a) || r.eip.CreationTimestamp.Before(&cur.CreationTimestamp))) {
				owner[a] = r.eip
			}
		}
	}
	for i := range reqs {
		r := &reqs[i]
		r.ips = slices.DeleteFunc(r.ips, func(a netip.Addr) bool {
			if o := owner[a]; o != r.eip {
				warn(r.eip, ReasonUnsupportedRequest, "egress IP %s is already requested by EgressIP %s", a, o.Name)
				return true
			}
			return false
		})
	}

	// Load and per-family use of every node (by index), counting what is
	// kept.
	type load struct{ v4, v6 int }
	loads := make([]load, len(nodes))
	use := func(node string, a netip.Addr) {
		i, ok := index[node]
		if !ok {
			return // a broken node without a last good parse
		}
		if a.Is6() {
			loads[i].v6++
		} else {
			loads[i].v4++
		}
	}
	hasRoom := func(i int, a netip.Addr) bool {
		l, c := loads[i], nodes[i].Capacity
		fam, famCap := l.v4, c.IPv4
		if a.Is6() {
			fam, famCap = l.v6, c.IPv6
		}
		return famCap.Allows(fam) && c.Total.Allows(l.v4+l.v6)
	}

	// assigned[i][k] is the node of reqs[i].ips[k] ("": none yet), all
	// in one array.
	assigned := make([][]string, len(reqs))
	nodeOf := make([]string, requested)
	for i, r := range reqs {
		assigned[i], nodeOf = nodeOf[:len(r.ips):len(r.ips)], nodeOf[len(r.ips):]
		for _, it := range r.eip.Status.Items {
			a, err := netip.ParseAddr(it.EgressIP)
			if err != nil {
				continue
			}
			a = a.Unmap()
			k := slices.Index(r.ips, a)
			if k < 0 || assigned[i][k] != "" || slices.Contains(assigned[i], it.Node) {
				continue
			}
			if _, isBroken := broken[it.Node]; !isBroken {
				if !candidate(it.Node) {
					continue
				}
				n := byName(it.Node)
				if _, _, ok := n.Network(a); !ok || !hasRoom(index[it.Node], a) || n.Refuses(a) {
					continue
				}
			}
			assigned[i][k] = it.Node
			use(it.Node, a)
		}
	}

	var candidates []int // indexes into nodes
	for i := range nodes {
		if candidate(nodes[i].Name) {
			candidates = append(candidates, i)
		}
	}
	total := func(i int) int { return loads[i].v4 + loads[i].v6 }
	for i, r := range reqs {
		var used []int // indexes of the nodes holding an IP of r
		for _, node := range assigned[i] {
			if j, ok := index[node]; ok {
				used = append(used, j)
			}
		}
		for k, a := range r.ips {
			if assigned[i][k] != "" {
				continue
			}
			// The least loaded eligible candidate, ties by name: one scan,
			// no sort per IP.
			chosen := -1
			for _, c := range candidates {
				if chosen >= 0 {
					if t, tc := total(c), total(chosen); t > tc || (t == tc && nodes[c].Name > nodes[chosen].Name) {
						continue
					}
				}
				if !hasRoom(c, a) || slices.Contains(used, c) || nodes[c].Refuses(a) {
					continue
				}
				if _, _, ok := nodes[c].Network(a); ok {
					chosen = c
				}
			}
			if chosen < 0 {
				warn(r.eip, ReasonNoMatchingNodeFound, "no egress-assignable, ready and reachable node without another IP of this EgressIP has a network containing %s and room for it", a)
				continue
			}
			assigned[i][k] = nodes[chosen].Name
			used = append(used, chosen)
			use(nodes[chosen].Name, a)
		}
		items := []egressv1.EgressIPStatusItem{}
		for k, a := range r.ips {
			if node := assigned[i][k]; node != "" {
				items = append(items, egressv1.EgressIPStatusItem{Node: node, EgressIP: a.String()})
			}
		}
		res.Status[r.eip.Name] = items
	}
	return res
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
