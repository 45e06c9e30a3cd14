package kubewatch

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/ovnedge/ovnedge/bgp/metallb"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
)

// Watcher runs shared informers for the kinds ovnedge reads and turns
// every change into a reconcile request on its queue. Reconciles are
// level-triggered: a request means "compute the desired state again from
// the caches", so bursts of events collapse into one request.
type Watcher struct {
	cs      kubernetes.Interface
	dyn     dynamic.Interface
	factory informers.SharedInformerFactory
	dynamic dynamicinformer.DynamicSharedInformerFactory
	eips    cache.SharedIndexInformer
	esvcs   cache.SharedIndexInformer // nil unless WatchEgressServices
	subnets cache.SharedIndexInformer // nil unless WatchKubeOVN
	nads    cache.SharedIndexInformer // nil unless WatchKubeOVN
	// lbsvc watches the managed lb-svc Deployments and the
	// ovn-vpc-nat-config ConfigMap; nil unless WatchLBSvc.
	lbsvc       []informers.SharedInformerFactory
	deployments cache.SharedIndexInformer
	natConfig   cache.SharedIndexInformer
	// bgp watches MetalLB's BGPPeers and BFDProfiles in one namespace;
	// nil unless WatchBGPPeers.
	bgp                   dynamicinformer.DynamicSharedInformerFactory
	bgpPeers, bfdProfiles cache.SharedIndexInformer
	// pods are the on-demand Pod informers; nil unless PodsOnDemand
	// (then the Watcher has no Pod informer of its own).
	pods *podWatches
	// node is the node of a node instance's Watcher (ForNode), "" for
	// others.
	node string
	// late, on a node instance's Watcher, builds the EndpointSlice
	// informer, started once the Services are synced (sliceStubs).
	late   informers.SharedInformerFactory
	stubs  sliceStubs
	synced []cache.InformerSynced
	queues []keyedQueue
	log    *slog.Logger
	// changes are the objects changed since the cluster loop last took
	// them (TakeChanges).
	changes changeLog
	// lists are the followed kinds' lists of the last Snapshot.
	lists [kindOther]listCache
}

// listCache keeps a kind's list of every cached object between
// Snapshots and lists the store again only once an object of the kind
// has changed: a pass of a node going NotReady, at 150,000 pods, listed
// 23,000 Nodes, Services, EndpointSlices and EgressIPs that had not
// changed (0.9 MB of garbage per pass, a sixth of what the daemon
// allocated during the scale benchmark's events). The slice is shared by
// every Snapshot holding it: read only, and clipped, so an append
// copies.
type listCache struct {
	mu sync.Mutex
	// fresh is false from the start and from every change of the kind
	// on: the informer's handlers clear it after the store holds the
	// change and before the change is recorded (changeLog), so a
	// Snapshot taken after TakeChanges returned a change lists it.
	fresh atomic.Bool
	list  any // []T
}

// cachedList returns the objects of store, as c last listed them when no
// object has changed since.
func cachedList[T any](c *listCache, store interface{ List() []any }) []T {
	return cachedListAs(c, store, typed[T])
}

// cachedListAs is cachedList of the objects as turns into T (false: left
// out).
func cachedListAs[T any](c *listCache, store interface{ List() []any }, as func(any) (T, bool)) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Set before the store is listed: a change from here on clears it
	// again.
	fresh := c.fresh.Swap(true)
	if l, ok := c.list.([]T); ok && fresh {
		return l
	}
	objs := store.List()
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := as(o); ok {
			out = append(out, t)
		}
	}
	out = slices.Clip(out)
	c.list = out
	return out
}

// The kinds the cluster loop follows object by object (Changes).
const (
	kindNode = iota
	kindNamespace
	kindPod
	kindService
	kindEndpointSlice
	kindEgressIP
	kindEgressService
	kindOther
)

// changeLog collects the keys of changed objects by kind for
// TakeChanges; full asks for a full recompute instead.
type changeLog struct {
	mu       sync.Mutex
	keys     [kindOther]map[string]bool
	stores   [kindOther]cache.Store
	other    bool
	reassign bool
	full     bool
	first    time.Time // when the first change since the last take was noted
}

// record notes a change of obj, of kind k.
func (c *changeLog) record(k int, obj any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first.IsZero() {
		c.first = time.Now()
	}
	if k == kindOther {
		c.other = true
		return
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.full = true
		return
	}
	if c.keys[k] == nil {
		c.keys[k] = map[string]bool{}
	}
	c.keys[k][key] = true
}

