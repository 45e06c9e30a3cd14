package ovsdbnb

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// sharedTables are the tables of the rows that hold other rows: the
// routers (policies, NATs, load balancers, groups), the switches (load
// balancers, groups, QoS rows) and the load balancer groups (load
// balancers).
var sharedTables = [...]string{nbdb.LogicalRouterTable, nbdb.LogicalSwitchTable, nbdb.LoadBalancerGroupTable}

// shared keeps the planner's index of the shared rows between Syncs.
// libovsdb replaces a cached row on update and never modifies it, so a
// row whose pointer is the one indexed last time holds the same
// references: a snapshot compares pointers (no hashing of a row, no
// allocation per row) and re-indexes the rows that changed only. At
// 2,000 nodes (6,000 routers and switches, 10,000 load balancers and as
// many policies and NATs) rebuilding the index cost every Sync 10-25 ms
// and most of the garbage of an event.
//
// An index is never modified once published: a change builds the next
// one from copies of the maps it touches, so the Syncs, the pipeline's
// replans and Drifted read theirs without a lock.
type shared struct {
	mu    sync.Mutex
	cache *cache.TableCache // whose rows last is of
	last  *sharedIndex
}

// sharedIndex is the shared rows of one moment of the cache.
type sharedIndex struct {
	// rows are the indexed rows by table (sharedTables' order) and UUID.
	rows     [len(sharedTables)]map[string]sharedRow
	routers  map[string]*nbdb.LogicalRouter
	switches map[string]*nbdb.LogicalSwitch
	groups   map[string]*nbdb.LoadBalancerGroup
	// children maps a policy or NAT to the routers holding it;
	// lbHolders a load balancer or group to the routers, switches and
	// groups whose load_balancer / load_balancer_group column holds it;
	// qosHolders a QoS row to the switches holding it.
	children, lbHolders, qosHolders refIndex
}

// refIndex maps a row's UUID to the rows holding it, in 256 shards by
// the UUID's first two hex digits: a change copies the shards it touches,
// each a 256th of the policies and NATs of every router (with 16, the
// five NATs of an egress IP's move copied up to five sixteenths of them).
type refIndex [256]map[string][]ref

// shard is the shard of UUID u.
func shard(u string) int {
	if len(u) < 2 {
		return 0
	}
	return hexDigit(u[0])<<4 | hexDigit(u[1])
}

// hexDigit is c's value as a hex digit (any byte gives 0-15).
func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return int(c) % 16
}

// get returns the rows holding u.
func (x *refIndex) get(u string) []ref { return x[shard(u)][u] }

// sharedRow is one indexed row and the references it held then.
type sharedRow struct {
	m    model.Model
	self ref
	// kinds are its references: children, load balancers (and groups),
	// QoS rows.
	kinds [3][]string
}

// holderKinds are the reverse maps of sharedRow.kinds.
func (x *sharedIndex) holderKinds() [3]*refIndex {
	return [3]*refIndex{&x.children, &x.lbHolders, &x.qosHolders}
}

// index returns the shared rows of tc, re-indexing what changed since the
// last call, in the first tables of sharedTables only: 1, the routers,
// is what the policies and NATs of a Sync of EgressIPs need (2,000 rows
// of 6,000 at 2,000 nodes to compare); the other tables' rows and the
// references they hold stay those of the last call that read them, so
// each table's part of the index is consistent with some moment of the
// cache, and a later call reads what changed in it since.
func (sh *shared) index(tc *cache.TableCache, tables int) (*sharedIndex, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	prev := sh.last
	if prev == nil || sh.cache != tc {
		prev = &sharedIndex{routers: map[string]*nbdb.LogicalRouter{}, switches: map[string]*nbdb.LogicalSwitch{},
			groups: map[string]*nbdb.LoadBalancerGroup{}}
		for t := range sharedTables {
			prev.rows[t] = map[string]sharedRow{}
		}
		for _, hm := range prev.holderKinds() {
			for i := range hm {
				hm[i] = map[string][]ref{}
			}
		}
	}
	type change struct {
		t    int
		uuid string
		m    model.Model // nil: deleted
	}
	var changes []change
	for t, table := range sharedTables[:tables] {
		rc := tc.Table(table)
		if rc == nil {
			return nil, errNotMonitored(table)
		}
		rows := rc.RowsShallow()
		seen := 0
		for u, m := range rows {
			old, ok := prev.rows[t][u]
			if ok {
				seen++
			}
			if !ok || old.m != m {
				changes = append(changes, change{t, u, m})
			}
		}
		if seen < len(prev.rows[t]) {
			for u := range prev.rows[t] {
				if _, ok := rows[u]; !ok {
					changes = append(changes, change{t: t, uuid: u})
				}
			}
		}
	}
	if len(changes) == 0 && sh.last != nil && sh.cache == tc {
		return sh.last, nil
	}
	next := *prev
	cloned := map[any]bool{}
	cow := func(p any) bool { // true the first time p is seen: clone it
		if cloned[p] {
			return false
		}
		cloned[p] = true
		return true
	}
	// writable returns shard i of x, copied the first time.
	writable := func(x *refIndex, i int) map[string][]ref {
		if cow(&x[i]) {
			x[i] = maps.Clone(x[i])
		}
		return x[i]
	}
	for _, c := range changes {
		if cow(&next.rows[c.t]) {
			next.rows[c.t] = maps.Clone(next.rows[c.t])
		}
		old, had := next.rows[c.t][c.uuid]
		var row sharedRow
		if c.m != nil {
			row = sharedRowOf(c.m)
		}
		// The name maps.
		switch c.t {
		case 0:
			r, _ := c.m.(*nbdb.LogicalRouter)
			rename(&next.routers, cow, func(r *nbdb.LogicalRouter) string { return r.UUID }, had, old.self.name, c.uuid, row.self.name, r)
		case 1:
			sw, _ := c.m.(*nbdb.LogicalSwitch)
			rename(&next.switches, cow, func(s *nbdb.LogicalSwitch) string { return s.UUID }, had, old.self.name, c.uuid, row.self.name, sw)
		case 2:
			g, _ := c.m.(*nbdb.LoadBalancerGroup)
			rename(&next.groups, cow, func(g *nbdb.LoadBalancerGroup) string { return g.UUID }, had, old.self.name, c.uuid, row.self.name, g)
		}
		// The reverse maps: what the row no longer holds, then what it
		// holds now.
		for k, hm := range next.holderKinds() {
			var gone, added []string
			switch {
			case had && c.m != nil && old.self == row.self:
				gone, added = diffSets(old.kinds[k], row.kinds[k])
			case had && c.m != nil: // renamed: every entry names the row anew
				gone, added = old.kinds[k], row.kinds[k]
			case had:
				gone = old.kinds[k]
			default:
				added = row.kinds[k]
			}
			for _, u := range gone {
				m := writable(hm, shard(u))
				hs := slices.DeleteFunc(slices.Clone(m[u]), func(h ref) bool { return h.uuid == c.uuid })
				if len(hs) == 0 {
					delete(m, u)
				} else {
					m[u] = hs
				}
			}
			for _, u := range added {
				m := writable(hm, shard(u))
				m[u] = append(slices.Clip(m[u]), row.self)
			}
		}
		if c.m == nil {
			delete(next.rows[c.t], c.uuid)
		} else {
			next.rows[c.t][c.uuid] = row
		}
	}
	sh.cache, sh.last = tc, &next
	return &next, nil
}

