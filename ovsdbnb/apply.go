package ovsdbnb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// apply writes the owners of batch in one transaction. An owner whose
// operation the server rejects is recorded and the batch is retried
// without it; a commit error that names no operation is isolated by
// retrying each owner alone. A failed insert guard, or an insert refused
// as a duplicate UUID, means the cache lags a committed transaction: the
// batch is planned again once the cache has caught up. A lost connection
// is retried once the client has reconnected (to the new leader).
//
// ready, when not nil, are the plans of batch made against the cache at
// the start of the Sync (the other batches in flight hold other owners):
// the first attempt sends them instead of planning again.
func (s *syncer) apply(ctx context.Context, desired map[Owner]State, batch []Owner, ready []*plan) error {
	for attempt := 1; ; attempt++ {
		plans := ready
		ready = nil
		if plans == nil {
			var err error
			if plans, err = s.planBatch(ctx, desired, s.alive(batch)); err != nil {
				return err
			}
		}
		ops, at, absorbed := assemble(plans)
		if len(ops) == 0 {
			return nil
		}
		conn := s.c.conn()
		// The endpoint it goes to, read before: the connection may drop
		// as the reply comes, and with it the client's endpoint.
		endpoint := s.c.Endpoint()
		sent := time.Now()
		results, err := s.c.transact(ctx, ops...)
		if err != nil {
			if ctx.Err() != nil || attempt >= maxAttempts {
				return fmt.Errorf("ovsdbnb: transact %d operations: %w", len(ops), err)
			}
			s.c.log.Warn("ovsdbnb: transaction lost, retrying after reconnection", "attempt", attempt, "err", err)
			if err := s.c.waitConnected(ctx); err != nil {
				return err
			}
			batch = owners(plans)
			continue
		}
		if _, err := ovsdb.CheckOperationResults(results, ops); err == nil {
			s.res.Transactions++
			for _, p := range plans {
				s.res.Add(p.res)
				s.res.Owners++
				s.res.Changed = append(s.res.Changed, p.owner)
			}
			s.res.Mutates -= absorbed
			for _, a := range at {
				if a.parent {
					s.res.Guards++
				}
			}
			s.c.log.Debug("ovsdbnb: transaction committed", "endpoint", endpoint, "owners", len(plans), "operations", len(ops), "took", time.Since(sent))
			return s.c.waitCache(ctx, conn, ops, results)
		}
		k := failedOp(results)
		var p *plan
		var i int
		if k >= 0 && k < len(at) {
			p, i = at[k].p, at[k].i
		}
		switch {
		case p == nil && len(plans) == 1:
			s.fail(&OwnerError{Owner: plans[0].owner, Row: "transaction", Err: commitError(results, len(ops))})
			return nil
		case p == nil:
			for _, q := range plans {
				if err := s.apply(ctx, desired, []Owner{q.owner}, nil); err != nil {
					return err
				}
			}
			return nil
		case k < len(at) && at[k].parent && attempt < maxAttempts:
			// A router or switch the plans add rows to is gone from
			// the server (deleted, or the database replaced) while the
			// cache still shows it: plan again against the new cache.
			s.res.Replans++
			s.c.log.Debug("ovsdbnb: a row referenced by the plan is gone, planning again", "owner", p.owner.String(), "row", p.rows[i])
			if err := sleep(ctx, retryPause); err != nil {
				return err
			}
			batch = owners(plans)
		case k < len(at) && at[k].parent:
			s.fail(&OwnerError{Owner: p.owner, Row: p.rows[i], Err: errors.New("the row it is added to was deleted and the cache never showed it")})
			batch = owners(plans)
		case lagged(p, i, results[k]) && attempt < maxAttempts:
			// The row exists on the server but not yet in the cache,
			// or (followRow) the step this one follows did not commit
			// its row: planned again once that step is done.
			s.res.Replans++
			msg := "ovsdbnb: the cache lags the server, planning again"
			if p.rows[i] == followRow {
				msg = "ovsdbnb: the step before did not commit; planning again once it is done"
			}
			s.c.log.Debug(msg, "owner", p.owner.String(), "row", p.rows[i])
			if err := sleep(ctx, retryPause); err != nil {
				return err
			}
			batch = owners(plans)
		case lagged(p, i, results[k]):
			s.fail(&OwnerError{Owner: p.owner, Row: p.rows[i], Err: errors.New("the row exists on the server but never showed in the cache")})
			batch = owners(plans)
		default:
			r := results[k]
			s.fail(&OwnerError{Owner: p.owner, Row: p.rows[i], Err: fmt.Errorf("%s: %s", r.Error, r.Details)})
			batch = owners(plans)
		}
	}
}

