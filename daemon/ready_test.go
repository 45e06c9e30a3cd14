package daemon

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
		do     func(r *readiness)
		ready  bool
		reason string
	}
	cases := []struct {
		name    string
		hasNode bool
		steps   []step
	}{
		{"node instance", true, []step{
			{"synced", func(r *readiness) { r.setSynced() }, false, reasonNotYet},
			{"node fails", func(r *readiness) { r.nodeDone(bad) }, false, reasonNodeFailed},
			{"node ok", func(r *readiness) { r.nodeDone(nil) }, true, reasonReconciled},
			{"follower's cluster pass ignored", func(r *readiness) { r.clusterDone(nb) }, true, reasonReconciled},
			{"leads", func(r *readiness) { r.setLeading(true) }, false, reasonNotYet},
			{"NB unreachable", func(r *readiness) { r.clusterDone(nb) }, false, reasonClusterFailed},
			{"node failing counts first", func(r *readiness) { r.nodeDone(bad) }, false, reasonNodeFailed},
			{"node ok again", func(r *readiness) { r.nodeDone(nil) }, false, reasonClusterFailed},
			{"NB back", func(r *readiness) { r.clusterDone(nil) }, true, reasonReconciled},
			{"stops leading", func(r *readiness) { r.setLeading(false) }, true, reasonReconciled},
		}},
		{"leader without a node", false, []step{
			{"not synced", func(*readiness) {}, false, reasonSyncing},
			{"synced, following", func(r *readiness) { r.setSynced() }, true, reasonReconciled},
			{"leads", func(r *readiness) { r.setLeading(true) }, false, reasonNotYet},
			{"first pass", func(r *readiness) { r.clusterDone(nil) }, true, reasonReconciled},
		}},
	}
	for _, c := range cases {
		var published []readyState
		r := newReadiness(c.hasNode, func(s readyState, changed bool) {
			if changed {
				published = append(published, s)
			}
		})
		prev := r.last
		for _, s := range c.steps {
			before := len(published)
			s.do(r)
			got := r.last
			if got.ready != s.ready || got.reason != s.reason {
				t.Errorf("%s, %s: ready %v (%s: %s), want %v (%s)", c.name, s.name, got.ready, got.reason, got.message, s.ready, s.reason)
			}
			want := 0
			if got.ready != prev.ready || got.reason != prev.reason {
				want = 1
			}
			if n := len(published) - before; n != want || (n == 1 && published[before] != got) {
				t.Errorf("%s, %s: %d publications, want %d", c.name, s.name, n, want)
			}
			prev = got
		}
	}
}

func TestLeaseIdentity(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"ovn-worker", "ovn-worker", "AB12"}, "ovn-worker_ovn-worker_AB12"},
		{[]string{"", "ovnedge-leader-5d9f-x2", "AB12"}, "ovnedge-leader-5d9f-x2_AB12"},
		{[]string{"", "", "AB12"}, "AB12"},
	} {
		if got := leaseIdentity(c.parts...); got != c.want {
			t.Errorf("leaseIdentity(%q) = %q, want %q", c.parts, got, c.want)
		}
	}
}
