package readiness

import (
	"errors"
	"testing"
)

// Readiness follows the instance's own work: the informers, the node's
// last pass, and the cluster's last pass while it leads; each change is
// published once.
func TestReadiness(t *testing.T) {
	t.Parallel()
	bad := errors.New(`port "eth0" is not on the bridge`)
	nb := errors.New("connect to tcp:10.0.0.1:6641: refused")
	type step struct {
		name   string
		do     func(r *Tracker)
		ready  bool
		reason string
	}
	cases := []struct {
		name    string
		hasNode bool
		steps   []step
	}{
		{"node instance", true, []step{
			{"synced", func(r *Tracker) { r.SetSynced() }, false, ReasonNotYet},
			{"node fails", func(r *Tracker) { r.NodeDone(bad) }, false, ReasonNodeFailed},
			{"node ok", func(r *Tracker) { r.NodeDone(nil) }, true, ReasonReconciled},
			{"follower's cluster pass ignored", func(r *Tracker) { r.ClusterDone(nb) }, true, ReasonReconciled},
			{"leads", func(r *Tracker) { r.SetLeading(true) }, false, ReasonNotYet},
			{"NB unreachable", func(r *Tracker) { r.ClusterDone(nb) }, false, ReasonClusterFailed},
			{"node failing counts first", func(r *Tracker) { r.NodeDone(bad) }, false, ReasonNodeFailed},
			{"node ok again", func(r *Tracker) { r.NodeDone(nil) }, false, ReasonClusterFailed},
			{"NB back", func(r *Tracker) { r.ClusterDone(nil) }, true, ReasonReconciled},
			{"stops leading", func(r *Tracker) { r.SetLeading(false) }, true, ReasonReconciled},
		}},
		{"leader without a node", false, []step{
			{"not synced", func(*Tracker) {}, false, ReasonSyncing},
			{"synced, following", func(r *Tracker) { r.SetSynced() }, true, ReasonReconciled},
			{"leads", func(r *Tracker) { r.SetLeading(true) }, false, ReasonNotYet},
			{"first pass", func(r *Tracker) { r.ClusterDone(nil) }, true, ReasonReconciled},
		}},
	}
	for _, c := range cases {
		var published []State
		r := NewTracker(c.hasNode, func(s State, changed bool) {
			if changed {
				published = append(published, s)
			}
		})
		prev := r.last
		for _, s := range c.steps {
			before := len(published)
			s.do(r)
			got := r.last
			if got.Ready != s.ready || got.Reason != s.reason {
				t.Errorf("%s, %s: ready %v (%s: %s), want %v (%s)", c.name, s.name, got.Ready, got.Reason, got.Message, s.ready, s.reason)
			}
			want := 0
			if got.Ready != prev.Ready || got.Reason != prev.Reason {
				want = 1
			}
			if n := len(published) - before; n != want || (n == 1 && published[before] != got) {
				t.Errorf("%s, %s: %d publications, want %d", c.name, s.name, n, want)
			}
			prev = got
		}
	}
}
