package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/ovnedge/ovnedge/egress"
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

// auditRun is one audit under way (Dataplane.audit, under cmu).
type auditRun struct {
	// seen are the changes the passes applied since the audit started,
	// each object as the last pass took it.
	seen Changes
}

// Audit checks the leader's incremental desired state against a full
// recompute of list's Snapshot (every object, the pods too), made without
// the cluster lock but for a few milliseconds. An error (errNoIndex,
// errDiverged, or another) asks the caller to have the cluster loop
// recompute everything instead.
func (d *Dataplane) Audit(ctx context.Context, list func() (Snapshot, error)) error {
	d.cmu.Lock()
	if d.index == nil || d.resigned || !incrementalSupported(d.params) {
		d.audit = nil
		d.cmu.Unlock()
		return errNoIndex
	}
	a := &auditRun{}
	d.audit = a
	p, reachable, prev := d.params, d.Reachable, slices.Clone(d.lastNodes)
	d.cmu.Unlock()
	// Its own holds: applying the listed statuses must neither start nor
	// end the leader's.
	p.Hold = p.Hold.Clone()
	err := d.audited(ctx, a, p, reachable, prev, list)
	d.cmu.Lock()
	if d.audit == a {
		d.audit = nil
	}
	d.cmu.Unlock()
	result := "match"
	switch {
	case errors.Is(err, errDiverged):
		result = "differed"
	case errors.Is(err, errSuperseded):
		return nil
	case err != nil:
		result = "failed"
	}
	d.m.Audits.WithLabelValues(result).Inc()
	return err
}

// audited is Audit's work from the list on.
func (d *Dataplane) audited(ctx context.Context, a *auditRun, p Params, reachable func(string) bool, prev []egress.Node,
	list func() (Snapshot, error)) error {
	s, err := list()
	if err != nil {
		return fmt.Errorf("audit: list: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d.cmu.Lock()
	s.EgressIPs, _ = d.overlayWritten(s.EgressIPs) // as a pass reads them
	d.cmu.Unlock()
	start := time.Now()
	y := newClusterIndex(p, reachable, prev)
	y.giveWay = d.giveWay(giveWayRun, giveWayMax)
	_, err = y.apply(SnapshotChanges(s))
	took := time.Since(start)
	d.m.Reconcile.WithLabelValues("audit", map[bool]string{true: "ok", false: "error"}[err == nil]).Observe(took.Seconds())
	if err != nil {
		return fmt.Errorf("audit: full recompute: %w", err)
	}
	// The leader's state, and the changes it applied since the audit
	// started, at one instant.
	d.cmu.Lock()
	if d.audit != a || d.index == nil {
		d.cmu.Unlock()
		return errSuperseded
	}
	seen := a.seen
	a.seen = Changes{}
	inc := d.index.state(0)
	inc.Egress, inc.LB = maps.Clone(inc.Egress), maps.Clone(inc.LB)
	inc.Status, inc.Ingress, inc.Nodes = maps.Clone(inc.Status), maps.Clone(inc.Ingress), slices.Clone(inc.Nodes)
	fit := d.nb != nil
	if fit {
		// The index's map keeps the rows as the NB's schema fits them
		// (fitSchema): both are compared as written.
		d.fitSchema(&inc)
	}
	d.cmu.Unlock()
	checked := time.Now()
	full, err := y.apply(&seen)
	if err != nil {
		return fmt.Errorf("audit: the changes since its list: %w", err)
	}
	if fit {
		d.cmu.Lock()
		d.fitSchema(&full)
		d.cmu.Unlock()
	}
	diff := diverged(full, inc)
	if diff.none() {
		d.log.Debug("audit: the incremental state matches a full recompute", "recompute", took,
			"changes", seen.Len(), "check", time.Since(checked))
		return nil
	}
	d.log.Warn("audit: the incremental state differs from a full recompute of the informers' caches; the cluster loop recomputes everything",
		"owners", len(diff.owners), "first", firstOwners(diff.owners, 10), "other", diff.other)
	return errDiverged
}

// seeChanges records ch, which a pass applied, in a.
func (a *auditRun) seeChanges(ch *Changes) {
	s := &a.seen
	s.Nodes = mergeChanges(s.Nodes, ch.Nodes)
	s.Namespaces = mergeChanges(s.Namespaces, ch.Namespaces)
	s.Pods = mergeChanges(s.Pods, ch.Pods)
	s.Services = mergeChanges(s.Services, ch.Services)
	s.EndpointSlices = mergeChanges(s.EndpointSlices, ch.EndpointSlices)
	s.EgressIPs = mergeChanges(s.EgressIPs, ch.EgressIPs)
	s.Reassign = s.Reassign || ch.Reassign
}

// mergeChanges is dst with src's objects over its own (allocated when
// src is not empty).
func mergeChanges[T any](dst, src map[string]T) map[string]T {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]T, len(src))
	}
	maps.Copy(dst, src)
	return dst
}

