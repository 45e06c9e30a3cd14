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
// starts a Pod informer per label selector the caller needs and stops
// those it no longer needs, and Snapshots hold only their pods. A node
// instance uses it: its bridge depends on Services, EndpointSlices and
// Nodes, and on Pods only for the egress IPs it hosts on host interfaces,
// so on a 150,000-pod cluster a node without them caches no pod and holds
// no Pod watch on the API server.
func PodsOnDemand() WatchOption {
	return func(w *Watcher) { w.pods = &podWatches{running: map[string]*podWatch{}} }
}

// podWatches are the Pod informers of a PodsOnDemand Watcher, by label
// selector (the API server's syntax; "" selects every pod).
type podWatches struct {
	mu      sync.Mutex
	ctx     context.Context // the Watcher's, from Start: the informers' lifetime
	running map[string]*podWatch
}

// podWatch is one label selector's Pod informer.
type podWatch struct {
	inf  cache.SharedIndexInformer
	stop context.CancelFunc
}

// NodeSnapshot is node's Snapshot. With PodsOnDemand its pod watches
// are first made those node's host-interface egress IPs serve
// (desired.HostEgressPodSelectors; kept as they are while node's
// annotations do not parse), and its Pods are theirs; without, it is
// Snapshot.
func (w *Watcher) NodeSnapshot(ctx context.Context, node string) (desired.Snapshot, error) {
	s, err := w.Snapshot()
	if err != nil || w.pods == nil {
		return s, err
	}
	sel, ok := desired.HostEgressPodSelectors(s, node)
	if !ok {
		return s, nil
	}
	if changed, err := w.WatchPods(ctx, sel); err != nil || !changed {
		return s, err
	}
	return w.Snapshot()
}

// WatchPods makes the Watcher's Pod informers those of selectors (label
// selectors in the API server's syntax; "" selects every pod): it starts
// the missing ones, waits for their caches, and stops the others. It
// reports whether the set changed, so the caller takes a new Snapshot.
// Without PodsOnDemand it does nothing: every pod is watched.
func (w *Watcher) WatchPods(ctx context.Context, selectors []string) (changed bool, err error) {
	if w.pods == nil {
		return false, nil
	}
	p := w.pods
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil {
		return false, fmt.Errorf("watch pods: the watcher has not started")
	}
	for sel, pw := range p.running {
		if !slices.Contains(selectors, sel) {
			pw.stop()
			delete(p.running, sel)
			changed = true
			w.log.Info("pod watch stopped", "labelSelector", sel)
		}
	}
	var synced []cache.InformerSynced
	for _, sel := range selectors {
		if p.running[sel] != nil {
			continue
		}
		pw := w.startPodWatch(p.ctx, sel)
		p.running[sel] = pw
		synced = append(synced, pw.inf.HasSynced)
		changed = true
		w.log.Info("pod watch started", "labelSelector", sel)
	}
	if changed {
		w.lists[kindPod].fresh.Store(false)
	}
	if len(synced) > 0 && !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return changed, fmt.Errorf("pod watches did not sync: %w", ctx.Err())
	}
	return changed, nil
}

// startPodWatch starts a Pod informer for the label selector sel, until
// ctx ends or its stop.
func (w *Watcher) startPodWatch(ctx context.Context, sel string) *podWatch {
	ctx, stop := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(w.cs, 0, informers.WithTransform(stripManagedFields))
	inf := f.InformerFor(&corev1.Pod{}, newPodInformer(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	handle := func(any) {
		w.lists[kindPod].fresh.Store(false)
		w.notify()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: handle, UpdateFunc: func(_, o any) { handle(o) }, DeleteFunc: handle,
	}); err != nil {
		w.log.Error("pod informer handler", "labelSelector", sel, "err", err)
	}
	f.Start(ctx.Done())
	return &podWatch{inf: inf, stop: stop}
}

// List lists the pods of every running pod watch, each once (selectors
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

// PodSelectors are the label selectors of a PodsOnDemand Watcher's
// running Pod informers, sorted.
func (w *Watcher) PodSelectors() []string {
	if w.pods == nil {
		return nil
	}
	p := w.pods
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.running))
	for sel := range p.running {
		out = append(out, sel)
	}
	slices.Sort(out)
	return out
}
