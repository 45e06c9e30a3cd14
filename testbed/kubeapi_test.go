package testbed

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestStartKubeAPIMissingBinary(t *testing.T) {
	t.Setenv("KUBE_APISERVER", "/nonexistent/kube-apiserver")
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		f := &fakeTB{TB: t}
		if k := StartKubeAPI(f); k != nil {
			t.Fatalf("CI=%q: StartKubeAPI without a binary returned %+v", ci, k)
		}
		got := f.skipped
		if ci == "true" {
			got = f.fatal
		}
		if !strings.Contains(got, "/nonexistent/kube-apiserver") {
			t.Errorf("CI=%q: skipped %q, fatal %q; want the missing binary named", ci, f.skipped, f.fatal)
		}
		if (ci == "true") != (f.fatal != "") || (ci == "true") == (f.skipped != "") {
			t.Errorf("CI=%q: skipped %q, fatal %q; want a failure exactly when CI=true", ci, f.skipped, f.fatal)
		}
	}
}

func TestStartKubeAPI(t *testing.T) {
	t.Parallel()
	var dir string
	var procs []int
	t.Run("server", func(t *testing.T) {
		k := StartKubeAPI(t)
		dir, procs = k.Dir, []int{k.etcd.cmd.Process.Pid, k.apiserver.cmd.Process.Pid}
		ctx := context.Background()
		cases := []struct {
			name      string
			config    func() (*rest.Config, error)
			forbidden bool
		}{
			{"admin config", func() (*rest.Config, error) { return k.Config, nil }, false},
			{"admin kubeconfig", func() (*rest.Config, error) { return clientcmd.BuildConfigFromFlags("", k.Kubeconfig) }, false},
			{"user config", func() (*rest.Config, error) { return k.UserConfig, nil }, true},
			{"user kubeconfig", func() (*rest.Config, error) { return clientcmd.BuildConfigFromFlags("", k.UserKubeconfig) }, true},
		}
		for i, c := range cases {
			rc, err := c.config()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kapi-" + strings.ReplaceAll(c.name, " ", "-")}}
			_, err = cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			if c.forbidden != apierrors.IsForbidden(err) || (!c.forbidden && err != nil) {
				t.Errorf("%d %s: create namespace: %v; want forbidden=%v (RBAC, no group for %s)", i, c.name, err, c.forbidden, KubeUser)
			}
		}
	})
	noLeftovers(t, dir, procs)
}
