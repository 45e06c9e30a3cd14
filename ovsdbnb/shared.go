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
	// rows are the indexed rows by table (sharedTables' order) and UUID,
	// counts how many each table holds.
	rows   [len(sharedTables)]rowShards
	counts [len(sharedTables)]int
	// routers, switches and groups map names to UUIDs: a row's update
	// changes them only when it renames the row.
	routers, switches, groups map[string]string
	// children maps a policy or NAT to the routers holding it;
	// lbHolders a load balancer or group to the routers, switches and
	// groups whose load_balancer / load_balancer_group column holds it;
	// switchHolders a QoS row or an ACL to the switches holding it
	// (qos_rules, acls: a UUID is of one table).
	children, lbHolders, switchHolders refIndex
}

// sharded maps a row's UUID to a V in 4,096 shards by the UUID's first
// three hex digits, in 64 groups of 64: a change copies the groups and
// the shards it touches. At 150,000 pods a refIndex of the children
// holds as many NATs: with 256 shards, the few NATs and policies of an
// egress IP's move copied 600 entries each (a tenth of what a NotReady
// pass allocated in BenchmarkClusterEventsNB); with 4,096, 40. Groups and
// shards are made on first write.
type sharded[V any] [64]*shardGroup[V]

// shardGroup is 64 shards of a sharded.
type shardGroup[V any] [64]map[string]V

// rowShards are a table's indexed rows in 64 shards by the UUID's first
// six bits: a change copies a 64th of the table (30 rows at 2,000
// routers). Each index looks every row of the table up: in 4,096
// shards, the lookups' cache misses were 11% of the daemon's CPU during
// the scale benchmark's events.
type rowShards [64]map[string]sharedRow

// lookup returns the row u and whether x holds it.
func (x *rowShards) lookup(u string) (sharedRow, bool) {
	g, _ := shard(u)
	r, ok := x[g][u]
	return r, ok
}

// all calls f with every UUID and row of x.
func (x *rowShards) all(f func(u string, r sharedRow)) {
	for _, m := range x {
		for u, r := range m {
			f(u, r)
		}
	}
}

// writable returns the shard of u, copied the first time (see cow).
func (x *rowShards) writable(cow func(any) bool, u string) map[string]sharedRow {
	g, _ := shard(u)
	return cloned(cow, &x[g])
}

// refIndex maps a row's UUID to the rows holding it.
type refIndex = sharded[[]ref]

// shard is the group and the shard in it of UUID u.
func shard(u string) (group, i int) {
	if len(u) < 3 {
		return 0, 0
	}
	n := hexDigit(u[0])<<8 | hexDigit(u[1])<<4 | hexDigit(u[2])
	return n >> 6, n & 63
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

// get returns the value of u.
func (x *sharded[V]) get(u string) V {
	v, _ := x.lookup(u)
	return v
}

// lookup returns the value of u and whether x holds one.
func (x *sharded[V]) lookup(u string) (V, bool) {
	g, i := shard(u)
	if x[g] == nil {
		var none V
		return none, false
	}
	v, ok := x[g][i][u]
	return v, ok
}

// all calls f with every UUID and value of x.
func (x *sharded[V]) all(f func(u string, v V)) {
	for _, g := range x {
		if g == nil {
			continue
		}
		for _, m := range g {
			for u, v := range m {
				f(u, v)
			}
		}
	}
}

// writable returns the shard of u in x, its group and itself copied the
// first time (see cow).
func writable[V any](cow func(any) bool, x *sharded[V], u string) map[string]V {
	g, i := shard(u)
	if cow(&x[g]) {
		grp := new(shardGroup[V])
		if x[g] != nil {
			*grp = *x[g]
		}
		x[g] = grp
	}
	return cloned(cow, &x[g][i])
}

// cloned returns *m, copied (made, if nil) the first time (see cow).
func cloned[V any](cow func(any) bool, m *map[string]V) map[string]V {
	if cow(m) {
		if *m != nil {
			*m = maps.Clone(*m)
		} else {
			*m = map[string]V{}
		}
	}
	return *m
}

// sharedRow is one indexed row and the references it held then.
type sharedRow struct {
	m    model.Model
	self ref
	// kinds are its references: children, load balancers (and groups),
	// QoS rows and ACLs.
	kinds [3][]string
}

// holderKinds are the reverse maps of sharedRow.kinds.
func (x *sharedIndex) holderKinds() [3]*refIndex {
	return [3]*refIndex{&x.children, &x.lbHolders, &x.switchHolders}
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
		prev = &sharedIndex{routers: map[string]string{}, switches: map[string]string{}, groups: map[string]string{}}
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
			old, ok := prev.rows[t].lookup(u)
			if ok {
				seen++
			}
			if !ok || old.m != m {
				changes = append(changes, change{t, u, m})
			}
		}
		if seen < prev.counts[t] {
			prev.rows[t].all(func(u string, _ sharedRow) {
				if _, ok := rows[u]; !ok {
					changes = append(changes, change{t: t, uuid: u})
				}
			})
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
	for _, c := range changes {
		rows := next.rows[c.t].writable(cow, c.uuid)
		old, had := rows[c.uuid]
		var row sharedRow
		if c.m != nil {
			row = sharedRowOf(c.m)
		}
		// The name maps.
		names := [...]*map[string]string{&next.routers, &next.switches, &next.groups}[c.t]
		rename(names, cow, had, old.self.name, c.uuid, row.self.name, c.m != nil)
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
				m := writable(cow, hm, u)
				hs := slices.DeleteFunc(slices.Clone(m[u]), func(h ref) bool { return h.uuid == c.uuid })
				if len(hs) == 0 {
					delete(m, u)
				} else {
					m[u] = hs
				}
			}
			for _, u := range added {
				m := writable(cow, hm, u)
				m[u] = append(slices.Clip(m[u]), row.self)
			}
		}
		switch {
		case c.m == nil:
			delete(rows, c.uuid)
			next.counts[c.t]--
		default:
			rows[c.uuid] = row
			if !had {
				next.counts[c.t]++
			}
		}
	}
	sh.cache, sh.last = tc, &next
	return &next, nil
}

// rename keeps the name map *x (copied on first write, see cow) in step
// with row id: its old name goes if it still names this row (another
// row may have taken the name in the same update), its new one comes
// unless the row is gone. An update that keeps the name writes nothing.
func rename(x *map[string]string, cow func(any) bool, had bool, oldName, id, newName string, alive bool) {
	drop := had && (!alive || oldName != newName) && (*x)[oldName] == id
	add := alive && (*x)[newName] != id
	if !drop && !add {
		return
	}
	if cow(x) {
		*x = maps.Clone(*x)
	}
	if drop {
		delete(*x, oldName)
	}
	if add {
		(*x)[newName] = id
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
			kinds: [3][]string{nil, union(r.LoadBalancer, r.LoadBalancerGroup), union(r.QOSRules, r.ACLs)}}
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
