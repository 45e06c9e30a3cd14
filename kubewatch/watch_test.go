package kubewatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/internal/scale"
	"github.com/ovnedge/ovnedge/manifests"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestWatcherRunLoop checks that a manifest change reaches the reconcile
// function as a Snapshot, and that a failed reconcile is retried.
func TestWatcherRunLoop(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	testbed.WriteFile(t, dir, "eip.yaml", testbed.EgressIPManifest)
	src := manifests.NewSource(dir, log)
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(src.Clientset, src.Dynamic, log)
	q := w.Queue("cluster")
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}

	var calls atomic.Int32
	seen := make(chan desired.Snapshot, 16)
	done := make(chan struct{})
	go func() {
		RunLoop(ctx, q, "test", log, func(context.Context) error {
			if calls.Add(1) == 1 {
				return errors.New("first reconcile fails")
			}
			s, err := w.Snapshot()
			if err != nil {
				return err
			}
			seen <- s
			return nil
		}, nil)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })

	wait := func(what string, cond func(desired.Snapshot) bool) {
		t.Helper()
		timeout := time.After(5 * time.Second)
		for {
			select {
			case s := <-seen:
				if cond(s) {
					return
				}
			case <-timeout:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	wait("the EgressIP after a retried failure", func(s desired.Snapshot) bool { return len(s.EgressIPs) == 1 })
	testbed.WriteFile(t, dir, "nodes.yaml", testbed.NodeManifest(`a: b`))
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	wait("the new node", func(s desired.Snapshot) bool { return len(s.Nodes) == 1 && len(s.EgressIPs) == 1 })
}

// TestWatcherTakeChanges: the first take asks for a full recompute; then
// each changed object comes once, as the store holds it (a deleted one as
// nil), and RequestFull and RequestReassign show in the next take.
func TestWatcherTakeChanges(t *testing.T) {
	ctx, src, w := startedWatcher(t)
	if ch := w.TakeChanges(); ch != nil {
		t.Fatalf("first take %+v, want nil (full)", ch)
	}
	core := src.Clientset.CoreV1()
	before := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}
	if _, err := core.Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web-0", Labels: map[string]string{"app": "a"}}}
	if _, err := core.Pods("prod").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Labels["app"] = "b"
	if _, err := core.Pods("prod").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	take := func(what string, cond func(*desired.Changes) bool) *desired.Changes {
		t.Helper()
		all := &desired.Changes{Namespaces: map[string]*corev1.Namespace{}, Pods: map[string]*egress.PodInfo{}}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			ch := w.TakeChanges()
			if ch == nil {
				t.Fatalf("%s: a take asked for a full recompute", what)
			}
			maps.Copy(all.Namespaces, ch.Namespaces)
			maps.Copy(all.Pods, ch.Pods)
			all.Reassign = all.Reassign || ch.Reassign
			if ch.Len() > 0 && ch.Since.IsZero() {
				t.Errorf("%s: %d changes taken with no Since", what, ch.Len())
			}
			if all.Since.IsZero() {
				all.Since = ch.Since
			}
			if cond(all) {
				return all
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s: %+v", what, all)
		return nil
	}
	first := take("the namespace and the relabelled pod", func(ch *desired.Changes) bool {
		p := ch.Pods["prod/web-0"]
		return ch.Namespaces["prod"] != nil && p != nil && p.Labels.Get("app") == "b"
	})
	if first.Since.Before(before) || first.Since.After(time.Now()) {
		t.Errorf("the first changes' Since %v, want after the namespace's create (%v)", first.Since, before)
	}
	if err := core.Pods("prod").Delete(ctx, "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	take("the deleted pod", func(ch *desired.Changes) bool { p, ok := ch.Pods["prod/web-0"]; return ok && p == nil })
	w.RequestReassign()
	if ch := w.TakeChanges(); ch == nil || !ch.Reassign || ch.Len() != 0 || !ch.Since.IsZero() {
		t.Errorf("after RequestReassign: %+v, want Reassign, no object and no Since", ch)
	}
	w.RequestFull()
	if ch := w.TakeChanges(); ch != nil {
		t.Errorf("after RequestFull: %+v, want nil", ch)
	}
}

// startedWatcher starts a Watcher on an empty in-memory API (stopped at
// the test's end).
func startedWatcher(t *testing.T, opts ...WatchOption) (context.Context, *manifests.Source, *Watcher) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src := manifests.NewSource(t.TempDir(), log)
	w := NewWatcher(src.Clientset, src.Dynamic, log, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx, src, w
}

// TestWatcherSnapshotLists: a Snapshot taken after TakeChanges returned
// a change lists the changed object, and a kind none of whose objects
// changed keeps the list of the Snapshot before (the same slice).
func TestWatcherSnapshotLists(t *testing.T) {
	ctx, src, w := startedWatcher(t)
	core := src.Clientset.CoreV1()
	// The first take is the full one, which drops the keys noted before
	// it: the node comes after it.
	w.TakeChanges()
	if _, err := core.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// taken waits until TakeChanges has returned a change of want and
	// returns the Snapshot taken right after.
	taken := func(want func(*desired.Changes) bool) desired.Snapshot {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if ch := w.TakeChanges(); ch != nil && want(ch) {
				s, err := w.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		}
		t.Fatal("timed out waiting for the change")
		return desired.Snapshot{}
	}
	s1 := taken(func(ch *desired.Changes) bool { return ch.Nodes["n1"] != nil })
	if len(s1.Nodes) != 1 || len(s1.Services) != 0 {
		t.Fatalf("first snapshot: %d nodes, %d services, want 1 and 0", len(s1.Nodes), len(s1.Services))
	}
	for i := range 3 {
		name := fmt.Sprintf("svc-%d", i)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
		if _, err := core.Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s2 := taken(func(ch *desired.Changes) bool { return ch.Services["default/"+name] != nil })
		if !slices.ContainsFunc(s2.Services, func(s *corev1.Service) bool { return s.Name == name }) || len(s2.Services) != i+1 {
			t.Fatalf("snapshot after %s was created: %d services, without it", name, len(s2.Services))
		}
		if !sameSlice(s1.Nodes, s2.Nodes) {
			t.Errorf("snapshot after %s was created: the nodes were listed again", name)
		}
		if cap(s2.Services) != len(s2.Services) {
			t.Errorf("services: cap %d, len %d: an append would write into the shared list", cap(s2.Services), len(s2.Services))
		}
	}
	s3, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if s4, _ := w.Snapshot(); !sameSlice(s3.Services, s4.Services) || !sameSlice(s3.Pods, s4.Pods) {
		t.Error("two snapshots with no change between them listed the services or pods twice")
	}
}

// TestNodeWatcherServices: a node instance's Watcher (ForNode) lists a
// Service while a node has work for it (here while it is a LoadBalancer)
// and not while its informer holds it as a stub (Changes then hold it as
// nil, as a deleted one); its deletion as a stub is seen.
func TestNodeWatcherServices(t *testing.T) {
	ctx, src, w := startedWatcher(t, ForNode("n1"))
	svcs := src.Clientset.CoreV1().Services("default")
	listed := func(want bool) {
		t.Helper()
		testbed.Eventually(t, 5*time.Second, func() error {
			s, err := w.Snapshot()
			if err != nil {
				return err
			}
			if got := slices.ContainsFunc(s.Services, func(s *corev1.Service) bool { return s.Name == "web" }); got != want {
				return fmt.Errorf("listed %v, want %v (%d Services)", got, want, len(s.Services))
			}
			if got := len(w.Services()) == 1; got != want {
				return fmt.Errorf("Services() %d", len(w.Services()))
			}
			return nil
		})
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}}}}
	created, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 5*time.Second, func() error {
		if _, ok, _ := w.factory.Core().V1().Services().Informer().GetStore().GetByKey("default/web"); !ok {
			return errors.New("not in the informer")
		}
		return nil
	})
	listed(false)
	created.Spec.Type = corev1.ServiceTypeLoadBalancer
	if created, err = svcs.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	listed(true)
	created.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err = svcs.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	listed(false)
	w.TakeChanges()
	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 5*time.Second, func() error {
		if ch := w.TakeChanges(); ch != nil {
			if _, ok := ch.Services["default/web"]; ok {
				return nil
			}
		}
		return errors.New("the stub's deletion not seen")
	})
}

