package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/kubewatch"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWatcherSeesAPIObjects applies the CRD and the demo objects through a
// real API server and checks that the daemon's informers (kubewatch.Watcher)
// see every kind, with status and without managedFields, and follow
// deletes and adds.
func TestWatcherSeesAPIObjects(t *testing.T) {
	t.Parallel()
	k := startKube(t)
	k.apply(t, demoDir)

	w := kubewatch.NewWatcher(k.cs, k.dyn, slog.New(slog.NewTextHandler(io.Discard, nil)))
	q := w.Queue("e2e")
	s, ctx := snapshot(t, w)
	for _, c := range []struct {
		kind string
		got  []string
		want []string // the API server adds some objects of its own
	}{
		{"Node", names(s.Nodes), []string{"ovn-worker", "ovn-worker2"}},
		{"Namespace", names(s.Namespaces), []string{"prod", "default"}},
		{"Pod", names(s.Pods), []string{"prod/web-0"}},
		{"Service", names(s.Services), []string{"prod/web", "prod/api", "default/kubernetes"}},
		{"EndpointSlice", names(s.EndpointSlices), []string{"prod/web-abcde", "prod/api-fghij"}},
		{"EgressIP", names(s.EgressIPs), []string{"egress-prod"}},
	} {
		for _, w := range c.want {
			if !slices.Contains(c.got, w) {
				t.Errorf("%s %s not in the informers' cache, which has %q", c.kind, w, c.got)
			}
		}
	}
	for _, p := range s.Pods {
		if view, ok := p.Served(); !ok || fmt.Sprint(view.IPs) != "[10.244.1.3]" {
			t.Errorf("pod %s/%s: served %v with IPs %v; want 10.244.1.3, running", p.Namespace, p.Name, ok, view.IPs)
		}
	}
	for _, n := range s.Nodes {
		if n.Annotations["k8s.ovn.org/node-subnets"] == "" || len(n.Status.Addresses) == 0 {
			t.Errorf("node %s lacks its annotations or addresses: %v %v", n.Name, n.Annotations, n.Status.Addresses)
		}
	}
	for _, e := range s.EgressIPs {
		ips, _, _ := unstructured.NestedStringSlice(e.Object, "spec", "egressIPs")
		if len(ips) != 1 || ips[0] != "172.18.0.44" || len(e.GetManagedFields()) > 0 {
			t.Errorf("EgressIP %s: egressIPs %v, %d managedFields; want [172.18.0.44], none", e.GetName(), ips, len(e.GetManagedFields()))
		}
	}
	if q.Len() == 0 {
		t.Errorf("no reconcile request queued after the informers synced")
	}

	// Follow a delete and an add.
	zero := int64(0)
	if err := k.cs.CoreV1().Pods("prod").Delete(ctx, "web-0", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}
	if _, err := k.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.poll(t, "the informers to see the pod deleted and the node added", func(context.Context) error {
		s, err := w.Snapshot()
		if err != nil {
			return err
		}
		if len(s.Pods) != 0 || len(s.Nodes) != 3 {
			return fmt.Errorf("%d pods, %d nodes; want 0, 3 (bare added)", len(s.Pods), len(s.Nodes))
		}
		return nil
	})
}

// names returns the objects' "namespace/name" (or "name").
func names[O interface {
	GetNamespace() string
	GetName() string
}](objs []O) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = path.Join(o.GetNamespace(), o.GetName())
	}
	return out
}

// TestWatcherKubeOVN applies the objects of Kube-OVN's LoadBalancer
// Service example (daemon/testdata/kubeovn)
// through a real API server with deploy/crds' Subnet and
// NetworkAttachmentDefinition CRDs, and checks that the informers of
// kubewatch.WatchKubeOVN yield them typed and follow an excludeIps update.
func TestWatcherKubeOVN(t *testing.T) {
	t.Parallel()
	k := startKube(t)
	k.poll(t, "Subnet and NetworkAttachmentDefinition CRDs served", func(ctx context.Context) error {
		if _, err := k.dyn.Resource(kubeovn.SubnetResource).List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		_, err := k.dyn.Resource(kubeovn.NADResource).List(ctx, metav1.ListOptions{})
		return err
	})
	k.apply(t, filepath.Join("..", "testdata", "kubeovn"), "seed004.yaml")

	w := kubewatch.NewWatcher(k.cs, k.dyn, slog.New(slog.NewTextHandler(io.Discard, nil)), kubewatch.WatchKubeOVN())
	s, ctx := snapshot(t, w)
	if len(s.Subnets) != 1 || len(s.NADs) != 1 {
		t.Fatalf("%d subnets, %d NADs; want 1, 1", len(s.Subnets), len(s.NADs))
	}
	sub, nad := s.Subnets[0], s.NADs[0]
	if sub.Name != "attach-subnet" || sub.Spec.Provider != "lb-svc-attachment.kube-system" || sub.Spec.CIDRBlock != "172.18.0.0/16" ||
		!slices.Equal(sub.Spec.ExcludeIps, []string{"172.18.0.0..172.18.0.10"}) || len(sub.ManagedFields) > 0 {
		t.Errorf("subnet %s %+v", sub.Name, sub.Spec)
	}
	if nad.Namespace != "kube-system" || nad.Name != "lb-svc-attachment" || !strings.Contains(nad.Spec.Config, "macvlan") {
		t.Errorf("NAD %s/%s %q", nad.Namespace, nad.Name, nad.Spec.Config)
	}

	u, err := k.dyn.Resource(kubeovn.SubnetResource).Get(ctx, "attach-subnet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedStringSlice(u.Object, []string{"172.18.0.0..172.18.0.20"}, "spec", "excludeIps"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.dyn.Resource(kubeovn.SubnetResource).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.poll(t, "the informers to see the new excludeIps", func(context.Context) error {
		s, err := w.Snapshot()
		if err != nil {
			return err
		}
		if got := s.Subnets[0].Spec.ExcludeIps; !slices.Equal(got, []string{"172.18.0.0..172.18.0.20"}) {
			return fmt.Errorf("excludeIps %v", got)
		}
		return nil
	})
}

