package ovsdbnb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// StepResult is what SyncSteps returns for one step: what Sync of that
// step would return.
type StepResult struct {
	Result
	Err error
}

// ErrNotStarted is the error of a step SyncSteps did not start because
// an earlier step failed with an error that is not a *SyncError.
var ErrNotStarted = errors.New("ovsdbnb: step not started: an earlier step failed")

// followRow names the wait operation of a followed step (see follow).
const followRow = "the step before"

// followWait is how long the server holds a step sent behind the step
// before (see SyncSteps) for that step to commit, in milliseconds. Its
// wait fails after that and the step is planned and sent again once the
// step before is done.
const followWait = 1000

// SyncSteps syncs each map of steps in turn, as Sync does, and returns
// each step's result: each step's rows are committed after the rows of
// the step before, as the make-before-break steps of a move need (SNATs
// on the new node, then the reroute, then the old SNATs deleted). After a
// step fails with an error that is not a *SyncError no further step is
// started.
//
// A step does not always wait for the reply to the step before: when,
// for every owner the two share, it changes only parts of the State
// (policies, NATs, address sets, ...) that the step before does not
// change, it is planned against the cache as it is, and sent behind the
// step before (its transaction holding at most DefaultBatchOps
// operations, as the one before). Each of its owners that the step before
// wrote gets a wait operation on a row that step wrote for that owner
// (with no owner in common, one on any row of that step's single
// transaction), with a timeout of followWait: the server holds the
// transaction until that step has committed, so the order of the commits
// is kept, whichever transaction reaches the server first. If the step before did
// not commit (the server refused the owner), the wait fails and the step
// is planned and sent again, whole, once the step before is done: what
// Sync after Sync would have written.
//
// Nor does a step always wait for the steps before the step before: it
// is planned against the cache as it is (which they have not reached)
// and sent behind them all. For an owner whose parts it changes are
// parts one of them writes too, its plan must make every operation that
// step's plan makes for the owner (a plan against a cache that has not
// reached that step): those are left out, what is left being what Sync
// would plan once that step has committed, which it must not write over;
// it waits for that step's rows too. Failing that, it waits for the
// steps before the step before, and is planned then as above.
//
// A step that changes a part the step before changes and cannot leave
// out that step's operations, that writes load balancers, groups or
// template variables, or that follows a step of several transactions,
// waits for the step before, as Sync after Sync does.
func (c *Client) SyncSteps(ctx context.Context, steps []map[Owner]State) []StepResult {
	begin := time.Now()
	out := make([]StepResult, len(steps))
	started := make([]*step, 0, len(steps))
	finished := 0 // the steps before it have been waited for
	failed := false
	finish := func(upTo int) {
		for ; finished < upTo; finished++ {
			res, err := started[finished].wait()
			out[finished] = StepResult{Result: res, Err: err}
			var se *SyncError
			if err != nil && !errors.As(err, &se) {
				failed = true
			}
		}
	}
	for i, desired := range steps {
		var st *step
		if i > 0 && !failed {
			// Behind the steps not answered yet (those answered by now
			// taken as such: their rows are in the cache); failing
			// that, behind the step before alone, once the others are
			// answered.
			for finished < i-1 && started[finished].answered() {
				finish(finished + 1)
			}
			st = c.follow(ctx, started[finished:i], desired, i == 1)
			if st == nil && finished < i-1 {
				finish(i - 1)
				if !failed {
					st = c.follow(ctx, started[i-1:i], desired, false)
				}
			}
		}
		if st == nil {
			finish(i)
			if failed {
				break
			}
			st = c.start(ctx, desired, SyncOptions{})
		}
		started = append(started, st)
		c.log.Debug("ovsdbnb: step started", "step", i, "behind", i-finished, "since", time.Since(begin))
	}
	finish(len(started))
	c.log.Debug("ovsdbnb: steps done", "steps", len(started), "took", time.Since(begin))
	for i := len(started); i < len(steps); i++ {
		out[i].Err = ErrNotStarted
	}
	return out
}

