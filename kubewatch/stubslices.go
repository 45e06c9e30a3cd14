package kubewatch

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// StubAnnotation marks an EndpointSlice a node instance keeps as a stub
// (no endpoints, no ports) because its Service is a stub (stubService): no
// node has work for it. At 150,000 pods, nine Services in ten of the scale
// benchmark's, and their endpoints are most of a node instance's cache.
const StubAnnotation = "ovnedge.io/stub"

// byService indexes EndpointSlices by their Service's namespace/name.
const byService = "service"

// sliceStubs keeps a node instance's EndpointSlices of stubbed Services as
// stubs, and their whole (compacted) form back when their Service needs a
// node: it lists them from the API server (refetch) and holds them in
// full until the informer stores a newer, whole, version of each. The
// informer's store is never written but by the informer: List and GetByKey
// (store) put full in place of a stub.
type sliceStubs struct {
	mu      sync.Mutex
	stubbed map[string]bool                              // Services (namespace/name) that are stubs
	full    map[string]*discoveryv1.EndpointSlice        // slice key -> its refetched whole form
	refetch workqueue.TypedRateLimitingInterface[string] // Services whose stub slices to fetch whole
}

func newSliceStubs() *sliceStubs {
	return &sliceStubs{stubbed: map[string]bool{}, full: map[string]*discoveryv1.EndpointSlice{},
		refetch: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
}

// service notes whether the Service s (as the transform left it) is a
// stub.
func (st *sliceStubs) service(s *corev1.Service) {
	key := s.Namespace + "/" + s.Name
	st.mu.Lock()
	defer st.mu.Unlock()
	if stubbable(s) {
		st.stubbed[key] = true
	} else {
		delete(st.stubbed, key)
	}
}

// forget drops a deleted Service.
func (st *sliceStubs) forget(s *corev1.Service) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.stubbed, s.Namespace+"/"+s.Name)
}

// trim makes s a stub when its Service is one; it says whether it did.
func (st *sliceStubs) trim(s *discoveryv1.EndpointSlice) bool {
	st.mu.Lock()
	stub := st.stubbed[serviceOf(s)]
	st.mu.Unlock()
	if stub {
		StubSlice(s)
	}
	return stub
}

// StubSlice keeps of s its identity, address type and Service, marked
// with StubAnnotation: what a node instance keeps of the EndpointSlice of
// a Service that TrimForNode makes a stub (a node's desired state is the
// same without its endpoints).
func StubSlice(s *discoveryv1.EndpointSlice) {
	*s = discoveryv1.EndpointSlice{TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion,
			Labels:      map[string]string{discoveryv1.LabelServiceName: s.Labels[discoveryv1.LabelServiceName]},
			Annotations: map[string]string{StubAnnotation: ""}},
		AddressType: s.AddressType}
}

func isStub(s *discoveryv1.EndpointSlice) bool {
	_, ok := s.Annotations[StubAnnotation]
	return ok
}

func serviceOf(s *discoveryv1.EndpointSlice) string {
	return s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
}

// sliceStored follows the informer's store: a stub of a Service that is
// no longer one is fetched whole; a whole slice replaces what was
// fetched.
func (st *sliceStubs) sliceStored(obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	key := s.Namespace + "/" + s.Name
	svc := serviceOf(s)
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case !isStub(s) || st.stubbed[svc]:
		delete(st.full, key) // the store holds what is read
	case st.full[key] == nil:
		st.refetch.Add(svc)
	}
}

// sliceDeleted drops what was fetched of a deleted slice.
func (st *sliceStubs) sliceDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		st.mu.Lock()
		delete(st.full, s.Namespace+"/"+s.Name)
		st.mu.Unlock()
	}
}

// serviceStored fetches the stub slices of a Service that needs a node
// now.
func (st *sliceStubs) serviceStored(obj any, slices cache.Indexer) {
	s, ok := obj.(*corev1.Service)
	if !ok || stubbable(s) {
		return
	}
	key := s.Namespace + "/" + s.Name
	objs, _ := slices.ByIndex(byService, key)
	for _, o := range objs {
		if es, ok := o.(*discoveryv1.EndpointSlice); ok && isStub(es) {
			st.sliceStored(es)
		}
	}
}