// divergence is how an incremental desired state differs from a full
// recompute of the same objects: the NB owners whose rows differ, and the
// other parts that do.
type divergence struct {
	owners []ovsdbnb.Owner
	other  []string
}

func (v divergence) none() bool { return len(v.owners) == 0 && len(v.other) == 0 }

// diverged compares the incremental state inc with the full recompute
// full: every part the leader writes or acts on (NB rows by owner, the
// EgressIP statuses, the Services' ingress, the owners kept, the host
// assignments, the egress nodes and the events).
func diverged(full, inc ClusterState) divergence {
	var v divergence
	v.owners = differingOwners(full.Egress, inc.Egress)
	v.owners = append(v.owners, differingOwners(full.LB, inc.LB)...)
	slices.SortFunc(v.owners, compareOwners)
	v.owners = slices.Compact(v.owners)
	for _, part := range []struct {
		name  string
		equal bool
	}{
		{"status", equality.Semantic.DeepEqual(full.Status, inc.Status)},
		{"ingress", equality.Semantic.DeepEqual(full.Ingress, inc.Ingress)},
		{"reply fallback", full.ReplyFallback.Equal(inc.ReplyFallback)},
		{"keep", slices.Equal(sortedOwners(full.Keep), sortedOwners(inc.Keep))},
		{"host", slices.Equal(sortedStrings(full.Host), sortedStrings(inc.Host))},
		{"nodes", reflect.DeepEqual(full.Nodes, inc.Nodes)},
		{"events", slices.Equal(sortedStrings(full.Events), sortedStrings(inc.Events))},
	} {
		if !part.equal {
			v.other = append(v.other, part.name)
		}
	}
	return v
}

// differingOwners are the owners of a and b whose states differ, one
// side having none among them.
func differingOwners(a, b map[ovsdbnb.Owner]ovsdbnb.State) []ovsdbnb.Owner {
	var out []ovsdbnb.Owner
	for o, st := range a {
		if t, ok := b[o]; !ok || !st.Equal(t) {
			out = append(out, o)
		}
	}
	for o := range b {
		if _, ok := a[o]; !ok {
			out = append(out, o)
		}
	}
	return out
}

func compareOwners(a, b ovsdbnb.Owner) int {
	return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name))
}

func sortedOwners(o []ovsdbnb.Owner) []ovsdbnb.Owner {
	return slices.SortedFunc(slices.Values(o), compareOwners)
}

// sortedStrings are the fmt.Sprint of each of s, sorted.
func sortedStrings[T any](s []T) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprint(v)
	}
	slices.Sort(out)
	return out
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
func (d *Dataplane) giveWay(run, max time.Duration) func() {
	var resumed time.Time
	return func() {
		if d.passing.Load() == 0 || time.Since(resumed) < run {
			return
		}
		for deadline := time.Now().Add(max); d.passing.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(200 * time.Microsecond)
		}
		resumed = time.Now()
	}
}
