package ovsdbnb

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

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
// Sync after Sync would have written. A step that changes a part the
// step before changes, that writes load balancers, groups or template
// variables, or that follows a step of several transactions, waits for
// the step before, as Sync after Sync does. The step after next is
// planned once the step before it has been answered.
func (c *Client) SyncSteps(ctx context.Context, steps []map[Owner]State) []StepResult {
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
		if i > 0 {
			finish(i - 1)
			if !failed {
				st = c.follow(ctx, started[i-1], desired, i == 1)
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
	}
	finish(len(started))
	for i := len(started); i < len(steps); i++ {
		out[i].Err = ErrNotStarted
	}
	return out
}

// follow starts desired behind prev, not waiting for prev's reply (see
// SyncSteps), and returns nil when it cannot. With first, prev is the
// first step: no step before it can have committed since its snapshot
// of the shared rows, which desired is then planned against too (the
// parts it plans are not those prev writes), without indexing them
// again.
func (c *Client) follow(ctx context.Context, prev *step, desired map[Owner]State, first bool) *step {
	if prev.err != nil || prev.batches != 1 {
		return nil
	}
	for _, st := range desired {
		if len(st.LoadBalancers) > 0 || len(st.Groups) > 0 || len(st.TemplateVars) > 0 {
			return nil // shared rows (groups, chassis rows), written in transactions of their own
		}
	}
	sent := make(map[Owner]*plan, len(prev.sent))
	for _, p := range prev.sent {
		sent[p.owner] = p
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
			return nil
		}
	}
	var plans []*plan
	ops, guarded := 0, false
	for _, o := range valid {
		if prev.s.failed[o] != nil {
			return nil // not written by prev: its parts unchanged here are not in the NB
		}
		parts := allParts
		if was, ok := prev.desired[o]; ok {
			parts = changedParts(was, desired[o])
		}
		q := sent[o]
		if q != nil && q.parts&parts != 0 {
			return nil
		}
		p := s.planned(sn, o, desired[o], parts)
		if p == nil {
			continue
		}
		if q != nil {
			g, ok := committed(q)
			if !ok {
				return nil
			}
			p.add(followRow, true, g)
			guarded = true
		}
		plans = append(plans, p)
		ops += len(p.ops)
	}
	if ops > DefaultBatchOps {
		return nil
	}
	if len(plans) > 0 && !guarded {
		// No owner in common: the transaction still commits after
		// prev's, which is one transaction (all or nothing).
		i := slices.IndexFunc(prev.sent, func(q *plan) bool { _, ok := committed(q); return ok })
		if i < 0 {
			return nil
		}
		g, _ := committed(prev.sent[i])
		plans[0].add(followRow, true, g)
	}
	st := &step{s: s, desired: desired, pl: newPipeline(s, desired)}
	if len(plans) > 0 {
		s.res.Followed++
		st.send(ctx, owners(plans), plans)
	}
	st.sn = sn
	return st
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
	for _, v := range row {
		switch v := v.(type) {
		case ovsdb.UUID:
			return true
		case ovsdb.OvsSet:
			if slices.ContainsFunc(v.GoSet, func(e any) bool { _, ok := e.(ovsdb.UUID); return ok }) {
				return true
			}
		case ovsdb.OvsMap:
			for k, e := range v.GoMap {
				if _, ok := k.(ovsdb.UUID); ok {
					return true
				}
				if _, ok := e.(ovsdb.UUID); ok {
					return true
				}
			}
		}
	}
	return false
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
