package scale

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/testbed"
)

// Apply server-side-applies every object of the YAML files at paths (a
// file, or every *.yaml of a directory), in order: deploy/'s CRDs and
// RBAC.
func Apply(ctx context.Context, config *rest.Config, paths ...string) error {
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, path := range paths {
		for _, f := range testbed.YAMLFiles(path) {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
			for {
				var u unstructured.Unstructured
				if err := d.Decode(&u.Object); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				if len(u.Object) == 0 {
					continue
				}
				if err := apply(ctx, dyn, mapper, &u); err != nil {
					return fmt.Errorf("%s: %s %s: %w", f, u.GetKind(), u.GetName(), err)
				}
			}
		}
	}
	return nil
}

func apply(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(m.Resource).Namespace(cmp.Or(u.GetNamespace(), "default"))
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, u.GetName(), "application/apply-patch+yaml", data,
		metav1.PatchOptions{FieldManager: "scale", Force: ptr.To(true)})
	return err
}

// ServiceAccountKubeconfig writes a kubeconfig of ServiceAccount
// kube-system/sa (a TokenRequest's token, valid a day) and returns its
// path.
func ServiceAccountKubeconfig(t testbed.T, k *testbed.KubeAPI, sa string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatalf("scale: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tr *authenticationv1.TokenRequest
	err = retry(ctx, func() (err error) { // the ServiceAccount was just applied
		tr, err = cs.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](86400)}},
			metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("scale: token of ServiceAccount kube-system/%s: %v", sa, err)
	}
	return k.KubeconfigFor(t, sa, tr.Status.Token)
}
