package ovsdbnb

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// optional is the value of an optional (0 or 1 element) string column;
// "" is the empty set.
type optional string

// row is a table row in a form the diff works on: scalar columns (string,
// int, optional or a []string set replaced as a whole), map columns whose
// keys are diffed one by one, and set columns diffed element by element.
type row struct {
	scalars map[string]any
	maps    map[string]map[string]string
	sets    map[string][]string
}

// ptrString is *p, or "" for nil.
func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// lbRow is the row of a desired load balancer.
func lbRow(lb LoadBalancer) row {
	return row{
		scalars: map[string]any{"name": lb.Name, "protocol": optional(lb.Protocol),
			"selection_fields": sortedCopy(lb.SelectionFields)},
		maps: map[string]map[string]string{"external_ids": lb.ExternalIDs, "options": lb.Options, "vips": lb.VIPs},
	}
}

// lbRowOf is the row of a cached load balancer.
func lbRowOf(lb *nbdb.LoadBalancer) row {
	return row{
		scalars: map[string]any{"name": lb.Name, "protocol": optional(ptrString(lb.Protocol)),
			"selection_fields": sortedCopy(lb.SelectionFields)},
		maps: map[string]map[string]string{"external_ids": lb.ExternalIDs, "options": lb.Options, "vips": lb.Vips},
	}
}

// policyRow is the row of a desired router policy.
func policyRow(p RouterPolicy) row {
	return row{
		scalars: map[string]any{"priority": p.Priority, "match": p.Match, "action": p.Action,
			"nexthops": sortedCopy(p.Nexthops)},
		maps: map[string]map[string]string{"external_ids": p.ExternalIDs, "options": p.Options},
	}
}

// policyRowOf is the row of a cached router policy.
func policyRowOf(p *nbdb.LogicalRouterPolicy) row {
	return row{
		scalars: map[string]any{"priority": p.Priority, "match": p.Match, "action": p.Action,
			"nexthops": sortedCopy(p.Nexthops)},
		maps: map[string]map[string]string{"external_ids": p.ExternalIDs, "options": p.Options},
	}
}

// natRow is the row of a desired NAT.
func natRow(n NAT) row {
	return row{
		scalars: map[string]any{"type": n.Type, "external_ip": n.ExternalIP, "logical_ip": n.LogicalIP,
			"logical_port": optional(n.LogicalPort)},
		maps: map[string]map[string]string{"external_ids": n.ExternalIDs, "options": n.Options},
	}
}

// natRowOf is the row of a cached NAT.
func natRowOf(n *nbdb.NAT) row {
	return row{
		scalars: map[string]any{"type": n.Type, "external_ip": n.ExternalIP, "logical_ip": n.LogicalIP,
			"logical_port": optional(ptrString(n.LogicalPort))},
		maps: map[string]map[string]string{"external_ids": n.ExternalIDs, "options": n.Options},
	}
}

// addressSetRow is the row of a desired address set.
func addressSetRow(a AddressSet) row {
	return row{
		scalars: map[string]any{"name": a.Name()},
		maps:    map[string]map[string]string{"external_ids": a.ExternalIDs},
		sets:    map[string][]string{"addresses": a.Addresses},
	}
}

// addressSetRowOf is the row of a cached address set.
func addressSetRowOf(a *nbdb.AddressSet) row {
	return row{
		scalars: map[string]any{"name": a.Name},
		maps:    map[string]map[string]string{"external_ids": a.ExternalIDs},
		sets:    map[string][]string{"addresses": a.Addresses},
	}
}

// qosRow is the row of a desired QoS. Its action and bandwidth maps are
// replaced as a whole (nobody else adds keys to them).
func qosRow(q QoS) row {
	return row{
		scalars: map[string]any{"priority": q.Priority, "direction": q.Direction, "match": q.Match,
			"action": intMap(q.Action), "bandwidth": intMap(q.Bandwidth)},
		maps: map[string]map[string]string{"external_ids": q.ExternalIDs},
	}
}

// qosRowOf is the row of a cached QoS.
func qosRowOf(q *nbdb.QoS) row {
	return row{
		scalars: map[string]any{"priority": q.Priority, "direction": q.Direction, "match": q.Match,
			"action": intMap(q.Action), "bandwidth": intMap(q.Bandwidth)},
		maps: map[string]map[string]string{"external_ids": q.ExternalIDs},
	}
}

// aclRow is the row of a desired ACL, marked with KeyACL (the client
// monitors only marked ACLs). An empty name is no name.
func aclRow(a ACL) row {
	ext := make(map[string]string, len(a.ExternalIDs)+1)
	maps.Copy(ext, a.ExternalIDs)
	ext[KeyACL] = "true"
	return row{
		scalars: map[string]any{"priority": a.Priority, "direction": a.Direction, "match": a.Match, "action": a.Action,
			"name": optional(a.Name)},
		maps: map[string]map[string]string{"external_ids": ext},
	}
}

