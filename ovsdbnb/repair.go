package ovsdbnb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// The drift repair. The Writer's client monitors the tables it writes
// (Client.TakeChanges): when rows of an owner it wrote are changed,
// deleted or detached by someone else, that owner is written again with
// the State last written, RepairDelay later, and the repair is logged
// with what it wrote. The monitor's echo of the Writer's own writes is
// recognised by the rows being what was written (Client.Drifted) and
// costs no sync. A reconnection (the NB restarted, a RAFT leader changed,
// the database wiped and created again) and a router, switch or load
// balancer group deleted (or a group taken from a router or switch)
// repair every owner, and ask the caller for a Write at once. One created
// (the topology restored, a node joined) changes no owner's rows: it only
// asks for that Write, so owners refused for want of that topology are
// written without waiting for the caller's backoff. Every owner is
// compared every FullResync too.
//
// Rows stamped with an owner the Writer does not hold (a backup restored
// with rows of objects deleted since) are left to the next Write, which
// deletes them when no object wants them.

// repairReason is why the NB was repaired: label is the reason label of
// WriterStats.Repairs, text what the log says.
type repairReason struct{ label, text string }

// The reasons of a repair.
var (
	reasonChanged     = repairReason{"changed", "rows changed by another writer"}
	reasonPeriodic    = repairReason{"periodic", "periodic full resync"}
	reasonReconnected = repairReason{"reconnected", "reconnected: the database may have been replaced"}
	reasonTopology    = repairReason{"topology", "routers, switches or load balancer groups created or deleted"}
)

// repairChunk is the most owners a repair syncs at once (a Write waits
// for one such batch at most).
const repairChunk = 64

// run repairs c's drift until ctx ends.
func (w *Writer) run(ctx context.Context, c *Client) {
	tick := time.NewTicker(w.opts.FullResync)
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
			case <-time.After(w.opts.RepairDelay):
			}
		case <-tick.C:
			periodic = true
		}
		w.repair(ctx, c, periodic)
	}
}

// repair writes again, with the State last written, the owners whose rows
// changed (every owner after a reconnection, a topology change or on the
// periodic resync) and are no longer what was written, and logs what
// that wrote.
//
// The monitor reports the Writer's own writes as changes too (it does
// not say who wrote): an owner whose rows in the cache are the State last
// written is such an echo, or a change already undone, and is not synced.
// That comparison (Client.Drifted) runs without the Writer's lock; the
// lock is held only to copy the States last written and to sync the
// owners that drifted, repairChunk owners at a time.
func (w *Writer) repair(ctx context.Context, c *Client, periodic bool) {
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
	// owners refused for want of it are retried (candidates), none
	// compared. One deleted may have taken rows no owner's change names.
	all := periodic || ch.Reconnected || ch.TopologyLost
	begin := time.Now()
	written, ok := w.candidates(c, ch, reason, all)
	if !ok || len(written) == 0 {
		return
	}
	w.stats.comparing.Store(true)
	defer w.stats.comparing.Store(false)
	drifted, err := c.Drifted(written)
	if err != nil {
		// Disconnected (the reconnection repairs every owner) or closed
		// (no longer the Writer's client).
		if ctx.Err() == nil {
			w.opts.Logger.Debug("northbound: repair postponed: the rows cannot be read back", "reason", reason.text, "err", err)
		}
		return
	}
	w.repairDrifted(ctx, c, drifted, written, ch.Owners, reason, begin)
}

// repairDrifted writes the drifted owners again, a batch at a time, and
// logs what that wrote.
func (w *Writer) repairDrifted(ctx context.Context, c *Client, drifted []Owner, written map[Owner]State,
	changes map[Owner][]string, reason repairReason, begin time.Time) {
	if len(drifted) == 0 {
		w.opts.Logger.Debug("northbound: nothing to repair", "reason", reason.text, "owners", len(written),
			"echoes", len(written), "took", time.Since(begin))
		return
	}
	var total Result
	refused := 0
	for batch := range slices.Chunk(drifted, repairChunk) {
		res, n, done := w.repairBatch(ctx, c, batch, written, reason)
		total.Add(res)
		refused += n
		if done {
			break
		}
	}
	if total.Ops() == 0 {
		w.opts.Logger.Debug("northbound: nothing to repair", "reason", reason.text, "owners", len(written),
			"echoes", len(written)-len(drifted), "drifted", len(drifted), "refused", refused, "took", time.Since(begin))
		return
	}
	w.logRepair(reason, "", changes, total, refused, time.Since(begin))
}

