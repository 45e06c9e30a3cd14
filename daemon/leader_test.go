package daemon

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovnedge/ovnedge/ovnknode"
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
		_ = RunLeader(ctx, cs, l("a"), log, func(context.Context) time.Duration { leading <- "a"; return 0 }) // steps down at once
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
}

// TestSuccessor: a holder on an egress-assignable node names the first
// Ready candidate of its workload on a Ready node that is not; otherwise
// it keeps the Lease.
func TestSuccessor(t *testing.T) {
	node := func(name string, egress, ready bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if egress {
			n.Labels[ovnknode.LabelEgressAssignable] = ""
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
		return n
	}
	nodes := map[string]*corev1.Node{"egress1": node("egress1", true, true), "egress2": node("egress2", true, true),
		"plain": node("plain", false, true), "plain2": node("plain2", false, true), "down": node("down", false, false)}
	leader := map[string]string{"app.kubernetes.io/name": "ovnedge", "app.kubernetes.io/component": "leader"}
	pod := func(name, on string, ready bool, extra ...string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: maps.Clone(leader)}, Spec: corev1.PodSpec{NodeName: on}}
		for i := 0; i+1 < len(extra); i += 2 {
			p.Labels[extra[i]] = extra[i+1]
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		return p
	}
	deleting := pod("b", "plain", true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	unlabelled := pod("a", "egress1", true)
	unlabelled.Labels = nil
	other := pod("b", "plain", true)
	other.Labels["app.kubernetes.io/component"] = "node"
	for _, c := range []struct {
		name       string
		self       corev1.Pod
		candidates []corev1.Pod
		want       string
	}{
		{"holder off the egress nodes", pod("a", "plain", true), []corev1.Pod{pod("b", "plain2", true)}, ""},
		{"to a candidate off them", pod("a", "egress1", true), []corev1.Pod{pod("b", "plain", true)}, "b"},
		{"of another ReplicaSet (a rollout)", pod("a", "egress1", true, "pod-template-hash", "1"),
			[]corev1.Pod{pod("b", "plain", true, "pod-template-hash", "2")}, "b"},
		{"the first by name", pod("a", "egress1", true), []corev1.Pod{pod("c", "plain2", true), pod("b", "plain", true)}, "b"},
		{"not to one on an egress node", pod("a", "egress1", true), []corev1.Pod{pod("b", "egress2", true)}, ""},
		{"not to one not Ready", pod("a", "egress1", true), []corev1.Pod{pod("b", "plain", false)}, ""},
		{"not to one on a NotReady node", pod("a", "egress1", true), []corev1.Pod{pod("b", "down", true)}, ""},
		{"not to one being deleted", pod("a", "egress1", true), []corev1.Pod{deleting}, ""},
		{"not to another workload", pod("a", "egress1", true), []corev1.Pod{other}, ""},
		{"not to one on an unknown node", pod("a", "egress1", true), []corev1.Pod{pod("b", "gone", true)}, ""},
		{"not to itself", pod("a", "egress1", true), []corev1.Pod{pod("a", "egress1", true)}, ""},
		{"holder on an unknown node", pod("a", "gone", true), []corev1.Pod{pod("b", "plain", true)}, ""},
		{"holder without labels", unlabelled, []corev1.Pod{pod("b", "plain", true)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Successor(&c.self, c.candidates, nodes); got != c.want {
				t.Errorf("Successor = %q, want %q", got, c.want)
			}
		})
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
