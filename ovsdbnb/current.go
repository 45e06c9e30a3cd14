package ovsdbnb

import (
	"cmp"
	"context"
	"fmt"
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
	owned := func(ids map[string]string) (Owner, bool) {
		o, ok := ownerOf(ids)
		if !ok || (len(want) > 0 && !want[o.Type]) {
			return Owner{}, false
		}
		return o, true
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
				o, ok := owned(r.ExternalIDs)
				if !ok {
					continue
				}
				managed := decodeManaged(r.ExternalIDs[KeyManaged])
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
				slices.Sort(lb.Switches)
				slices.Sort(lb.Routers)
				slices.Sort(lb.Groups)
				st := out[o]
				st.LoadBalancers = append(st.LoadBalancers, lb)
				out[o] = st
			case *nbdb.LogicalRouterPolicy:
				o, ok := owned(r.ExternalIDs)
				if !ok {
					continue
				}
				managed := decodeManaged(r.ExternalIDs[KeyManaged])
				st := out[o]
				st.Policies = append(st.Policies, RouterPolicy{Router: parentName(sn, r.UUID), Priority: r.Priority,
					Match: r.Match, Action: r.Action, Nexthops: sortedCopy(r.Nexthops),
					Options: managedKeys(r.Options, managed["options"]), ExternalIDs: ownerKeys(r.ExternalIDs, managed)})
				out[o] = st
			case *nbdb.NAT:
				o, ok := owned(r.ExternalIDs)
				if !ok {
					continue
				}
				managed := decodeManaged(r.ExternalIDs[KeyManaged])
				st := out[o]
				st.NATs = append(st.NATs, NAT{Router: parentName(sn, r.UUID), Type: r.Type, ExternalIP: r.ExternalIP,
					LogicalIP: r.LogicalIP, LogicalPort: ptrString(r.LogicalPort),
					Options: managedKeys(r.Options, managed["options"]), ExternalIDs: ownerKeys(r.ExternalIDs, managed)})
				out[o] = st
			case *nbdb.AddressSet:
				o, ok := owned(r.ExternalIDs)
				if !ok {
					continue
				}
				st := out[o]
				st.AddressSets = append(st.AddressSets, AddressSet{Addresses: sortedCopy(r.Addresses),
					ExternalIDs: ownerKeys(r.ExternalIDs, decodeManaged(r.ExternalIDs[KeyManaged]))})
				out[o] = st
			case *nbdb.QoS:
				o, ok := owned(r.ExternalIDs)
				if !ok {
					continue
				}
				q := QoS{Priority: r.Priority, Direction: r.Direction, Match: r.Match, Action: r.Action,
					Bandwidth: r.Bandwidth, ExternalIDs: ownerKeys(r.ExternalIDs, decodeManaged(r.ExternalIDs[KeyManaged]))}
				for _, h := range sn.qosHoldersOf(r.UUID) {
					q.Switches = append(q.Switches, h.name)
				}
				slices.Sort(q.Switches)
				st := out[o]
				st.QoSRules = append(st.QoSRules, q)
				out[o] = st
			case *nbdb.ChassisTemplateVar:
				for k, names := range r.ExternalIDs {
					name, ok := strings.CutPrefix(k, KeyTemplateVars)
					if !ok {
						continue
					}
					o, ok := owned(map[string]string{KeyOwnedBy: name})
					if !ok {
						continue
					}
					st := out[o]
					for _, v := range strings.Split(names, ",") {
						if val, ok := r.Variables[v]; ok && v != "" {
							st.TemplateVars = append(st.TemplateVars, TemplateVar{Chassis: r.Chassis, Name: v, Value: val})
						}
					}
					out[o] = st
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
