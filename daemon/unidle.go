package daemon

import (
	"context"
	"crypto/tls"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/kubestatus"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/lbsvc/unidle"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// unidling is OVN-Kubernetes' unidling on the leader
// (--ovn-empty-lb-events, package lbsvc/unidle): NeedPods events from
// the Southbound's controller events, and k8s.ovn.org/unidled-at.
type unidling struct {
	cfg *Config
	cs  kubernetes.Interface
	rec record.EventRecorder
	log *slog.Logger
}

// run records NeedPods events until ctx ends (unidle.Serve), finding
// their Service among services().
func (u *unidling) run(ctx context.Context, services func() []*corev1.Service) {
	dial := func(ctx context.Context) (*unidle.Events, error) {
		t, err := sbTLS(u.cfg)
		if err != nil {
			return nil, err
		}
		return unidle.Dial(ctx, u.cfg.SBAddress, t, u.log)
	}
	unidle.Serve(ctx, dial, 5*time.Second, services, func(e event.Event) {
		ref := e.Object
		u.rec.Event(&ref, e.Type, e.Reason, e.Message)
	}, u.log)
}

// serviceUpdated sets or removes k8s.ovn.org/unidled-at as the update
// of a Service calls for (lbsvc.UnidledAtPatch). It runs on the
// informer's goroutine for every update: only a change is sent, off it.
func (u *unidling) serviceUpdated(ctx context.Context, old, cur *corev1.Service) {
	v, ok := lbsvc.UnidledAtPatch(old, cur, time.Now())
	if !ok {
		return
	}
	var value any
	if v != nil {
		value = *v
	}
	patch := kubestatus.AnnotationPatch(lbsvc.UnidledAtAnnotation, value)
	go func() {
		if _, err := u.cs.CoreV1().Services(cur.Namespace).Patch(ctx, cur.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			u.log.Error("unidling: annotate the Service", "service", cur.Namespace+"/"+cur.Name, "annotation", lbsvc.UnidledAtAnnotation, "err", err)
		}
	}()
}

// sbTLS is the TLS configuration of ssl: Southbound endpoints (the
// Northbound's files), nil without any.
func sbTLS(cfg *Config) (*tls.Config, error) {
	if !slices.ContainsFunc(cfg.SBAddress, func(a string) bool { return strings.HasPrefix(a, "ssl:") }) {
		return nil, nil
	}
	return ovsdbnb.TLSConfig(cfg.NBPrivKey, cfg.NBCert, cfg.NBCA)
}
