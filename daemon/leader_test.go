package daemon

import (
	"context"
	"io"
	"log/slog"
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
