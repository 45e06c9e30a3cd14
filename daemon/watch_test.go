package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatcherRunLoop checks that a manifest change reaches the reconcile
// function as a Snapshot, and that a failed reconcile is retried.
func TestWatcherRunLoop(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	putFile(t, dir, "eip.yaml", eipYAML)
	src := NewManifestSource(dir, log)
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(src.Clientset, src.Dynamic, log)
	q := w.Queue("cluster")
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}

	var calls atomic.Int32
	seen := make(chan Snapshot, 16)
	done := make(chan struct{})
	go func() {
		RunLoop(ctx, q, "test", NewMetrics(), log, func(context.Context) error {
			if calls.Add(1) == 1 {
				return errors.New("first reconcile fails")
			}
			s, err := w.Snapshot()
			if err != nil {
				return err
			}
			seen <- s
			return nil
		})
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })

	wait := func(what string, cond func(Snapshot) bool) {
		t.Helper()
		timeout := time.After(5 * time.Second)
		for {
			select {
			case s := <-seen:
				if cond(s) {
					return
				}
			case <-timeout:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	wait("the EgressIP after a retried failure", func(s Snapshot) bool { return len(s.EgressIPs) == 1 })
	putFile(t, dir, "nodes.yaml", nodeManifest(`a: b`))
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	wait("the new node", func(s Snapshot) bool { return len(s.Nodes) == 1 && len(s.EgressIPs) == 1 })
}
