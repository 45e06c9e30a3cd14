package lbsvc

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Unidling, as OVN-Kubernetes' --ovn-empty-lb-events does it
// (go-controller/pkg/ovn/controller/unidling/unidled_annotation_controller.go
// and lbOpts in services/lb_config.go at 8871cd9).
const (
	// IdledAtSuffix ends the annotation an idler (oc idle, Knative, ...)
	// puts on a Service it scaled to zero: "<prefix>/idled-at".
	IdledAtSuffix = "/idled-at"
	// UnidledAtSuffix ends the annotation of when a Service was
	// unidled; UnidledAtAnnotation, set to the time (RFC 3339) an
	// idled-at annotation was removed and removed when one comes back,
	// is the leader's.
	UnidledAtSuffix     = "/unidled-at"
	UnidledAtAnnotation = "k8s.ovn.org" + UnidledAtSuffix
	// UnidleGracePeriod is how long after unidling a Service's load
	// balancers still raise events instead of rejecting, while its new
	// endpoints come up.
	UnidleGracePeriod = 30 * time.Second
)

// Idled reports whether svc has an "*/idled-at" annotation.
func Idled(svc *corev1.Service) bool {
	for k := range svc.Annotations {
		if strings.HasSuffix(k, IdledAtSuffix) {
			return true
		}
	}
	return false
}

// Unidling reports whether svc was unidled less than UnidleGracePeriod
// before now (an "*/unidled-at" annotation of that time).
func Unidling(svc *corev1.Service, now time.Time) bool {
	for k, v := range svc.Annotations {
		if !strings.HasSuffix(k, UnidledAtSuffix) {
			continue
		}
		at, err := time.Parse(time.RFC3339, v)
		return err == nil && now.Before(at.Add(UnidleGracePeriod))
	}
	return false
}

// emptyLBEvents reports whether svc's load balancers raise an event
// instead of rejecting when they have no backends (OVN-Kubernetes'
// lbOpts): with Options.EmptyLBEvents, for an idled Service or one in
// its grace period.
func emptyLBEvents(svc *corev1.Service, opts Options) bool {
	if !opts.EmptyLBEvents {
		return false
	}
	return Idled(svc) || Unidling(svc, time.Now())
}

// UnidledAtPatch is the change of the UnidledAtAnnotation a Service
// update calls for: its time when the update removed the last
// idled-at annotation, nil (remove) when it added one to a Service
// having the annotation; ok is false when nothing changes.
func UnidledAtPatch(old, cur *corev1.Service, now time.Time) (value *string, ok bool) {
	switch was, is := Idled(old), Idled(cur); {
	case was && !is:
		v := now.UTC().Format(time.RFC3339)
		return &v, true
	case !was && is:
		_, has := cur.Annotations[UnidledAtAnnotation]
		return nil, has
	}
	return nil, false
}