// follow starts desired behind the steps pending (sent, not answered
// yet; the last is the step before), not waiting for their replies (see
// SyncSteps), and returns nil when it cannot. With first, the step
// before is the first step: no step before it can have committed since
// its snapshot of the shared rows, which desired is then planned against
// too (the parts it plans are not those that step writes), without
// indexing them again.
func (c *Client) follow(ctx context.Context, pending []*step, desired map[Owner]State, first bool) *step {
	prev := pending[len(pending)-1]
	// refuse logs why the step waits (how often a step follows is the
	// scale benchmark's log to read) and returns nil.
	refuse := func(why string, o Owner) *step {
		c.log.Debug("ovsdbnb: step waits for the steps before", "steps", len(pending), "reason", why, "owner", o.String())
		return nil
	}
	if why, o := cannotFollow(pending, desired); why != "" {
		return refuse(why, o)
	}
	s := &syncer{c: c, opts: SyncOptions{BatchOps: DefaultBatchOps}, failed: map[Owner]*OwnerError{},
		owners: len(desired), after: prev.idle()}
	valid := s.valid(desired)
	var sn *snap
	if p := prev.sn; first && p != nil && p.tc == c.nb.Cache() && (p.all || tablesFor(desired, valid) == 1) {
		sn = &snap{sharedIndex: p.sharedIndex, all: p.all, tc: p.tc, sh: p.sh}
	} else {
		var err error
		if sn, err = s.snapshotFor(desired, valid); err != nil {
			return refuse("no snapshot: "+err.Error(), Owner{})
		}
	}
	f := &follower{pending: pending, desired: desired, s: s, sn: sn}
	plans, why, o := f.plan(valid)
	if why != "" {
		return refuse(why, o)
	}
	if len(plans) > 0 && !f.guarded {
		// No owner in common: the transaction still commits after
		// prev's, which is one transaction (all or nothing).
		i := slices.IndexFunc(prev.sent, func(q *plan) bool { _, ok := committed(q); return ok })
		if i < 0 {
			return refuse("the step before has no row to wait on", Owner{})
		}
		g, _ := committed(prev.sent[i])
		plans[0].add(followRow, true, g)
	}
	st := &step{s: s, desired: desired, pl: newPipeline(s, desired)}
	if len(plans) > 0 {
		s.res.Followed++
		st.send(ctx, owners(plans), plans)
	}
	if len(pending) > 1 || f.covered > 0 {
		c.log.Debug("ovsdbnb: step sent behind the steps unanswered", "steps", len(pending), "owners", len(plans),
			"covered", f.covered)
	}
	st.sn = sn
	return st
}

// cannotFollow says why a step of desired cannot be sent behind the
// pending steps ("" when it can), and the owner at fault.
func cannotFollow(pending []*step, desired map[Owner]State) (string, Owner) {
	for _, q := range pending {
		if q.err != nil || q.batches != 1 {
			return "a step before failed or was sent in several transactions", Owner{} // its plans are not all in sent
		}
	}
	for o, st := range desired {
		if len(st.LoadBalancers) > 0 || len(st.Groups) > 0 || len(st.TemplateVars) > 0 {
			// Shared rows (groups, chassis rows), written in
			// transactions of their own.
			return "load balancers, groups or template variables", o
		}
	}
	return "", Owner{}
}

// follower plans a step sent behind the pending steps.
type follower struct {
	pending []*step
	desired map[Owner]State
	s       *syncer
	sn      *snap
	sent    []map[Owner]*plan // each pending step's plans, by owner
	w       *writes           // what the pending steps write, read on first use
	// guarded is set once a plan waits on a pending plan's row; covered
	// counts the plans that leave parts to the pending steps.
	guarded bool
	covered int
}

// plan plans every valid owner's step, each committing after the pending
// plans of its owner; why (and the owner) when the step cannot follow.
func (f *follower) plan(valid []Owner) (plans []*plan, why string, at Owner) {
	f.sent = make([]map[Owner]*plan, len(f.pending))
	for k, q := range f.pending {
		f.sent[k] = make(map[Owner]*plan, len(q.sent))
		for _, p := range q.sent {
			f.sent[k][p.owner] = p
		}
	}
	ops := 0
	for _, o := range valid {
		p, why := f.planOwner(o)
		if why != "" {
			return nil, why, o
		}
		if p == nil {
			continue
		}
		plans = append(plans, p)
		ops += len(p.ops)
	}
	if ops > DefaultBatchOps {
		return nil, "more than one transaction", Owner{}
	}
	return plans, "", Owner{}
}

