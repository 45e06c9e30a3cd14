package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/manifests"

	"github.com/ovnedge/ovnedge/testbed"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Directories of the repository the tests read.
var (
	deployDir = filepath.Join("..", "..", "deploy")
	crdDir    = filepath.Join(deployDir, "crds")
	demoDir   = filepath.Join("..", "..", "examples", "demo")
)

// waitTimeout bounds every wait for the API server or the daemon.
const waitTimeout = 60 * time.Second

// kindInfo is how the tests create objects of one kind.
type kindInfo struct {
	kind, resource string
	// status is written through the status subresource after the create.
	status bool
}

// kinds are the kinds the tests create, in creation order (a namespace
// before what lives in it, a CRD before its objects).
var kinds = []kindInfo{
	{"CustomResourceDefinition", "customresourcedefinitions", false},
	{"Namespace", "namespaces", false},
	{"ServiceAccount", "serviceaccounts", false},
	{"ClusterRole", "clusterroles", false},
	{"ClusterRoleBinding", "clusterrolebindings", false},
	{"Role", "roles", false},
	{"RoleBinding", "rolebindings", false},
	{"Node", "nodes", true},
	{"Pod", "pods", true},
	{"Service", "services", true},
	{"EndpointSlice", "endpointslices", false},
	{"EgressIP", "egressips", false},
	{"NetworkAttachmentDefinition", "network-attachment-definitions", false},
	{"Subnet", "subnets", false},
}

// kindIndex returns kind's index in kinds, or -1.
func kindIndex(kind string) int {
	return slices.IndexFunc(kinds, func(k kindInfo) bool { return k.kind == kind })
}

// kube is a real API server with the EgressIP CRD installed, and admin
// clients of it.
type kube struct {
	*testbed.KubeAPI
	cs  kubernetes.Interface
	dyn dynamic.Interface
}

// startKube starts an API server and installs the CRDs of deploy/crds.
func startKube(t testing.TB) *kube {
	t.Helper()
	api := testbed.StartKubeAPI(t)
	k := &kube{KubeAPI: api}
	var err error
	if k.cs, err = kubernetes.NewForConfig(api.Config); err != nil {
		t.Fatalf("clientset: %v", err)
	}
	if k.dyn, err = dynamic.NewForConfig(api.Config); err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	begin := time.Now()
	k.apply(t, crdDir)
	// The first create of a custom resource right after its CRD is
	// Established stalls; wait until the resource lists instead.
	k.poll(t, "EgressIP CRD established and served", func(ctx context.Context) error {
		_, err := k.dyn.Resource(egressv1.Resource).List(ctx, metav1.ListOptions{})
		return err
	})
	t.Logf("CRDs of %s served after %v", crdDir, time.Since(begin).Round(time.Millisecond))
	return k
}

// poll calls cond every 200 ms until it returns nil, and fails the test
// with cond's last error after waitTimeout.
func (k *kube) poll(t testing.TB, what string, cond func(ctx context.Context) error) {
	t.Helper()
	if err := waitFor(what, cond); err != nil {
		t.Fatal(err)
	}
}

// waitFor calls cond every 200 ms until it returns nil, and returns
// cond's last error after waitTimeout.
func waitFor(what string, cond func(ctx context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, waitTimeout, true,
		func(ctx context.Context) (bool, error) {
			err := cond(ctx)
			if err == nil || ctx.Err() == nil { // keep the last error that is not the timeout's
				last = err
			}
			return err == nil, nil
		})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w: %v", what, err, last)
	}
	return nil
}

// apply creates every object of the manifests in dir (daemon.LoadManifests;
// only those of the named files when some are given) in the order of
// kinds, then sets the status the manifests give: with no controllers
// running, nothing else would.
func (k *kube) apply(t testing.TB, dir string, only ...string) {
	t.Helper()
	files, err := manifests.Load(dir)
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	var objs []runtime.Object
	for path, f := range files {
		if len(only) == 0 || slices.Contains(only, filepath.Base(path)) {
			objs = append(objs, f...)
		}
	}
	slices.SortStableFunc(objs, func(a, b runtime.Object) int {
		return kindIndex(a.GetObjectKind().GroupVersionKind().Kind) - kindIndex(b.GetObjectKind().GroupVersionKind().Kind)
	})
	for _, o := range objs {
		// Bounded: a create that hangs (seen once in CI: ~3.5 minutes,
		// the test's later waits then out of time) fails here, with how
		// long it waited (create's error names the object).
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		begin := time.Now()
		_, err := k.create(ctx, o)
		cancel()
		if err != nil {
			t.Fatalf("%s: after %v: %v", dir, time.Since(begin).Round(time.Millisecond), err)
		}
	}
}

// create creates obj through the dynamic client and, for built-in kinds,
// writes its status through the status subresource.
func (k *kube) create(ctx context.Context, obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("to unstructured: %w", err)
	}
	u := &unstructured.Unstructured{Object: m}
	gvk := u.GroupVersionKind()
	i := kindIndex(gvk.Kind)
	if i < 0 {
		return nil, fmt.Errorf("%s %s: kind not used by the tests", gvk.Kind, u.GetName())
	}
	res := k.dyn.Resource(gvk.GroupVersion().WithResource(kinds[i].resource))
	var r dynamic.ResourceInterface = res
	if ns := u.GetNamespace(); ns != "" {
		r = res.Namespace(ns)
	}
	status, _, _ := unstructured.NestedMap(m, "status")
	created, err := r.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	if !kinds[i].status || len(status) == 0 {
		return created, nil
	}
	created.Object["status"] = status
	updated, err := r.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("status of %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	return updated, nil
}
