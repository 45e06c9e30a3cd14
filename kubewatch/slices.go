package kubewatch

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// sliceStubs is how a node instance's Watcher keeps the EndpointSlices of
// the Services it keeps as stubs (no node has work for them): as stubs
// too, in the informer's store, so that it holds neither their metadata
// nor their endpoints (at 150,000 pods nine slices in ten, 11 MB of a
// node's 34 MB heap). A slice is stubbed when its Service is a stub in the
// Services' store: the EndpointSlice informer starts only once that store
// is synced. When a Service comes to have node work, the slices stubbed
// for it are read from the API server once and kept in fetched until
// the informer holds them whole (their next change) or they go; Snapshot
// lists those in their place. Nothing is looked up by Service but on
// that change, so no index is kept (the index of an earlier attempt cost
// more than the slices it saved).
type sliceStubs struct {
	ctx     context.Context // the Watcher's, from Start
	mu      sync.Mutex
	fetched map[string]*discoveryv1.EndpointSlice // by key
}

// sliceInformer is the EndpointSlice informer: the main factory's, or on
// a node instance's Watcher one of its own, started late, with the
// Service handler that fetches the stubs of a Service that comes to need
// the node.
func (w *Watcher) sliceInformer() cache.SharedIndexInformer {
	if w.node == "" {
		return w.factory.InformerFor(&discoveryv1.EndpointSlice{}, newSliceInformer)
	}
	w.late = informers.NewSharedInformerFactoryWithOptions(w.cs, 0, informers.WithTransform(w.transform))
	inf := w.late.InformerFor(&discoveryv1.EndpointSlice{}, newSliceInformer)
	if _, err := w.factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.serviceChanged(nil, o) },
		UpdateFunc: w.serviceChanged,
	}); err != nil {
		w.log.Error("informer handler", "err", err)
	}
	whole := func(o any) { // the informer's own from now on
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			w.stubs.forget(s.Namespace + "/" + s.Name)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    whole,
		UpdateFunc: func(_, o any) { whole(o) },
		DeleteFunc: func(o any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o); err == nil {
				w.stubs.forget(key)
			}
		},
	}); err != nil {
		w.log.Error("informer handler", "err", err)
	}
	return inf
}

// startSlices starts a node instance's EndpointSlice informer once the
// Services are synced.
func (w *Watcher) startSlices(ctx context.Context) error {
	if w.late == nil {
		return nil
	}
	w.stubs.mu.Lock()
	w.stubs.ctx = ctx
	w.stubs.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), w.factory.Core().V1().Services().Informer().HasSynced) {
		return fmt.Errorf("informer caches did not sync: %w", ctx.Err())
	}
	w.late.Start(ctx.Done())
	return nil
}

// stubSlice is obj, or a stub of it when it is an EndpointSlice whose
// Service the Services' store holds as a stub.
func (w *Watcher) stubSlice(obj any) any {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj
	}
	svc := s.Labels[discoveryv1.LabelServiceName]
	if svc == "" {
		return obj
	}
	o, ok, _ := w.factory.Core().V1().Services().Informer().GetStore().GetByKey(s.Namespace + "/" + svc)
	if _, stubbed := o.(*stub); !ok || !stubbed {
		return obj
	}
	return &stub{namespace: s.Namespace, name: s.Name, resourceVersion: s.ResourceVersion, service: svc}
}

// serviceChanged fetches, when a Service comes to have node work, the
// slices stubbed for it, and forgets those fetched when it no longer has.
func (w *Watcher) serviceChanged(old, cur any) {
	_, wasStub := old.(*stub)
	if st, ok := cur.(*stub); ok {
		w.stubs.forgetService(st.namespace, st.name)
		return
	}
	if old != nil && !wasStub {
		return
	}
	svc, ok := cur.(*corev1.Service)
	if !ok {
		return
	}
	var keys []string
	for _, o := range w.late.Discovery().V1().EndpointSlices().Informer().GetStore().List() {
		if st, ok := o.(*stub); ok && st.namespace == svc.Namespace && st.service == svc.Name {
			keys = append(keys, st.namespace+"/"+st.name)
		}
	}
	if len(keys) > 0 {
		go w.fetch(keys)
	}
}

// fetch reads the slices of keys from the API server, keeps them
// (trimmed) for Snapshot and notes their change.
func (w *Watcher) fetch(keys []string) {
	w.stubs.mu.Lock()
	ctx := w.stubs.ctx
	w.stubs.mu.Unlock()
	for _, key := range keys {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		s, err := w.cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			w.log.Warn("endpoint slice of a Service that came to need the node not read; kept as it was until it changes", "slice", key, "err", err)
			continue
		}
		if o, ok, _ := w.late.Discovery().V1().EndpointSlices().Informer().GetStore().GetByKey(key); ok {
			if _, stubbed := o.(*stub); !stubbed {
				continue // the informer has it whole already
			}
		}
		obj, _ := stripManagedFields(s)
		s = TrimForNode(obj, w.node).(*discoveryv1.EndpointSlice)
		w.stubs.mu.Lock()
		if w.stubs.fetched == nil {
			w.stubs.fetched = map[string]*discoveryv1.EndpointSlice{}
		}
		w.stubs.fetched[key] = s
		w.stubs.mu.Unlock()
		w.changed(kindEndpointSlice, s)
	}
}

// sliceOf is a cached slice as Snapshot lists it: itself, or for a stub
// the slice fetched in its place (none: left out).
func (w *Watcher) sliceOf(o any) (*discoveryv1.EndpointSlice, bool) {
	switch s := o.(type) {
	case *discoveryv1.EndpointSlice:
		return s, true
	case *stub:
		w.stubs.mu.Lock()
		defer w.stubs.mu.Unlock()
		f, ok := w.stubs.fetched[s.namespace+"/"+s.name]
		return f, ok
	}
	return nil, false
}

// forget drops the slice fetched for key.
func (st *sliceStubs) forget(key string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.fetched != nil {
		delete(st.fetched, key)
	}
}

// forgetService drops the slices fetched for Service namespace/name.
func (st *sliceStubs) forgetService(namespace, name string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for k, s := range st.fetched {
		if s.Namespace == namespace && s.Labels[discoveryv1.LabelServiceName] == name {
			delete(st.fetched, k)
		}
	}
}
