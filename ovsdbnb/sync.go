package ovsdbnb

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// DefaultBatchOps bounds the operations of one Sync transaction; an
// owner's operations are never split, so a transaction exceeds it only
// when one owner alone does. Batches of about a thousand operations keep
// the pipeline full (see doc.go) and the server's cost per operation
// lowest: creating 10,000 load balancers took 1.0-1.1 s in batches of
// 1,000 and 1.5 s in batches of 5,000 (BenchmarkCreateLoadBalancers).
const DefaultBatchOps = 1000

// Limits of the retries of one batch.
const (
	maxAttempts = 30
	cacheWait   = 10 * time.Second
	retryPause  = 100 * time.Millisecond
)

// Result counts what Sync sent. Inserts, Updates, Mutates and Deletes are
// OVSDB operations; Guards are the "wait" operations that make a duplicate
// insert fail on the server when the cache lags (only where an insert
// cannot use its row's derived UUID, see insert), and those that make a
// transaction fail when a router or switch it adds rows to is gone (see
// assemble).
type Result struct {
	Inserts, Updates, Mutates, Deletes int
	Guards                             int
	// Replans counts the batches planned again because the server showed
	// that the cache lagged: an insert of a row that already exists was
	// refused, and nothing of that transaction was written.
	Replans int
	// Transactions is the number of transactions committed.
	Transactions int
	// Followed counts the transactions sent behind the step before,
	// without waiting for its reply (see SyncSteps).
	Followed int
	// Owners is the number of owners whose rows are now as desired.
	Owners int
	// Adopted counts the rows written by someone else (OVN-Kubernetes)
	// without an owner stamp that an owner took over in place because
	// they are the rows it wants (see Sync).
	Adopted int
	// Changed are the owners whose rows were written (operations sent
	// and committed), in no particular order.
	Changed []Owner
}

// Ops returns the number of row operations (guards not counted).
func (r Result) Ops() int { return r.Inserts + r.Updates + r.Mutates + r.Deletes }

// Add adds the counts of o to r.
func (r *Result) Add(o Result) {
	r.Inserts += o.Inserts
	r.Updates += o.Updates
	r.Mutates += o.Mutates
	r.Deletes += o.Deletes
	r.Guards += o.Guards
	r.Replans += o.Replans
	r.Transactions += o.Transactions
	r.Followed += o.Followed
	r.Owners += o.Owners
	r.Adopted += o.Adopted
	r.Changed = append(r.Changed, o.Changed...)
}

// OwnerError is why one owner's rows were not written. The other owners
// of the same Sync are not affected.
type OwnerError struct {
	Owner Owner
	// Row names the offending row, e.g. `policy ovn_cluster_router/100
	// "ip4.src == 10.244.1.3"` or "load balancer Service_default/web_TCP_cluster".
	Row string
	Err error
}

func (e *OwnerError) Error() string {
	return fmt.Sprintf("ovsdbnb: owner %s: %s: %v", e.Owner, e.Row, e.Err)
}

func (e *OwnerError) Unwrap() error { return e.Err }

// SyncError holds the OwnerErrors of one Sync, sorted by owner.
type SyncError struct{ Owners []*OwnerError }

