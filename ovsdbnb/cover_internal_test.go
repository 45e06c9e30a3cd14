package ovsdbnb

import (
	"slices"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// TestUncovered: what is left of a plan made against a cache that the
// plans it covers have not reached yet (see follow): their operations
// left out when it makes every one of them, as named by their derived
// UUIDs (not by the named UUIDs, which differ from plan to plan), and
// nothing when it does not.
func TestUncovered(t *testing.T) {
	o := Owner{Type: "EgressIP", Name: "eip1"}
	gr1 := ref{nbdb.LogicalRouterTable, "11111111-0000-0000-0000-000000000001", "gr1"}
	gr2 := ref{nbdb.LogicalRouterTable, "11111111-0000-0000-0000-000000000002", "gr2"}
	const newNAT, oldNAT = "22222222-0000-0000-0000-000000000001", "22222222-0000-0000-0000-000000000002"
	natOn := func(ip string) row {
		return natRow(NAT{Router: "gr2", Type: "snat", ExternalIP: ip, LogicalIP: "10.244.1.3"}).stamp(o)
	}
	// insert adds the insert of the new SNAT (as name, with the derived
	// UUID newNAT) and its reference from gr2.
	insert := func(p *plan, name string, r row) {
		op := insertOp(nbdb.NATTable, name, r)
		op.UUID = newNAT
		p.add("nat", true, op)
		p.addRef("nat", gr2, "nat", ovsdb.MutateOperationInsert, name)
	}
	deleteOld := func(p *plan) {
		p.addRef("old", gr1, "nat", ovsdb.MutateOperationDelete, oldNAT)
		p.add("old", false, ovsdb.Operation{Op: ovsdb.OperationDelete, Table: nbdb.NATTable, Where: whereUUID(oldNAT)})
	}
	made := &plan{owner: o, parts: partNATs}
	insert(made, "row1", natOn("172.18.0.33"))
	tests := []struct {
		name string
		p    func(p *plan)
		left int // operations left, -1 for nil
	}{
		{"the break: the new SNAT as made, the old deleted", func(p *plan) { insert(p, "row7", natOn("172.18.0.33")); deleteOld(p) }, 2},
		{"the new SNAT not made", deleteOld, -1},
		{"the new SNAT made otherwise", func(p *plan) { insert(p, "row7", natOn("172.18.0.34")); deleteOld(p) }, -1},
		{"what is left names a row left out", func(p *plan) {
			insert(p, "row7", natOn("172.18.0.33"))
			p.addRef("nat", gr1, "nat", ovsdb.MutateOperationInsert, "row7")
		}, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan{owner: o, parts: partNATs}
			tc.p(p)
			got := uncovered(p, []*plan{made})
			switch {
			case tc.left < 0 && got != nil:
				t.Errorf("left %v, want nil", got.ops)
			case tc.left >= 0 && (got == nil || len(got.ops) != tc.left):
				t.Errorf("left %+v, want %d operations", got, tc.left)
			case tc.left > 0 && got.res.Deletes != 1:
				t.Errorf("left %+v, want the old SNAT's delete", got.res)
			}
		})
	}
}