// RequestFull makes the next TakeChanges ask for a full recompute: on
// gaining the leadership, and periodically as a safety net.
func (w *Watcher) RequestFull() {
	w.changes.mu.Lock()
	w.changes.full = true
	w.changes.mu.Unlock()
}

// RequestReassign notes that the EgressIPs' assignment may change
// without an object changing (Changes.Reassign).
func (w *Watcher) RequestReassign() {
	w.changes.mu.Lock()
	w.changes.reassign = true
	w.changes.mu.Unlock()
}

// TakeChanges returns the objects changed since the last call, each as
// its informer's store now holds it (nil: deleted), and forgets them;
// nil when a full recompute is due (at the start, after RequestFull, or
// when a key could not be made).
func (w *Watcher) TakeChanges() *desired.Changes {
	c := &w.changes
	c.mu.Lock()
	keys, full, other, reassign, first := c.keys, c.full, c.other, c.reassign, c.first
	c.keys, c.full, c.other, c.reassign, c.first = [kindOther]map[string]bool{}, false, false, false, time.Time{}
	c.mu.Unlock()
	if full {
		return nil
	}
	ch := &desired.Changes{Other: other, Reassign: reassign, Since: first}
	ch.Nodes = lookup[*corev1.Node](c.stores[kindNode], keys[kindNode])
	ch.Namespaces = lookup[*corev1.Namespace](c.stores[kindNamespace], keys[kindNamespace])
	ch.Pods = lookupAs(c.stores[kindPod], keys[kindPod], podInfo)
	ch.Services = lookup[*corev1.Service](c.stores[kindService], keys[kindService])
	ch.EndpointSlices = lookup[*discoveryv1.EndpointSlice](c.stores[kindEndpointSlice], keys[kindEndpointSlice])
	ch.EgressIPs = lookup[*unstructured.Unstructured](c.stores[kindEgressIP], keys[kindEgressIP])
	ch.EgressServices = lookup[*unstructured.Unstructured](c.stores[kindEgressService], keys[kindEgressService])
	return ch
}

// lookup maps keys to the objects store holds (nil: none).
func lookup[T comparable](store cache.Store, keys map[string]bool) map[string]T {
	return lookupAs(store, keys, typed[T])
}

// lookupAs maps keys to the objects store holds, as as turns them into T
// (the zero T: none).
func lookupAs[T any](store cache.Store, keys map[string]bool, as func(any) (T, bool)) map[string]T {
	out := make(map[string]T, len(keys))
	for k := range keys {
		var obj T
		if o, ok, err := store.GetByKey(k); err == nil && ok {
			obj, _ = as(o)
		}
		out[k] = obj
	}
	return out
}

// typed is o as a T.
func typed[T any](o any) (T, bool) {
	t, ok := o.(T)
	return t, ok
}

// cachedPod is a Pod as the caches hold it: what ovnedge reads of it, in
// compact form (egress.PodInfo: at 150,000 pods a trimmed corev1.Pod
// cost about 1.5 KiB each, most of it the struct's empty fields), with
// the metadata the informers' keys and namespace index read.
type cachedPod struct{ egress.PodInfo }

// GetObjectMeta makes a cachedPod an object to meta.Accessor (its
// namespace and name: the informers' keys and namespace index).
func (p *cachedPod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}
}

// podInfo is a cached pod's PodInfo (shared with the cache: read only).
func podInfo(o any) (*egress.PodInfo, bool) {
	if p, ok := o.(*cachedPod); ok {
		return &p.PodInfo, true
	}
	return nil, false
}

// stripManagedFields drops managedFields from cached objects, keeps
// Pods in compact form (cachedPod), Nodes without their image and volume
// lists (trimNode) and EndpointSlices without their endpoints' references
// (trimSlice): ovnedge never reads the rest, and that is most of every
// object's memory. It is idempotent, as client-go requires:
// a streaming list's objects pass through it twice.
func stripManagedFields(obj any) (any, error) {
	switch o := obj.(type) {
	case *cachedPod:
		return o, nil
	case *corev1.Pod:
		return &cachedPod{PodInfo: *egress.NewPodInfo(o)}, nil
	}
	if n, ok := obj.(*corev1.Node); ok {
		trimNode(n)
	}
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		trimSlice(s)
	}
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// trimNode drops what ovnedge never reads of a Node and what makes most
// of its size on a real node: the kubelet's list of up to 50 images with
// their names and sizes, and the volumes in use and attached. Nodes are
// only ever patched, never updated from the cache, so nothing is lost.
func trimNode(n *corev1.Node) {
	n.Status.Images, n.Status.VolumesInUse, n.Status.VolumesAttached = nil, nil, nil
}