// planBatch plans the owners of batch against a fresh snapshot of the
// cache and returns the plans that have operations; owners already as
// desired are counted, owners that cannot be planned recorded as failed.
func (s *syncer) planBatch(ctx context.Context, desired map[Owner]State, batch []Owner) ([]*plan, error) {
	if s.after != nil {
		select {
		case <-s.after:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	sn, err := s.snapshotFor(desired, batch)
	if err != nil {
		return nil, err
	}
	var plans []*plan
	for _, o := range batch {
		if p := s.planned(sn, o, desired[o], allParts); p != nil {
			plans = append(plans, p)
		}
	}
	return plans, nil
}

// lagged reports whether the failure r of p's operation i shows that the
// cache lags the server: a failed wait guard, or a derived UUID taken.
func lagged(p *plan, i int, r ovsdb.OperationResult) bool {
	return p.lag[i] && (p.ops[i].Op == ovsdb.OperationWait || r.Error == "duplicate uuid")
}

// owners returns the owners of plans.
func owners(plans []*plan) []Owner {
	out := make([]Owner, len(plans))
	for i, p := range plans {
		out[i] = p.owner
	}
	return out
}

// failedOp returns the index of the first failed operation, -1 when
// only the commit failed.
func failedOp(results []ovsdb.OperationResult) int {
	for k, r := range results {
		if r.Error != "" {
			return k
		}
	}
	return -1
}

// opRef is where an operation of a transaction comes from: operation i
// of plan p, or, when parent is set, the guard of the row that operation
// i adds a row to.
type opRef struct {
	p      *plan
	i      int
	parent bool
}

// assemble lays out the operations of plans as one transaction, with
// where each comes from. The mutations that add rows to, or take them
// from, a reference column (a router's policies and nat, a switch's or
// router's load_balancer, ...) are merged into one mutation per row,
// column and direction, after all other operations: ovsdb-server
// rewrites the whole set on each mutation, so a thousand policies added
// to a router holding forty thousand cost a thousand rewrites. Only the
// commit checks references, so the order within the transaction does not
// matter to them. A merged mutation is attributed to the first one it
// absorbed; absorbed counts the mutations merged away.
//
// Each row that rows are added to gets a guard (see parentGuard): a
// mutation whose row is gone matches nothing and is no error, and the
// rows it was to hold, in tables that are not roots (policies, NATs,
// QoS rules), are then garbage-collected by the server as the
// transaction commits: the transaction would succeed and write nothing,
// and the cache never show the inserted rows. It happens when the cache
// still shows a router that was deleted and created again, e.g. a
// transaction planned just before the NB was replaced (wiped, its
// topology restored) and sent to the new database after the reconnect.
func assemble(plans []*plan) (ops []ovsdb.Operation, at []opRef, absorbed int) {
	type key struct {
		table, uuid, column string
		mutator             ovsdb.Mutator
	}
	var refs, guards []ovsdb.Operation
	var refAt, guardAt []opRef
	merged := map[key]int{} // -> index in refs
	guarded := map[key]bool{}
	for _, p := range plans {
		for i, op := range p.ops {
			if !p.ref[i] {
				ops, at = append(ops, op), append(at, opRef{p: p, i: i})
				continue
			}
			m := op.Mutations[0]
			k := key{op.Table, op.Where[0].Value.(ovsdb.UUID).GoUUID, m.Column, m.Mutator}
			uuids := m.Value.(ovsdb.OvsSet).GoSet
			if j, ok := merged[k]; ok {
				set := refs[j].Mutations[0].Value.(ovsdb.OvsSet)
				set.GoSet = append(set.GoSet, uuids...)
				refs[j].Mutations[0].Value = set
				absorbed++
				continue
			}
			merged[k] = len(refs)
			op.Mutations = []ovsdb.Mutation{{Column: m.Column, Mutator: m.Mutator,
				Value: ovsdb.OvsSet{GoSet: slices.Clone(uuids)}}}
			refs, refAt = append(refs, op), append(refAt, opRef{p: p, i: i})
			parent := key{table: k.table, uuid: k.uuid}
			if m.Mutator == ovsdb.MutateOperationInsert && !guarded[parent] {
				guarded[parent] = true
				guards = append(guards, parentGuard(k.table, k.uuid))
				guardAt = append(guardAt, opRef{p: p, i: i, parent: true})
			}
		}
	}
	ops, at = append(ops, refs...), append(at, refAt...)
	return append(ops, guards...), append(at, guardAt...), absorbed
}

// parentGuard is a wait operation that fails the transaction unless
// table still holds the row uuid.
func parentGuard(table, uuid string) ovsdb.Operation {
	return ovsdb.Operation{Op: ovsdb.OperationWait, Table: table, Timeout: new(int), Where: whereUUID(uuid),
		Until: string(ovsdb.WaitConditionEqual), Columns: []string{"_uuid"},
		Rows: []ovsdb.Row{{"_uuid": ovsdb.UUID{GoUUID: uuid}}}}
}

// commitError is the error of a transaction that failed at commit.
func commitError(results []ovsdb.OperationResult, n int) error {
	if len(results) > n {
		return fmt.Errorf("commit: %s: %s", results[n].Error, results[n].Details)
	}
	return errors.New("commit failed without an error result")
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitConnected waits until the client has a connection again.
// transact sends ops in one transaction, unless ctx is done: libovsdb
// sends a transaction whatever its context, and only stops waiting for
// the reply, so a controller stopping (SIGTERM, the Lease lost) would
// still commit what it had planned, e.g. the first step of a
// make-before-break whose last step never comes.
func (c *Client) transact(ctx context.Context, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("not sent: %w", err)
	}
	return c.nb.Transact(ctx, ops...)
}

func (c *Client) waitConnected(ctx context.Context) error {
	for !c.nb.Connected() {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("ovsdbnb: waiting for reconnection: %w", err)
		}
	}
	return nil
}

// waitCache waits until the cache shows the rows the committed ops
// inserted and no longer shows the rows they deleted, so the next plan
// does not insert them again (libovsdb#212). On timeout it only logs: the
// derived UUIDs and insert guards still keep duplicates out.
//
// It stops waiting when conn, the connection (Client.conn) the ops were
// sent on, is lost: the cache is then reloaded whole from the server the
// client reconnects to, which holds the rows or not, and the rows of a
// transaction the server committed just before it went down with its
// database (wiped, replaced) would never show. The reconnection makes the
// caller's repair (TakeChanges) sync every owner again.
func (c *Client) waitCache(ctx context.Context, conn uint64, ops []ovsdb.Operation, results []ovsdb.OperationResult) error {
	type want struct {
		table, uuid string
		present     bool
	}
	var wants []want
	for i, op := range ops {
		switch op.Op {
		case ovsdb.OperationInsert:
			wants = append(wants, want{op.Table, results[i].UUID.GoUUID, true})
		case ovsdb.OperationDelete:
			if u := uuidWhere(&op); u != "" && results[i].Count > 0 {
				wants = append(wants, want{op.Table, u, false})
			}
		}
	}
	deadline := time.Now().Add(cacheWait)
	for _, w := range wants {
		if _, ok := monitored[w.table]; !ok || c.nb.Cache().Table(w.table) == nil {
			continue // not monitored (EnsureTopology's ports and routes)
		}
		for c.nb.Cache().Table(w.table).HasRow(w.uuid) != w.present {
			if c.conn() != conn {
				c.log.Debug("ovsdbnb: connection lost after a commit; the cache is reloaded on reconnecting", "table", w.table, "uuid", w.uuid)
				return nil
			}
			if time.Now().After(deadline) {
				c.log.Warn("ovsdbnb: cache still lags the committed transaction", "table", w.table, "uuid", w.uuid)
				return nil
			}
			if err := sleep(ctx, time.Millisecond); err != nil {
				return fmt.Errorf("ovsdbnb: waiting for the cache: %w", err)
			}
		}
	}
	return nil
}

// syncGroups creates the load balancer groups the owners name and
// attaches them to their switches and routers, in one transaction before
// the owners' rows. Load_Balancer_Group has no external_ids, so a group
// cannot be proven ours: groups are created and attached, never deleted
// or detached. When it sends nothing (the groups exist and are attached:
// every Sync of a Service but the first) it returns the snapshot it
// read, for the owners' plans.
func (s *syncer) syncGroups(ctx context.Context, desired map[Owner]State, owners []Owner) (*snap, error) {
	if !slices.ContainsFunc(owners, func(o Owner) bool { return len(desired[o].Groups) > 0 }) {
		return nil, nil // most Syncs between full ones: no group owner
	}
	sn, err := s.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range owners {
		for _, g := range desired[o].Groups {
			if err := groupExists(sn, g); err != nil {
				s.fail(&OwnerError{Owner: o, Row: "load balancer group " + g.Name, Err: err})
				break
			}
		}
	}
	// Each group's holders missing: a group of every node's switch and
	// router (4,000 rows) named by each of 10,000 Services is looked up,
	// not collected and sorted, when it is attached already.
	type group struct {
		uuid    string          // "" for a group to create
		has     map[string]bool // its holders' UUIDs
		missing map[ref]bool
	}
	groups := map[string]*group{}
	for _, o := range s.alive(owners) {
		for _, g := range desired[o].Groups {
			gr := groups[g.Name]
			if gr == nil {
				gr = &group{missing: map[ref]bool{}}
				if u := sn.groups[g.Name]; u != "" {
					holders := sn.holders(u)
					gr.uuid, gr.has = u, make(map[string]bool, len(holders))
					for _, h := range holders {
						gr.has[h.uuid] = true
					}
				}
				groups[g.Name] = gr
			}
			for _, n := range g.Switches {
				if u := sn.switches[n]; !gr.has[u] {
					gr.missing[ref{nbdb.LogicalSwitchTable, u, n}] = true
				}
			}
			for _, n := range g.Routers {
				if u := sn.routers[n]; !gr.has[u] {
					gr.missing[ref{nbdb.LogicalRouterTable, u, n}] = true
				}
			}
		}
	}
	p := &plan{}
	for _, name := range sortedKeys(groups) {
		gr := groups[name]
		uuid := gr.uuid
		if uuid == "" {
			uuid = s.name()
			p.add("load balancer group "+name, false, ovsdb.Operation{Op: ovsdb.OperationInsert,
				Table: nbdb.LoadBalancerGroupTable, Row: ovsdb.Row{"name": name}, UUIDName: uuid})
		}
		// Switches, then routers, each by name.
		targets := slices.SortedFunc(maps.Keys(gr.missing), func(a, b ref) int {
			return cmp.Or(-cmp.Compare(a.table, b.table), cmp.Compare(a.name, b.name))
		})
		for _, t := range targets {
			p.addRef("load balancer group "+name, t, "load_balancer_group", ovsdb.MutateOperationInsert, uuid)
		}
	}
	ops := p.ops
	if len(ops) == 0 {
		return sn, nil
	}
	conn := s.c.conn()
	results, err := s.c.transact(ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(results, ops)
	}
	if err != nil {
		return nil, fmt.Errorf("ovsdbnb: load balancer groups %v: %w", sortedKeys(groups), err)
	}
	s.res.Transactions++
	s.res.Add(p.res)
	return nil, s.c.waitCache(ctx, conn, ops, results)
}

// groupExists checks that the switches and routers of g exist.
func groupExists(sn *snap, g LoadBalancerGroup) error {
	var missing []string
	for _, n := range g.Switches {
		if sn.switches[n] == "" {
			missing = append(missing, fmt.Sprintf("logical switch %q", n))
		}
	}
	for _, n := range g.Routers {
		if sn.routers[n] == "" {
			missing = append(missing, fmt.Sprintf("logical router %q", n))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%v: does not exist", missing)
	}
	return nil
}