// planOwner plans o's step: the parts of its State this step changes
// (against the last pending step that has o), after the pending plans of
// o (if one does not commit, neither does this one, which leaves the
// parts they write to them), covering those that write parts this step
// changes too.
func (f *follower) planOwner(o Owner) (*plan, string) {
	parts := allParts
	for k := len(f.pending) - 1; k >= 0; k-- {
		if was, ok := f.pending[k].desired[o]; ok {
			parts = changedParts(was, f.desired[o])
			break
		}
	}
	var after, cover []*plan
	for k, q := range f.pending {
		if q.s.failed[o] != nil {
			return nil, "refused by a step before" // not written by q: its parts unchanged here are not in the NB
		}
		if qp := f.sent[k][o]; qp != nil {
			after = append(after, qp)
			if qp.parts&parts != 0 {
				cover = append(cover, qp)
			}
		}
	}
	planParts := parts
	for _, q := range cover {
		planParts |= q.parts
	}
	p := f.s.planned(f.sn, o, f.desired[o], planParts)
	if len(cover) > 0 {
		if f.w == nil {
			f.w = writesOf(f.pending)
		}
		// Nothing left has nothing to wait with for the steps it leaves
		// o to: it waits for their replies instead.
		switch p = uncovered(p, cover); {
		case p == nil:
			return nil, "the plan does not make the operations of the steps before"
		case len(p.ops) == 0:
			return nil, "nothing left to send"
		case f.w.conflicts(p):
			return nil, "writes a row the steps before write"
		}
		f.covered++
	}
	if p == nil {
		return nil, ""
	}
	for _, q := range after {
		g, ok := committed(q)
		if !ok {
			return nil, "a plan before has no row to wait on"
		}
		p.add(followRow, true, g)
		f.guarded = true
	}
	return p, ""
}

// uncovered returns p without the operations that the plans of cover
// make too, p being planned against a cache that none of them has
// reached yet: nil unless p makes every operation of theirs (as their
// rows will be once they have committed, so that what is left of p is
// what Sync would plan then), and unless the rows p inserts and what is
// left names are told apart by their derived UUIDs. A nil p gives nil.
func uncovered(p *plan, cover []*plan) *plan {
	if p == nil || p.res.Adopted > 0 {
		return nil
	}
	pk, ok := opKeys(p)
	if !ok {
		return nil
	}
	left := map[string]int{}
	for _, q := range cover {
		qk, ok := opKeys(q)
		if !ok {
			return nil
		}
		for i, k := range qk {
			if q.ops[i].Op != ovsdb.OperationWait {
				left[k]++
			}
		}
	}
	out := &plan{owner: p.owner, parts: p.parts}
	gone := map[string]bool{} // the named UUIDs of the inserts left out
	for i, op := range p.ops {
		if op.Op != ovsdb.OperationWait && left[pk[i]] > 0 {
			left[pk[i]]--
			if op.Op == ovsdb.OperationInsert {
				gone[op.UUIDName] = true
			}
			continue
		}
		out.add(p.rows[i], p.lag[i], op)
		out.ref[len(out.ref)-1] = p.ref[i]
	}
	for _, n := range left {
		if n > 0 {
			return nil
		}
	}
	for _, op := range out.ops {
		if names(op, gone) {
			return nil
		}
	}
	return out
}

// insertNames maps the named UUIDs of p's inserts to the derived UUIDs
// they insert (see insert); false when an insert has none.
func insertNames(p *plan) (map[string]string, bool) {
	named := map[string]string{}
	ok := true
	for _, op := range p.ops {
		if op.Op == ovsdb.OperationInsert {
			if op.UUID == "" {
				ok = false
			}
			named[op.UUIDName] = op.UUID
		}
	}
	return named, ok
}