// newPodInformer builds a Pod informer of namespace ("" for every one),
// listing with tweak when not nil, without the namespace index the
// factory's would keep: nothing looks pods up by namespace in the cache,
// and at 150,000 pods the index was 8 MB of the leader's heap.
func newPodInformer(namespace string, tweak func(*metav1.ListOptions)) func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
	return func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(cs, namespace, resync, cache.Indexers{}, tweak)
	}
}

// unindexed has factory build its Node, Namespace and Service informers
// (and newSliceInformer the EndpointSlices') without the namespace index
// its own keep: nothing looks them up by namespace (Snapshot lists them
// whole), and at 150,000 pods the index's sets were 2.6 MB of a node
// instance's heap.
func unindexed(factory informers.SharedInformerFactory) {
	none := cache.Indexers{}
	factory.InformerFor(&corev1.Node{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewNodeInformer(cs, resync, none)
	})
	factory.InformerFor(&corev1.Namespace{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewNamespaceInformer(cs, resync, none)
	})
	factory.InformerFor(&corev1.Service{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewServiceInformer(cs, metav1.NamespaceAll, resync, none)
	})
}

// newSliceInformer builds an EndpointSlice informer without the namespace
// index (unindexed).
func newSliceInformer(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	return discoveryinformers.NewEndpointSliceInformer(cs, metav1.NamespaceAll, resync, cache.Indexers{})
}

// trimSlice drops what ovnedge never reads of an EndpointSlice: its
// annotations, owner references and labels but the Service's name, and
// each endpoint's target reference, hostname, zone and hints (at 150,000
// pods, a reference per endpoint: about 150 bytes each). Slices are
// never written back from the cache.
func trimSlice(s *discoveryv1.EndpointSlice) {
	s.Annotations, s.OwnerReferences, s.GenerateName = nil, nil, ""
	if svc, ok := s.Labels[discoveryv1.LabelServiceName]; ok && len(s.Labels) > 1 {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	} else if !ok {
		s.Labels = nil
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		e.TargetRef, e.Hostname, e.Zone, e.Hints, e.DeprecatedTopology = nil, nil, nil, nil, nil
	}
}

// WatchOption adds kinds to a Watcher.
type WatchOption func(*Watcher)

// WatchKubeOVN also watches kubeovn.io/v1 Subnets and k8s.cni.cncf.io/v1
// NetworkAttachmentDefinitions. Their CRDs must exist: the caches never
// sync otherwise.
func WatchKubeOVN() WatchOption {
	return func(w *Watcher) {
		WatchSubnets()(w)
		if w.nads == nil {
			w.nads = w.customInformer(kubeovn.NADResource)
		}
	}
}

// WatchSubnets also watches kubeovn.io/v1 Subnets (the underlay subnets of
// Kube-OVN's MetalLB integration). Their CRD must exist.
func WatchSubnets() WatchOption {
	return func(w *Watcher) {
		if w.subnets == nil {
			w.subnets = w.customInformer(kubeovn.SubnetResource)
		}
	}
}

// WatchLBSvc watches what Kube-OVN's LoadBalancer Services need besides
// WatchKubeOVN's kinds (which it includes): the lb-svc Deployments
// ovnedge manages, in every namespace (by their managed-by label), and
// the ConfigMap kube-system/ovn-vpc-nat-config (by name).
func WatchLBSvc() WatchOption {
	return func(w *Watcher) {
		WatchKubeOVN()(w)
		managed := informers.NewSharedInformerFactoryWithOptions(w.cs, 0, informers.WithTransform(stripManagedFields),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.LabelSelector = kubeovn.LabelManagedBy + "=" + kubeovn.ManagedBy
			}))
		config := informers.NewSharedInformerFactoryWithOptions(w.cs, 0, informers.WithTransform(stripManagedFields),
			informers.WithNamespace(kubeovn.ConfigMapNamespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", kubeovn.ConfigMapName).String()
			}))
		w.lbsvc = []informers.SharedInformerFactory{managed, config}
		w.deployments = managed.Apps().V1().Deployments().Informer()
		w.natConfig = config.Core().V1().ConfigMaps().Informer()
	}
}

// WatchEgressServices watches k8s.ovn.org/v1 EgressServices (Snapshot's
// EgressServices). Their CRD must exist.
func WatchEgressServices() WatchOption {
	return func(w *Watcher) {
		if w.esvcs == nil {
			w.esvcs = w.customInformer(egressv1.ServiceResource)
		}
	}
}

