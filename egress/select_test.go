package egress_test

import (
	"fmt"
	"testing"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSelectPods(t *testing.T) {
	namespaces := []*corev1.Namespace{
		namespace("prod", map[string]string{"environment": "production", "team": "a"}),
		namespace("dev", map[string]string{"environment": "development", "team": "a"}),
		namespace("other", nil),
	}
	hostNet := pod("prod", "hostnet", "w1", map[string]string{"app": "web"}, "172.18.0.2")
	hostNet.Spec.HostNetwork = true
	pending := pod("prod", "pending", "w1", map[string]string{"app": "web"}, "10.244.1.9")
	pending.Status.Phase = corev1.PodPending
	noIP := pod("prod", "noip", "w1", map[string]string{"app": "web"})
	legacy := pod("prod", "legacy", "w1", map[string]string{"app": "web"})
	legacy.Status.PodIP = "10.244.1.8"
	pods := []*corev1.Pod{
		pod("prod", "web", "w1", map[string]string{"app": "web"}, "10.244.1.3", "fd00:10:244:2::3"),
		pod("prod", "db", "w1", map[string]string{"app": "db"}, "10.244.1.4"),
		pod("dev", "web", "w2", map[string]string{"app": "web"}, "10.244.2.3"),
		pod("other", "web", "w2", map[string]string{"app": "web", "tier": "front"}, "10.244.2.4"),
		hostNet, pending, noIP, legacy,
	}
	tests := []struct {
		name    string
		ns, pod metav1.LabelSelector
		want    string
		err     bool
	}{
		{name: "seed: NotIn development, app=web",
			ns: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "environment", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"development"}}}},
			pod:  metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			want: "[other/web[10.244.2.4] prod/legacy[10.244.1.8] prod/web[10.244.1.3 fd00:10:244:2::3]]"},
		{name: "empty pod selector: every running pod of the namespaces",
			ns:   metav1.LabelSelector{MatchLabels: map[string]string{"environment": "development"}},
			want: "[dev/web[10.244.2.3]]"},
		{name: "Exists and In",
			ns:   metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists}}},
			pod:  metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"db"}}}},
			want: "[prod/db[10.244.1.4]]"},
		{name: "DoesNotExist",
			ns:   metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpDoesNotExist}}},
			want: "[other/web[10.244.2.4]]"},
		{name: "selects nothing", ns: metav1.LabelSelector{MatchLabels: map[string]string{"environment": "staging"}}, want: "[]"},
		{name: "bad operator",
			ns:  metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}},
			err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &egressv1.EgressIP{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Spec: egressv1.EgressIPSpec{NamespaceSelector: tc.ns, PodSelector: tc.pod}}
			got, err := egress.SelectPods(e, namespaces, egress.PodInfos(pods))
			if tc.err {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := "["
			for i, p := range got {
				if i > 0 {
					s += " "
				}
				s += fmt.Sprintf("%s%v", p.Key(), p.IPs)
			}
			if s += "]"; s != tc.want {
				t.Errorf("got  %s\nwant %s", s, tc.want)
			}
		})
	}
}
