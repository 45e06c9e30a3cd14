package manifests

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ovnedge/ovnedge/bgp/metallb"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
)

// customKinds are the custom resources the manifests may hold, by kind:
// EgressIP, Kube-OVN's Subnet and Multus' NetworkAttachmentDefinition
// (whose resource name client-go's guess gets wrong), MetalLB's pools.
var customKinds = map[schema.GroupVersionKind]schema.GroupVersionResource{
	{Group: "k8s.ovn.org", Version: "v1", Kind: "EgressIP"}:                        egressv1.Resource,
	{Group: "k8s.ovn.org", Version: "v1", Kind: "EgressService"}:                   egressv1.ServiceResource,
	{Group: "kubeovn.io", Version: "v1", Kind: "Subnet"}:                           kubeovn.SubnetResource,
	{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}: kubeovn.NADResource,
	// MetalLB's pools and L2 advertisements are held (Kube-OVN's MetalLB
	// underlay guide lists them) but not read: MetalLB assigns and announces; ovnedge reads
	// the Services' status. Its BGP peers are read with --bgp-peer-crds.
	{Group: "metallb.io", Version: "v1beta1", Kind: "IPAddressPool"}:   {Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"},
	{Group: "metallb.io", Version: "v1beta1", Kind: "L2Advertisement"}: {Group: "metallb.io", Version: "v1beta1", Resource: "l2advertisements"},
	{Group: "metallb.io", Version: "v1beta2", Kind: "BGPPeer"}:         metallb.BGPPeerResource,
	{Group: "metallb.io", Version: "v1beta1", Kind: "BFDProfile"}:      metallb.BFDProfileResource,
}

// Source keeps an in-memory API server, client-go's fake
// clientset for built-in kinds and a dynamic one for custom resources such
// as EgressIP, equal to the objects in a directory of manifests. The
// daemon's informers run on it exactly as on a real API server, so the
// embedded default and a cluster share every line of the wiring.
type Source struct {
	Clientset *fake.Clientset
	Dynamic   *dynamicfake.FakeDynamicClient

	dir     string
	log     *slog.Logger
	files   map[string][]runtime.Object // last good content of each file
	objects map[objKey]runtime.Object   // what the trackers hold
	stamp   string                      // directory fingerprint at the last reload
	// read holds the size and mtime of each file when its objects in
	// files were read: an unchanged file is not parsed again.
	read map[string]string
	// created is the creationTimestamp given to each object whose
	// manifest has none, as an API server sets it on create; last is
	// the latest given.
	created map[objKey]metav1.Time
	last    time.Time
}

type objKey struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

// watchBuffer is how many events a watcher of the in-memory API holds
// before client-go's fake watcher panics ("channel full"): its default,
// 100, is overrun by one reload of a large file or one pass of status
// writes at scale. The fakes offer no other setting than this global, so
// it is raised once, before the first watcher exists; one change of more
// than this many objects at once is still refused by the fake.
const watchBuffer = 1 << 15

var raiseWatchBuffer sync.Once

// NewSource returns an empty source for dir; call Reload to load it.
func NewSource(dir string, log *slog.Logger) *Source {
	raiseWatchBuffer.Do(func() { watch.DefaultChanSize = watchBuffer })
	return &Source{
		// Not NewClientset: its field-managed tracker builds a REST
		// mapper on every Create (1.6 ms each, 15 s for 9,350 objects),
		// and ovnedge never applies server-side.
		//lint:ignore SA1019 the plain object tracker is the one that scales
		Clientset: fake.NewSimpleClientset(),
		Dynamic:   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds()),
		dir:       dir,
		log:       log.With("manifests", dir),
		files:     map[string][]runtime.Object{},
		objects:   map[objKey]runtime.Object{},
		read:      map[string]string{},
		created:   map[objKey]metav1.Time{},
	}
}