// opKeys returns a key for each operation of p that is the same for the
// same operation in another plan: the named UUIDs of p's inserts (which
// differ from plan to plan) replaced by the derived UUIDs they insert;
// false when an insert has no derived UUID.
func opKeys(p *plan) ([]string, bool) {
	named, ok := insertNames(p)
	rename := func(u string) string {
		if d, ok := named[u]; ok && d != "" {
			return d
		}
		return u
	}
	keys := make([]string, len(p.ops))
	var b strings.Builder
	for i, op := range p.ops {
		if op.Op == ovsdb.OperationWait {
			continue
		}
		b.Reset()
		keyString(&b, op.Op)
		keyString(&b, op.Table)
		keyString(&b, op.UUID)
		b.WriteByte('W')
		for _, w := range op.Where {
			keyString(&b, w.Column)
			keyString(&b, string(w.Function))
			keyValue(&b, w.Value, rename)
		}
		b.WriteByte('R')
		for _, c := range slices.Sorted(maps.Keys(op.Row)) {
			keyString(&b, c)
			keyValue(&b, op.Row[c], rename)
		}
		b.WriteByte('M')
		for _, m := range op.Mutations {
			keyString(&b, m.Column)
			keyString(&b, string(m.Mutator))
			keyValue(&b, m.Value, rename)
		}
		keys[i] = b.String()
	}
	return keys, ok
}