// TestNodeWatcherSlices: a node instance's Watcher keeps the
// EndpointSlices of a Service it keeps as a stub as stubs too, and lists
// none; once the Service has node work, it lists them (read from the API
// server), then as the informer has them after their next change.
func TestNodeWatcherSlices(t *testing.T) {
	ctx, src, w := startedWatcher(t, ForNode("n1"))
	svcs := src.Clientset.CoreV1().Services("default")
	slices := src.Clientset.DiscoveryV1().EndpointSlices("default")
	svc, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store := func() cache.Store { return w.late.Discovery().V1().EndpointSlices().Informer().GetStore() }
	testbed.Eventually(t, 5*time.Second, func() error {
		if _, ok, _ := w.factory.Core().V1().Services().Informer().GetStore().GetByKey("default/web"); !ok {
			return errors.New("Service not in the informer")
		}
		return nil
	})
	slice, err := slices.Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, NodeName: ptr.To("n1")}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	listed := func(endpoints int) {
		t.Helper()
		testbed.Eventually(t, 5*time.Second, func() error {
			s, err := w.Snapshot()
			if err != nil {
				return err
			}
			n := -1
			for _, e := range s.EndpointSlices {
				if e.Name == "web-1" {
					n = len(e.Endpoints)
				}
			}
			if n != endpoints {
				return fmt.Errorf("web-1 listed with %d endpoints (-1: not listed), want %d", n, endpoints)
			}
			return nil
		})
	}
	testbed.Eventually(t, 5*time.Second, func() error {
		if o, ok, _ := store().GetByKey("default/web-1"); !ok || !reflect.DeepEqual(o, &stub{namespace: "default", name: "web-1",
			resourceVersion: slice.ResourceVersion, service: "web"}) {
			return fmt.Errorf("the informer holds %+v", o)
		}
		return nil
	})
	listed(-1)
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	if svc, err = svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	listed(1) // fetched
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0.6"}, NodeName: ptr.To("n1")})
	if _, err := slices.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	listed(2) // the informer's
	w.stubs.mu.Lock()
	_, ok := w.stubs.fetched["default/web-1"]
	w.stubs.mu.Unlock()
	if ok {
		t.Error("the fetched slice kept once the informer had it whole")
	}
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err = svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := slices.Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	listed(-1)
}

