package egress

import (
	"maps"
	"slices"

	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// MakeBeforeBreak returns the states to apply, in order, to go from old to
// new without losing a packet when egress IPs move:
//
//  1. old policies and QoS rules with the NATs and address sets of both:
//     the new egress node's SNAT exists before traffic is sent there;
//  2. new policies and QoS rules with the NATs of both: the reroute moves;
//  3. new: the old SNATs go.
//
// Each step holds every owner of old and new; an owner only in old is an
// empty State in the last step, so applying it deletes its rows. When
// nothing moves, the steps are equal to new and applying them is a no-op.
func MakeBeforeBreak(old, new map[ovsdbnb.Owner]ovsdbnb.State) []map[ovsdbnb.Owner]ovsdbnb.State {
	owners := slices.Collect(maps.Keys(old))
	for o := range new {
		if _, ok := old[o]; !ok {
			owners = append(owners, o)
		}
	}
	steps := make([]map[ovsdbnb.Owner]ovsdbnb.State, 3)
	for i := range steps {
		steps[i] = make(map[ovsdbnb.Owner]ovsdbnb.State, len(owners))
	}
	for _, o := range owners {
		was, is := old[o], new[o]
		nats := unionNATs(was.NATs, is.NATs)
		sets := unionSets(was.AddressSets, is.AddressSets)
		steps[0][o] = ovsdbnb.State{LoadBalancers: was.LoadBalancers, Groups: was.Groups, Policies: was.Policies, NATs: nats,
			AddressSets: sets, QoSRules: was.QoSRules}
		steps[1][o] = ovsdbnb.State{LoadBalancers: is.LoadBalancers, Groups: is.Groups, Policies: is.Policies, NATs: nats,
			AddressSets: sets, QoSRules: is.QoSRules}
		steps[2][o] = is
	}
	return steps
}

func natKey(n ovsdbnb.NAT) [5]string {
	return [5]string{n.Router, n.Type, n.ExternalIP, n.LogicalIP, n.LogicalPort}
}

// unionNATs is a then the NATs of b that a lacks.
func unionNATs(a, b []ovsdbnb.NAT) []ovsdbnb.NAT {
	seen := make(map[[5]string]bool, len(a))
	out := slices.Clone(a)
	for _, n := range a {
		seen[natKey(n)] = true
	}
	for _, n := range b {
		if !seen[natKey(n)] {
			out = append(out, n)
		}
	}
	return out
}

// unionSets merges address sets by k8s.ovn.org/id: each set of b holds its
// addresses and those a's set of the same id had.
func unionSets(a, b []ovsdbnb.AddressSet) []ovsdbnb.AddressSet {
	byID := map[string][]string{}
	for _, s := range a {
		byID[s.ExternalIDs[ovsdbnb.KeyID]] = s.Addresses
	}
	out := make([]ovsdbnb.AddressSet, 0, len(a)+len(b))
	done := map[string]bool{}
	for _, s := range b {
		id := s.ExternalIDs[ovsdbnb.KeyID]
		done[id] = true
		addrs := slices.Concat(s.Addresses, byID[id])
		slices.Sort(addrs)
		s.Addresses = slices.Compact(addrs)
		out = append(out, s)
	}
	for _, s := range a {
		if !done[s.ExternalIDs[ovsdbnb.KeyID]] {
			out = append(out, s)
		}
	}
	return out
}

// SilenceFirst returns the steps to go from old to new when the nodes
// whose gateway routers silenced says yes to are down (unreachable, dead):
// first old without the SNATs on those routers (their egress IPs: the
// gateway router answers ARP for a NAT's external IP, and OVN sends its
// gratuitous ARPs, so a node that is only cut off from the leader stops
// answering), then MakeBeforeBreak from there to new. The new owner's
// SNAT, and with it its gratuitous ARP, comes only in a later step. With
// no silenced router the first step equals old and applying it is a
// no-op.
func SilenceFirst(old, new map[ovsdbnb.Owner]ovsdbnb.State, silenced func(router string) bool) []map[ovsdbnb.Owner]ovsdbnb.State {
	quiet := make(map[ovsdbnb.Owner]ovsdbnb.State, len(old))
	for o, st := range old {
		st.NATs = slices.DeleteFunc(slices.Clone(st.NATs), func(n ovsdbnb.NAT) bool {
			return silenced != nil && silenced(n.Router) && !slices.ContainsFunc(new[o].NATs, func(m ovsdbnb.NAT) bool { return natKey(m) == natKey(n) })
		})
		quiet[o] = st
	}
	return append([]map[ovsdbnb.Owner]ovsdbnb.State{quiet}, MakeBeforeBreak(quiet, new)...)
}
