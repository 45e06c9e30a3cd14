package ovsdbnb

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/model"

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
	out, _, err := c.current(func(o Owner) bool { return len(want) == 0 || want[o.Type] }, nil, len(sharedTables))
	return out, err
}

// current reads back the States of the owners keep wants: of every owned
// row (a scan of the tables) when owners is nil, else of the rows of
// owners only, found through the client index on KeyOwnedBy. It also
// returns the snapshot of the shared tables it read the holders from, of
// the first tables of sharedTables (see snapshotOf).
func (c *Client) current(keep func(Owner) bool, owners []Owner, tables int) (map[Owner]State, *snap, error) {
	// The cache of the moment: a disconnected (or closed) client has
	// none, and its next one is another object.
	cache := c.nb.Cache()
	if cache == nil {
		return nil, nil, errors.New("ovsdbnb: current: not connected")
	}
	s := &syncer{c: c}
	conn := c.conn()
	sn, err := s.snapshotOf(tables)
	if err != nil {
		return nil, nil, err
	}
	r := &reader{c: c, cache: cache, conn: conn, sn: sn, keep: keep, owners: owners, out: map[Owner]State{}}
	for _, table := range []string{nbdb.LoadBalancerTable, nbdb.LogicalRouterPolicyTable, nbdb.NATTable,
		nbdb.AddressSetTable, nbdb.QoSTable, nbdb.ACLTable, nbdb.ChassisTemplateVarTable} {
		ms, err := r.rows(table)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range ms {
			r.read(m)
		}
	}
	for o, st := range r.out {
		r.out[o] = st.Sorted()
	}
	return r.out, sn, nil
}

// reader reads the owned rows of a cache into States by owner.
type reader struct {
	c      *Client
	cache  *cache.TableCache
	conn   uint64
	sn     *snap
	keep   func(Owner) bool
	owners []Owner // nil: every owner
	out    map[Owner]State
}

// put adds a row stamped with ids to its owner's State (f is given the
// keys the owner wrote, KeyManaged), if the owner is wanted.
func (r *reader) put(ids map[string]string, f func(st *State, managed map[string]map[string]bool)) {
	o, ok := ownerOf(ids)
	if !ok || !r.keep(o) {
		return
	}
	st := r.out[o]
	f(&st, decodeManaged(ids[KeyManaged]))
	r.out[o] = st
}

// rows are the rows of table that may be the owners' (every row without
// owners).
func (r *reader) rows(table string) ([]any, error) {
	tc := r.cache.Table(table)
	if tc == nil {
		return nil, fmt.Errorf("ovsdbnb: current: table %s is not monitored", table)
	}
	var out []any
	if table == nbdb.ChassisTemplateVarTable && r.owners != nil && !slices.ContainsFunc(r.owners, func(o Owner) bool {
		return !r.c.records.absent(r.conn, KeyTemplateVars+o.String())
	}) {
		return nil, nil // none of the owners holds a variable (templateRecords)
	}
	if r.owners == nil || table == nbdb.ChassisTemplateVarTable { // template variables name owners in their keys
		for _, m := range tc.RowsShallow() { // read only
			out = append(out, m)
		}
		return out, nil
	}
	for _, o := range r.owners {
		ms, err := tc.RowsByModels([]model.Model{ownerProbe(table, ownerIDs(o))})
		if err != nil {
			return nil, fmt.Errorf("ovsdbnb: current: read %s of %s: %w", table, o, err)
		}
		for _, m := range ms {
			out = append(out, m)
		}
	}
	return out, nil
}

// read adds row m to its owner's State.
func (r *reader) read(m any) {
	switch row := m.(type) {
	case *nbdb.LoadBalancer:
		r.put(row.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
			st.LoadBalancers = append(st.LoadBalancers, r.loadBalancer(row, managed))
		})
	case *nbdb.LogicalRouterPolicy:
		r.put(row.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
			st.Policies = append(st.Policies, RouterPolicy{Router: parentName(r.sn, row.UUID), Priority: row.Priority,
				Match: row.Match, Action: row.Action, Nexthops: row.Nexthops,
				Options: managedKeys(row.Options, managed["options"]), ExternalIDs: ownerKeys(row.ExternalIDs, managed)})
		})
	case *nbdb.NAT:
		r.put(row.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
			st.NATs = append(st.NATs, NAT{Router: parentName(r.sn, row.UUID), Type: row.Type, ExternalIP: row.ExternalIP,
				LogicalIP: row.LogicalIP, LogicalPort: ptrString(row.LogicalPort),
				Options: managedKeys(row.Options, managed["options"]), ExternalIDs: ownerKeys(row.ExternalIDs, managed)})
		})
	case *nbdb.AddressSet:
		r.put(row.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
			st.AddressSets = append(st.AddressSets, AddressSet{Addresses: row.Addresses,
				ExternalIDs: ownerKeys(row.ExternalIDs, managed)})
		})
	case *nbdb.QoS:
		r.put(row.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
			q := QoS{Priority: row.Priority, Direction: row.Direction, Match: row.Match, Action: maps.Clone(row.Action),
				Bandwidth: maps.Clone(row.Bandwidth), ExternalIDs: ownerKeys(row.ExternalIDs, managed)}
			for _, h := range r.sn.switchHoldersOf(row.UUID) {
				q.Switches = append(q.Switches, h.name)
			}
			st.QoSRules = append(st.QoSRules, q)
		})
	case *nbdb.ACL:
		r.put(row.ExternalIDs, func(st *State, managed map[string]map[string]bool) {
			a := ACL{Priority: row.Priority, Direction: row.Direction, Match: row.Match, Action: row.Action,
				Name: ptrString(row.Name), ExternalIDs: ownerKeys(row.ExternalIDs, managed)}
			delete(a.ExternalIDs, KeyACL)
			for _, h := range r.sn.switchHoldersOf(row.UUID) {
				a.Switches = append(a.Switches, h.name)
			}
			st.ACLs = append(st.ACLs, a)
		})
	case *nbdb.ChassisTemplateVar:
		r.templateVars(row)
	}
}

