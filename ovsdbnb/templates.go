package ovsdbnb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// templateRows returns the cached Chassis_Template_Var rows by chassis
// (read only).
func (s *syncer) templateRows() (map[string]*nbdb.ChassisTemplateVar, error) {
	tc := s.c.nb.Cache().Table(nbdb.ChassisTemplateVarTable)
	if tc == nil {
		return nil, errNotMonitored(nbdb.ChassisTemplateVarTable)
	}
	out := map[string]*nbdb.ChassisTemplateVar{}
	for _, m := range tc.RowsShallow() {
		r := m.(*nbdb.ChassisTemplateVar)
		out[r.Chassis] = r
	}
	return out, nil
}

// syncChassisRows inserts, in one transaction before the owners' rows, the
// Chassis_Template_Var row of every chassis an owner sets a variable on
// and that has none yet. The rows are shared by all owners (and by
// OVN-Kubernetes) and never deleted: an owner only adds and removes its
// variables.
func (s *syncer) syncChassisRows(ctx context.Context, desired map[Owner]State, owners []Owner) error {
	want := map[string]bool{}
	for _, o := range owners {
		for _, v := range desired[o].TemplateVars {
			want[v.Chassis] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	rows, err := s.templateRows()
	if err != nil {
		return err
	}
	var ops []ovsdb.Operation
	for _, ch := range sortedKeys(want) {
		if rows[ch] == nil {
			ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.ChassisTemplateVarTable,
				Row: ovsdb.Row{"chassis": ch}, UUIDName: s.name()})
		}
	}
	if len(ops) == 0 {
		return nil
	}
	conn := s.c.conn()
	results, err := s.c.transact(ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(results, ops)
	}
	if err != nil {
		return fmt.Errorf("ovsdbnb: chassis template var rows: %w", err)
	}
	s.res.Transactions++
	s.res.Inserts += len(ops)
	return s.c.waitCache(ctx, conn, ops, results)
}

// templateIndex is a snapshot's Chassis_Template_Var rows (read only):
// by chassis, and, for a Sync of many owners, by the external_ids key
// recording an owner's variables (KeyTemplateVars + owner), so that
// planning one owner looks at the chassis it wants variables on and those
// it holds variables on, not at every chassis row (2,000 on a large
// cluster, for each of 10,000 Services). A Sync of a few owners (an
// event's) looks their records up row by row instead: indexing every
// record of every row costs one row per chassis times the Services with
// NodePorts, about 2 million keys at OpenShift's maximums.
type templateIndex struct {
	byChassis map[string]*nbdb.ChassisTemplateVar
	byRecord  map[string][]*nbdb.ChassisTemplateVar // nil: not indexed
}

// held returns the rows holding record rec.
func (idx *templateIndex) held(rec string) []*nbdb.ChassisTemplateVar {
	if idx.byRecord != nil {
		return idx.byRecord[rec]
	}
	var out []*nbdb.ChassisTemplateVar
	for _, r := range idx.byChassis {
		if _, ok := r.ExternalIDs[rec]; ok {
			out = append(out, r)
		}
	}
	return out
}

// templateRecords are the records (KeyTemplateVars + owner) the NB's
// Chassis_Template_Var rows may hold, as the client knows them: every
// record of the rows a Sync of many owners indexed, and each record a
// Sync wanted. A Sync of a few owners plans nothing for an owner that
// wants no variable and whose record is not known, rather than reading
// every chassis row (2,000 on a large cluster) for each such owner (an
// EgressIP's, a ClusterIP Service's). Records are only ever added (one
// no longer held costs a lookup), so concurrent Syncs lose none of each
// other's. They are trusted on the connection the last full index was
// read on: after a reconnection the database may be another one, with
// records of its own, until a Sync of many owners reads them. They also
// assume that no other client writes this client's owners' records,
// which the owners' one writer (the leader) holds as the rest of its
// rows.
type templateRecords struct {
	mu    sync.Mutex
	known bool   // recs holds every record of the rows on connection conn
	conn  uint64 // the connection the last index was read on
	recs  map[string]bool
}

// reset adds the records of byRecord, every record of the rows read on
// connection conn.
func (t *templateRecords) reset(conn uint64, byRecord map[string][]*nbdb.ChassisTemplateVar) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.known, t.conn = true, conn
	if t.recs == nil {
		t.recs = make(map[string]bool, len(byRecord))
	}
	for k := range byRecord {
		t.recs[k] = true
	}
}

// add notes that record rec is, or will be, held.
func (t *templateRecords) add(rec string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.recs == nil {
		t.recs = map[string]bool{}
	}
	t.recs[rec] = true
}

// absent reports whether no row holds record rec, as far as the client
// knows on connection conn; false when it does not know.
func (t *templateRecords) absent(conn uint64, rec string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.known && t.conn == conn && !t.recs[rec]
}