// aclRowOf is the row of a cached ACL.
func aclRowOf(a *nbdb.ACL) row {
	return row{
		scalars: map[string]any{"priority": a.Priority, "direction": a.Direction, "match": a.Match, "action": a.Action,
			"name": optional(ptrString(a.Name))},
		maps: map[string]map[string]string{"external_ids": a.ExternalIDs},
	}
}

// intMap is a map column of string keys and integer values, compared
// and written as a whole.
type intMap map[string]int

// sortedCopy returns a sorted copy of s (nil for an empty s).
func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

// stamp returns r with the owner key and the managed-keys record added to
// its external_ids (a copy: the caller's maps are never modified).
func (r row) stamp(o Owner) row {
	ext := make(map[string]string, len(r.maps["external_ids"])+2)
	for k, v := range r.maps["external_ids"] {
		ext[k] = v
	}
	ext[KeyOwnedBy] = o.String()
	maps := make(map[string]map[string]string, len(r.maps))
	for c, m := range r.maps {
		maps[c] = m
	}
	maps["external_ids"] = ext
	ext[KeyManaged] = encodeManaged(maps)
	return row{scalars: r.scalars, maps: maps, sets: r.sets}
}

// encodeManaged renders the keys of maps, column by column, as
// "col=k1,k2;col2=k3" (sorted; KeyManaged itself left out).
func encodeManaged(maps map[string]map[string]string) string {
	var cols []string
	for c, m := range maps {
		var keys []string
		for k := range m {
			if k != KeyManaged {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			continue
		}
		sort.Strings(keys)
		cols = append(cols, c+"="+strings.Join(keys, ","))
	}
	sort.Strings(cols)
	return strings.Join(cols, ";")
}

// managedRecords remembers decodeManaged's results: the records of an
// owner's rows are mostly the same few strings (every NAT of an EgressIP
// has one), read again on each echo of a write (Drifted). Bounded: it is
// emptied when it holds maxManagedRecords (load balancers' records name
// their VIPs).
var managedRecords = struct {
	sync.Mutex
	m map[string]map[string]map[string]bool
}{m: map[string]map[string]map[string]bool{}}

const maxManagedRecords = 4096

// decodeManaged parses encodeManaged's output into column -> keys. The
// result is shared: read only.
func decodeManaged(s string) map[string]map[string]bool {
	managedRecords.Lock()
	defer managedRecords.Unlock()
	if out, ok := managedRecords.m[s]; ok {
		return out
	}
	out := parseManaged(s)
	if len(managedRecords.m) >= maxManagedRecords {
		clear(managedRecords.m)
	}
	managedRecords.m[s] = out
	return out
}

// parseManaged parses encodeManaged's output into column -> keys.
func parseManaged(s string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, col := range strings.Split(s, ";") {
		name, keys, ok := strings.Cut(col, "=")
		if !ok {
			continue
		}
		set := map[string]bool{}
		for _, k := range strings.Split(keys, ",") {
			set[k] = true
		}
		out[name] = set
	}
	return out
}

// ovsValue converts a scalar of a row into its OVSDB notation.
func ovsValue(v any) any {
	switch v := v.(type) {
	case optional:
		if v == "" {
			return ovsdb.OvsSet{GoSet: []any{}}
		}
		return string(v)
	case []string:
		return stringSet(v)
	case intMap:
		om := make(map[any]any, len(v))
		for k, n := range v {
			om[k] = n
		}
		return ovsdb.OvsMap{GoMap: om}
	default:
		return v
	}
}

// stringSet is an OVSDB set of strings.
func stringSet(s []string) ovsdb.OvsSet {
	set := make([]any, len(s))
	for i, e := range s {
		set[i] = e
	}
	return ovsdb.OvsSet{GoSet: set}
}

// stringMap is an OVSDB map of strings.
func stringMap(m map[string]string) ovsdb.OvsMap {
	om := make(map[any]any, len(m))
	for k, v := range m {
		om[k] = v
	}
	return ovsdb.OvsMap{GoMap: om}
}

// uuidSet is an OVSDB set of (possibly named) UUIDs.
func uuidSet(uuids ...string) ovsdb.OvsSet {
	set := make([]any, len(uuids))
	for i, u := range uuids {
		set[i] = ovsdb.UUID{GoUUID: u}
	}
	return ovsdb.OvsSet{GoSet: set}
}

// whereUUID selects the row with uuid.
func whereUUID(uuid string) []ovsdb.Condition {
	return []ovsdb.Condition{{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: uuid}}}
}

// insertOp inserts r into table under the named UUID name.
func insertOp(table, name string, r row) ovsdb.Operation {
	vals := ovsdb.Row{}
	for c, v := range r.scalars {
		vals[c] = ovsValue(v)
	}
	for c, m := range r.maps {
		if len(m) > 0 {
			vals[c] = stringMap(m)
		}
	}
	for c, s := range r.sets {
		if len(s) > 0 {
			vals[c] = stringSet(s)
		}
	}
	return ovsdb.Operation{Op: ovsdb.OperationInsert, Table: table, Row: vals, UUIDName: name}
}

