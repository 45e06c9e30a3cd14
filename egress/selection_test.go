package egress_test

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/internal/clustermodel"
)

// TestSelectionMatchesSelectPods edits a random cluster step by step and
// checks after every step that the pods a Selection has each EgressIP
// serve are SelectPods' over the whole cluster, and that every change of
// them was reported.
func TestSelectionMatchesSelectPods(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		m := clustermodel.New(seed, 4, 3, 30, 6, 6)
		s := egress.NewSelection()
		served := map[string]map[string]egress.Pod{} // what the reported changes add up to
		changed := func(c egress.PodChange) {
			if served[c.EgressIP] == nil {
				served[c.EgressIP] = map[string]egress.Pod{}
			}
			if c.Had {
				delete(served[c.EgressIP], c.Key)
			}
			if c.Has {
				served[c.EgressIP][c.Key] = c.New
			}
		}
		var last desired.ClusterState
		for step := range 300 {
			what := "initial"
			if step > 0 {
				what = m.Edit(last)
			}
			ch := m.Ch
			m.Reset()
			for k, ns := range ch.Namespaces {
				s.SetNamespace(k, ns, changed)
			}
			for k, u := range ch.EgressIPs {
				s.SetEgressIP(k, u, changed)
			}
			for k, p := range ch.Pods {
				s.SetPod(k, p, changed)
			}
			snap := m.Snapshot()
			for _, u := range snap.EgressIPs {
				eip, err := egressv1.FromUnstructured(u)
				if err != nil {
					continue
				}
				want, err := egress.SelectPods(eip, snap.Namespaces, snap.Pods)
				if err != nil {
					continue
				}
				got := slices.SortedFunc(maps.Values(s.Get(eip.Name).Pods), func(a, b egress.Pod) int {
					return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
				})
				if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
					t.Fatalf("seed %d step %d (%s): %s serves %v, SelectPods %v", seed, step, what, eip.Name, got, want)
				}
				if !reflect.DeepEqual(served[eip.Name], s.Get(eip.Name).Pods) && (len(served[eip.Name]) > 0 || len(s.Get(eip.Name).Pods) > 0) {
					t.Fatalf("seed %d step %d (%s): the changes reported for %s add up to %v, it serves %v", seed, step, what,
						eip.Name, served[eip.Name], s.Get(eip.Name).Pods)
				}
			}
		}
	}
}