// run fetches, until ctx ends, the slices of each Service refetch
// delivers, compacts them for node and keeps those whose stored form is
// still a stub; changed is told of each.
func (st *sliceStubs) run(ctx context.Context, cs kubernetes.Interface, store cache.Store, node string, changed func(any), log func(string, ...any)) {
	go func() {
		<-ctx.Done()
		st.refetch.ShutDown()
	}()
	for {
		svc, quit := st.refetch.Get()
		if quit {
			return
		}
		ns, name, _ := cache.SplitMetaNamespaceKey(svc)
		list, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}).String()})
		if err != nil {
			log("fetching the endpoints of a Service that needs a node now", "service", svc, "err", err)
			st.refetch.AddRateLimited(svc)
			st.refetch.Done(svc)
			continue
		}
		st.refetch.Forget(svc)
		for i := range list.Items {
			s := &list.Items[i]
			s.ManagedFields = nil
			compactSlice(s, node)
			if st.keep(s, store) {
				changed(s)
			}
		}
		st.refetch.Done(svc)
	}
}

// keep holds s as the whole form of its stored stub; false when the store
// holds no stub of it (a whole version came meanwhile, or none).
func (st *sliceStubs) keep(s *discoveryv1.EndpointSlice, store cache.Store) bool {
	key := s.Namespace + "/" + s.Name
	cur, ok, _ := store.GetByKey(key)
	if es, _ := cur.(*discoveryv1.EndpointSlice); !ok || es == nil || !isStub(es) {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.full[key] = s
	return true
}

// stubStore is the EndpointSlice informer's store as the node instance
// reads it: a stub with a fetched whole form reads as that.
type stubStore struct {
	cache.Store
	st *sliceStubs
}

func (s stubStore) List() []any {
	objs := s.Store.List()
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if len(s.st.full) == 0 {
		return objs
	}
	for i, o := range objs {
		objs[i] = s.st.whole(o)
	}
	return objs
}

func (s stubStore) GetByKey(key string) (any, bool, error) {
	o, ok, err := s.Store.GetByKey(key)
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.whole(o), ok, err
}

// whole is o, or its fetched whole form when o is a stub (st.mu held).
func (st *sliceStubs) whole(o any) any {
	if es, ok := o.(*discoveryv1.EndpointSlice); ok && isStub(es) {
		if f := st.full[es.Namespace+"/"+es.Name]; f != nil {
			return f
		}
	}
	return o
}

// sliceIndexers index a node instance's EndpointSlices by Service.
var sliceIndexers = cache.Indexers{byService: func(obj any) ([]string, error) {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		return []string{serviceOf(s)}, nil
	}
	return nil, nil
}}

// sliceInformer is the factory's EndpointSlice informer, or a node
// instance's own (indexed by Service, started by Start after the
// Services).
func (w *Watcher) sliceInformer() cache.SharedIndexInformer {
	if w.stubs == nil {
		return w.factory.Discovery().V1().EndpointSlices().Informer()
	}
	w.slices = discoveryinformers.NewEndpointSliceInformer(w.cs, metav1.NamespaceAll, 0, sliceIndexers)
	if err := w.slices.SetTransform(w.transform); err != nil {
		w.log.Error("EndpointSlice informer", "err", err)
	}
	return w.slices
}

// followStubs has the stubs follow what the informers store.
func (w *Watcher) followStubs(svcs, slices cache.SharedIndexInformer) {
	_, err := svcs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.stubs.serviceStored(o, slices.GetIndexer()) },
		UpdateFunc: func(_, o any) { w.stubs.serviceStored(o, slices.GetIndexer()) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if s, ok := o.(*corev1.Service); ok {
				w.stubs.forget(s)
			}
		},
	})
	if err == nil {
		_, err = slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    w.stubs.sliceStored,
			UpdateFunc: func(_, o any) { w.stubs.sliceStored(o) },
			DeleteFunc: w.stubs.sliceDeleted,
		})
	}
	if err != nil {
		w.log.Error("informer handler", "err", err)
	}
}