// snapshot starts w until the test ends and returns its first Snapshot
// and the context it runs in.
func snapshot(t *testing.T, w *kubewatch.Watcher) (desired.Snapshot, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s, ctx
}

// TestWatcherPodsOnDemand: a node instance's Watcher (PodsOnDemand)
// holds no Pod watch on the API server and caches no pod until WatchPods
// asks for a label selector; then it holds one watch for it and caches
// only the pods it selects, and drops both when the selector goes.
func TestWatcherPodsOnDemand(t *testing.T) {
	t.Parallel()
	k := startKube(t)
	k.apply(t, demoDir)
	base := podWatches(t, k) // the API server's own
	w := kubewatch.NewWatcher(k.cs, k.dyn, slog.New(slog.NewTextHandler(io.Discard, nil)), kubewatch.PodsOnDemand())
	s, ctx := snapshot(t, w)
	if len(s.Pods) != 0 || len(s.Nodes) == 0 {
		t.Fatalf("%d pods and %d nodes before any WatchPods; want none and the demo's", len(s.Pods), len(s.Nodes))
	}
	for _, p := range []*corev1.Pod{testPod("other", "db"), testPod("web-1", "web")} {
		if _, err := k.cs.CoreV1().Pods("prod").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := podWatches(t, k) - base; n != 0 {
		t.Errorf("%d pod watches on the API server before any WatchPods, want 0", n)
	}
	web, db, every := desired.PodWatch{LabelSelector: "app=web"}, desired.PodWatch{LabelSelector: "app=db"}, desired.PodWatch{}
	prodWeb, otherWeb := desired.PodWatch{Namespace: "prod", LabelSelector: "app=web"}, desired.PodWatch{Namespace: "default", LabelSelector: "app=web"}
	for _, c := range []struct {
		selectors []desired.PodWatch
		changed   bool
		pods      []string
		watches   int
	}{
		{[]desired.PodWatch{web}, true, []string{"prod/web-0", "prod/web-1"}, 1},
		{[]desired.PodWatch{web}, false, []string{"prod/web-0", "prod/web-1"}, 1},
		{[]desired.PodWatch{db, web}, true, []string{"prod/other", "prod/web-0", "prod/web-1"}, 2},
		{[]desired.PodWatch{every, web}, true, []string{"prod/other", "prod/web-0", "prod/web-1"}, 2}, // overlapping: each pod once
		{[]desired.PodWatch{otherWeb, prodWeb}, true, []string{"prod/web-0", "prod/web-1"}, 2},        // by namespace
		{[]desired.PodWatch{otherWeb}, true, nil, 1},
		{nil, true, nil, 0},
	} {
		changed, err := w.WatchPods(ctx, c.selectors)
		if err != nil || changed != c.changed {
			t.Fatalf("WatchPods(%q) = %v, %v; want %v, nil", c.selectors, changed, err, c.changed)
		}
		if got := w.PodWatches(); !slices.Equal(got, c.selectors) {
			t.Errorf("PodWatches() = %q after WatchPods(%q)", got, c.selectors)
		}
		s, err := w.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		got := names(s.Pods)
		slices.Sort(got)
		if !slices.Equal(got, c.pods) {
			t.Errorf("WatchPods(%q): pods %q, want %q", c.selectors, got, c.pods)
		}
		k.poll(t, fmt.Sprintf("%d pod watches on the API server", c.watches), func(context.Context) error {
			if n := podWatches(t, k) - base; n != c.watches {
				return fmt.Errorf("%d pod watches", n)
			}
			return nil
		})
	}
}

// testPod is a running pod of namespace prod labelled app.
func testPod(name, app string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: "ovn-worker", Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
}

// podWatches is the API server's count of open Pod watches: with no
// controller running, its own and the Watcher's.
func podWatches(t *testing.T, k *kube) int {
	t.Helper()
	n, err := k.Watches(context.Background(), "pods")
	if err != nil {
		t.Fatal(err)
	}
	return n
}
