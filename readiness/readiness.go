package readiness

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

// Condition is the condition an instance keeps on its own Pod (found
// by the POD_NAME and POD_NAMESPACE environment variables the chart sets):
// True once its own work last succeeded, False with the reason and the
// error while it cannot do it.
const Condition corev1.PodConditionType = "ovnedge.io/Reconciled"

// Reasons of Condition and of the events that report its changes.
const (
	ReasonSyncing       = "InformersNotSynced"
	ReasonNodeFailed    = "NodeReconcileFailed"
	ReasonClusterFailed = "ClusterReconcileFailed"
	ReasonNotYet        = "NotReconciledYet"
	ReasonReconciled    = "Reconciled"
	// ReasonUninstalled: the instance removed what it wrote (`ovnedge
	// uninstall`) and stays idle.
	ReasonUninstalled = "Uninstalled"
)

// State is an instance's readiness and why.
type State struct {
	Ready           bool
	Reason, Message string
}

// Tracker is an instance's readiness: ready once its informers have
// synced and its own work last succeeded: the node's pass (on an instance
// with a node) and, while it leads, the cluster pass. Every new state goes
// to publish, which is told whether readiness or its reason changed (the
// error's text alone changes from pass to pass); a pass that leaves it as
// it was publishes nothing.
type Tracker struct {
	mu      sync.Mutex
	synced  bool
	hasNode bool
	leading bool
	node    error // the node pass's last error; errNotYet before the first
	cluster error // the cluster pass's, since this instance leads
	// failingSince is when the cluster pass began failing while leading
	// (zero while it succeeds).
	failingSince time.Time
	last         State
	publish      func(s State, changed bool)
}

var errNotYet = errors.New("no pass has finished yet")

// NewTracker tracks an instance that runs a node's work (hasNode) and
// may lead; publish gets every new State (see Tracker).
func NewTracker(hasNode bool, publish func(State, bool)) *Tracker {
	return &Tracker{hasNode: hasNode, node: errNotYet, cluster: errNotYet, publish: publish,
		last: State{Reason: ReasonSyncing}}
}

// state is the readiness the fields say.
func (r *Tracker) state() State {
	failed := func(reason string, err error) State {
		if errors.Is(err, errNotYet) {
			reason = ReasonNotYet
		}
		return State{Reason: reason, Message: err.Error()}
	}
	switch {
	case !r.synced:
		return State{Reason: ReasonSyncing, Message: "waiting for the informers' first list"}
	case r.hasNode && r.node != nil:
		return failed(ReasonNodeFailed, r.node)
	case r.leading && r.cluster != nil:
		return failed(ReasonClusterFailed, r.cluster)
	}
	return State{Ready: true, Reason: ReasonReconciled}
}

// update changes the fields under the lock and publishes the new state
// when it differs (a changed error message included).
func (r *Tracker) update(f func()) {
	r.mu.Lock()
	f()
	s := r.state()
	same, changed := s == r.last, s.Ready != r.last.Ready || s.Reason != r.last.Reason
	r.last = s
	r.mu.Unlock()
	if r.publish != nil && !same {
		r.publish(s, changed)
	}
}

// SetSynced records that the informers have synced.
func (r *Tracker) SetSynced() { r.update(func() { r.synced = true }) }

// NodeDone records the end of a node pass (err nil: it succeeded).
func (r *Tracker) NodeDone(err error) { r.update(func() { r.node = err }) }

// ClusterDone records the end of a cluster pass (err nil: it succeeded).
func (r *Tracker) ClusterDone(err error) {
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

// SetLeading starts or stops counting the cluster pass; a new leader is
// not ready until its first cluster pass succeeds.
func (r *Tracker) SetLeading(leading bool) {
	r.update(func() { r.leading, r.cluster, r.failingSince = leading, errNotYet, time.Time{} })
}

// ClusterFailing is how long the leader's cluster pass has been failing
// (0 while it succeeds or before its first pass ends).
func (r *Tracker) ClusterFailing() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failingSince.IsZero() {
		return 0
	}
	return time.Since(r.failingSince)
}

// PodReporter writes readiness changes to the instance's own Pod: the
// Condition and an event (Warning NotReady with each new reason,
// Normal Ready), off the
// reconcile loops and coalesced: only the latest state is written.
type PodReporter struct {
	cs             kubernetes.Interface
	rec            record.EventRecorder
	namespace, pod string
	log            *slog.Logger
	wake           chan struct{}
	mu             sync.Mutex
	next           State
}

// NewPodReporter returns nil when the Pod is not known (no POD_NAME or
// POD_NAMESPACE: a process started by hand), when only the log reports.
func NewPodReporter(cs kubernetes.Interface, rec record.EventRecorder, namespace, pod string, log *slog.Logger) *PodReporter {
	if cs == nil || namespace == "" || pod == "" {
		return nil
	}
	return &PodReporter{cs: cs, rec: rec, namespace: namespace, pod: pod, log: log, wake: make(chan struct{}, 1)}
}

// Report makes s the state to write (the latest wins).
func (p *PodReporter) Report(s State) {
	p.mu.Lock()
	p.next = s
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run writes each reported state until ctx ends, retrying a failed write
// every few seconds.
func (p *PodReporter) Run(ctx context.Context) {
	var written *State
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
		if written == nil || written.Ready != s.Ready {
			since = metav1.Now()
		}
		if err := p.write(ctx, s, since); err != nil {
			p.log.Warn("readiness condition not written", "pod", p.namespace+"/"+p.pod, "err", err)
			retry.Reset(3 * time.Second)
			continue
		}
		if written == nil || written.Ready != s.Ready || written.Reason != s.Reason {
			p.event(s)
		}
		written = &s
	}
}

// write patches Condition on the Pod's status; since is when its
// status last flipped.
func (p *PodReporter) write(ctx context.Context, s State, since metav1.Time) error {
	status := corev1.ConditionFalse
	if s.Ready {
		status = corev1.ConditionTrue
	}
	// A map, not a PodCondition: its empty message must replace the last
	// one, which omitempty would leave in place.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": Condition, "status": status, "reason": s.Reason, "message": s.Message,
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
func (p *PodReporter) event(s State) {
	if p.rec == nil || s.Reason == ReasonSyncing || s.Reason == ReasonNotYet {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.namespace, Name: p.pod}
	if s.Ready {
		p.rec.Event(ref, corev1.EventTypeNormal, "Ready", "the instance's work is reconciled")
		return
	}
	p.rec.Eventf(ref, corev1.EventTypeWarning, "NotReady", "%s: %s", s.Reason, s.Message)
}

// Why is the reason, and the message when there is one.
func (s State) Why() string {
	if s.Message == "" {
		return s.Reason
	}
	return s.Reason + ": " + s.Message
}
