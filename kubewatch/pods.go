package kubewatch

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/ovnedge/ovnedge/desired"
)

// PodsOnDemand makes the Watcher watch no Pods of its own: WatchPods
// starts a Pod informer per namespace and label selector the caller needs
// and stops those it no longer needs, and Snapshots hold only their pods. A node
// instance uses it: its bridge depends on Services, EndpointSlices and
// Nodes, and on Pods only for the egress IPs it hosts on host interfaces,
// so on a 150,000-pod cluster a node without them caches no pod and holds
// no Pod watch on the API server.
func PodsOnDemand() WatchOption {
	return func(w *Watcher) { w.pods = &podWatches{running: map[desired.PodWatch]*podWatch{}} }
}

// podWatches are the Pod informers of a PodsOnDemand Watcher, by
// namespace and label selector.
type podWatches struct {
	mu      sync.Mutex
	ctx     context.Context // the Watcher's, from Start: the informers' lifetime
	running map[desired.PodWatch]*podWatch
}

// podWatch is one namespace's and label selector's Pod informer.
type podWatch struct {
	inf  cache.SharedIndexInformer
	stop context.CancelFunc
}

// NodeSnapshot is node's Snapshot. With PodsOnDemand its pod watches
// are first made those node's host-interface egress IPs serve
// (desired.HostEgressPodWatches; kept as they are while node's
// annotations do not parse), and its Pods are theirs; without, it is
// Snapshot.
func (w *Watcher) NodeSnapshot(ctx context.Context, node string) (desired.Snapshot, error) {
	s, err := w.Snapshot()
	if err != nil || w.pods == nil {
		return s, err
	}
	watches, ok := desired.HostEgressPodWatches(s, node)
	if !ok {
		return s, nil
	}
	if changed, err := w.WatchPods(ctx, watches); err != nil || !changed {
		return s, err
	}
	return w.Snapshot()
}

// WatchPods makes the Watcher's Pod informers those of watches: it
// starts the missing ones, waits for their caches, and stops the others.
// It reports whether the set changed, so the caller takes a new Snapshot.
// Without PodsOnDemand it does nothing: every pod is watched.
func (w *Watcher) WatchPods(ctx context.Context, watches []desired.PodWatch) (changed bool, err error) {
	if w.pods == nil {
		return false, nil
	}
	p := w.pods
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil {
		return false, fmt.Errorf("watch pods: the watcher has not started")
	}
	for pw, running := range p.running {
		if !slices.Contains(watches, pw) {
			running.stop()
			delete(p.running, pw)
			changed = true
			w.log.Info("pod watch stopped", "namespace", pw.Namespace, "labelSelector", pw.LabelSelector)
		}
	}
	var synced []cache.InformerSynced
	for _, pw := range watches {
		if p.running[pw] != nil {
			continue
		}
		running := w.startPodWatch(p.ctx, pw)
		p.running[pw] = running
		synced = append(synced, running.inf.HasSynced)
		changed = true
		w.log.Info("pod watch started", "namespace", pw.Namespace, "labelSelector", pw.LabelSelector)
	}
	if changed {
		w.lists[kindPod].fresh.Store(false)
	}
	if len(synced) > 0 && !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return changed, fmt.Errorf("pod watches did not sync: %w", ctx.Err())
	}
	return changed, nil
}

// startPodWatch starts the Pod informer of pw, until ctx ends or its
// stop.
func (w *Watcher) startPodWatch(ctx context.Context, pw desired.PodWatch) *podWatch {
	ctx, stop := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(w.cs, 0, informers.WithTransform(stripManagedFields))
	inf := f.InformerFor(&corev1.Pod{}, newPodInformer(pw.Namespace, func(o *metav1.ListOptions) { o.LabelSelector = pw.LabelSelector }))
	handle := func(any) {
		w.lists[kindPod].fresh.Store(false)
		w.notify()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: handle, UpdateFunc: func(_, o any) { handle(o) }, DeleteFunc: handle,
	}); err != nil {
		w.log.Error("pod informer handler", "namespace", pw.Namespace, "labelSelector", pw.LabelSelector, "err", err)
	}
	f.Start(ctx.Done())
	return &podWatch{inf: inf, stop: stop}
}

// List lists the pods of every running pod watch, each once (watches
// may overlap): the Snapshot's Pods of a PodsOnDemand Watcher.
func (p *podWatches) List() []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []any
	seen := map[string]bool{}
	for _, pw := range p.running {
		for _, o := range pw.inf.GetStore().List() {
			if key, err := cache.MetaNamespaceKeyFunc(o); err == nil && !seen[key] {
				seen[key] = true
				out = append(out, o)
			}
		}
	}
	return out
}

// PodWatches are the namespaces and label selectors of a PodsOnDemand
// Watcher's running Pod informers, sorted.
func (w *Watcher) PodWatches() []desired.PodWatch {
	if w.pods == nil {
		return nil
	}
	p := w.pods
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]desired.PodWatch, 0, len(p.running))
	for pw := range p.running {
		out = append(out, pw)
	}
	slices.SortFunc(out, desired.PodWatch.Compare)
	return out
}