// WatchBGPPeers watches MetalLB's BGPPeers (metallb.io/v1beta2) and
// BFDProfiles (metallb.io/v1beta1) in namespace. Their CRDs must exist.
func WatchBGPPeers(namespace string) WatchOption {
	return func(w *Watcher) {
		w.bgp = dynamicinformer.NewFilteredDynamicSharedInformerFactory(w.dyn, 0, namespace, nil)
		w.bgpPeers = w.bgp.ForResource(metallb.BGPPeerResource).Informer()
		w.bfdProfiles = w.bgp.ForResource(metallb.BFDProfileResource).Informer()
		for _, inf := range []cache.SharedIndexInformer{w.bgpPeers, w.bfdProfiles} {
			if err := inf.SetTransform(stripManagedFields); err != nil {
				w.log.Warn("informer: managedFields kept", "err", err)
			}
		}
	}
}

func (w *Watcher) customInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	inf := w.dynamic.ForResource(gvr).Informer()
	if err := inf.SetTransform(stripManagedFields); err != nil {
		w.log.Warn("informer: managedFields kept", "resource", gvr.Resource, "err", err)
	}
	return inf
}

// NewWatcher builds the informers on a typed and a dynamic client (a real
// API server's, or a ManifestSource's).
func NewWatcher(cs kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger, opts ...WatchOption) *Watcher {
	w := &Watcher{
		cs:      cs,
		dyn:     dyn,
		dynamic: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0),
		log:     log,
	}
	w.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(w.transform))
	unindexed(w.factory)
	w.eips = w.customInformer(egressv1.Resource)
	if err := w.eips.SetTransform(w.transform); err != nil { // TrimForNode's too
		log.Warn("informer: EgressIPs kept whole", "err", err)
	}
	for _, o := range opts {
		o(w)
	}
	slices := w.sliceInformer()
	var pods cache.SharedIndexInformer // nil: on demand
	if w.pods == nil {
		pods = w.factory.InformerFor(&corev1.Pod{}, newPodInformer(metav1.NamespaceAll, nil))
	}
	infs := []cache.SharedIndexInformer{
		w.factory.Core().V1().Nodes().Informer(),
		w.factory.Core().V1().Namespaces().Informer(),
		pods,
		w.factory.Core().V1().Services().Informer(),
		slices,
		w.eips,
		w.esvcs,
	}
	for k, inf := range infs { // in the order of the kinds
		if inf == nil {
			w.changes.stores[k] = cache.NewStore(cache.MetaNamespaceKeyFunc) // empty
			continue
		}
		w.changes.stores[k] = inf.GetStore()
	}
	w.changes.full = true
	for _, inf := range []cache.SharedIndexInformer{w.subnets, w.nads} {
		if inf != nil {
			infs = append(infs, inf)
		}
	}
	if w.deployments != nil {
		infs = append(infs, w.deployments, w.natConfig)
	}
	if w.bgp != nil {
		infs = append(infs, w.bgpPeers, w.bfdProfiles)
	}
	for i, inf := range infs {
		if inf == nil {
			continue
		}
		w.synced = append(w.synced, inf.HasSynced)
		kind := min(i, kindOther)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.changed(kind, o) },
			UpdateFunc: func(_, o any) { w.changed(kind, o) },
			DeleteFunc: func(o any) { w.changed(kind, o) },
		}); err != nil {
			log.Error("informer handler", "err", err)
		}
	}
	return w
}

// Queue returns a new rate-limited queue that receives key whenever any
// watched object changes. Call it before Start.
func (w *Watcher) Queue(key string) workqueue.TypedRateLimitingInterface[string] {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: key})
	w.queues = append(w.queues, keyedQueue{q, key})
	return q
}

// keyedQueue remembers the key its owner wants on every change.
type keyedQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	key string
}

// changed notes a change of obj, of kind k, once its informer's store
// holds it: its kind's list is stale, the change is recorded for the
// cluster loop and every queue gets its key.
func (w *Watcher) changed(k int, obj any) {
	if k < kindOther {
		w.lists[k].fresh.Store(false)
	}
	w.changes.record(k, obj)
	w.notify()
}

func (w *Watcher) notify() {
	for _, q := range w.queues {
		q.Add(q.key)
	}
}

// Start starts the informers and waits for their caches.
func (w *Watcher) Start(ctx context.Context) error {
	if w.pods != nil {
		w.pods.mu.Lock()
		w.pods.ctx = ctx
		w.pods.mu.Unlock()
	}
	w.factory.Start(ctx.Done())
	if err := w.startSlices(ctx); err != nil {
		return err
	}
	w.dynamic.Start(ctx.Done())
	for _, f := range w.lbsvc {
		f.Start(ctx.Done())
	}
	if w.bgp != nil {
		w.bgp.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
		return fmt.Errorf("informer caches did not sync: %w", ctx.Err())
	}
	return nil
}

