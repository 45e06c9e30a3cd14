package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// NB drift. The leader's NB client monitors the tables it writes
// (ovsdbnb.Client.TakeChanges): when rows of an owner ovnedge synced are
// changed, deleted or detached by someone else, that owner is synced
// again with the State it last wrote, a few hundred milliseconds later
// (repairDelay), and the repair is logged with what it wrote. The
// monitor's echo of ovnedge's own writes is recognised by the rows being
// what was written (ovsdbnb.Client.Drifted) and costs no sync. A
// reconnection (the NB restarted, a RAFT leader changed, the database
// wiped and created again) and a router, switch or load balancer group
// deleted (or a group taken from a router or switch) repair every owner,
// and ask the cluster loop for a reconcile at once. One created (the
// topology restored, a node joined, the leader's own groups written)
// changes no owner's rows: it only asks for that reconcile, so owners
// refused for want of that topology are written without waiting for
// their backoff. Every owner is repaired every fullResync too, on a timer
// of its own.
//
// Rows stamped with an owner ovnedge does not hold (a backup restored
// with rows of objects deleted since) are left to the cluster loop, which
// deletes them when no object wants them.

// nbOwnerTypes are the owner types whose rows the leader finds in the NB
// on connecting: those no object wants are deleted by the first sync.
var nbOwnerTypes = []string{egress.OwnerEgressIP, egress.OwnerNode, egress.OwnerClusterPolicies, lbsvc.OwnerService}

// egressOwnerTypes are the owner types the EgressIP make-before-break
// steps go through.
var egressOwnerTypes = []string{egress.OwnerEgressIP, egress.OwnerNode, egress.OwnerClusterPolicies}

// repairReason is why the NB was repaired: label is the reason label of
// ovnedge_nb_repairs_total, text what the log says.
type repairReason struct{ label, text string }

// The reasons of an NB repair.
var (
	reasonChanged     = repairReason{"changed", "rows changed by another writer"}
	reasonPeriodic    = repairReason{"periodic", "periodic full resync"}
	reasonReconnected = repairReason{"reconnected", "reconnected: the database may have been replaced"}
	reasonTopology    = repairReason{"topology", "routers, switches or load balancer groups created or deleted"}
)

// repairDelay lets a burst of NB changes (a restore writing row after
// row, a reconnection reloading the cache) settle before the repair.
const repairDelay = 200 * time.Millisecond

// dialNB connects the leader's NB client and reads what a previous
// leader (or this daemon before a restart) left there: the owners to
// delete if no object wants them any more, and the EgressIP rows the
// first make-before-break steps start from, so that unchanged rows are
// neither deleted nor inserted again. It starts the drift repair.
func (d *Dataplane) dialNB(ctx context.Context) error {
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: d.cfg.NBAddress, PrivateKey: d.cfg.NBPrivKey,
		Certificate: d.cfg.NBCert, CACert: d.cfg.NBCA, Logger: d.log})
	if err != nil {
		return fmt.Errorf("northbound: %w", err)
	}
	stale, err := c.Owners(nbOwnerTypes...)
	if err == nil {
		d.lastEIP, err = c.Current(egressOwnerTypes...)
	}
	if err != nil {
		c.Close()
		return fmt.Errorf("northbound: %w", err)
	}
	d.nb, d.stale, d.synced = c, stale, nil
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.nbStop = cancel
	go d.watchNB(wctx, c)
	d.log.Info("northbound: starting from the rows in the NB", "owners", len(stale), "egress-owners", len(d.lastEIP))
	return nil
}

// closeNB stops the drift repair and closes the NB client; the next
// cluster reconcile connects again and starts from what the NB holds.
// Called with cmu held: a repair waiting for it finds another client (or
// none) and returns.
func (d *Dataplane) closeNB() {
	if d.nb == nil {
		return
	}
	d.nbStop()
	d.nb.Close()
	d.nb, d.nbStop, d.synced, d.stale, d.repairing, d.reread = nil, nil, nil, nil, repairReason{}, false
	d.lastEIP, d.lastNodes = map[ovsdbnb.Owner]ovsdbnb.State{}, nil
	clear(d.lbOwners)
}

// Leading is told when this instance starts and stops leading. A former
// leader drops its NB connection and its record of what it wrote: another
// leader has written since, and on leading again this instance starts
// from the NB as a new process does.
//
// Until it leads again its cluster work writes nothing: a reconcile that
// began before the Lease was lost, or was queued behind it, would
// otherwise connect again and write (and start a drift repair) beside the
// new leader.
func (d *Dataplane) Leading(leading bool) {
	d.cmu.Lock()
	defer d.cmu.Unlock()
	d.resigned = !leading
	d.audit = nil
	// The heartbeat drops its targets with the leadership: the next pass
	// sets them again, even with the nodes unchanged.
	d.targetNodes = nil
	if !leading {
		d.closeNB()
	}
}

