package ovsdbnb

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// Current reads back, from the client cache, the State each owner's rows
// in the NB amount to (owners of the given types only, when types are
// given): its load balancers with the switches, routers and groups
// holding them, its router policies and NATs with their routers, its
// address sets, its QoS rows with their switches, and its template
// variables. Only the map keys the owner wrote (KeyManaged) are read, so
// syncing an owner with its Current State sends nothing. Groups are
// shared rows without an owner and are not read back.
//
// A controller that starts (or takes over from another instance) uses it
// as its record of what is programmed: a make-before-break step from the
// rows already there keeps them, where one from nothing would delete
// them first. Elements are sorted by identity (names, router, priority,
// match, addresses).
func (c *Client) Current(types ...string) (map[Owner]State, error) {
	want := map[string]bool{}
	for _, t := range types {
		want[t] = true
	}
	s := &syncer{c: c}
	sn, err := s.snapshot(context.Background())
	if err != nil {
		return nil, err
	}
	out := map[Owner]State{}
	// put adds a row stamped with ids to its owner's State (f is given
	// the keys the owner wrote, KeyManaged), if the owner is wanted.
	put := func(ids map[string]string, f func(st *State, managed map[string]map[string]bool)) {
		o, ok := ownerOf(ids)
		if !ok || (len(want) > 0 && !want[o.Type]) {
			return
		}
		st := out[o]
		f(&st, decodeManaged(ids[KeyManaged]))
		out[o] = st
	}
	rows := func(table string) ([]any, error) {
		tc := c.nb.Cache().Table(table)
		if tc == nil {
			return nil, fmt.Errorf("ovsdbnb: current: table %s is not monitored", table)
		}
		var out []any
		for _, m := range tc.RowsShallow() { // read only
			out = append(out, m)
		}
		return out, nil
	}
	for _, table := range []string{nbdb.LoadBalancerTable, nbdb.LogicalRouterPolicyTable, nbdb.NATTable,
		nbdb.AddressSetTable, nbdb.QoSTable, nbdb.ChassisTemplateVarTable} {
		ms, err := rows(table)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			switch r := m.(type) {
			case *nbdb.LoadBalancer:
				put(r.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
					lb := LoadBalancer{Name: r.Name, Protocol: ptrString(r.Protocol), VIPs: managedKeys(r.Vips, managed["vips"]),
						Options: managedKeys(r.Options, managed["options"]), SelectionFields: sortedCopy(r.SelectionFields),
						ExternalIDs: ownerKeys(r.ExternalIDs, managed)}
					for _, h := range sn.holders(r.UUID) {
						switch h.table {
						case nbdb.LogicalSwitchTable:
							lb.Switches = append(lb.Switches, h.name)
						case nbdb.LogicalRouterTable:
							lb.Routers = append(lb.Routers, h.name)
						case nbdb.LoadBalancerGroupTable:
							lb.Groups = append(lb.Groups, h.name)
						}
					}
					st.LoadBalancers = append(st.LoadBalancers, lb)
				})
			case *nbdb.LogicalRouterPolicy:
				put(r.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
					st.Policies = append(st.Policies, RouterPolicy{Router: parentName(sn, r.UUID), Priority: r.Priority,
						Match: r.Match, Action: r.Action, Nexthops: r.Nexthops,
						Options: managedKeys(r.Options, managed["options"]), ExternalIDs: ownerKeys(r.ExternalIDs, managed)})
				})
			case *nbdb.NAT:
				put(r.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
					st.NATs = append(st.NATs, NAT{Router: parentName(sn, r.UUID), Type: r.Type, ExternalIP: r.ExternalIP,
						LogicalIP: r.LogicalIP, LogicalPort: ptrString(r.LogicalPort),
						Options: managedKeys(r.Options, managed["options"]), ExternalIDs: ownerKeys(r.ExternalIDs, managed)})
				})
			case *nbdb.AddressSet:
				put(r.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
					st.AddressSets = append(st.AddressSets, AddressSet{Addresses: r.Addresses,
						ExternalIDs: ownerKeys(r.ExternalIDs, managed)})
				})
			case *nbdb.QoS:
				put(r.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
					q := QoS{Priority: r.Priority, Direction: r.Direction, Match: r.Match, Action: maps.Clone(r.Action),
						Bandwidth: maps.Clone(r.Bandwidth), ExternalIDs: ownerKeys(r.ExternalIDs, managed)}
					for _, h := range sn.qosHoldersOf(r.UUID) {
						q.Switches = append(q.Switches, h.name)
					}
					st.QoSRules = append(st.QoSRules, q)
				})
			case *nbdb.ChassisTemplateVar:
				for k, names := range r.ExternalIDs {
					if name, ok := strings.CutPrefix(k, KeyTemplateVars); ok {
						put(map[string]string{KeyOwnedBy: name}, func(st *State, _ map[string]map[string]bool) {
							for _, v := range strings.Split(names, ",") {
								if val, ok := r.Variables[v]; ok && v != "" {
									st.TemplateVars = append(st.TemplateVars, TemplateVar{Chassis: r.Chassis, Name: v, Value: val})
								}
							}
						})
					}
				}
			}
		}
	}
	for o, st := range out {
		out[o] = st.Sorted()
	}
	return out, nil
}

