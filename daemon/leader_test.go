package daemon

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

// TestRunLeaderTakeover runs two candidates on one API: one leads; when it
// stops (releasing the Lease) the other takes over.
func TestRunLeaderTakeover(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cs := fake.NewClientset()
	lease := func(id string) Lease {
		return Lease{Namespace: "kube-system", Name: "ovnedge", Identity: id,
			Duration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	}
	leading := make(chan string, 4)
	start := func(id string) (context.CancelFunc, chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := RunLeader(ctx, cs, lease(id), log, func(ctx context.Context) {
				leading <- id
				<-ctx.Done()
			}); err != nil {
				t.Error(err)
			}
		}()
		return cancel, done
	}
	cancelA, doneA := start("a")
	first := <-leading
	cancelB, doneB := start("b")
	t.Cleanup(func() { cancelB(); <-doneB })
	if first != "a" {
		t.Fatalf("first leader %s, want a", first)
	}
	began := time.Now()
	cancelA()
	<-doneA
	select {
	case id := <-leading:
		if id != "b" {
			t.Fatalf("second leader %s, want b", id)
		}
		t.Logf("b took over %v after a released the lease", time.Since(began))
	case <-time.After(5 * time.Second):
		t.Fatal("b did not take over")
	}
}

// A lead that returns while it still holds the Lease steps down: the
// Lease is released at once and another candidate takes it, while the
// one that stepped down waits a lease duration before campaigning again.
func TestRunLeaderStepDown(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	log := slog.New(slog.DiscardHandler)
	l := func(id string) Lease {
		return Lease{Namespace: "kube-system", Name: "ovnedge", Identity: id,
			Duration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	}
	ctx, cancel := context.WithCancel(context.Background())
	leading := make(chan string, 10)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		_ = RunLeader(ctx, cs, l("a"), log, func(context.Context) { leading <- "a" }) // steps down at once
	})
	if id := <-leading; id != "a" {
		t.Fatalf("first leader %s, want a", id)
	}
	wg.Go(func() {
		_ = RunLeader(ctx, cs, l("b"), log, func(lctx context.Context) { leading <- "b"; <-lctx.Done() })
	})
	select {
	case id := <-leading:
		if id != "b" {
			t.Fatalf("after a stepped down %s leads, want b", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b never took the Lease a stepped down from")
	}
}
