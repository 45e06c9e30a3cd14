package daemon

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestRun runs the daemon's loops on a manifests directory: both
// reconcilers see the objects, a file change reaches them, and cancelling
// the context stops run.
func TestRun(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	testbed.WriteFile(t, dir, "eip.yaml", testbed.EgressIPManifest)
	cfg := &Config{Manifests: dir, NodeName: "ovn-worker", LeaderElect: true}
	c, err := Connect(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	node, cluster := make(chan desired.Snapshot, 64), make(chan desired.Snapshot, 64)
	r := reconcilers{
		Node:    func(_ context.Context, s desired.Snapshot) error { node <- s; return nil },
		Cluster: func(_ context.Context, s desired.Snapshot) error { cluster <- s; return nil },
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	m := NewMetrics()
	go func() {
		stopped <- run(ctx, cfg, c, r, runEnv{Log: log, Metrics: m, ManifestPoll: 10 * time.Millisecond,
			Lease: Lease{Namespace: "kube-system", Name: "ovnedge", Identity: "test",
				Duration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not stop")
		}
	})
	wait := func(what string, ch chan desired.Snapshot, cond func(desired.Snapshot) bool) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case s := <-ch:
				if cond(s) {
					return
				}
			case <-timeout:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	hasEIP := func(s desired.Snapshot) bool { return len(s.EgressIPs) == 1 }
	wait("node reconcile", node, hasEIP)
	wait("cluster reconcile on the leader", cluster, hasEIP)
	testbed.WriteFile(t, dir, "nodes.yaml", testbed.NodeManifest(`a: b`))
	hasNode := func(s desired.Snapshot) bool { return len(s.Nodes) == 1 }
	wait("node reconcile after a file change", node, hasNode)
	wait("cluster reconcile after a file change", cluster, hasNode)
}