// Reload reads the directory again and creates, updates and deletes
// objects so the API holds what the files say. A file that cannot be read
// keeps its previous objects (nothing already programmed is lost) and its
// error is returned; so is an object defined by two files (the first file
// in name order wins).
//
// An object whose manifest has no creationTimestamp gets one when it is
// first created, as an API server sets it, kept across updates: objects
// read at once are created in file name order, then in their order in
// the file, and an object added later is younger than those already
// there. Rules that let the oldest object win (a duplicate VIP) are thus
// first come, first served in manifests mode too.
func (s *Source) Reload() error {
	stamps := map[string]string{}
	loaded, loadErr := load(s.dir, func(path string, info fs.FileInfo) ([]runtime.Object, bool) {
		stamp := fileStamp(info)
		stamps[path] = stamp
		objs, ok := s.files[path]
		return objs, ok && s.read[path] == stamp
	})
	if loaded == nil {
		return loadErr
	}
	failed := map[string]bool{}
	var me *Error
	for _, err := range unjoin(loadErr) {
		if errors.As(err, &me) {
			failed[me.File] = true
		}
	}
	for path := range s.files {
		if _, ok := loaded[path]; !ok && !failed[path] {
			delete(s.files, path) // the file is gone
		}
	}
	maps.Copy(s.files, loaded)
	for path := range s.read {
		if _, ok := loaded[path]; !ok {
			delete(s.read, path)
		}
	}
	for path := range loaded {
		s.read[path] = stamps[path]
	}

	want := map[objKey]runtime.Object{}
	var order []objKey // file name order, then position in the file
	errs := []error{loadErr}
	for _, path := range slices.Sorted(maps.Keys(s.files)) {
		for _, obj := range s.files[path] {
			k, err := keyOf(obj)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
				continue
			}
			if _, dup := want[k]; dup {
				errs = append(errs, fmt.Errorf("%s: %s %s/%s is defined twice; the first definition wins", path, k.gvk.Kind, k.namespace, k.name))
				continue
			}
			want[k] = obj
			order = append(order, k)
		}
	}
	for _, k := range order {
		obj := want[k]
		old, exists := s.objects[k]
		if exists && (old == obj || equality.Semantic.DeepEqual(old, obj)) { // == : from a file not read again
			continue
		}
		if err := s.put(k, obj, exists); err != nil {
			errs = append(errs, err)
			continue
		}
		s.objects[k] = obj
	}
	for k := range s.objects {
		if _, ok := want[k]; !ok {
			if err := s.tracker(k).Delete(resourceOf(k), k.namespace, k.name); err != nil {
				errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", k.gvk.Kind, k.namespace, k.name, err))
				continue
			}
			delete(s.objects, k)
			delete(s.created, k)
		}
	}
	return errors.Join(errs...)
}

func (s *Source) put(k objKey, obj runtime.Object, exists bool) error {
	obj = obj.DeepCopyObject()
	if m, err := meta.Accessor(obj); err == nil && m.GetCreationTimestamp().Time.IsZero() {
		ts, ok := s.created[k]
		if !ok {
			t := time.Now().Round(0)
			if !t.After(s.last) {
				t = s.last.Add(time.Nanosecond)
			}
			s.last, ts = t, metav1.NewTime(t)
		}
		m.SetCreationTimestamp(ts)
		s.created[k] = ts
	}
	var err error
	if exists {
		err = s.tracker(k).Update(resourceOf(k), obj, k.namespace)
	} else {
		err = s.tracker(k).Create(resourceOf(k), obj, k.namespace)
	}
	if err != nil {
		return fmt.Errorf("store %s %s/%s: %w", k.gvk.Kind, k.namespace, k.name, err)
	}
	return nil
}

func (s *Source) tracker(k objKey) k8stesting.ObjectTracker {
	if scheme.Scheme.Recognizes(k.gvk) {
		return s.Clientset.Tracker()
	}
	return s.Dynamic.Tracker()
}

func keyOf(obj runtime.Object) (objKey, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return objKey{}, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if _, known := customKinds[gvk]; !known {
			return objKey{}, fmt.Errorf("unsupported kind %s of %s", u.GroupVersionKind(), u.GetName())
		}
	}
	return objKey{gvk: gvk, namespace: m.GetNamespace(), name: m.GetName()}, nil
}

func resourceOf(k objKey) schema.GroupVersionResource {
	if gvr, ok := customKinds[k.gvk]; ok {
		return gvr
	}
	gvr, _ := meta.UnsafeGuessKindToResource(k.gvk)
	return gvr
}

func listKinds() map[schema.GroupVersionResource]string {
	out := map[schema.GroupVersionResource]string{}
	for gvk, gvr := range customKinds {
		out[gvr] = gvk.Kind + "List"
	}
	return out
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}

// Watch reloads the directory whenever a file in it changes (polled every
// interval) until ctx ends. Reload errors are logged: the last good objects
// stay.
func (s *Source) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stamp, err := dirStamp(s.dir)
		if err != nil || stamp == s.stamp {
			continue
		}
		s.stamp = stamp
		if err := s.Reload(); err != nil {
			s.log.Warn("manifests reloaded with errors; the last good version of each failing file stays", "err", err)
		} else {
			s.log.Info("manifests reloaded", "objects", len(s.objects))
		}
	}
}

// dirStamp fingerprints a directory's files by name, size and mtime.
func dirStamp(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b []byte
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		b = fmt.Appendf(b, "%s %s\n", filepath.Join(dir, e.Name()), fileStamp(info))
	}
	return string(b), nil
}

// fileStamp fingerprints a file by size and mtime.
func fileStamp(info fs.FileInfo) string {
	return fmt.Sprintf("%d %d", info.Size(), info.ModTime().UnixNano())
}