// equalScalar compares two scalar values of a row.
func equalScalar(a, b any) bool {
	as, aok := a.([]string)
	bs, bok := b.([]string)
	if aok || bok {
		return slices.Equal(as, bs)
	}
	am, aok := a.(intMap)
	bm, bok := b.(intMap)
	if aok || bok {
		return maps.Equal(am, bm)
	}
	return a == b
}

// diffOps returns the operations turning cur (the cached row uuid) into
// want: one update of the changed scalar columns and one mutate of the
// changed map keys and set elements. Map keys that are in cur but neither
// in want nor recorded as managed in cur's KeyManaged belong to another
// writer and are left alone.
func diffOps(table, uuid string, cur, want row) []ovsdb.Operation {
	var ops []ovsdb.Operation
	upd := ovsdb.Row{}
	for c, v := range want.scalars {
		if !equalScalar(cur.scalars[c], v) {
			upd[c] = ovsValue(v)
		}
	}
	if len(upd) > 0 {
		ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: table, Row: upd, Where: whereUUID(uuid)})
	}
	// The keys written before (KeyManaged) matter only when they are not
	// the keys wanted now: the record is usually unchanged, and is then
	// not parsed.
	var managed map[string]map[string]bool
	if rec := cur.maps["external_ids"][KeyManaged]; rec != want.maps["external_ids"][KeyManaged] {
		managed = decodeManaged(rec)
	}
	var muts []ovsdb.Mutation
	for _, c := range sortedKeys(want.maps) {
		muts = append(muts, mapMutations(c, cur.maps[c], want.maps[c], managed[c])...)
	}
	for _, c := range sortedKeys(want.sets) {
		muts = append(muts, setMutations(c, cur.sets[c], want.sets[c])...)
	}
	if len(muts) > 0 {
		ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationMutate, Table: table, Mutations: muts, Where: whereUUID(uuid)})
	}
	return ops
}

// mapMutations turns the keys of cur into want: keys whose value changes
// and keys previously managed but no longer wanted are deleted, then the
// new pairs are inserted (an OVSDB insert never overwrites a key).
func mapMutations(col string, cur, want map[string]string, managed map[string]bool) []ovsdb.Mutation {
	var del []string
	var ins map[string]string
	for k, v := range want {
		old, ok := cur[k]
		if ok && old == v {
			continue
		}
		if ok {
			del = append(del, k)
		}
		if ins == nil {
			ins = map[string]string{}
		}
		ins[k] = v
	}
	for k := range managed {
		if _, wanted := want[k]; !wanted {
			if _, ok := cur[k]; ok {
				del = append(del, k)
			}
		}
	}
	var muts []ovsdb.Mutation
	if len(del) > 0 {
		sort.Strings(del)
		muts = append(muts, ovsdb.Mutation{Column: col, Mutator: ovsdb.MutateOperationDelete, Value: stringSet(del)})
	}
	if len(ins) > 0 {
		muts = append(muts, ovsdb.Mutation{Column: col, Mutator: ovsdb.MutateOperationInsert, Value: stringMap(ins)})
	}
	return muts
}

// setMutations turns the set cur into want.
func setMutations(col string, cur, want []string) []ovsdb.Mutation {
	if slices.Equal(cur, want) { // the same elements, in the same order
		return nil
	}
	has := map[string]bool{}
	for _, e := range cur {
		has[e] = true
	}
	wanted := map[string]bool{}
	var ins, del []string
	for _, e := range want {
		wanted[e] = true
		if !has[e] {
			ins = append(ins, e)
		}
	}
	for _, e := range cur {
		if !wanted[e] {
			del = append(del, e)
		}
	}
	var muts []ovsdb.Mutation
	if len(del) > 0 {
		sort.Strings(del)
		muts = append(muts, ovsdb.Mutation{Column: col, Mutator: ovsdb.MutateOperationDelete, Value: stringSet(del)})
	}
	if len(ins) > 0 {
		sort.Strings(ins)
		muts = append(muts, ovsdb.Mutation{Column: col, Mutator: ovsdb.MutateOperationInsert, Value: stringSet(ins)})
	}
	return muts
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// policyID identifies a router policy within its owner.
func policyID(router string, priority int, match string) string {
	return "policy " + router + "/" + strconv.Itoa(priority) + " " + strconv.Quote(match)
}

// natID identifies a NAT within its owner.
func natID(router, typ, externalIP, logicalIP string) string {
	return fmt.Sprintf("nat %s/%s %s %s", router, typ, externalIP, logicalIP)
}

// aclID identifies an ACL within its owner.
func aclID(direction string, priority int, match string) string {
	return "acl " + direction + "/" + strconv.Itoa(priority) + " " + strconv.Quote(match)
}

// qosID identifies a QoS row within its owner.
func qosID(direction string, priority int, match string) string {
	return "qos " + direction + "/" + strconv.Itoa(priority) + " " + strconv.Quote(match)
}