// managedKeys returns the pairs of m whose keys are in managed (nil when
// none).
func managedKeys(m map[string]string, managed map[string]bool) map[string]string {
	var out map[string]string
	for k, v := range m {
		if managed[k] {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// ownerKeys returns the external_ids the owner wrote, without the
// reconciler's own keys (KeyOwnedBy, KeyManaged), which Sync adds.
func ownerKeys(ids map[string]string, managed map[string]map[string]bool) map[string]string {
	out := managedKeys(ids, managed["external_ids"])
	delete(out, KeyOwnedBy)
	delete(out, KeyManaged)
	return out
}

// Sorted returns a copy of s in the order Current reads rows back: rows
// sorted by identity (name; router, priority and match; router, type and
// addresses; chassis and name), and the set-like columns (nexthops,
// addresses, selection fields, the switches, routers and groups holding a
// row) sorted. Sync gives both orders the same rows.
func (s State) Sorted() State {
	t := State{LoadBalancers: slices.Clone(s.LoadBalancers), Groups: slices.Clone(s.Groups),
		Policies: slices.Clone(s.Policies), NATs: slices.Clone(s.NATs), AddressSets: slices.Clone(s.AddressSets),
		QoSRules: slices.Clone(s.QoSRules), TemplateVars: slices.Clone(s.TemplateVars)}
	for i := range t.LoadBalancers {
		lb := &t.LoadBalancers[i]
		lb.SelectionFields, lb.Switches = sortedCopy(lb.SelectionFields), sortedCopy(lb.Switches)
		lb.Routers, lb.Groups = sortedCopy(lb.Routers), sortedCopy(lb.Groups)
	}
	for i := range t.Groups {
		t.Groups[i].Switches, t.Groups[i].Routers = sortedCopy(t.Groups[i].Switches), sortedCopy(t.Groups[i].Routers)
	}
	for i := range t.Policies {
		t.Policies[i].Nexthops = sortedCopy(t.Policies[i].Nexthops)
	}
	for i := range t.AddressSets {
		t.AddressSets[i].Addresses = sortedCopy(t.AddressSets[i].Addresses)
	}
	for i := range t.QoSRules {
		t.QoSRules[i].Switches = sortedCopy(t.QoSRules[i].Switches)
	}
	slices.SortFunc(t.LoadBalancers, func(a, b LoadBalancer) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(t.Groups, func(a, b LoadBalancerGroup) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(t.Policies, func(a, b RouterPolicy) int {
		return cmp.Or(cmp.Compare(a.Router, b.Router), cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Match, b.Match))
	})
	slices.SortFunc(t.NATs, func(a, b NAT) int {
		return cmp.Or(cmp.Compare(a.Router, b.Router), cmp.Compare(a.Type, b.Type), cmp.Compare(a.ExternalIP, b.ExternalIP),
			cmp.Compare(a.LogicalIP, b.LogicalIP))
	})
	slices.SortFunc(t.AddressSets, func(a, b AddressSet) int { return cmp.Compare(a.Name(), b.Name()) })
	slices.SortFunc(t.QoSRules, func(a, b QoS) int {
		return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Match, b.Match))
	})
	slices.SortFunc(t.TemplateVars, func(a, b TemplateVar) int {
		return cmp.Or(cmp.Compare(a.Chassis, b.Chassis), cmp.Compare(a.Name, b.Name))
	})
	return t
}
