package egress

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNewPodInfo: a PodInfo serves a pod as PodFromK8s always did
// (running, pod network, not being deleted, with a valid IP; addresses
// unmapped and deduplicated, PodIP when PodIPs is empty).
func TestNewPodInfo(t *testing.T) {
	now := metav1.Now()
	pod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web", Labels: map[string]string{"app": "web"}},
			Spec:   corev1.PodSpec{NodeName: "node1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.3", PodIPs: []corev1.PodIP{{IP: "10.244.1.3"}}}}
		edit(p)
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string // the served view, "" for none
	}{
		{"running", pod(func(*corev1.Pod) {}), "prod/web on node1 [10.244.1.3]"},
		{"dual stack", pod(func(p *corev1.Pod) {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: "fd00:10:244:1::3"})
		}), "prod/web on node1 [10.244.1.3 fd00:10:244:1::3]"},
		{"PodIP only", pod(func(p *corev1.Pod) { p.Status.PodIPs = nil }), "prod/web on node1 [10.244.1.3]"},
		{"mapped and repeated", pod(func(p *corev1.Pod) {
			p.Status.PodIPs = []corev1.PodIP{{IP: "::ffff:10.244.1.3"}, {IP: "10.244.1.3"}}
		}), "prod/web on node1 [10.244.1.3]"},
		{"bad IP", pod(func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "10.244.1", nil }), ""},
		{"pending", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), ""},
		{"host network", pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), ""},
		{"being deleted", pod(func(p *corev1.Pod) { p.DeletionTimestamp = &now }), ""},
		{"no IP", pod(func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := NewPodInfo(tc.pod)
			got := ""
			if p, ok := info.Served(); ok {
				got = fmt.Sprintf("%s on %s %v", p.Key(), p.Node, p.IPs)
			}
			if got != tc.want {
				t.Errorf("served %q, want %q", got, tc.want)
			}
			if info.Labels.Get("app") != "web" || info.GetNamespace() != "prod" || info.GetName() != "web" {
				t.Errorf("identity %s/%s, labels %v", info.GetNamespace(), info.GetName(), info.Labels)
			}
		})
	}
	if NewPodInfo(nil) != nil || len(PodInfos([]*corev1.Pod{nil, pod(func(*corev1.Pod) {})})) != 1 {
		t.Error("nil pods are not left out")
	}
}

// TestLabelsInterned: pods labelled alike share one label set, which
// goes from the table once no PodInfo holds it.
func TestLabelsInterned(t *testing.T) {
	a := NewPodInfo(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "web", "tier": "1"}}})
	b := NewPodInfo(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"tier": "1", "app": "web"}}})
	tier2 := map[string]string{"app": "web", "tier": "2"}
	differs := func() bool { // c goes with this call
		c := NewPodInfo(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: tier2}})
		return a.Labels != c.Labels
	}
	// Keys and values that would run together without a separator.
	d := NewPodInfo(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d", Labels: map[string]string{"ap": "pweb", "tier": "1"}}})
	if a.Labels != b.Labels {
		t.Error("equal label sets are not shared")
	}
	if !differs() || a.Labels == d.Labels {
		t.Error("different label sets are shared")
	}
	if v, ok := a.Labels.Lookup("tier"); !ok || v != "1" || a.Labels.Has("x") {
		t.Errorf("lookup: %q %v", v, ok)
	}
	none := NewPodInfo(&corev1.Pod{})
	if none.Labels == nil || none.Labels.Has("app") {
		t.Error("an unlabelled pod has no empty label set")
	}
	key := canonical(tier2)
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		labelSets.Lock()
		_, held := labelSets.m[key]
		labelSets.Unlock()
		if !held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a label set no PodInfo holds stays in the table")
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(d)
}
