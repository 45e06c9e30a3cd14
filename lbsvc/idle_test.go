package lbsvc_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
)

// OVN-Kubernetes' Test_idledServices (services/lb_config_test.go at
// 8871cd9) as a table over every load balancer of the Service: with
// --ovn-empty-lb-events an idled Service, or one unidled 10 s ago, gets
// reject=false event=true; an active one, or one unidled an hour ago,
// reject=true event=false; without the flag every one rejects.
func TestIdledServices(t *testing.T) {
	tenSecondsAgo := time.Now().Add(-10 * time.Second).Format(time.RFC3339)
	oneHourAgo := time.Now().Add(-time.Hour).Format(time.RFC3339)
	for _, c := range []struct {
		name          string
		annotations   map[string]string
		reject, event string
	}{
		{"active service", map[string]string{}, "true", "false"},
		{"idled service", map[string]string{"k8s.ovn.org/idled-at": "2023-01-01T13:14:15Z"}, "false", "true"},
		{"idled by another idler", map[string]string{"idling.alpha.openshift.io/idled-at": "2023-01-01T13:14:15Z"}, "false", "true"},
		{"recently unidled service", map[string]string{"k8s.ovn.org/unidled-at": tenSecondsAgo}, "false", "true"},
		{"long time unidled service", map[string]string{"k8s.ovn.org/unidled-at": oneHourAgo}, "true", "false"},
		{"bad unidled-at", map[string]string{"k8s.ovn.org/unidled-at": "yesterday"}, "true", "false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := svc("foo", corev1.ServiceTypeNodePort, []string{"10.96.0.10"}, port("http", corev1.ProtocolTCP, 80, 30080, "8080"))
			s.Annotations = c.annotations
			in := lbsvc.Input{Services: []*corev1.Service{s}, Nodes: nodes()}
			for _, opts := range []lbsvc.Options{{EmptyLBEvents: true}, {}, {EmptyLBEvents: true, PerNodeLBs: true}} {
				reject, event := c.reject, c.event
				if !opts.EmptyLBEvents {
					reject, event = "true", "false"
				}
				states, _ := lbsvc.Build(in, opts)
				lbs := states[lbsvc.ServiceOwner("default", "foo")].LoadBalancers
				if len(lbs) == 0 {
					t.Fatal("no load balancers")
				}
				for _, lb := range lbs {
					if lb.Options["reject"] != reject || lb.Options["event"] != event {
						t.Errorf("%+v: %s reject=%s event=%s, want reject=%s event=%s", opts, lb.Name,
							lb.Options["reject"], lb.Options["event"], reject, event)
					}
				}
			}
		})
	}
}

// UnidledAtPatch follows OVN-Kubernetes' unidledAtController: removing the
// last idled-at sets unidled-at to now, adding one removes unidled-at
// (when there), anything else changes nothing.
func TestUnidledAtPatch(t *testing.T) {
	now := time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC)
	with := func(a map[string]string) *corev1.Service {
		s := svc("foo", corev1.ServiceTypeClusterIP, []string{"10.96.0.10"})
		s.Annotations = a
		return s
	}
	idled := map[string]string{"k8s.ovn.org/idled-at": "2026-11-29T00:00:00Z"}
	unidled := map[string]string{lbsvc.UnidledAtAnnotation: "2026-11-29T00:00:00Z"}
	both := map[string]string{"k8s.ovn.org/idled-at": "x", lbsvc.UnidledAtAnnotation: "y"}
	for _, c := range []struct {
		name      string
		old, cur  map[string]string
		ok        bool
		wantValue string // "" for removal
	}{
		{"unidled", idled, nil, true, "2026-11-29T01:02:03Z"},
		{"idled again, unidled-at removed", unidled, both, true, ""},
		{"idled without unidled-at", nil, idled, false, ""},
		{"still idled", idled, idled, false, ""},
		{"never idled", nil, unidled, false, ""},
	} {
		v, ok := lbsvc.UnidledAtPatch(with(c.old), with(c.cur), now)
		got := ""
		if v != nil {
			got = *v
		}
		if ok != c.ok || got != c.wantValue || (ok && c.wantValue == "" && v != nil) {
			t.Errorf("%s: %q, %v; want %q, %v", c.name, got, ok, c.wantValue, c.ok)
		}
	}
}