func (e *SyncError) Error() string {
	msgs := make([]string, len(e.Owners))
	for i, o := range e.Owners {
		msgs[i] = o.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap returns the OwnerErrors.
func (e *SyncError) Unwrap() []error {
	errs := make([]error, len(e.Owners))
	for i, o := range e.Owners {
		errs[i] = o
	}
	return errs
}

// SyncOptions tune Sync.
type SyncOptions struct {
	// BatchOps bounds the operations per transaction (DefaultBatchOps).
	BatchOps int
}

// Sync makes the NB rows of every owner in desired equal to its State:
// rows are found by the KeyOwnedBy external id, and only the difference
// is sent (insert, update of the changed columns, mutation of the changed
// map keys and set elements, delete), many owners per transaction. An
// owner mapped to an empty State has its rows deleted; an owner absent
// from desired is left alone, as are rows and map keys written by anyone
// else. Sync is idempotent: a second call with the same desired state
// sends nothing.
//
// An owner whose State is invalid, or whose operations the server
// rejects, is reported in a *SyncError (one *OwnerError each) and the
// other owners are still written. A connection failure is retried once
// the client has reconnected; other errors are returned as they are.
func (c *Client) Sync(ctx context.Context, desired map[Owner]State) (Result, error) {
	return c.SyncWith(ctx, desired, SyncOptions{})
}

// SyncWith is Sync with options.
func (c *Client) SyncWith(ctx context.Context, desired map[Owner]State, opts SyncOptions) (Result, error) {
	return c.start(ctx, desired, opts).wait()
}

// start plans desired and sends its batches (see Sync); the returned
// step's wait waits for them and returns what Sync returns.
func (c *Client) start(ctx context.Context, desired map[Owner]State, opts SyncOptions) *step {
	if opts.BatchOps <= 0 {
		opts.BatchOps = DefaultBatchOps
	}
	s := &syncer{c: c, opts: opts, failed: map[Owner]*OwnerError{}, owners: len(desired)}
	st := &step{s: s, desired: desired}
	owners := s.valid(desired)
	s.checkVIPs(desired, owners)
	s.checkLBNames(desired, s.alive(owners))
	owners = s.alive(owners)

	// The groups' snapshot, when they needed no transaction: the rows
	// that follow change no router, switch or group.
	snap, err := s.syncGroups(ctx, desired, owners)
	if err != nil {
		return st.failed(err)
	}
	owners = s.alive(owners)
	if err := s.syncChassisRows(ctx, desired, owners); err != nil {
		return st.failed(err)
	}
	if snap == nil {
		if snap, err = s.snapshotFor(desired, owners); err != nil {
			return st.failed(err)
		}
	}
	st.pl = newPipeline(s, desired)
	var batch []Owner
	var plans []*plan
	ops := 0
	for _, o := range owners {
		if st.pl.stopped() {
			break
		}
		p := s.planned(snap, o, desired[o], allParts)
		if p == nil {
			continue
		}
		if len(batch) > 0 && ops+len(p.ops) > opts.BatchOps {
			st.send(ctx, batch, plans)
			batch, plans, ops = nil, nil, 0
		}
		batch, plans = append(batch, o), append(plans, p)
		ops += len(p.ops)
	}
	if len(batch) > 0 && !st.pl.stopped() {
		st.send(ctx, batch, plans)
	}
	st.sn = snap
	return st
}

// valid returns the owners of desired whose State is valid for the
// server's schema, sorted; the others are recorded as failed.
func (s *syncer) valid(desired map[Owner]State) []Owner {
	owners := make([]Owner, 0, len(desired))
	for o, st := range desired {
		err := validate(o, st)
		if err == nil {
			err = s.c.checkSchema(o, st)
		}
		if err != nil {
			s.fail(err)
			continue
		}
		owners = append(owners, o)
	}
	sortOwners(owners)
	return owners
}

// syncer is the state of one Sync call.
type syncer struct {
	c      *Client
	opts   SyncOptions
	res    Result
	failed map[Owner]*OwnerError
	named  int // counter for named UUIDs
	// owners is the number of owners of this Sync (0 for a batch's own
	// syncer); owned indexes, by table and owner, the cached rows of the
	// tables ownedRows scanned whole rather than look up owner by owner
	// (see ownedRows).
	owners int
	owned  map[string]map[string][]model.Model
	// after, when not nil, is closed once the step this Sync follows is
	// done (see SyncSteps): a batch planned again waits for it, so that
	// its plan is made against a cache showing that step.
	after <-chan struct{}
}

// fail records an owner's error (the first one wins).
func (s *syncer) fail(err error) {
	var oe *OwnerError
	if !errors.As(err, &oe) {
		return
	}
	if _, ok := s.failed[oe.Owner]; !ok {
		s.failed[oe.Owner] = oe
	}
}

// logFailed logs the owners not synced, one line per cause: an NB
// without its topology refuses every owner for the same missing router
// or group, and says so once.
func (s *syncer) logFailed() {
	byCause := map[string][]*OwnerError{}
	for _, oe := range s.failed {
		cause := oe.Err.Error()
		byCause[cause] = append(byCause[cause], oe)
	}
	for _, cause := range sortedKeys(byCause) {
		oes := byCause[cause]
		sort.Slice(oes, func(i, j int) bool { return oes[i].Owner.String() < oes[j].Owner.String() })
		if len(oes) == 1 {
			s.c.log.Warn("ovsdbnb: owner not synced", "owner", oes[0].Owner.String(), "row", oes[0].Row, "err", oes[0].Err)
			continue
		}
		names := make([]string, 0, 3)
		for _, oe := range oes[:min(3, len(oes))] {
			names = append(names, oe.Owner.String())
		}
		s.c.log.Warn("ovsdbnb: owners not synced", "owners", len(oes), "first", strings.Join(names, ","),
			"row", oes[0].Row, "err", oes[0].Err)
	}
}

// alive returns the owners that have not failed.
func (s *syncer) alive(owners []Owner) []Owner {
	out := owners[:0:0]
	for _, o := range owners {
		if s.failed[o] == nil {
			out = append(out, o)
		}
	}
	return out
}

// err returns the SyncError of the failed owners, or nil.
func (s *syncer) err() error {
	if len(s.failed) == 0 {
		return nil
	}
	e := &SyncError{}
	for _, oe := range s.failed {
		e.Owners = append(e.Owners, oe)
	}
	sort.Slice(e.Owners, func(i, j int) bool { return e.Owners[i].Owner.String() < e.Owners[j].Owner.String() })
	return e
}

// name returns a fresh named UUID.
func (s *syncer) name() string {
	s.named++
	return "row" + strconv.Itoa(s.named)
}

// ref is a row that holds references: a router, a switch or a group.
type ref struct{ table, uuid, name string }

// snap is what the planner needs of the shared tables, read from the
// cache: the shared index of the moment (see shared) and what one plan
// builds on first use.
type snap struct {
	*sharedIndex
	// foreign indexes, by table, the rows without an owner stamp by
	// their identity within an owner (policyID, natID, qosID), built on
	// first use; adopted are the rows an owner of this plan took over.
	foreign map[string]map[string]string
	adopted map[string]bool
	// templates indexes the Chassis_Template_Var rows, built on first
	// use (see templates).
	templates *templateIndex
	// all is false for an index of the routers only (the switches' and
	// groups' part is of an earlier moment): readAll reads them from tc
	// through sh.
	all bool
	tc  *cache.TableCache
	sh  *shared
}

// parent returns the router holding the policy or NAT u.
func (sn *snap) parent(u string) (ref, bool) {
	if rs := sn.children.get(u); len(rs) > 0 {
		return rs[0], true
	}
	return ref{}, false
}

// holders returns the rows holding the load balancer or group u.
func (sn *snap) holders(u string) []ref { return sn.lbHolders.get(u) }

// switchHoldersOf returns the switches holding the QoS row or ACL u.
func (sn *snap) switchHoldersOf(u string) []ref { return sn.switchHolders.get(u) }

// snapshot reads the shared tables from the cache. The rows are the
// cache's own, read without cloning (routers holding tens of thousands of
// policies and NATs would otherwise be deep-copied on every Sync) and
// never written; the index of their references is the client's, kept
// between Syncs (see shared).
func (s *syncer) snapshot(_ context.Context) (*snap, error) {
	return s.snapshotOf(len(sharedTables))
}

// snapshotFor is the snapshot to plan owners with: of the routers only
// when none of them wants a load balancer, a group or a QoS row (a Sync
// of EgressIPs: policies, NATs, address sets), which is enough for them;
// a plan that meets a load balancer or a QoS row of the owner's in the
// cache reads the rest first (snap.readAll).
func (s *syncer) snapshotFor(desired map[Owner]State, owners []Owner) (*snap, error) {
	return s.snapshotOf(tablesFor(desired, owners))
}

// tablesFor is how many of sharedTables a plan of owners needs indexed
// (see snapshotFor).
func tablesFor(desired map[Owner]State, owners []Owner) int {
	for _, o := range owners {
		if holdsShared(desired[o]) {
			return len(sharedTables)
		}
	}
	return 1
}

// holdsShared reports whether st has rows that switches or groups hold
// (load balancers, QoS rows, ACLs) or groups: its plan, or its read back,
// needs every shared table indexed.
func holdsShared(st State) bool {
	return len(st.LoadBalancers) > 0 || len(st.Groups) > 0 || len(st.QoSRules) > 0 || len(st.ACLs) > 0
}

func (s *syncer) snapshotOf(tables int) (*snap, error) {
	tc := s.c.nb.Cache()
	if tc == nil { // disconnected, or closed
		return nil, errors.New("ovsdbnb: read cache: not connected")
	}
	x, err := s.c.shared.index(tc, tables)
	if err != nil {
		return nil, err
	}
	return &snap{sharedIndex: x, all: tables == len(sharedTables), tc: tc, sh: &s.c.shared}, nil
}

// readAll makes sn an index of every shared table, read now, if it is one
// of the routers only. The plans already made against it stay valid: the
// routers it read then are part of some moment of the cache, as they
// would be for a plan made a moment earlier.
func (sn *snap) readAll() error {
	if sn.all {
		return nil
	}
	x, err := sn.sh.index(sn.tc, len(sharedTables))
	if err != nil {
		return err
	}
	sn.sharedIndex, sn.all = x, true
	return nil
}

// parentName is the name of the router holding the policy or NAT u, ""
// for none.
func parentName(sn *snap, u string) string {
	r, _ := sn.parent(u)
	return r.name
}

// plan is the operations of one owner. rows[i] names the row of ops[i].
type plan struct {
	owner Owner
	ops   []ovsdb.Operation
	rows  []string
	res   Result
	// lag[i] is true when ops[i] is a wait guard or an insert with a
	// derived UUID: its failure means the cache lags the server.
	lag []bool
	// ref[i] is true when ops[i] (from mutateRefs) adds a row to, or
	// takes it from, a reference column: see assemble.
	ref []bool
	// parts are the parts of the State (partLBs, ...) the plan has
	// operations for.
	parts int
}

// addRef adds the mutation inserting uuid into, or deleting it from, h's
// column col.
func (p *plan) addRef(rowName string, h ref, col string, mutator ovsdb.Mutator, uuid string) {
	p.add(rowName, false, mutateRefs(h, col, mutator, uuid))
	p.ref[len(p.ref)-1] = true
}

func (p *plan) add(rowName string, lag bool, ops ...ovsdb.Operation) {
	for _, op := range ops {
		p.ops = append(p.ops, op)
		p.rows = append(p.rows, rowName)
		p.lag = append(p.lag, lag)
		p.ref = append(p.ref, false)
		switch {
		case op.Op == ovsdb.OperationWait:
			p.res.Guards++
		case op.Op == ovsdb.OperationInsert:
			p.res.Inserts++
		case op.Op == ovsdb.OperationUpdate:
			p.res.Updates++
		case op.Op == ovsdb.OperationMutate:
			p.res.Mutates++
		case op.Op == ovsdb.OperationDelete:
			p.res.Deletes++
		}
	}
}

// ownedRows returns the cached rows of table stamped with owner o
// (read only), found through the client index on KeyOwnedBy; ids returns
// a row's external_ids. A Sync of many owners (at least an eighth of the
// table's rows) scans the table once instead, indexing every owner's rows
// shallowly: a lookup clones the rows it returns, and the leader's full
// syncs look up every owner twice (checkVIPs, then the plan).
func ownedRows[T any](s *syncer, o Owner, table string, probe model.Model, ids func(*T) map[string]string) ([]*T, error) {
	tc := s.c.nb.Cache().Table(table)
	if tc.Len() == 0 {
		return nil, nil // most owners have rows in one or two tables only
	}
	var rows []model.Model
	if idx, ok := s.owned[table]; ok || s.owners*8 >= tc.Len() {
		if !ok {
			idx = map[string][]model.Model{}
			for _, m := range tc.RowsShallow() {
				if ob := ids(m.(*T))[KeyOwnedBy]; ob != "" {
					idx[ob] = append(idx[ob], m)
				}
			}
			if s.owned == nil {
				s.owned = map[string]map[string][]model.Model{}
			}
			s.owned[table] = idx
		}
		rows = idx[o.String()]
	} else {
		found, err := tc.RowsByModels([]model.Model{probe})
		if err != nil {
			return nil, &OwnerError{Owner: o, Row: table, Err: fmt.Errorf("read cache: %w", err)}
		}
		for _, m := range found {
			rows = append(rows, m)
		}
	}
	out := make([]*T, 0, len(rows))
	for _, m := range rows {
		if t := m.(*T); ids(t)[KeyOwnedBy] == o.String() {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return uuidOf(out[i]) < uuidOf(out[j]) })
	return out, nil
}

// uuidOf returns the UUID of an nbdb model.
func uuidOf(m any) string {
	switch m := m.(type) {
	case *nbdb.LoadBalancer:
		return m.UUID
	case *nbdb.LogicalRouterPolicy:
		return m.UUID
	case *nbdb.NAT:
		return m.UUID
	case *nbdb.AddressSet:
		return m.UUID
	case *nbdb.QoS:
		return m.UUID
	case *nbdb.ACL:
		return m.UUID
	}
	return ""
}

// ownerIDs is the probe external_ids of owner o.
func ownerIDs(o Owner) map[string]string { return map[string]string{KeyOwnedBy: o.String()} }

// ownerProbe is the probe of table's client index on KeyOwnedBy: a row
// whose external_ids are ids (ownerIDs, or an empty owner for the rows
// without a stamp). nil for a table without that index.
func ownerProbe(table string, ids map[string]string) model.Model {
	switch table {
	case nbdb.LoadBalancerTable:
		return &nbdb.LoadBalancer{ExternalIDs: ids}
	case nbdb.LogicalRouterPolicyTable:
		return &nbdb.LogicalRouterPolicy{ExternalIDs: ids}
	case nbdb.NATTable:
		return &nbdb.NAT{ExternalIDs: ids}
	case nbdb.AddressSetTable:
		return &nbdb.AddressSet{ExternalIDs: ids}
	case nbdb.QoSTable:
		return &nbdb.QoS{ExternalIDs: ids}
	case nbdb.ACLTable:
		return &nbdb.ACL{ExternalIDs: ids}
	}
	return nil
}

// The parts of a State, planned one after the other (see plan).
const (
	partLBs = 1 << iota
	partPolicies
	partNATs
	partAddressSets
	partQoS
	partACLs
	partTemplateVars

	allParts = 1<<iota - 1
)

// plan computes the operations of owner o against sn and the cache, for
// the parts of st in parts only: the rows of the others are left as they
// are. The plan records the parts it has operations for.
func (s *syncer) plan(sn *snap, o Owner, st State, parts int) (*plan, error) {
	p := &plan{owner: o}
	for _, part := range []struct {
		bit  int
		plan func() error
	}{
		{partLBs, func() error { return s.planLBs(sn, p, st.LoadBalancers) }},
		{partPolicies, func() error { return s.planPolicies(sn, p, st.Policies) }},
		{partNATs, func() error { return s.planNATs(sn, p, st.NATs) }},
		{partAddressSets, func() error { return s.planAddressSets(sn, p, st.AddressSets) }},
		{partQoS, func() error { return s.planQoS(sn, p, st.QoSRules) }},
		{partACLs, func() error { return s.planACLs(sn, p, st.ACLs) }},
		{partTemplateVars, func() error { return s.planTemplateVars(sn, p, st.TemplateVars) }},
	} {
		if parts&part.bit == 0 {
			continue
		}
		n := len(p.ops)
		if err := part.plan(); err != nil {
			return nil, err
		}
		if len(p.ops) > n {
			p.parts |= part.bit
		}
	}
	return p, nil
}

// planned plans owner o (see plan) and returns the plan when it has
// operations: an owner that cannot be planned is recorded as failed, one
// already as desired counted.
func (s *syncer) planned(sn *snap, o Owner, st State, parts int) *plan {
	p, err := s.plan(sn, o, st, parts)
	switch {
	case err != nil:
		s.fail(err)
		return nil
	case len(p.ops) == 0:
		s.res.Owners++
		return nil
	}
	return p
}

// attach adds the operations that make exactly the rows in want (of
// table's column col) hold uuid, given the rows that hold it now.
func attach(p *plan, rowName, uuid, col string, want []ref, now []ref) {
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[w.table+w.uuid] = true
	}
	has := map[string]bool{}
	for _, h := range now {
		has[h.table+h.uuid] = true
		if !wanted[h.table+h.uuid] {
			p.addRef(rowName, h, col, ovsdb.MutateOperationDelete, uuid)
		}
	}
	for _, w := range want {
		if !has[w.table+w.uuid] {
			p.addRef(rowName, w, col, ovsdb.MutateOperationInsert, uuid)
			has[w.table+w.uuid] = true
		}
	}
}

// mutateRefs inserts or deletes uuid in h's column col.
func mutateRefs(h ref, col string, mutator ovsdb.Mutator, uuid string) ovsdb.Operation {
	return ovsdb.Operation{Op: ovsdb.OperationMutate, Table: h.table, Where: whereUUID(h.uuid),
		Mutations: []ovsdb.Mutation{{Column: col, Mutator: mutator, Value: uuidSet(uuid)}}}
}

// lbTargets resolves the switches, routers and groups of lb.
func lbTargets(sn *snap, lb LoadBalancer) ([]ref, error) {
	var out []ref
	for _, n := range lb.Switches {
		ls := sn.switches[n]
		if ls == "" {
			return nil, fmt.Errorf("logical switch %q does not exist", n)
		}
		out = append(out, ref{nbdb.LogicalSwitchTable, ls, n})
	}
	for _, n := range lb.Routers {
		lr := sn.routers[n]
		if lr == "" {
			return nil, fmt.Errorf("logical router %q does not exist", n)
		}
		out = append(out, ref{nbdb.LogicalRouterTable, lr, n})
	}
	for _, n := range lb.Groups {
		g := sn.groups[n]
		if g == "" {
			return nil, fmt.Errorf("load balancer group %q does not exist", n)
		}
		out = append(out, ref{nbdb.LoadBalancerGroupTable, g, n})
	}
	return out, nil
}

func (s *syncer) planLBs(sn *snap, p *plan, want []LoadBalancer) error {
	o := p.owner
	cur, err := ownedRows(s, o, nbdb.LoadBalancerTable, &nbdb.LoadBalancer{ExternalIDs: ownerIDs(o)},
		func(r *nbdb.LoadBalancer) map[string]string { return r.ExternalIDs })
	if err != nil {
		return err
	}
	if len(want) > 0 || len(cur) > 0 {
		if err := sn.readAll(); err != nil { // the switches and groups holding them
			return &OwnerError{Owner: o, Row: "load balancers", Err: err}
		}
	}
	byName := map[string]*nbdb.LoadBalancer{}
	for _, lb := range cur {
		if byName[lb.Name] != nil {
			continue // a duplicate: deleted below as not wanted
		}
		byName[lb.Name] = lb
	}
	keep := map[string]bool{}
	for _, lb := range want {
		rowName := "load balancer " + lb.Name
		targets, err := lbTargets(sn, lb)
		if err != nil {
			return &OwnerError{Owner: o, Row: rowName, Err: err}
		}
		r := lbRow(lb).stamp(o)
		if c := byName[lb.Name]; c != nil {
			keep[c.UUID] = true
			p.add(rowName, false, diffOps(nbdb.LoadBalancerTable, c.UUID, lbRowOf(c), r)...)
			attach(p, rowName, c.UUID, "load_balancer", targets, sn.holders(c.UUID))
			continue
		}
		if other, err := s.lbByName(lb.Name); err != nil {
			return &OwnerError{Owner: o, Row: rowName, Err: err}
		} else if other != nil && other.ExternalIDs[KeyOwnedBy] == "" && sn.adopt(other.UUID) {
			p.res.Adopted++
			p.add(rowName, false, diffOps(nbdb.LoadBalancerTable, other.UUID, adopted(lbRowOf(other)), r)...)
			attach(p, rowName, other.UUID, "load_balancer", targets, sn.holders(other.UUID))
			continue
		} else if other != nil {
			return &OwnerError{Owner: o, Row: rowName, Err: fmt.Errorf("a load balancer of that name exists (%s), owned by %q",
				other.UUID, other.ExternalIDs[KeyOwnedBy])}
		}
		name := s.insert(p, nbdb.LoadBalancerTable, rowName, r, map[string]any{"name": lb.Name})
		attach(p, rowName, name, "load_balancer", targets, nil)
	}
	for _, c := range cur {
		if !keep[c.UUID] {
			rowName := "load balancer " + c.Name
			attach(p, rowName, c.UUID, "load_balancer", nil, sn.holders(c.UUID))
			p.add(rowName, false, ovsdb.Operation{Op: ovsdb.OperationDelete, Table: nbdb.LoadBalancerTable, Where: whereUUID(c.UUID)})
		}
	}
	return nil
}

// lbByName returns a cached load balancer named name, or nil.
func (s *syncer) lbByName(name string) (*nbdb.LoadBalancer, error) {
	rows, err := s.c.nb.Cache().Table(nbdb.LoadBalancerTable).RowsByModels([]model.Model{&nbdb.LoadBalancer{Name: name}})
	if err != nil {
		return nil, fmt.Errorf("read cache: %w", err)
	}
	for _, m := range rows {
		if lb := m.(*nbdb.LoadBalancer); lb.Name == name {
			return lb, nil
		}
	}
	return nil, nil
}

// insert adds the insert of p's row r (named rowName, identified by the
// columns key) and returns its named UUID. The row gets a UUID derived
// from the table, the owner and rowName, so that inserting it again while
// the cache lags a committed insert fails on the server ("duplicate
// uuid", an index lookup) rather than writing a duplicate. When a cached
// row holds that UUID (one this plan may delete, e.g. after someone
// edited its identity columns), the insert is guarded by a wait on key
// instead, which scans the table.
func (s *syncer) insert(p *plan, table, rowName string, r row, key map[string]any) string {
	name := s.name()
	op := insertOp(table, name, r)
	if u := rowUUID(table, p.owner, rowName); !s.c.nb.Cache().Table(table).HasRow(u) {
		op.UUID = u
		p.add(rowName, true, op)
		return name
	}
	p.add(rowName, true, guard(table, &p.owner, key))
	p.add(rowName, false, op)
	return name
}

// rowUUID is the UUID an owner's row is inserted with: a version 5 style
// UUID of the SHA-1 of table, owner and row name.
func rowUUID(table string, o Owner, rowName string) string {
	h := sha1.Sum([]byte(table + "\x00" + o.String() + "\x00" + rowName))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// guard is the insert guard: a wait operation that fails the
// transaction when table already holds a row with the column values cols
// (and, for a non-nil owner, stamped with it). It waits, with a zero
// timeout, until the rows selected are not exactly one row equal to cols:
// "until == []" cannot be sent as libovsdb drops an empty "rows".
func guard(table string, o *Owner, cols map[string]any) ovsdb.Operation {
	var where []ovsdb.Condition
	if o != nil {
		where = append(where, ovsdb.Condition{Column: "external_ids", Function: ovsdb.ConditionIncludes, Value: stringMap(ownerIDs(*o))})
	}
	row := ovsdb.Row{}
	for _, c := range sortedKeys(cols) {
		where = append(where, ovsdb.Condition{Column: c, Function: ovsdb.ConditionEqual, Value: cols[c]})
		row[c] = cols[c]
	}
	return ovsdb.Operation{Op: ovsdb.OperationWait, Table: table, Timeout: new(int),
		Until: string(ovsdb.WaitConditionNotEqual), Columns: sortedKeys(cols), Rows: []ovsdb.Row{row}, Where: where}
}

// routerChild plans the rows of one owner that hang off a router's
// column col (policies or nat).
type routerChild struct {
	id     string         // identity within the owner
	router string         // router name
	r      row            // desired row, stamped
	key    map[string]any // identity columns for the guard
}

// planChildren diffs the owner's rows of table (cur, keyed by identity)
// against want, moving rows in and out of their routers' column col.
func (s *syncer) planChildren(sn *snap, p *plan, table, col string, cur map[string][]string, curRows map[string]row, want []routerChild) error {
	keep := map[string]bool{}
	var inserts []func()
	for _, w := range want {
		lr := sn.routers[w.router]
		if lr == "" {
			return &OwnerError{Owner: p.owner, Row: w.id, Err: fmt.Errorf("logical router %q does not exist", w.router)}
		}
		lrRef := ref{nbdb.LogicalRouterTable, lr, w.router}
		if uuids := cur[w.id]; len(uuids) > 0 {
			u := uuids[0]
			keep[u] = true
			p.add(w.id, false, diffOps(table, u, curRows[u], w.r)...)
			if parent, ok := sn.parent(u); !ok || parent.uuid != lr {
				p.addRef(w.id, lrRef, col, ovsdb.MutateOperationInsert, u)
			}
			continue
		}
		if u, cr, ok := s.foreignRow(sn, table, w.id); ok {
			p.res.Adopted++
			p.add(w.id, false, diffOps(table, u, adopted(cr), w.r)...)
			if parent, ok := sn.parent(u); !ok || parent.uuid != lr {
				if ok {
					p.addRef(w.id, parent, col, ovsdb.MutateOperationDelete, u)
				}
				p.addRef(w.id, lrRef, col, ovsdb.MutateOperationInsert, u)
			}
			continue
		}
		inserts = append(inserts, func() {
			name := s.insert(p, table, w.id, w.r, w.key)
			p.addRef(w.id, lrRef, col, ovsdb.MutateOperationInsert, name)
		})
	}
	// Deletes go first: a row moving to another router is deleted
	// before the guard of its replacement, if any, is evaluated.
	defer func() {
		for _, f := range inserts {
			f()
		}
	}()
	for _, id := range sortedKeys(cur) {
		for _, u := range cur[id] {
			if keep[u] {
				continue
			}
			if parent, ok := sn.parent(u); ok {
				p.addRef(id, parent, col, ovsdb.MutateOperationDelete, u)
			}
			p.add(id, false, ovsdb.Operation{Op: ovsdb.OperationDelete, Table: table, Where: whereUUID(u)})
		}
	}
	return nil
}

func (s *syncer) planPolicies(sn *snap, p *plan, want []RouterPolicy) error {
	o := p.owner
	rows, err := ownedRows(s, o, nbdb.LogicalRouterPolicyTable, &nbdb.LogicalRouterPolicy{ExternalIDs: ownerIDs(o)},
		func(r *nbdb.LogicalRouterPolicy) map[string]string { return r.ExternalIDs })
	if err != nil {
		return err
	}
	cur, curRows := map[string][]string{}, map[string]row{}
	for _, r := range rows {
		id := policyID(parentName(sn, r.UUID), r.Priority, r.Match)
		cur[id] = append(cur[id], r.UUID)
		curRows[r.UUID] = policyRowOf(r)
	}
	var children []routerChild
	for _, w := range want {
		children = append(children, routerChild{id: policyID(w.Router, w.Priority, w.Match), router: w.Router,
			r: policyRow(w).stamp(o), key: map[string]any{"priority": w.Priority, "match": w.Match}})
	}
	return s.planChildren(sn, p, nbdb.LogicalRouterPolicyTable, "policies", cur, curRows, children)
}

func (s *syncer) planNATs(sn *snap, p *plan, want []NAT) error {
	o := p.owner
	rows, err := ownedRows(s, o, nbdb.NATTable, &nbdb.NAT{ExternalIDs: ownerIDs(o)},
		func(r *nbdb.NAT) map[string]string { return r.ExternalIDs })
	if err != nil {
		return err
	}
	cur, curRows := map[string][]string{}, map[string]row{}
	for _, r := range rows {
		id := natID(parentName(sn, r.UUID), r.Type, r.ExternalIP, r.LogicalIP)
		cur[id] = append(cur[id], r.UUID)
		curRows[r.UUID] = natRowOf(r)
	}
	var children []routerChild
	for _, w := range want {
		children = append(children, routerChild{id: natID(w.Router, w.Type, w.ExternalIP, w.LogicalIP), router: w.Router,
			r: natRow(w).stamp(o), key: map[string]any{"type": w.Type, "external_ip": w.ExternalIP, "logical_ip": w.LogicalIP}})
	}
	return s.planChildren(sn, p, nbdb.NATTable, "nat", cur, curRows, children)
}

func (s *syncer) planAddressSets(sn *snap, p *plan, want []AddressSet) error {
	o := p.owner
	rows, err := ownedRows(s, o, nbdb.AddressSetTable, &nbdb.AddressSet{ExternalIDs: ownerIDs(o)},
		func(r *nbdb.AddressSet) map[string]string { return r.ExternalIDs })
	if err != nil {
		return err
	}
	byName := map[string]*nbdb.AddressSet{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	keep := map[string]bool{}
	for _, a := range want {
		rowName := "address set " + a.Name() + " (" + a.ExternalIDs[KeyID] + ")"
		r := addressSetRow(a).stamp(o)
		if c := byName[a.Name()]; c != nil {
			keep[c.UUID] = true
			p.add(rowName, false, diffOps(nbdb.AddressSetTable, c.UUID, addressSetRowOf(c), r)...)
			continue
		}
		if c := s.addressSetByName(a.Name()); c != nil && c.ExternalIDs[KeyOwnedBy] == "" && sn.adopt(c.UUID) {
			p.res.Adopted++
			p.add(rowName, false, diffOps(nbdb.AddressSetTable, c.UUID, adopted(addressSetRowOf(c)), r)...)
			continue
		}
		// Address_Set names are also a unique index: another owner's set
		// of the same name is refused at commit.
		s.insert(p, nbdb.AddressSetTable, rowName, r, map[string]any{"name": a.Name()})
	}
	for _, r := range rows {
		if !keep[r.UUID] {
			p.add("address set "+r.Name, false, ovsdb.Operation{Op: ovsdb.OperationDelete, Table: nbdb.AddressSetTable, Where: whereUUID(r.UUID)})
		}
	}
	return nil
}

// planQoS makes the owner's QoS rows those of want (see planHeld).
func (s *syncer) planQoS(sn *snap, p *plan, want []QoS) error {
	return planSwitchRows(s, sn, p, nbdb.QoSTable, "qos_rules", true,
		func(r *nbdb.QoS) (map[string]string, cachedHeld) {
			return r.ExternalIDs, cachedHeld{r.UUID, qosID(r.Direction, r.Priority, r.Match), qosRowOf(r)}
		},
		want, func(q QoS) held {
			return newHeld(qosID(q.Direction, q.Priority, q.Match), qosRow(q), q.Switches, q.Priority, q.Direction, q.Match)
		})
}

// planACLs makes the owner's ACLs those of want (see planHeld). ACLs
// are never adopted: OVN-Kubernetes writes none of the same identity.
func (s *syncer) planACLs(sn *snap, p *plan, want []ACL) error {
	return planSwitchRows(s, sn, p, nbdb.ACLTable, "acls", false,
		func(r *nbdb.ACL) (map[string]string, cachedHeld) {
			return r.ExternalIDs, cachedHeld{r.UUID, aclID(r.Direction, r.Priority, r.Match), aclRowOf(r)}
		},
		want, func(a ACL) held {
			return newHeld(aclID(a.Direction, a.Priority, a.Match), aclRow(a), a.Switches, a.Priority, a.Direction, a.Match)
		})
}

// planSwitchRows plans the owner's rows of table (of model T, held by
// switches in col) with planHeld: its cached rows read through cached
// (their external_ids and form), the desired ones converted by heldOf.
func planSwitchRows[T, W any](s *syncer, sn *snap, p *plan, table, col string, adopt bool,
	cached func(*T) (map[string]string, cachedHeld), want []W, heldOf func(W) held) error {
	rows, err := ownedRows(s, p.owner, table, ownerProbe(table, ownerIDs(p.owner)),
		func(r *T) map[string]string { ids, _ := cached(r); return ids })
	if err != nil {
		return err
	}
	cur := make([]cachedHeld, len(rows))
	for i, r := range rows {
		_, cur[i] = cached(r)
	}
	hs := make([]held, len(want))
	for i, w := range want {
		hs[i] = heldOf(w)
	}
	return s.planHeld(sn, p, table, col, hs, cur, adopt)
}

// newHeld is a held row whose insert is guarded by its priority,
// direction and match.
func newHeld(id string, r row, switches []string, priority int, direction, match string) held {
	return held{id, r, switches, map[string]any{"priority": priority, "direction": direction, "match": match}}
}

// held is a desired row that switches hold (a QoS row, an ACL): its
// identity within the owner, its row, the switches and the columns of
// its insert's guard.
type held struct {
	id       string
	row      row
	switches []string
	key      map[string]any
}

// cachedHeld is an owner's row of such a table in the cache.
type cachedHeld struct {
	uuid, id string
	row      row
}

// planHeld makes the owner's rows of table (held by switches in col)
// those of want, each held by exactly its switches. A row no longer
// wanted is taken from every switch holding it and deleted; with adopt,
// an unstamped row of the same identity is taken over.
func (s *syncer) planHeld(sn *snap, p *plan, table, col string, want []held, cur []cachedHeld, adopt bool) error {
	o := p.owner
	if len(want) > 0 || len(cur) > 0 {
		if err := sn.readAll(); err != nil { // the switches holding them
			return &OwnerError{Owner: o, Row: table, Err: err}
		}
	}
	byID := map[string]cachedHeld{}
	for _, c := range cur {
		if _, dup := byID[c.id]; !dup {
			byID[c.id] = c // a duplicate is deleted below as not wanted
		}
	}
	keep := map[string]bool{}
	for _, h := range want {
		var targets []ref
		for _, n := range h.switches {
			ls := sn.switches[n]
			if ls == "" {
				return &OwnerError{Owner: o, Row: h.id, Err: fmt.Errorf("logical switch %q does not exist", n)}
			}
			targets = append(targets, ref{nbdb.LogicalSwitchTable, ls, n})
		}
		r := h.row.stamp(o)
		if c, ok := byID[h.id]; ok {
			keep[c.uuid] = true
			p.add(h.id, false, diffOps(table, c.uuid, c.row, r)...)
			attach(p, h.id, c.uuid, col, targets, sn.switchHoldersOf(c.uuid))
			continue
		}
		if adopt {
			if u, cr, ok := s.foreignRow(sn, table, h.id); ok {
				p.res.Adopted++
				p.add(h.id, false, diffOps(table, u, adopted(cr), r)...)
				attach(p, h.id, u, col, targets, sn.switchHoldersOf(u))
				continue
			}
		}
		name := s.insert(p, table, h.id, r, h.key)
		attach(p, h.id, name, col, targets, nil)
	}
	for _, c := range cur {
		if keep[c.uuid] {
			continue
		}
		attach(p, c.id, c.uuid, col, nil, sn.switchHoldersOf(c.uuid))
		p.add(c.id, false, ovsdb.Operation{Op: ovsdb.OperationDelete, Table: table, Where: whereUUID(c.uuid)})
	}
	return nil
}
