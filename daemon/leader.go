package daemon

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// Lease says which coordination Lease elects the cluster-wide leader and
// how fast a dead leader is replaced (at most Duration after its last
// renewal).
type Lease struct {
	Namespace, Name string
	Identity        string
	Duration        time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
	// OnOtherHolder, if set, is called (on its own goroutine) with each
	// other candidate's identity this one sees holding the Lease while it
	// campaigns.
	OnOtherHolder func(identity string)
}

// DefaultLease is the Lease ovnedge's leader holds: kube-system/ovnedge,
// replaced within 15 s of a leader's death, as client-go's defaults.
func DefaultLease(identity string) Lease {
	return Lease{Namespace: "kube-system", Name: "ovnedge", Identity: identity,
		Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// HandOffPause is how long a leader that stepped down for a successor
// waits before it campaigns again: longer than a standby candidate's
// longest wait between two tries (client-go waits RetryPeriod to
// RetryPeriod×(1+JitterFactor), 2 to 4.4 s by default), so the successor
// always tries first. (A pause of 2×RetryPeriod lost that race about once
// in twelve hand-overs, and the Lease came back to the leader it had
// just left.)
func (l Lease) HandOffPause() time.Duration {
	return time.Duration((1+leaderelection.JitterFactor)*float64(l.RetryPeriod)) + l.RetryPeriod
}

// RunLeader calls lead with a context that is cancelled when this
// instance loses the Lease, and campaigns again, until ctx ends. On ctx's
// end a held Lease is released so a successor takes over at once. A lead
// that returns while its context is still alive steps down: the Lease is
// released, and this instance campaigns again only after the pause lead
// returned (l.Duration when 0), so another candidate can take it.
func RunLeader(ctx context.Context, cs kubernetes.Interface, l Lease, log *slog.Logger, lead func(context.Context) (pause time.Duration)) error {
	for ctx.Err() == nil {
		stepped, pause, err := leaderTerm(ctx, cs, l, log, lead)
		if err != nil {
			return err
		}
		if stepped {
			select {
			case <-ctx.Done():
			case <-time.After(cmp.Or(pause, l.Duration)):
			}
		}
	}
	return nil
}

// leaderTerm campaigns until this instance has led once and lost or left
// the Lease (or ctx ends); stepped says whether lead stepped down, and
// pause is what it returned then.
func leaderTerm(ctx context.Context, cs kubernetes.Interface, l Lease, log *slog.Logger, lead func(context.Context) time.Duration) (stepped bool, pause time.Duration, err error) {
	term, cancel := context.WithCancel(ctx)
	defer cancel()
	var down atomic.Bool
	var paused atomic.Int64
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.Identity},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   l.Duration,
		RenewDeadline:   l.RenewDeadline,
		RetryPeriod:     l.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            l.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				log.Info("became the cluster-wide leader", "lease", l.Namespace+"/"+l.Name, "identity", l.Identity)
				p := lead(lctx)
				if lctx.Err() == nil {
					log.Warn("stepping down: releasing the Lease for another candidate", "lease", l.Namespace+"/"+l.Name, "for", cmp.Or(p, l.Duration))
					paused.Store(int64(p))
					down.Store(true)
					cancel()
				}
			},
			OnStoppedLeading: func() {
				log.Info("no longer the leader", "lease", l.Namespace+"/"+l.Name, "identity", l.Identity)
			},
			OnNewLeader: func(id string) {
				if id != l.Identity {
					log.Info("leader elected", "leader", id)
				}
				if id != l.Identity && id != "" && l.OnOtherHolder != nil {
					l.OnOtherHolder(id)
				}
			},
		},
	})
	if err != nil {
		return false, 0, fmt.Errorf("leader election on %s/%s: %w", l.Namespace, l.Name, err)
	}
	elector.Run(term) // returns when leadership is lost or left, or ctx ends
	return down.Load(), time.Duration(paused.Load()), nil
}

// NewRecorder returns an event recorder for component "ovnedge". Events
// are always logged; with toAPI they are also written to the API server
// (in manifests mode there is no API server to read them from).
func NewRecorder(cs kubernetes.Interface, toAPI bool, log *slog.Logger) (record.EventRecorder, func()) {
	b := record.NewBroadcaster()
	w := b.StartEventWatcher(func(e *corev1.Event) {
		level := slog.LevelInfo
		if e.Type == corev1.EventTypeWarning {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "event", "object",
			e.InvolvedObject.Kind+"/"+objectName(e.InvolvedObject.Namespace, e.InvolvedObject.Name),
			"type", e.Type, "reason", e.Reason, "message", e.Message)
	})
	if toAPI {
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	}
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ovnedge"}), func() {
		w.Stop()
		b.Shutdown()
	}
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