// candidates returns, under the Writer's lock (held only for this), the
// States last written of the owners to compare with the NB: those
// changed, or all with all. Changed owners the Writer has not written
// (refused and being retried, or wanted by no Write) are left to the
// next Write, asked for. ok is false when c is no longer the Writer's
// client.
func (w *Writer) candidates(c *Client, ch Changes, reason repairReason, all bool) (map[Owner]State, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c != c {
		return nil, false
	}
	if all || ch.Topology || w.rec.synced == nil {
		w.wakeFor(reason) // owners refused or not yet written are retried now
	}
	if w.rec.synced == nil {
		return nil, true // no Write has completed: the next writes everything
	}
	written := map[Owner]State{}
	if all {
		maps.Copy(written, w.rec.synced) // States are replaced, never modified: sharing them is safe
	}
	for o := range ch.Owners {
		if st, ok := w.rec.synced[o]; ok {
			written[o] = st
			continue
		}
		if slices.Contains(w.opts.OwnerTypes, o.Type) && !slices.Contains(w.rec.stale, o) {
			w.rec.stale = append(w.rec.stale, o)
		}
		w.wakeFor(reason)
	}
	return written, true
}

// repairBatch syncs the owners of batch again with the State they were
// compared with, under the Writer's lock, unless a Write has written
// them since (its sync wrote over any drift). It returns what the sync
// wrote, how many owners the server refused, and done when the rest of
// the repair is left to the next Write (the client replaced, or a failed
// transaction).
func (w *Writer) repairBatch(ctx context.Context, c *Client, batch []Owner, written map[Owner]State, reason repairReason) (Result, int, bool) {
	w.mu.Lock()
	locked := time.Now()
	defer func() {
		held := time.Since(locked)
		w.mu.Unlock()
		w.opts.Logger.Debug("northbound: repair batch synced under the writer's lock", "owners", len(batch), "held", held)
	}()
	if w.c != c || w.rec.synced == nil {
		return Result{}, 0, true
	}
	send := make(map[Owner]State, len(batch))
	for _, o := range batch {
		if st, ok := w.rec.synced[o]; ok && st.Equal(written[o]) {
			send[o] = st
		}
	}
	if len(send) == 0 {
		return Result{}, 0, false
	}
	res, err := c.Sync(ctx, send)
	w.stats.ops(res)
	var se *SyncError
	switch {
	case err != nil && !errors.As(err, &se):
		w.syncLost() // unknown: the next Write sends everything
		w.wakeFor(reason)
		w.opts.Logger.Warn("northbound: repair failed; the next write compares every owner", "reason", reason.text, "err", err)
		return res, 0, true
	case se != nil:
		for _, oe := range se.Owners {
			w.refuse(oe.Owner) // retried by the next Write
		}
		w.wakeFor(reason)
		return res, len(se.Owners), false
	}
	return res, 0, false
}

// wakeFor asks for a Write whose writes are logged as a repair for
// reason.
func (w *Writer) wakeFor(reason repairReason) {
	if w.repairing == (repairReason{}) {
		w.repairing = reason
	}
	if w.opts.Wake != nil {
		w.opts.Wake()
	}
}

// loggedRepair logs, when the repair asked for this Write, what the Write
// wrote; the request is done once the Write succeeds.
func (w *Writer) loggedRepair(res Result, err error) {
	if w.repairing == (repairReason{}) {
		return
	}
	if res.Ops() > 0 {
		w.logRepair(w.repairing, " (by the cluster loop)", nil, res, 0, 0)
	}
	if err == nil {
		w.repairing = repairReason{}
	}
}

// logRepair logs a repair (by, when not the repair itself, says who
// wrote it): why, the owners written with what changed in their rows
// (when the monitor said), the operations and the owners refused; and
// counts it.
func (w *Writer) logRepair(reason repairReason, by string, changes map[Owner][]string, res Result, refused int, took time.Duration) {
	w.stats.repair(reason.label, len(res.Changed))
	w.opts.Logger.Info("northbound: repaired rows changed behind ovnedge's back", "reason", reason.text+by,
		"owners", len(res.Changed), "repaired", describeRepair(res.Changed, changes, 10),
		"inserted", res.Inserts, "updated", res.Updates, "mutated", res.Mutates, "deleted", res.Deletes,
		"refused", refused, "took", took.Round(time.Millisecond))
}

// describeRepair renders up to max owners written, each with what the
// monitor saw change in its rows: "Type/name (what, what); ...", and how
// many more there are.
func describeRepair(owners []Owner, changes map[Owner][]string, max int) string {
	keys := slices.SortedFunc(slices.Values(owners), func(a, b Owner) int { return strings.Compare(a.String(), b.String()) })
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
