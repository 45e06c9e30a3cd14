package scale

import (
	"context"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/testbed"
)

// TestFlowMonitor: a flow added, changed and deleted on a real bridge
// completes the expectations matching it, in order, and one that no
// change matches times out.
func TestFlowMonitor(t *testing.T) {
	ovs := testbed.StartOVS(t, testbed.OVSOptions{NoPatch: true})
	m, err := StartFlowMonitor(ovs.Mgmt(), ovs.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, step := range []struct{ cmd, flow string }{
		{"add-flow", "priority=500,ip,nw_dst=198.51.100.7,actions=drop"},
		{"mod-flows", "priority=500,ip,nw_dst=198.51.100.7,actions=LOCAL"},
		{"del-flows", "ip,nw_dst=198.51.100.7"},
	} {
		e := m.Expect("nw_dst=198.51.100.7")
		begin := time.Now()
		ovs.Ofctl(step.cmd, ovs.Mgmt(), step.flow)
		at, err := e.Wait(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.cmd, err)
		}
		if at.Before(begin) {
			t.Errorf("%s: change stamped %v before the command", step.cmd, begin.Sub(at))
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if _, err := m.Expect("nw_dst=198.51.100.8").Wait(short); err == nil {
		t.Error("an expectation no change matches completed")
	}
}