// keyString writes s to a key, length first (no two strings run into
// one another).
func keyString(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// keyValue writes an OVSDB value to a key, tagged with its type, its
// UUIDs renamed: sets in their order, maps sorted. Written by hand: fmt
// (which sorts maps too) was 8% of a NotReady pass's CPU in process, a
// millisecond per pass. A type an operation does not hold goes through
// fmt.
func keyValue(b *strings.Builder, v any, rename func(string) string) {
	switch v := v.(type) {
	case nil:
		b.WriteByte('n')
	case string:
		b.WriteByte('s')
		keyString(b, v)
	case int:
		b.WriteByte('i')
		b.WriteString(strconv.Itoa(v))
		b.WriteByte(';')
	case float64:
		b.WriteByte('f')
		b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		b.WriteByte(';')
	case bool:
		b.WriteByte('b')
		b.WriteString(strconv.FormatBool(v))
		b.WriteByte(';')
	case ovsdb.UUID:
		b.WriteByte('u')
		keyString(b, rename(v.GoUUID))
	case ovsdb.OvsSet:
		b.WriteByte('S')
		b.WriteString(strconv.Itoa(len(v.GoSet)))
		b.WriteByte('[')
		for _, e := range v.GoSet {
			keyValue(b, e, rename)
		}
		b.WriteByte(']')
	case ovsdb.OvsMap:
		entries := make([]string, 0, len(v.GoMap))
		var e strings.Builder
		for k, val := range v.GoMap {
			e.Reset()
			keyValue(&e, k, rename)
			keyValue(&e, val, rename)
			entries = append(entries, e.String())
		}
		slices.Sort(entries)
		b.WriteByte('M')
		b.WriteString(strconv.Itoa(len(entries)))
		b.WriteByte('[')
		for _, e := range entries {
			b.WriteString(e)
		}
		b.WriteByte(']')
	default:
		keyString(b, fmt.Sprintf("%T %v", v, mapUUIDs(v, rename)))
	}
}

// writes are what the plans of the steps pending write (see targets):
// rows, the holders whose references they change, and those references.
type writes struct{ rows, holders, refs map[string]bool }

// writesOf returns what the plans of pending write.
func writesOf(pending []*step) *writes {
	w := &writes{rows: map[string]bool{}, holders: map[string]bool{}, refs: map[string]bool{}}
	for _, st := range pending {
		for _, q := range st.sent {
			named, _ := insertNames(q)
			for i := range q.ops {
				row, ref := targets(q, i, named)
				switch {
				case ref != "":
					w.holders[row], w.refs[ref] = true, true
				case row != "":
					w.rows[row] = true
				}
			}
		}
	}
	return w
}

// conflicts reports whether an operation of p writes what w holds: a
// row both change, or the same reference of a holder (each adding its
// own rows to, or taking them from, a router's column is no conflict).
func (w *writes) conflicts(p *plan) bool {
	named, _ := insertNames(p)
	for i := range p.ops {
		row, ref := targets(p, i, named)
		switch {
		case ref != "" && (w.rows[row] || w.refs[ref]):
			return true
		case ref == "" && row != "" && (w.rows[row] || w.holders[row]):
			return true
		}
	}
	return false
}

// targets returns the row operation i of p writes (inserts, updates,
// mutates or deletes), and for a reference it adds or takes (p.ref), the
// reference too: "" for a wait, or an insert of a row without a derived
// UUID (a new row of its own).
func targets(p *plan, i int, named map[string]string) (row, ref string) {
	op := p.ops[i]
	u := uuidWhere(&op)
	switch {
	case op.Op == ovsdb.OperationWait, op.Op == ovsdb.OperationInsert && op.UUID == "":
		return "", ""
	case op.Op == ovsdb.OperationInsert:
		u = op.UUID
	case p.ref[i]:
		var elem []string
		for _, m := range op.Mutations {
			mapUUIDs(m.Value, func(e string) string {
				if d := named[e]; d != "" {
					e = d
				}
				elem = append(elem, m.Column+" "+e)
				return e
			})
		}
		return op.Table + " " + u, op.Table + " " + u + " " + strings.Join(elem, ",")
	}
	return op.Table + " " + u, ""
}

// mapUUIDs returns v (an OVSDB value) with each UUID in it mapped by f.
func mapUUIDs(v any, f func(string) string) any {
	switch v := v.(type) {
	case ovsdb.UUID:
		return ovsdb.UUID{GoUUID: f(v.GoUUID)}
	case ovsdb.OvsSet:
		set := make([]any, len(v.GoSet))
		for i, e := range v.GoSet {
			set[i] = mapUUIDs(e, f)
		}
		return ovsdb.OvsSet{GoSet: set}
	case ovsdb.OvsMap:
		m := make(map[any]any, len(v.GoMap))
		for k, e := range v.GoMap {
			m[mapUUIDs(k, f)] = mapUUIDs(e, f)
		}
		return ovsdb.OvsMap{GoMap: m}
	}
	return v
}

// names reports whether op holds one of the UUIDs of set.
func names(op ovsdb.Operation, set map[string]bool) bool {
	found := false
	see := func(u string) string {
		found = found || set[u]
		return u
	}
	for _, v := range op.Row {
		mapUUIDs(v, see)
	}
	for _, m := range op.Mutations {
		mapUUIDs(m.Value, see)
	}
	return found
}

// changedParts returns the parts (partLBs, ...) in which a and b differ.
func changedParts(a, b State) int {
	parts := 0
	for _, part := range []struct {
		bit   int
		equal bool
	}{
		{partLBs, slices.EqualFunc(a.LoadBalancers, b.LoadBalancers, LoadBalancer.equal) &&
			slices.EqualFunc(a.Groups, b.Groups, LoadBalancerGroup.equal)},
		{partPolicies, slices.EqualFunc(a.Policies, b.Policies, RouterPolicy.equal)},
		{partNATs, slices.EqualFunc(a.NATs, b.NATs, NAT.equal)},
		{partAddressSets, slices.EqualFunc(a.AddressSets, b.AddressSets, AddressSet.equal)},
		{partQoS, slices.EqualFunc(a.QoSRules, b.QoSRules, QoS.equal)},
		{partACLs, slices.EqualFunc(a.ACLs, b.ACLs, ACL.equal)},
		{partTemplateVars, slices.Equal(a.TemplateVars, b.TemplateVars)},
	} {
		if !part.equal {
			parts |= part.bit
		}
	}
	return parts
}

// committed returns a wait operation that holds, within followWait,
// once p's operations have committed: on a row p updates (its updated
// columns as p writes them), deletes (gone) or inserts with its derived
// UUID (there, as inserted); false when p has none of these.
func committed(p *plan) (ovsdb.Operation, bool) {
	timeout := followWait
	mutated := map[string]bool{}
	for _, op := range p.ops {
		if op.Op == ovsdb.OperationMutate {
			for _, m := range op.Mutations {
				mutated[whereKey(op)+"/"+m.Column] = true
			}
		}
	}
	var del, ins *ovsdb.Operation
	for i := range p.ops {
		op := &p.ops[i]
		switch {
		case op.Op == ovsdb.OperationUpdate && uuidWhere(op) != "":
			cols := slices.Sorted(maps.Keys(op.Row))
			if slices.ContainsFunc(cols, func(c string) bool { return mutated[whereKey(*op)+"/"+c] }) {
				continue
			}
			return ovsdb.Operation{Op: ovsdb.OperationWait, Table: op.Table, Timeout: &timeout, Where: op.Where,
				Until: string(ovsdb.WaitConditionEqual), Columns: cols, Rows: []ovsdb.Row{op.Row}}, true
		case op.Op == ovsdb.OperationDelete && uuidWhere(op) != "" && del == nil:
			del = op
		case op.Op == ovsdb.OperationInsert && op.UUID != "" && ins == nil && !refers(op.Row):
			ins = op
		}
	}
	switch {
	case del != nil:
		u := uuidWhere(del)
		return ovsdb.Operation{Op: ovsdb.OperationWait, Table: del.Table, Timeout: &timeout, Where: del.Where,
			Until: string(ovsdb.WaitConditionNotEqual), Columns: []string{"_uuid"},
			Rows: []ovsdb.Row{{"_uuid": ovsdb.UUID{GoUUID: u}}}}, true
	case ins != nil:
		// The row as inserted, not only its UUID: a row of that UUID
		// already there (the cache lagging another writer's insert)
		// does not say that p committed.
		row := maps.Clone(ins.Row)
		row["_uuid"] = ovsdb.UUID{GoUUID: ins.UUID}
		return ovsdb.Operation{Op: ovsdb.OperationWait, Table: ins.Table, Timeout: &timeout,
			Where: whereUUID(ins.UUID),
			Until: string(ovsdb.WaitConditionEqual), Columns: slices.Sorted(maps.Keys(row)), Rows: []ovsdb.Row{row}}, true
	}
	return ovsdb.Operation{}, false
}

// refers reports whether row holds a reference (a UUID, maybe one named
// in its own transaction, which another transaction cannot name).
func refers(row ovsdb.Row) bool {
	found := false
	for _, v := range row {
		mapUUIDs(v, func(u string) string { found = true; return u })
	}
	return found
}

// uuidWhere returns the UUID op selects its row by, "" when it does not
// select one row by UUID.
func uuidWhere(op *ovsdb.Operation) string {
	if len(op.Where) != 1 || op.Where[0].Column != "_uuid" || op.Where[0].Function != ovsdb.ConditionEqual {
		return ""
	}
	u, _ := op.Where[0].Value.(ovsdb.UUID)
	return u.GoUUID
}

func whereKey(op ovsdb.Operation) string { return op.Table + "/" + uuidWhere(&op) }

// step is a Sync under way: its batches sent (start, follow), its result
// waited for by wait.
type step struct {
	s       *syncer
	desired map[Owner]State
	pl      *pipeline // nil when nothing was planned (err)
	err     error     // the error that stopped it before anything was sent
	batches int       // the batches sent
	sent    []*plan   // the plans of the first batch sent
	sn      *snap     // the snapshot the plans were made against

	done chan struct{} // closed once its batches are done (idle)
	once sync.Once
	res  Result
	werr error
}

// failed ends st with err before anything was sent.
func (st *step) failed(err error) *step {
	st.err = err
	return st
}

// send sends a batch of st.
func (st *step) send(ctx context.Context, batch []Owner, plans []*plan) {
	st.batches++
	if st.batches == 1 {
		st.sent = plans
	}
	st.pl.send(ctx, batch, plans)
}

// idle returns a channel closed once st's batches are done, their rows
// in the cache. Called once everything was sent.
func (st *step) idle() <-chan struct{} {
	if st.done == nil {
		st.done = make(chan struct{})
		go func() {
			if st.pl != nil {
				st.pl.wg.Wait()
			}
			close(st.done)
		}()
	}
	return st.done
}

// answered reports whether st's batches are done, not waiting.
func (st *step) answered() bool {
	select {
	case <-st.idle():
		return true
	default:
		return false
	}
}

// wait waits for st's batches and returns what Sync returns.
func (st *step) wait() (Result, error) {
	st.once.Do(func() {
		defer st.s.logFailed()
		err := st.err
		if st.pl != nil {
			if perr := st.pl.wait(); err == nil {
				err = perr
			}
		}
		if err == nil {
			err = st.s.err()
		}
		st.res, st.werr = st.s.res, err
	})
	return st.res, st.werr
}
