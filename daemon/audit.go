package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// The periodic full recompute (the incremental path's safety net) runs
// off the cluster lock, as an audit (Dataplane.Audit):
//
//  1. it starts noting what the cluster passes apply (auditRun.seen) and
//     only then lists the informers' caches: every object the list holds
//     in another version than the leader's index has applied is applied
//     by a pass from then on, and noted;
//  2. it computes a second index from the list, with its own copy of the
//     egress IP holds (HostHold.Clone): 4 s at 150,000 pods, during which
//     the passes run as usual;
//  3. under the lock, for a few milliseconds, it takes the changes noted
//     and a copy of the leader's desired state (clusterIndex.state, whose
//     maps a later pass changes); then, off the lock again, it applies
//     those changes to the second index, which has then applied the same
//     version of every object as the leader's, and compares the two
//     desired states (diverged).
//
// Equal, the second index is dropped. Different, Audit says so
// (errDiverged) and names the owners in a warning, and the caller has the
// cluster loop recompute everything under the lock, as every periodic
// recompute did before the audit. A change whose informer event had not
// been handled when the changes were taken (an informer seconds behind
// its store), or a hold of an egress IP on a host interface running out
// in between, also shows as a difference: the full recompute is then
// right too.

// errNoIndex is Audit's when the leader has no incremental index to check
// (not computed yet, or the incremental path does not run with these
// Params); errDiverged when the index differs from the full recompute.
// With either (or any error) the cluster loop recomputes everything.
// errSuperseded is audited's when a pass computed everything anew while
// it ran: nothing is left to check.
var (
	errNoIndex    = errors.New("no incremental state to audit")
	errDiverged   = errors.New("the incremental state differs from a full recompute")
	errSuperseded = errors.New("computed anew meanwhile")
)

// auditRun is one audit under way (clusterWork.audit, under its mu).
type auditRun struct {
	// seen are the changes the passes applied since the audit started,
	// each object as the last pass took it.
	seen desired.Changes
}

// Audit checks the leader's incremental desired state against a full
// recompute of list's Snapshot (every object, the pods too), made without
// the cluster lock but for a few milliseconds. An error (errNoIndex,
// errDiverged, or another) asks the caller to have the cluster loop
// recompute everything instead.
func (c *clusterWork) auditIndex(ctx context.Context, list func() (desired.Snapshot, error)) error {
	c.mu.Lock()
	if c.index == nil || c.resigned || !desired.Supported(c.params) {
		c.audit = nil
		c.mu.Unlock()
		return errNoIndex
	}
	a := &auditRun{}
	c.audit = a
	p, reachable, prev := c.params, c.hooks.reachable, slices.Clone(c.lastNodes)
	c.mu.Unlock()
	// Its own holds: applying the listed statuses must neither start nor
	// end the leader's.
	p.Hold = p.Hold.Clone()
	err := c.audited(ctx, a, p, reachable, prev, list)
	c.mu.Lock()
	if c.audit == a {
		c.audit = nil
	}
	c.mu.Unlock()
	result := "match"
	switch {
	case errors.Is(err, errDiverged):
		result = "differed"
	case errors.Is(err, errSuperseded):
		return nil
	case err != nil:
		result = "failed"
	}
	c.m.Audits.WithLabelValues(result).Inc()
	return err
}

// audited is Audit's work from the list on.
func (c *clusterWork) audited(ctx context.Context, a *auditRun, p desired.Params, reachable func(string) bool, prev []ovnknode.Node,
	list func() (desired.Snapshot, error)) error {
	s, err := list()
	if err != nil {
		return fmt.Errorf("audit: list: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	s.EgressIPs, _ = c.status.OverlayWritten(s.EgressIPs) // as a pass reads them
	c.mu.Unlock()
	start := time.Now()
	y := desired.NewIndex(p, reachable, prev)
	y.GiveWay(c.giveWay(giveWayRun, giveWayMax))
	_, err = y.Apply(desired.SnapshotChanges(s))
	took := time.Since(start)
	c.m.Reconcile.WithLabelValues("audit", map[bool]string{true: "ok", false: "error"}[err == nil]).Observe(took.Seconds())
	if err != nil {
		return fmt.Errorf("audit: full recompute: %w", err)
	}
	// The leader's state, and the changes it applied since the audit
	// started, at one instant.
	c.mu.Lock()
	if c.audit != a || c.index == nil {
		c.mu.Unlock()
		return errSuperseded
	}
	seen := a.seen
	a.seen = desired.Changes{}
	inc := c.index.State()
	inc.Egress, inc.LB = maps.Clone(inc.Egress), maps.Clone(inc.LB)
	inc.Status, inc.Ingress, inc.Nodes = maps.Clone(inc.Status), maps.Clone(inc.Ingress), slices.Clone(inc.Nodes)
	var cl *ovsdbnb.Client
	if c.nb != nil {
		cl = c.nb.Client()
	}
	if cl != nil {
		// The index's map keeps the rows as the NB's schema fits them
		// (fitSchema): both are compared as written.
		c.fitSchema(cl, &inc)
	}
	c.mu.Unlock()
	checked := time.Now()
	full, err := y.Apply(&seen)
	if err != nil {
		return fmt.Errorf("audit: the changes since its list: %w", err)
	}
	if cl != nil {
		c.mu.Lock()
		c.fitSchema(cl, &full)
		c.mu.Unlock()
	}
	diff := desired.Diverged(full, inc)
	if diff.None() {
		c.log.Debug("audit: the incremental state matches a full recompute", "recompute", took,
			"changes", seen.Len(), "check", time.Since(checked))
		return nil
	}
	c.log.Warn("audit: the incremental state differs from a full recompute of the informers' caches; the cluster loop recomputes everything",
		"owners", len(diff.Owners), "first", firstOwners(diff.Owners, 10), "other", diff.Other)
	return errDiverged
}

// firstOwners names up to n of owners.
func firstOwners(owners []ovsdbnb.Owner, n int) []string {
	out := make([]string, 0, min(n, len(owners)))
	for _, o := range owners[:min(n, len(owners))] {
		out = append(out, o.String())
	}
	return out
}

// The audit gives way to the cluster passes: between two objects it
// waits while a pass runs (or waits for the lock), up to giveWayMax at a
// time and not again before it has run giveWayRun, so that passes back to
// back slow it down (to about a tenth of a core) without stopping it.
// Without it, a node going NotReady at 150,000 pods took twice as long
// while an audit computed beside it on two cores.
const (
	giveWayMax = 100 * time.Millisecond
	giveWayRun = 10 * time.Millisecond
)

// giveWay returns an audit index's clusterIndex.giveWay: it waits while
// a pass runs, up to max at a time, and not again before run has passed
// since it last went on.
func (c *clusterWork) giveWay(run, max time.Duration) func() {
	var resumed time.Time
	return func() {
		if c.passing.Load() == 0 || time.Since(resumed) < run {
			return
		}
		for deadline := time.Now().Add(max); c.passing.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(200 * time.Microsecond)
		}
		resumed = time.Now()
	}
}