// TestWritesConflicts: an operation left of a covering plan conflicts
// with the steps pending when it writes a row they write, or a holder's
// reference they change; changing other references of the same holder
// does not.
func TestWritesConflicts(t *testing.T) {
	o := Owner{Type: "EgressIP", Name: "eip1"}
	gr1 := ref{nbdb.LogicalRouterTable, "11111111-0000-0000-0000-000000000001", "gr1"}
	const x, y, z = "33333333-0000-0000-0000-000000000001", "33333333-0000-0000-0000-000000000002", "33333333-0000-0000-0000-000000000003"
	q := &plan{owner: o}
	q.addRef("x", gr1, "nat", ovsdb.MutateOperationInsert, x)
	q.add("z", false, ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: nbdb.NATTable, Where: whereUUID(z), Row: ovsdb.Row{"external_ip": "172.18.0.9"}})
	w := writesOf([]*step{{sent: []*plan{q}}})
	tests := []struct {
		name string
		p    func(p *plan)
		want bool
	}{
		{"another reference of the same router", func(p *plan) { p.addRef("y", gr1, "nat", ovsdb.MutateOperationDelete, y) }, false},
		{"the same reference", func(p *plan) { p.addRef("x", gr1, "nat", ovsdb.MutateOperationDelete, x) }, true},
		{"a row they update", func(p *plan) {
			p.add("z", false, ovsdb.Operation{Op: ovsdb.OperationDelete, Table: nbdb.NATTable, Where: whereUUID(z)})
		}, true},
		{"the router whose references they change", func(p *plan) {
			p.add("gr1", false, ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: nbdb.LogicalRouterTable, Where: whereUUID(gr1.uuid), Row: ovsdb.Row{"enabled": false}})
		}, true},
		{"another row", func(p *plan) {
			p.add("y", false, ovsdb.Operation{Op: ovsdb.OperationDelete, Table: nbdb.NATTable, Where: whereUUID(y)})
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan{owner: o}
			tc.p(p)
			if got := w.conflicts(p); got != tc.want {
				t.Errorf("conflicts %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOpKeys: an operation's key is the same for the same operation in
// another plan (maps in any order, the insert's named UUID replaced by
// its derived UUID) and differs when any value, column or type does.
func TestOpKeys(t *testing.T) {
	const derived = "33333333-0000-0000-0000-000000000001"
	op := func(name string, row ovsdb.Row, muts ...ovsdb.Mutation) *plan {
		p := &plan{}
		ins := ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.NATTable, UUID: derived, UUIDName: name, Row: row}
		p.add("r", true, ins)
		p.add("r", false, ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable,
			Where: whereUUID("44444444-0000-0000-0000-000000000001"), Mutations: muts})
		return p
	}
	ids := func(kv ...string) ovsdb.OvsMap {
		m := ovsdb.OvsMap{GoMap: map[any]any{}}
		for i := 0; i < len(kv); i += 2 {
			m.GoMap[kv[i]] = kv[i+1]
		}
		return m
	}
	ref := func(name string) ovsdb.Mutation {
		return ovsdb.Mutation{Column: "nat", Mutator: ovsdb.MutateOperationInsert,
			Value: ovsdb.OvsSet{GoSet: []any{ovsdb.UUID{GoUUID: name}}}}
	}
	base := op("row1", ovsdb.Row{"type": "snat", "external_ids": ids("a", "1", "b", "2"), "priority": 5}, ref("row1"))
	tests := []struct {
		name string
		p    *plan
		same bool
	}{
		{"named otherwise, map built in another order", op("row9", ovsdb.Row{"priority": 5, "external_ids": ids("b", "2", "a", "1"), "type": "snat"}, ref("row9")), true},
		{"a map value differs", op("row1", ovsdb.Row{"type": "snat", "external_ids": ids("a", "1", "b", "3"), "priority": 5}, ref("row1")), false},
		{"a value's type differs", op("row1", ovsdb.Row{"type": "snat", "external_ids": ids("a", "1", "b", "2"), "priority": "5"}, ref("row1")), false},
		{"a column differs", op("row1", ovsdb.Row{"type": "snat", "external_ids": ids("a", "1", "b", "2"), "priorit": 5}, ref("row1")), false},
		{"strings that run together differently", op("row1", ovsdb.Row{"types": "nat", "external_ids": ids("a", "1", "b", "2"), "priority": 5}, ref("row1")), false},
		{"the reference names another row", op("row1", ovsdb.Row{"type": "snat", "external_ids": ids("a", "1", "b", "2"), "priority": 5}, ref("row2")), false},
	}
	bk, ok := opKeys(base)
	if !ok {
		t.Fatal("base: an insert without a derived UUID")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, _ := opKeys(tc.p)
			if same := slices.Equal(k, bk); same != tc.same {
				t.Errorf("same keys %v, want %v:\n%q\n%q", same, tc.same, k, bk)
			}
		})
	}
}
