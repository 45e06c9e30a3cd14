package daemon

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection"
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
			if err := RunLeader(ctx, cs, lease(id), log, func(ctx context.Context) time.Duration {
				leading <- id
				<-ctx.Done()
				return 0
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
// one that stepped down waits a lease duration before campaigning again,
// and then sees the other holding it (OnOtherHolder).
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
	seen := make(chan string, 10)
	a := l("a")
	a.OnOtherHolder = func(id string) { seen <- id }
	wg.Go(func() {
		_ = RunLeader(ctx, cs, a, log, func(context.Context) time.Duration { leading <- "a"; return 0 }) // steps down at once
	})
	if id := <-leading; id != "a" {
		t.Fatalf("first leader %s, want a", id)
	}
	wg.Go(func() {
		_ = RunLeader(ctx, cs, l("b"), log, func(lctx context.Context) time.Duration { leading <- "b"; <-lctx.Done(); return 0 })
	})
	select {
	case id := <-leading:
		if id != "b" {
			t.Fatalf("after a stepped down %s leads, want b", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b never took the Lease a stepped down from")
	}
	select {
	case id := <-seen:
		if id != "b" {
			t.Fatalf("a saw %s holding the Lease, want b", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a, campaigning again, never saw b holding the Lease")
	}
}

// A lead that steps down with a pause (a hand-over to a successor) campaigns
// again after that pause, not a lease duration, and takes the Lease back
// when nobody took it.
func TestRunLeaderStepDownPause(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	l := Lease{Namespace: "kube-system", Name: "ovnedge", Identity: "a",
		Duration: time.Minute, RenewDeadline: 30 * time.Second, RetryPeriod: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	terms := make(chan int, 4)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	n := 0
	wg.Go(func() {
		_ = RunLeader(ctx, cs, l, slog.New(slog.DiscardHandler), func(lctx context.Context) time.Duration {
			n++
			terms <- n
			if n == 1 {
				return 200 * time.Millisecond // hand over
			}
			<-lctx.Done()
			return 0
		})
	})
	for want := 1; want <= 2; want++ {
		select {
		case got := <-terms:
			if got != want {
				t.Fatalf("term %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second): // the lease duration is a minute
			t.Fatalf("no term %d: the pause was not taken instead of the lease duration", want)
		}
	}
}

// TestRunLeaderHandOff: a leader that steps down for a successor with
// HandOffPause leaves it the Lease every time: with two candidates that
// both step down at once, the leadership alternates over many terms (a
// pause within a standby's jittered retry wait, 2×RetryPeriod, let the
// leader take the Lease back now and then). The API answers each Lease
// request after 10 ms, as a busy one does.
func TestRunLeaderHandOff(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	cs.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		time.Sleep(10 * time.Millisecond)
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	terms := make(chan string, 64)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, id := range []string{"a", "b"} {
		l := Lease{Namespace: "kube-system", Name: "ovnedge", Identity: id,
			Duration: time.Minute, RenewDeadline: 30 * time.Second, RetryPeriod: 50 * time.Millisecond}
		wg.Go(func() {
			_ = RunLeader(ctx, cs, l, slog.New(slog.DiscardHandler), func(context.Context) time.Duration {
				terms <- id
				return l.HandOffPause()
			})
		})
	}
	var seq []string
	for len(seq) < 24 {
		select {
		case id := <-terms:
			if len(seq) > 0 && seq[len(seq)-1] == id {
				t.Fatalf("term %d: %s took the Lease back after handing it over (terms %v)", len(seq), id, seq)
			}
			seq = append(seq, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("no term after %v", seq)
		}
	}
}

// TestHandOffPause: the pause outlasts a standby's longest wait between
// two tries (client-go's RetryPeriod×(1+JitterFactor)) by a RetryPeriod
// of API latency, for client-go's defaults and the chart's fast settings.
func TestHandOffPause(t *testing.T) {
	for _, retry := range []time.Duration{2 * time.Second, 500 * time.Millisecond, 100 * time.Millisecond} {
		l := Lease{RetryPeriod: retry}
		longest := time.Duration((1 + leaderelection.JitterFactor) * float64(retry))
		if got := l.HandOffPause(); got < longest+retry {
			t.Errorf("RetryPeriod %v: HandOffPause %v, want at least %v (a standby waits up to %v between tries)", retry, got, longest+retry, longest)
		}
	}
}