// syncLost is called when a sync failed without saying which owners were
// written (the connection lost, the context ended while a transaction
// was out): every owner is synced again, and the next sync's
// make-before-break steps start from the egress rows the NB holds, not
// from lastEIP. Steps from the rows before the lost sync would take back
// what it committed: its reroutes deleted, then inserted again.
func (d *Dataplane) syncLost() {
	d.synced, d.reread = nil, true
}

// startFromNB reads the egress rows back from the NB after syncLost, as
// dialNB does on connecting.
func (d *Dataplane) startFromNB() error {
	if !d.reread {
		return nil
	}
	cur, err := d.nb.Current(egressOwnerTypes...)
	if err != nil {
		return fmt.Errorf("northbound: reading back the egress rows after a failed sync: %w", err)
	}
	d.lastEIP, d.reread = cur, false
	return nil
}

// wake asks the cluster loop for a reconcile, when Run's Env.Wake is
// wired to it.
func (d *Dataplane) wake() {
	if d.Wake != nil {
		d.Wake()
	}
}

// watchNB repairs NB drift until ctx ends (see the note above).
func (d *Dataplane) watchNB(ctx context.Context, c *ovsdbnb.Client) {
	tick := time.NewTicker(fullResync)
	defer tick.Stop()
	for {
		periodic := false
		select {
		case <-ctx.Done():
			return
		case <-c.Changed():
			select {
			case <-ctx.Done():
				return
			case <-time.After(repairDelay):
			}
		case <-tick.C:
			periodic = true
		}
		d.repairNB(ctx, c, periodic)
	}
}

// repairNB syncs again, with the State last written, the owners whose
// rows changed (every owner after a reconnection, a topology change or on
// the periodic resync) and are no longer what ovnedge last wrote, and
// logs what that wrote.
//
// The monitor reports ovnedge's own writes as changes too (it does not
// say who wrote): an owner whose rows in the cache are the State last
// written is such an echo, or a change already undone, and is not synced.
// That comparison (ovsdbnb.Client.Drifted) runs without the cluster
// lock; the lock is held only to copy the States last written and to
// sync the owners that drifted, repairBatch owners at a time, so a
// cluster reconcile waits for at most one small repair.
func (d *Dataplane) repairNB(ctx context.Context, c *ovsdbnb.Client, periodic bool) {
	ch := c.TakeChanges()
	reason := reasonChanged
	switch {
	case periodic:
		reason = reasonPeriodic
	case ch.Reconnected:
		reason = reasonReconnected
	case ch.Topology:
		reason = reasonTopology
	}
	// A router, switch or group created changes no owner's rows: the
	// owners refused for want of it are retried (repairCandidates), none
	// compared. One deleted may have taken rows no owner's change names.
	all := periodic || ch.Reconnected || ch.TopologyLost
	begin := time.Now()
	written, ok := d.repairCandidates(c, ch, reason, all)
	if !ok || len(written) == 0 {
		return
	}
	d.m.NBComparing.Set(1)
	defer d.m.NBComparing.Set(0)
	drifted, err := c.Drifted(written)
	if err != nil {
		// Disconnected (the reconnection repairs every owner) or
		// closed (no longer the leader's client).
		if ctx.Err() == nil {
			d.log.Debug("northbound: repair postponed: the rows cannot be read back", "reason", reason.text, "err", err)
		}
		return
	}
	compared := time.Since(begin)
	if len(drifted) == 0 {
		d.log.Debug("northbound: nothing to repair", "reason", reason.text, "owners", len(written),
			"echoes", len(written), "took", compared)
		return
	}
	var total ovsdbnb.Result
	refused := 0
	for batch := range slices.Chunk(drifted, repairChunk) {
		res, n, done := d.repairBatch(ctx, c, batch, written, reason)
		total.Add(res)
		refused += n
		if done {
			break
		}
	}
	if total.Ops() == 0 {
		d.log.Debug("northbound: nothing to repair", "reason", reason.text, "owners", len(written),
			"echoes", len(written)-len(drifted), "drifted", len(drifted), "refused", refused, "took", time.Since(begin))
		return
	}
	d.logRepair(reason, "", ch.Owners, total, refused, time.Since(begin))
}

// repairChunk is the most owners a repair syncs under the cluster lock at
// once.
const repairChunk = 64

// repairCandidates returns, under the cluster lock (held only for this),
// the States last written of the owners to compare with the NB: those
// changed, or all with all. Changed owners this leader has not written
// (refused and being retried, or wanted by no object) are left to the
// cluster loop, woken for them. ok is false when c is no longer the
// leader's client.
func (d *Dataplane) repairCandidates(c *ovsdbnb.Client, ch ovsdbnb.Changes, reason repairReason, all bool) (map[ovsdbnb.Owner]ovsdbnb.State, bool) {
	d.cmu.Lock()
	defer d.cmu.Unlock()
	if d.nb != c {
		return nil, false
	}
	if all || ch.Topology || d.synced == nil {
		d.wakeFor(reason) // owners refused or not yet written are retried now
	}
	if d.synced == nil {
		return nil, true // no sync has completed: the cluster loop writes everything
	}
	written := map[ovsdbnb.Owner]ovsdbnb.State{}
	if all {
		maps.Copy(written, d.synced) // States are replaced, never modified: sharing them is safe
	}
	for o := range ch.Owners {
		if st, ok := d.synced[o]; ok {
			written[o] = st
			continue
		}
		if slices.Contains(nbOwnerTypes, o.Type) && !slices.Contains(d.stale, o) {
			d.stale = append(d.stale, o)
		}
		d.wakeFor(reason)
	}
	return written, true
}

