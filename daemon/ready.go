package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
)

// ReadyCondition is the condition an instance keeps on its own Pod (found
// by the POD_NAME and POD_NAMESPACE environment variables the chart sets):
// True once its own work last succeeded, False with the reason and the
// error while it cannot do it.
const ReadyCondition corev1.PodConditionType = "ovnedge.io/Reconciled"

// Reasons of ReadyCondition and of the events that report its changes.
const (
	reasonSyncing       = "InformersNotSynced"
	reasonNodeFailed    = "NodeReconcileFailed"
	reasonClusterFailed = "ClusterReconcileFailed"
	reasonNotYet        = "NotReconciledYet"
	reasonReconciled    = "Reconciled"
)

// readyState is what /readyz answers, and why.
type readyState struct {
	ready           bool
	reason, message string
}

// readiness is an instance's readiness: ready once its informers have
// synced and its own work last succeeded: the node's pass (on an instance
// with a node) and, while it leads, the cluster pass. Every new state goes
// to publish, which is told whether readiness or its reason changed (the
// error's text alone changes from pass to pass); a pass that leaves it as
// it was publishes nothing.
type readiness struct {
	mu      sync.Mutex
	synced  bool
	hasNode bool
	leading bool
	node    error // the node pass's last error; errNotYet before the first
	cluster error // the cluster pass's, since this instance leads
	// failingSince is when the cluster pass began failing while leading
	// (zero while it succeeds).
	failingSince time.Time
	last         readyState
	publish      func(s readyState, changed bool)
}

var errNotYet = errors.New("no pass has finished yet")

func newReadiness(hasNode bool, publish func(readyState, bool)) *readiness {
	return &readiness{hasNode: hasNode, node: errNotYet, cluster: errNotYet, publish: publish,
		last: readyState{reason: reasonSyncing}}
}

// state is the readiness the fields say.
func (r *readiness) state() readyState {
	failed := func(reason string, err error) readyState {
		if errors.Is(err, errNotYet) {
			reason = reasonNotYet
		}
		return readyState{reason: reason, message: err.Error()}
	}
	switch {
	case !r.synced:
		return readyState{reason: reasonSyncing, message: "waiting for the informers' first list"}
	case r.hasNode && r.node != nil:
		return failed(reasonNodeFailed, r.node)
	case r.leading && r.cluster != nil:
		return failed(reasonClusterFailed, r.cluster)
	}
	return readyState{ready: true, reason: reasonReconciled}
}

// update changes the fields under the lock and publishes the new state
// when it differs (a changed error message included).
func (r *readiness) update(f func()) {
	r.mu.Lock()
	f()
	s := r.state()
	same, changed := s == r.last, s.ready != r.last.ready || s.reason != r.last.reason
	r.last = s
	r.mu.Unlock()
	if r.publish != nil && !same {
		r.publish(s, changed)
	}
}

func (r *readiness) setSynced()         { r.update(func() { r.synced = true }) }
func (r *readiness) nodeDone(err error) { r.update(func() { r.node = err }) }
func (r *readiness) clusterDone(err error) {
	r.update(func() {
		r.cluster = err
		switch {
		case err == nil:
			r.failingSince = time.Time{}
		case r.failingSince.IsZero():
			r.failingSince = time.Now()
		}
	})
}

// setLeading starts or stops counting the cluster pass; a new leader is
// not ready until its first cluster pass succeeds.
func (r *readiness) setLeading(leading bool) {
	r.update(func() { r.leading, r.cluster, r.failingSince = leading, errNotYet, time.Time{} })
}

// clusterFailing is how long the leader's cluster pass has been failing
// (0 while it succeeds or before its first pass ends).
func (r *readiness) clusterFailing() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failingSince.IsZero() {
		return 0
	}
	return time.Since(r.failingSince)
}

// podReporter writes readiness changes to the instance's own Pod: the
// ReadyCondition and an event (Warning NotReady with each new reason,
// Normal Ready), off the
// reconcile loops and coalesced: only the latest state is written.
type podReporter struct {
	cs             kubernetes.Interface
	rec            record.EventRecorder
	namespace, pod string
	log            *slog.Logger
	wake           chan struct{}
	mu             sync.Mutex
	next           readyState
}

// newPodReporter returns nil when the Pod is not known (no POD_NAME or
// POD_NAMESPACE: a process started by hand), when only the log reports.
func newPodReporter(cs kubernetes.Interface, rec record.EventRecorder, namespace, pod string, log *slog.Logger) *podReporter {
	if cs == nil || namespace == "" || pod == "" {
		return nil
	}
	return &podReporter{cs: cs, rec: rec, namespace: namespace, pod: pod, log: log, wake: make(chan struct{}, 1)}
}

func (p *podReporter) report(s readyState) {
	p.mu.Lock()
	p.next = s
	p.mu.Unlock()
	poke(p.wake)
}

// run writes each reported state until ctx ends, retrying a failed write
// every few seconds.
func (p *podReporter) run(ctx context.Context) {
	var written *readyState
	var since metav1.Time // when ready last flipped: the condition's transition
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-retry.C:
		}
		p.mu.Lock()
		s := p.next
		p.mu.Unlock()
		if written != nil && *written == s {
			continue
		}
		if written == nil || written.ready != s.ready {
			since = metav1.Now()
		}
		if err := p.write(ctx, s, since); err != nil {
			p.log.Warn("readiness condition not written", "pod", p.namespace+"/"+p.pod, "err", err)
			retry.Reset(3 * time.Second)
			continue
		}
		if written == nil || written.ready != s.ready || written.reason != s.reason {
			p.event(s)
		}
		written = &s
	}
}

// write patches ReadyCondition on the Pod's status; since is when its
// status last flipped.
func (p *podReporter) write(ctx context.Context, s readyState, since metav1.Time) error {
	status := corev1.ConditionFalse
	if s.ready {
		status = corev1.ConditionTrue
	}
	// A map, not a PodCondition: its empty message must replace the last
	// one, which omitempty would leave in place.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": ReadyCondition, "status": status, "reason": s.reason, "message": s.message,
		"lastTransitionTime": since,
	}}}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = p.cs.CoreV1().Pods(p.namespace).Patch(ctx, p.pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patch pod status: %w", err)
	}
	return nil
}

// event records s on the Pod: Ready, or NotReady with the reason of a
// failure (waiting for the first list or pass is no event).
func (p *podReporter) event(s readyState) {
	if p.rec == nil || s.reason == reasonSyncing || s.reason == reasonNotYet {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.namespace, Name: p.pod}
	if s.ready {
		p.rec.Event(ref, corev1.EventTypeNormal, "Ready", "the instance's work is reconciled")
		return
	}
	p.rec.Eventf(ref, corev1.EventTypeWarning, "NotReady", "%s: %s", s.reason, s.message)
}