// TestCachedPod: the informers keep a Pod as its egress.PodInfo (what the
// egress computations read: the egress view, the labels for the
// selectors), keyed and indexed by its namespace and name as the Pod
// was, and keep it as it is when it passes again (a streaming list's
// objects do).
func TestCachedPod(t *testing.T) {
	now := metav1.Now()
	p := scale.Pod(3)
	p.UID, p.ResourceVersion, p.Annotations = "u-3", "42", map[string]string{"k8s.ovn.org/pod-networks": "{}"}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	for _, tc := range []struct {
		name     string
		deleting bool
	}{{"running", false}, {"being deleted", true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := p.DeepCopy()
			if tc.deleting {
				p.DeletionTimestamp = &now
			}
			obj, err := stripManagedFields(p)
			if err != nil {
				t.Fatal(err)
			}
			again, err := stripManagedFields(obj)
			if err != nil || again != obj {
				t.Errorf("a cached pod passed again: %v, %v", again, err)
			}
			got, ok := podInfo(obj)
			if !ok {
				t.Fatalf("cached as %T", obj)
			}
			want, wantOK := egress.PodFromK8s(p)
			view, viewOK := got.Served()
			if viewOK != wantOK || !reflect.DeepEqual(view, want) || wantOK == tc.deleting {
				t.Errorf("egress view: %+v (%v), want %+v (%v)", view, viewOK, want, wantOK)
			}
			if got.Labels.Get(scale.LabelApp) != p.Labels[scale.LabelApp] || got.Labels.Has("x") {
				t.Errorf("labels %v, want %v", got.Labels, p.Labels)
			}
			for name, f := range map[string]cache.KeyFunc{"key": cache.MetaNamespaceKeyFunc,
				"namespace index": func(o any) (string, error) {
					ns, err := cache.MetaNamespaceIndexFunc(o)
					return strings.Join(ns, ","), err
				}} {
				a, errA := f(obj)
				b, errB := f(p)
				if a != b || errA != nil || errB != nil {
					t.Errorf("%s: %q (%v), the Pod's %q (%v)", name, a, errA, b, errB)
				}
			}
		})
	}
}

// TestTrimNode: a cached Node keeps everything ovnedge reads (labels,
// annotations, spec, addresses, conditions) and loses its images and
// volumes.
func TestTrimNode(t *testing.T) {
	n := scale.Node(7)
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	n.Status.VolumesInUse = []corev1.UniqueVolumeName{"v"}
	n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "v", DevicePath: "/dev/x"}}
	if len(n.Status.Images) == 0 {
		t.Fatal("scale.Node has no images: the kubelet reports up to 50")
	}
	want := n.DeepCopy()
	want.ManagedFields, want.Status.Images, want.Status.VolumesInUse, want.Status.VolumesAttached = nil, nil, nil, nil
	obj, err := stripManagedFields(n)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*corev1.Node); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("trimmed node:\n%+v\nwant\n%+v", got, want)
	}
}

// TestTrimSlice: a cached EndpointSlice keeps what the load balancers read
// (labels, address type, ports, each endpoint's addresses, conditions and
// node) and loses its annotations and the endpoints' references, hostnames,
// zones and hints.
func TestTrimSlice(t *testing.T) {
	s := scale.EndpointSlice(3, []int{30, 31})
	s.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-11-28T00:00:00Z"}
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "svc-3", UID: "u"}}
	s.GenerateName = "svc-3-"
	s.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	zone, host := "z1", "web-0"
	for i := range s.Endpoints {
		s.Endpoints[i].Zone, s.Endpoints[i].Hostname = &zone, &host
		s.Endpoints[i].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
	}
	want := s.DeepCopy()
	want.Annotations, want.ManagedFields, want.OwnerReferences, want.GenerateName = nil, nil, nil, ""
	want.Labels = map[string]string{discoveryv1.LabelServiceName: s.Labels[discoveryv1.LabelServiceName]}
	for i := range want.Endpoints {
		e := &want.Endpoints[i]
		e.TargetRef, e.Zone, e.Hostname, e.Hints = nil, nil, nil, nil
	}
	obj, err := stripManagedFields(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*discoveryv1.EndpointSlice); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("trimmed slice:\n%+v\nwant\n%+v", got, want)
	}
}

// sameSlice reports whether a and b are the same slice (the same
// elements in the same memory), not merely equal.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