// rename keeps the name map *x (copied on first write, see cow) in step
// with row uuid: its old name goes if it still names this row (another
// row may have taken the name in the same update), its new one comes
// unless the row is gone (v nil).
func rename[T comparable](x *map[string]T, cow func(any) bool, uuid func(T) string, had bool, oldName, id, newName string, v T) {
	if cow(x) {
		*x = maps.Clone(*x)
	}
	var none T
	if r := (*x)[oldName]; had && r != none && uuid(r) == id {
		delete(*x, oldName)
	}
	if v != none {
		(*x)[newName] = v
	}
}

// sharedRowOf indexes a router, switch or group row.
func sharedRowOf(m model.Model) sharedRow {
	switch r := m.(type) {
	case *nbdb.LogicalRouter:
		return sharedRow{m: m, self: ref{nbdb.LogicalRouterTable, r.UUID, r.Name},
			kinds: [3][]string{union(r.Policies, r.Nat), union(r.LoadBalancer, r.LoadBalancerGroup), nil}}
	case *nbdb.LogicalSwitch:
		return sharedRow{m: m, self: ref{nbdb.LogicalSwitchTable, r.UUID, r.Name},
			kinds: [3][]string{nil, union(r.LoadBalancer, r.LoadBalancerGroup), union(r.QOSRules)}}
	case *nbdb.LoadBalancerGroup:
		return sharedRow{m: m, self: ref{nbdb.LoadBalancerGroupTable, r.UUID, r.Name},
			kinds: [3][]string{nil, union(r.LoadBalancer), nil}}
	}
	return sharedRow{m: m}
}

// union is the distinct UUIDs of the columns, sorted. The server sends
// a set's UUIDs in order, and libovsdb keeps that order unless it applies
// a change to the set in place: sorted columns are merged (a group of
// 10,000 load balancers costs a pass, not a sort), a single one is used
// as it is (the cached row is never modified).
func union(cols ...[]string) []string {
	n := 0
	sorted := true
	for _, c := range cols {
		n += len(c)
		sorted = sorted && strictlySorted(c)
	}
	switch {
	case n == 0:
		return nil
	case sorted && len(cols) == 1:
		return cols[0]
	case sorted && len(cols) == 2:
		return mergeSorted(cols[0], cols[1])
	}
	out := make([]string, 0, n)
	for _, c := range cols {
		out = append(out, c...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// strictlySorted reports whether s is sorted without repeats.
func strictlySorted(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= s[i] {
			return false
		}
	}
	return true
}

// mergeSorted is the union of the strictly sorted a and b, sorted.
func mergeSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	add := func(u string) { out = append(out, u) }
	walkSorted(a, b, add, add, add)
	return out
}

// diffSets returns the elements of the sorted sets a and b only one of
// them holds.
func diffSets(a, b []string) (onlyA, onlyB []string) {
	walkSorted(a, b, func(string) {}, func(u string) { onlyA = append(onlyA, u) }, func(u string) { onlyB = append(onlyB, u) })
	return onlyA, onlyB
}

// walkSorted walks the sorted sets a and b in step, in order: both is
// given the elements they share, onlyA and onlyB the others.
func walkSorted(a, b []string, both, onlyA, onlyB func(string)) {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			both(a[i])
			i++
			j++
		case a[i] < b[j]:
			onlyA(a[i])
			i++
		default:
			onlyB(b[j])
			j++
		}
	}
	for _, u := range a[i:] {
		onlyA(u)
	}
	for _, u := range b[j:] {
		onlyB(u)
	}
}

// errNotMonitored is the error of a shared table the client does not
// monitor.
func errNotMonitored(table string) error {
	return fmt.Errorf("ovsdbnb: read cache: table %s is not monitored", table)
}
