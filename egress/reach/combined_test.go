package reach_test

import (
	"testing"

	"github.com/ovnedge/ovnedge/egress/reach"
)

// Combined: a node is reachable when every check says so, and every node
// is while all targets are lost at once.
func TestCombined(t *testing.T) {
	down := map[string]map[string]bool{"check": {}, "heartbeat": {}}
	check := func(by string) func(string) bool { return func(n string) bool { return !down[by][n] } }
	c := reach.NewCombined(check("check"), check("heartbeat"))
	c.SetTargets([]reach.Target{{Node: "w1"}, {Node: "w2"}})
	steps := []struct {
		name    string
		by      string
		node    string
		isDown  bool
		want    map[string]bool
		allDown bool
	}{
		{"all up", "", "", false, map[string]bool{"w1": true, "w2": true}, false},
		{"w1 lost by the heartbeat", "heartbeat", "w1", true, map[string]bool{"w1": false, "w2": true}, false},
		{"w2 lost by the check: every target lost", "check", "w2", true, map[string]bool{"w1": true, "w2": true}, true},
		{"w1 back", "heartbeat", "w1", false, map[string]bool{"w1": true, "w2": false}, false},
	}
	prev := false
	for _, s := range steps {
		if s.by != "" {
			down[s.by][s.node] = s.isDown
			if all, flipped := c.Changed(); all != s.allDown || flipped != (s.allDown != prev) {
				t.Errorf("%s: Changed %v, %v; want %v, flipped %v", s.name, all, flipped, s.allDown, s.allDown != prev)
			}
		}
		prev = s.allDown
		for n, want := range s.want {
			if got := c.Reachable(n); got != want {
				t.Errorf("%s: Reachable(%s) = %v, want %v", s.name, n, got, want)
			}
		}
		if c.AllDown() != s.allDown {
			t.Errorf("%s: AllDown %v, want %v", s.name, c.AllDown(), s.allDown)
		}
	}
	c.SetTargets(nil)
	if c.AllDown() {
		t.Error("no targets: all down")
	}
}