// loadBalancer is row as its owner's State holds it, with the switches,
// routers and groups holding it.
func (r *reader) loadBalancer(row *nbdb.LoadBalancer, managed map[string]map[string]bool) LoadBalancer {
	lb := LoadBalancer{Name: row.Name, Protocol: ptrString(row.Protocol), VIPs: managedKeys(row.Vips, managed["vips"]),
		Options: managedKeys(row.Options, managed["options"]), SelectionFields: sortedCopy(row.SelectionFields),
		ExternalIDs: ownerKeys(row.ExternalIDs, managed)}
	for _, h := range r.sn.holders(row.UUID) {
		switch h.table {
		case nbdb.LogicalSwitchTable:
			lb.Switches = append(lb.Switches, h.name)
		case nbdb.LogicalRouterTable:
			lb.Routers = append(lb.Routers, h.name)
		case nbdb.LoadBalancerGroupTable:
			lb.Groups = append(lb.Groups, h.name)
		}
	}
	return lb
}

// templateVars adds a chassis' template variables to the States of the
// owners recorded in its external_ids (a row holds every NodePort
// Service's): the wanted owners' records only, when owners are given.
func (r *reader) templateVars(row *nbdb.ChassisTemplateVar) {
	record := func(name, names string) {
		r.put(map[string]string{KeyOwnedBy: name}, func(st *State, _ map[string]map[string]bool) {
			for _, v := range strings.Split(names, ",") {
				if val, ok := row.Variables[v]; ok && v != "" {
					st.TemplateVars = append(st.TemplateVars, TemplateVar{Chassis: row.Chassis, Name: v, Value: val})
				}
			}
		})
	}
	if r.owners != nil {
		for _, o := range r.owners {
			if names, ok := row.ExternalIDs[KeyTemplateVars+o.String()]; ok {
				record(o.String(), names)
			}
		}
		return
	}
	for k, names := range row.ExternalIDs {
		if name, ok := strings.CutPrefix(k, KeyTemplateVars); ok {
			record(name, names)
		}
	}
}

// Drifted returns the owners of written whose rows in the NB (as the
// client cache shows them, read back as Current does) are not the State
// written: rows another writer changed, deleted or detached, or that a
// replaced database lost. An owner whose rows are what it last wrote is
// left out, so the monitor's echo of the client's own Sync (TakeChanges
// names every owner it wrote) costs a read of those owners' rows, never a
// Sync. Load balancer groups are shared rows, not read back: an owner
// naming one has drifted when the group is missing or not held by the
// switches and routers it names. Few owners are read through the client
// index, many by one scan of the tables. The result is sorted.
func (c *Client) Drifted(written map[Owner]State) ([]Owner, error) {
	if len(written) == 0 {
		return nil, nil
	}
	all := slices.Collect(maps.Keys(written))
	var owners []Owner
	if len(written) <= driftIndexed {
		owners = all
	}
	// The routers alone are enough to read back policies and NATs: an
	// owner that wrote no load balancer, group or QoS row and has one
	// in the NB has drifted whoever holds it.
	cur, sn, err := c.current(func(o Owner) bool { _, ok := written[o]; return ok }, owners, tablesFor(written, all))
	if err != nil {
		return nil, err
	}
	var out []Owner
	for o, st := range written {
		want := st.Sorted()
		want.Groups = nil
		if !cur[o].Equal(want) || !groupsHeld(sn, st.Groups) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b Owner) int { return cmp.Compare(a.String(), b.String()) })
	return out, nil
}

// groupsHeld reports whether the load balancer groups of gs exist and
// the switches and routers each names hold it. Groups have no owner
// stamp: a wiped database loses them with nothing for Current to read
// back, and the owners that name them must be synced to create them.
func groupsHeld(sn *snap, gs []LoadBalancerGroup) bool {
	for _, g := range gs {
		u, ok := sn.groups[g.Name]
		if !ok {
			return false
		}
		held := map[ref]bool{}
		for _, h := range sn.holders(u) {
			held[ref{table: h.table, name: h.name}] = true
		}
		for _, sw := range g.Switches {
			if !held[ref{table: nbdb.LogicalSwitchTable, name: sw}] {
				return false
			}
		}
		for _, r := range g.Routers {
			if !held[ref{table: nbdb.LogicalRouterTable, name: r}] {
				return false
			}
		}
	}
	return true
}

// driftIndexed is the most owners Drifted reads through the client index
// (five lookups each) rather than by scanning the tables.
const driftIndexed = 256

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
		QoSRules: slices.Clone(s.QoSRules), ACLs: slices.Clone(s.ACLs), TemplateVars: slices.Clone(s.TemplateVars)}
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
	for i := range t.ACLs {
		t.ACLs[i].Switches = sortedCopy(t.ACLs[i].Switches)
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
	slices.SortFunc(t.ACLs, func(a, b ACL) int {
		return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Match, b.Match))
	})
	slices.SortFunc(t.TemplateVars, func(a, b TemplateVar) int {
		return cmp.Or(cmp.Compare(a.Chassis, b.Chassis), cmp.Compare(a.Name, b.Name))
	})
	return t
}
