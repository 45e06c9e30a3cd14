package e2e

import (
	"testing"
)

// TestStart brings up the cluster with ovnedge: every instance serves
// /readyz, the leader from a pod network namespace, as deploy/ runs them.
func TestStart(t *testing.T) {
	e := Start(t, Options{EgressNodes: []string{"ovn-worker2", "ovn-worker3"}})
	for _, n := range e.Nodes {
		if i := e.Instance(n.Name); i == nil || !i.Alive() {
			t.Errorf("node %s: no running instance", n.Name)
		}
	}
	if !e.Leader.Alive() {
		t.Errorf("leader not running")
	}
}