// repairBatch syncs the owners of batch again with the State they were
// compared with, under the cluster lock, unless the cluster loop has
// written them since (its Sync wrote over any drift). It returns what the
// sync wrote, how many owners the server refused, and done when the rest
// of the repair is to be left to the cluster loop (the client replaced,
// or a failed transaction).
func (d *Dataplane) repairBatch(ctx context.Context, c *ovsdbnb.Client, batch []ovsdbnb.Owner,
	written map[ovsdbnb.Owner]ovsdbnb.State, reason repairReason) (ovsdbnb.Result, int, bool) {
	d.cmu.Lock()
	locked := time.Now()
	defer func() {
		held := time.Since(locked)
		d.cmu.Unlock()
		d.log.Debug("northbound: repair batch synced under the cluster lock", "owners", len(batch), "held", held)
	}()
	if d.nb != c || d.synced == nil {
		return ovsdbnb.Result{}, 0, true
	}
	send := make(map[ovsdbnb.Owner]ovsdbnb.State, len(batch))
	for _, o := range batch {
		if st, ok := d.synced[o]; ok && st.Equal(written[o]) {
			send[o] = st
		}
	}
	if len(send) == 0 {
		return ovsdbnb.Result{}, 0, false
	}
	res, err := c.Sync(ctx, send)
	d.countNB(res)
	var se *ovsdbnb.SyncError
	switch {
	case err != nil && !errors.As(err, &se):
		d.syncLost() // unknown: the cluster loop resends everything
		d.wakeFor(reason)
		d.log.Warn("northbound: repair failed; the cluster loop syncs every owner again", "reason", reason.text, "err", err)
		return res, 0, true
	case se != nil:
		for _, oe := range se.Owners {
			d.refuse(oe.Owner) // retried, with an event, by the cluster loop
		}
		d.wakeFor(reason)
	}
	return res, refusedOwners(se), false
}

// wakeFor asks the cluster loop for a reconcile whose writes are logged
// as a repair for reason.
func (d *Dataplane) wakeFor(reason repairReason) {
	if d.repairing == (repairReason{}) {
		d.repairing = reason
	}
	d.wake()
}

// loggedRepair logs, when the drift repair asked for this cluster
// reconcile, what the reconcile wrote; the request is done once the
// reconcile succeeds.
func (d *Dataplane) loggedRepair(res ovsdbnb.Result, err error) {
	if d.repairing == (repairReason{}) {
		return
	}
	if res.Ops() > 0 {
		d.logRepair(d.repairing, " (by the cluster loop)", nil, res, 0, 0)
	}
	if err == nil {
		d.repairing = repairReason{}
	}
}

// logRepair logs a repair (by, when not the repair itself, says who
// wrote it): why, the owners written with what changed in their rows
// (when the monitor said), the operations and the owners refused; and
// counts it in ovnedge_nb_repairs_total.
func (d *Dataplane) logRepair(reason repairReason, by string, changes map[ovsdbnb.Owner][]string, res ovsdbnb.Result, refused int, took time.Duration) {
	d.m.NBRepairs.WithLabelValues(reason.label).Inc()
	d.m.NBRepairedOwners.WithLabelValues(reason.label).Add(float64(len(res.Changed)))
	d.log.Info("northbound: repaired rows changed behind ovnedge's back", "reason", reason.text+by,
		"owners", len(res.Changed), "repaired", describeRepair(res.Changed, changes, 10),
		"inserted", res.Inserts, "updated", res.Updates, "mutated", res.Mutates, "deleted", res.Deletes,
		"refused", refused, "took", took.Round(time.Millisecond))
}

// describeRepair renders up to max owners written, each with what the
// monitor saw change in its rows: "Type/name (what, what); ...", and how
// many more there are.
func describeRepair(owners []ovsdbnb.Owner, changes map[ovsdbnb.Owner][]string, max int) string {
	keys := slices.SortedFunc(slices.Values(owners), func(a, b ovsdbnb.Owner) int { return strings.Compare(a.String(), b.String()) })
	var parts []string
	for i, o := range keys {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(keys)-max))
			break
		}
		p := o.String()
		if what := changes[o]; len(what) > 0 {
			p += " (" + strings.Join(what, ", ") + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// refusedOwners counts the owners of se.
func refusedOwners(se *ovsdbnb.SyncError) int {
	if se == nil {
		return 0
	}
	return len(se.Owners)
}
