package sbwait_test

import (
	"context"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/sbwait"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestWait: after a NB change and NextCfg, Wait returns once the named
// chassis has applied it, even with another chassis dead; it times out
// naming a chassis that never applies it.
func TestWait(t *testing.T) {
	c := testbed.StartCluster(t, testbed.ClusterOptions{Nodes: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nb, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{c.OVN.NB}})
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	w, err := sbwait.Dial(ctx, []string{c.OVN.SB}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cfg, err := nb.NextCfg(ctx)
	if err != nil || cfg < 1 {
		t.Fatalf("nb_cfg %d: %v", cfg, err)
	}
	if err := w.Wait(ctx, cfg, "ovn-worker", "ovn-worker2"); err != nil {
		t.Fatalf("live chassis: %v", err)
	}
	c.Node("ovn-worker2").Kill()
	next, err := nb.NextCfg(ctx)
	if err != nil || next != cfg+1 {
		t.Fatalf("next nb_cfg %d (%v), want %d", next, err, cfg+1)
	}
	if err := w.Wait(ctx, next, "ovn-worker"); err != nil {
		t.Errorf("the live chassis with another dead: %v", err)
	}
	short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if err := w.Wait(short, next, "ovn-worker2"); err == nil {
		t.Error("a dead chassis applied the change")
	}
}
