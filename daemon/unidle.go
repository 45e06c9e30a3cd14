package daemon

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

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

// run turns controller events into NeedPods events until ctx ends,
// finding their Service among services(); it dials the Southbound
// again until it connects.
func (u *unidling) run(ctx context.Context, services func() []*corev1.Service) {
	var events *unidle.Events
	for events == nil {
		t, err := sbTLS(u.cfg)
		if err == nil {
			events, err = unidle.Dial(ctx, u.cfg.SBAddress, t, u.log)
		}
		if err != nil {
			u.log.Error("unidling: southbound", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
	}
	defer events.Close()
	u.log.Info("unidling: watching the Southbound's controller events")
	events.Run(ctx, func(ev unidle.Event) {
		e, ok := unidle.NeedPods(services(), ev)
		if !ok {
			u.log.Warn("unidling: no Service has the controller event's VIP", "vip", ev.VIP, "protocol", ev.Protocol)
			return
		}
		ref := e.Object
		u.rec.Event(&ref, e.Type, e.Reason, e.Message)
		u.log.Info("unidling: NeedPods", "service", ref.Namespace+"/"+ref.Name, "vip", ev.VIP)
	})
}

// serviceUpdated sets or removes k8s.ovn.org/unidled-at as the update
// of a Service calls for (lbsvc.UnidledAtPatch).
func (u *unidling) serviceUpdated(ctx context.Context, old, cur *corev1.Service) {
	v, ok := lbsvc.UnidledAtPatch(old, cur, time.Now())
	if !ok {
		return
	}
	var value any
	if v != nil {
		value = *v
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{lbsvc.UnidledAtAnnotation: value}}})
	if _, err := u.cs.CoreV1().Services(cur.Namespace).Patch(ctx, cur.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		u.log.Error("unidling: annotate the Service", "service", cur.Namespace+"/"+cur.Name, "annotation", lbsvc.UnidledAtAnnotation, "err", err)
	}
}

// sbTLS is the TLS configuration of ssl: Southbound endpoints (the
// Northbound's files), nil without any.
func sbTLS(cfg *Config) (*tls.Config, error) {
	if !slices.ContainsFunc(cfg.SBAddress, func(a string) bool { return strings.HasPrefix(a, "ssl:") }) {
		return nil, nil
	}
	return ovsdbnb.TLSConfig(cfg.NBPrivKey, cfg.NBCert, cfg.NBCA)
}
