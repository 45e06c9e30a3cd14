package ovsdbnb

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// LoadBalancerInserts returns the insert operations Sync sends for the
// load balancers of desired into an NB that has none of them (rows
// stamped with their owner, derived UUIDs), in owner order: the
// benchmarks' raw transact sends the same rows without the client.
func LoadBalancerInserts(desired map[Owner]State) []ovsdb.Operation {
	owners := make([]Owner, 0, len(desired))
	for o := range desired {
		owners = append(owners, o)
	}
	sortOwners(owners)
	var ops []ovsdb.Operation
	for _, o := range owners {
		for _, lb := range desired[o].LoadBalancers {
			op := insertOp(nbdb.LoadBalancerTable, "", lbRow(lb).stamp(o))
			op.UUID = rowUUID(nbdb.LoadBalancerTable, o, "load balancer "+lb.Name)
			ops = append(ops, op)
		}
	}
	return ops
}

// SharedIndexMismatch compares the client's shared index, kept up to date
// incrementally, with one built anew from the same cache; "" when they
// agree. With routersOnly, the client's index reads the routers only
// (as an EgressIP's Sync does) and only their part is compared. ok is
// false when the cache changed between the two (try again).
func SharedIndexMismatch(c *Client, routersOnly bool) (mismatch string, ok bool) {
	tables := len(sharedTables)
	if routersOnly {
		tables = 1
	}
	tc := c.nb.Cache()
	inc, err := c.shared.index(tc, tables)
	if err != nil {
		return err.Error(), true
	}
	fresh, err := (&shared{}).index(tc, tables)
	if err != nil {
		return err.Error(), true
	}
	if again, _ := c.shared.index(tc, tables); again != inc {
		return "", false
	}
	return sharedDiff(inc, fresh, tables), true
}

// sharedDiff describes how two indexes differ in their first tables of
// sharedTables, "" when they hold the same rows and references there (the
// test of the incremental index).
func sharedDiff(a, b *sharedIndex, tables int) string {
	var out []string
	names := func(kind string, x, y map[string]string) {
		if !maps.Equal(x, y) {
			out = append(out, fmt.Sprintf("%s: %v != %v", kind, x, y))
		}
	}
	names("routers", a.routers, b.routers)
	if tables > 1 {
		names("switches", a.switches, b.switches)
		names("groups", a.groups, b.groups)
	}
	flat := func(x *refIndex) map[string]string {
		r := map[string]string{}
		x.all(func(u string, hs []ref) {
			var s []string
			for _, h := range hs {
				s = append(s, h.table+"/"+h.uuid+"/"+h.name)
			}
			slices.Sort(s)
			r[u] = fmt.Sprint(s)
		})
		return r
	}
	ak, bk := a.holderKinds(), b.holderKinds()
	for k, kind := range []string{"children", "lb holders", "qos holders"} {
		if tables > 1 || k == 0 { // the children are the routers' only
			names(kind, flat(ak[k]), flat(bk[k]))
		}
	}
	rows := func(x *rowShards) map[string]string {
		r := map[string]string{}
		x.all(func(u string, row sharedRow) { r[u] = fmt.Sprint(row.self, row.kinds) })
		return r
	}
	for t := range sharedTables[:tables] {
		if a.counts[t] != b.counts[t] {
			out = append(out, fmt.Sprintf("%s: %d rows != %d", sharedTables[t], a.counts[t], b.counts[t]))
		}
		names(sharedTables[t]+" rows", rows(&a.rows[t]), rows(&b.rows[t]))
	}
	return strings.Join(out, "\n")
}

// Forget makes w forget what it wrote: with lost, as after a sync whose
// outcome is unknown (syncLost: every owner compared next, the stepped
// rows read back from the NB); else only the owners written, the stepped
// rows left as they were before the last Write. Either way the stepped
// rows recorded are emptied first, as before a first Write that
// committed.
func (w *Writer) Forget(lost bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rec.stepped = map[Owner]State{}
	if lost {
		w.syncLost()
	} else {
		w.rec.synced = nil
	}
}
