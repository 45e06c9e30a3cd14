package ovsdbnb

import (
	"slices"
	"testing"
)

// TestNATRouters: the routers a make-before-break step gives a new NAT,
// whose chassis must confirm it before the reroute moves.
func TestNATRouters(t *testing.T) {
	o := Owner{Type: "EgressIP", Name: "prod"}
	nat := func(router, ext string) NAT {
		return NAT{Router: router, Type: "snat", ExternalIP: ext, LogicalIP: "10.244.1.3"}
	}
	synced := map[Owner]State{o: {NATs: []NAT{nat("GR_a", "172.18.0.44")}}}
	send := map[Owner]State{
		o:                               {NATs: []NAT{nat("GR_a", "172.18.0.44"), nat("GR_b", "172.18.0.44")}},
		{Type: "EgressIP", Name: "new"}: {NATs: []NAT{nat("GR_c", "172.18.0.45")}},
	}
	if got := natRouters(send, synced); !slices.Equal(got, []string{"GR_b", "GR_c"}) {
		t.Errorf("routers %v, want [GR_b GR_c]", got)
	}
	if got := natRouters(synced, synced); len(got) != 0 {
		t.Errorf("nothing new: %v", got)
	}
}

// TestPlanStepsDrain: a step that takes a NAT from a router waits (Drain)
// before the next, one that gives a NAT waits (Settle) unless it is the
// last, and neither waits without its hook.
func TestPlanStepsDrain(t *testing.T) {
	o := Owner{Type: "EgressIP", Name: "prod"}
	nat := func(router string) NAT {
		return NAT{Router: router, Type: "snat", ExternalIP: "172.18.0.44", LogicalIP: "10.244.1.3"}
	}
	old := map[Owner]State{o: {NATs: []NAT{nat("GR_a")}}}
	silenced := map[Owner]State{o: {}}
	moved := map[Owner]State{o: {NATs: []NAT{nat("GR_b")}}}
	w := &Writer{rec: record{synced: old}, opts: WriterOptions{Steps: func(_, _ map[Owner]State) []map[Owner]State {
		return []map[Owner]State{silenced, moved}
	}}}
	tests := []struct {
		name          string
		settle, drain bool
		wait          []bool
	}{
		{"both hooks", true, true, []bool{true, false}},
		{"settle only: nothing added before the last step", true, false, []bool{false, false}},
		{"drain only", false, true, []bool{true, false}},
	}
	for _, tc := range tests {
		sends := w.planSteps(old, moved, nil, tc.settle, tc.drain)
		if len(sends) != 2 {
			t.Fatalf("%s: %d steps, want 2", tc.name, len(sends))
		}
		if !slices.Equal(sends[0].removed, []string{"GR_a"}) || !slices.Equal(sends[1].added, []string{"GR_b"}) {
			t.Errorf("%s: removed %v, added %v", tc.name, sends[0].removed, sends[1].added)
		}
		for i, want := range tc.wait {
			if sends[i].wait != want {
				t.Errorf("%s: step %d waits %v, want %v", tc.name, i, sends[i].wait, want)
			}
		}
	}
}