// templates returns sn's template index, built on first use from the
// cache.
func (s *syncer) templates(sn *snap) (*templateIndex, error) {
	if sn.templates != nil {
		return sn.templates, nil
	}
	conn := s.c.conn() // before the rows: a reconnection since leaves the records unknown
	rows, err := s.templateRows()
	if err != nil {
		return nil, err
	}
	idx := &templateIndex{byChassis: rows}
	if s.owners >= 64 {
		idx.byRecord = map[string][]*nbdb.ChassisTemplateVar{}
		for _, r := range rows {
			for k := range r.ExternalIDs {
				if strings.HasPrefix(k, KeyTemplateVars) {
					idx.byRecord[k] = append(idx.byRecord[k], r)
				}
			}
		}
		s.c.records.reset(conn, idx.byRecord)
	}
	sn.templates = idx
	return idx, nil
}

// planTemplateVars makes the variables owner p.owner holds in the
// chassis rows those of want. What an owner holds is recorded in each
// row's external_ids (KeyTemplateVars + owner); a variable already there
// with the wanted value and recorded by nobody (OVN-Kubernetes wrote it)
// is taken over by recording it, without rewriting it.
func (s *syncer) planTemplateVars(sn *snap, p *plan, want []TemplateVar) error {
	rec := KeyTemplateVars + p.owner.String()
	if len(want) == 0 && s.c.records.absent(s.c.conn(), rec) {
		return nil // holds no variable: no chassis row to read
	}
	if len(want) > 0 {
		s.c.records.add(rec)
	}
	idx, err := s.templates(sn)
	if err != nil {
		return &OwnerError{Owner: p.owner, Row: "chassis template vars", Err: err}
	}
	held := idx.held(rec)
	if len(want) == 0 && len(held) == 0 {
		return nil
	}
	rows := make(map[string]*nbdb.ChassisTemplateVar, len(held)+len(want))
	for _, r := range held {
		rows[r.Chassis] = r
	}
	for _, v := range want {
		if r := idx.byChassis[v.Chassis]; r != nil {
			rows[v.Chassis] = r
		}
	}
	wantBy := map[string]map[string]string{}
	for _, v := range want {
		if wantBy[v.Chassis] == nil {
			wantBy[v.Chassis] = map[string]string{}
		}
		wantBy[v.Chassis][v.Name] = v.Value
	}
	for _, ch := range sortedKeys(wantBy) {
		if rows[ch] == nil {
			return &OwnerError{Owner: p.owner, Row: "chassis template vars " + ch, Err: fmt.Errorf("no Chassis_Template_Var row")}
		}
	}
	for _, ch := range sortedKeys(rows) {
		r := rows[ch]
		held, hasRec := r.ExternalIDs[rec]
		w := wantBy[ch]
		if !hasRec && w == nil {
			continue
		}
		var del []string
		ins := map[string]string{}
		for _, name := range splitNames(held) {
			if _, ok := w[name]; !ok {
				if _, present := r.Variables[name]; present {
					del = append(del, name)
				}
			}
		}
		for name, v := range w {
			old, ok := r.Variables[name]
			if ok && old == v {
				continue
			}
			if ok {
				del = append(del, name)
			}
			ins[name] = v
		}
		var muts []ovsdb.Mutation
		if len(del) > 0 {
			slices.Sort(del)
			muts = append(muts, ovsdb.Mutation{Column: "variables", Mutator: ovsdb.MutateOperationDelete, Value: stringSet(del)})
		}
		if len(ins) > 0 {
			muts = append(muts, ovsdb.Mutation{Column: "variables", Mutator: ovsdb.MutateOperationInsert, Value: stringMap(ins)})
		}
		names := strings.Join(sortedKeys(w), ",")
		if names != held || hasRec != (names != "") {
			if hasRec {
				muts = append(muts, ovsdb.Mutation{Column: "external_ids", Mutator: ovsdb.MutateOperationDelete, Value: stringSet([]string{rec})})
			}
			if names != "" {
				muts = append(muts, ovsdb.Mutation{Column: "external_ids", Mutator: ovsdb.MutateOperationInsert, Value: stringMap(map[string]string{rec: names})})
			}
		}
		if len(muts) > 0 {
			p.add("chassis template vars "+ch, false, ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.ChassisTemplateVarTable,
				Where: whereUUID(r.UUID), Mutations: muts})
		}
	}
	return nil
}

// splitNames splits a comma-separated list ("" is none).
func splitNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// validateTemplateVars checks an owner's template variables.
func validateTemplateVars(vars []TemplateVar) (string, error) {
	seen := map[string]bool{}
	for _, v := range vars {
		row := "template var " + v.Chassis + "/" + v.Name
		switch {
		case v.Chassis == "":
			return row, fmt.Errorf("empty chassis")
		case v.Name == "" || strings.ContainsAny(v.Name, ",;= ^:"):
			return row, fmt.Errorf("name empty or contains ',', ';', '=', ' ', '^' or ':'")
		case seen[v.Chassis+"\x00"+v.Name]:
			return row, fmt.Errorf("listed twice")
		}
		seen[v.Chassis+"\x00"+v.Name] = true
	}
	return "", nil
}