// Snapshot lists every cached object.
func (w *Watcher) Snapshot() (desired.Snapshot, error) {
	return w.snapshot().WithPods()
}

// SnapshotFor is the cluster loop's Snapshot: with changed, its Pods
// are left out until WithPods (the incremental path reads the changed
// pods only).
func (w *Watcher) SnapshotFor(changed *desired.Changes) (desired.Snapshot, error) {
	if changed == nil {
		return w.Snapshot()
	}
	s := w.snapshot()
	s.Changed = changed
	return s, nil
}

// snapshot lists every cached object but the Pods (listPods lists
// them), through the lists kept since the last change of their kind.
func (w *Watcher) snapshot() desired.Snapshot {
	var s desired.Snapshot
	stores := &w.changes.stores
	s.Nodes = cachedList[*corev1.Node](&w.lists[kindNode], stores[kindNode])
	s.Namespaces = cachedList[*corev1.Namespace](&w.lists[kindNamespace], stores[kindNamespace])
	s.ListPods = func() ([]*egress.PodInfo, error) {
		if w.pods != nil {
			return cachedListAs(&w.lists[kindPod], w.pods, podInfo), nil
		}
		return cachedListAs(&w.lists[kindPod], stores[kindPod], podInfo), nil
	}
	s.Services = cachedList[*corev1.Service](&w.lists[kindService], stores[kindService])
	s.EndpointSlices = cachedListAs(&w.lists[kindEndpointSlice], stores[kindEndpointSlice], w.sliceOf)
	s.EgressIPs = cachedList[*unstructured.Unstructured](&w.lists[kindEgressIP], stores[kindEgressIP])
	s.EgressServices = cachedList[*unstructured.Unstructured](&w.lists[kindEgressService], stores[kindEgressService])
	if w.subnets != nil {
		for _, o := range w.subnets.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				if sub, err := kubeovn.SubnetFromUnstructured(u); err != nil {
					w.log.Warn("subnet left out", "err", err)
				} else {
					s.Subnets = append(s.Subnets, sub)
				}
			}
		}
	}
	if w.nads != nil {
		for _, o := range w.nads.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				if nad, err := kubeovn.NADFromUnstructured(u); err != nil {
					w.log.Warn("network attachment definition left out", "err", err)
				} else {
					s.NADs = append(s.NADs, nad)
				}
			}
		}
		slices.SortFunc(s.Subnets, func(a, b *kubeovn.Subnet) int { return strings.Compare(a.Name, b.Name) })
		slices.SortFunc(s.NADs, func(a, b *nadv1.NetworkAttachmentDefinition) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
	}
	if w.bgp != nil {
		s.BGPPeers = sortedUnstructured(w.bgpPeers)
		s.BFDProfiles = sortedUnstructured(w.bfdProfiles)
	}
	if w.deployments != nil {
		for _, o := range w.deployments.GetStore().List() {
			if dp, ok := o.(*appsv1.Deployment); ok && dp.Labels[kubeovn.LabelManagedBy] == kubeovn.ManagedBy {
				s.LBSvcDeployments = append(s.LBSvcDeployments, dp)
			}
		}
		slices.SortFunc(s.LBSvcDeployments, func(a, b *appsv1.Deployment) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		for _, o := range w.natConfig.GetStore().List() {
			// The manifests' fake API ignores field selectors: match here.
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Namespace == kubeovn.ConfigMapNamespace && cm.Name == kubeovn.ConfigMapName {
				s.LBSvcConfig = cm
			}
		}
	}
	return s
}

// sortedUnstructured lists an informer's objects by namespace/name.
func sortedUnstructured(inf cache.SharedIndexInformer) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range inf.GetStore().List() {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	return out
}

// RunLoop calls reconcile for every key the queue delivers until ctx ends,
// retrying a failed key with the queue's backoff. observe, when not nil,
// is given each reconcile's latency and result ("ok", "error").
func RunLoop(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], loop string, log *slog.Logger,
	reconcile func(context.Context) error, observe func(d time.Duration, result string)) {
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		start := time.Now()
		err := reconcile(ctx)
		result := "ok"
		if err != nil {
			result = "error"
		}
		if observe != nil {
			observe(time.Since(start), result)
		}
		log.Debug("reconciled", "loop", loop, "duration", time.Since(start), "result", result)
		if err != nil && ctx.Err() == nil {
			log.Warn("reconcile failed; retrying with backoff", "loop", loop, "retries", q.NumRequeues(key), "err", err)
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}
