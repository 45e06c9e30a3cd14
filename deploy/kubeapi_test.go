package deploy_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/metrics"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/testbed"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// releaseNS is the namespace the chart is rendered for.
const releaseNS = "kube-system"

// chartAPI is a kube-apiserver holding the chart's default rendering,
// the workloads left out (no kubelet runs them).
type chartAPI struct {
	*testbed.KubeAPI
	cs kubernetes.Interface
}

// startChartAPI starts a kube-apiserver and server-side applies the
// chart's RBAC and admission policy to it.
func startChartAPI(t *testing.T) *chartAPI {
	t.Helper()
	k := testbed.StartKubeAPI(t)
	a := &chartAPI{KubeAPI: k, cs: kubernetes.NewForConfigOrDie(k.Config)}
	ctx := context.Background()
	testbed.Eventually(t, 30*time.Second, func() error {
		_, err := a.cs.CoreV1().Namespaces().Get(ctx, releaseNS, metav1.GetOptions{})
		return err
	})
	skip := map[string]bool{"DaemonSet": true, "Deployment": true, "Job": true}
	if err := e2e.NewApplier(k.Config).Apply(ctx, render(t, tool(t, "helm")), func(u *unstructured.Unstructured) bool {
		return !skip[u.GetKind()]
	}); err != nil {
		t.Fatalf("rendered chart: %v", err)
	}
	return a
}

// podToken returns a token of the ServiceAccount sa bound to a Pod
// scheduled on node (created here, as the kubelet's is), or, node empty,
// a token bound to no object.
func (a *chartAPI) podToken(t *testing.T, sa, node string) string {
	t.Helper()
	ctx := context.Background()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if node != "" {
		pod, err := a.cs.CoreV1().Pods(releaseNS).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: sa + "-"},
			Spec: corev1.PodSpec{ServiceAccountName: sa, NodeName: node,
				Containers: []corev1.Container{{Name: "ovnedge", Image: "ovnedge"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := a.cs.CoreV1().ServiceAccounts(releaseNS).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s: %v", sa, err)
	}
	return tr.Status.Token
}

// client is a client authenticating with token.
func (a *chartAPI) client(token string) kubernetes.Interface {
	c := rest.AnonymousClientConfig(a.Config)
	c.BearerToken = token
	return kubernetes.NewForConfigOrDie(c)
}

// TestNodeIdentityPolicy applies the chart's RBAC and
// ValidatingAdmissionPolicy to a real kube-apiserver and patches Nodes
// as a node instance does (a merge patch of ovnedge.io/egress-host-ips),
// with the ovnedge-node ServiceAccount's token bound to a Pod on node-a:
// its own Node's annotation may be set and removed; node-b's, its own
// Node's other annotations, labels and spec may not; a token bound to no
// Pod may patch no Node; an administrator is not matched.
func TestNodeIdentityPolicy(t *testing.T) {
	a := startChartAPI(t)
	ctx := context.Background()
	for _, n := range []string{"node-a", "node-b"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"role": "worker"},
			Annotations: map[string]string{"k8s.ovn.org/host-cidrs": `["172.18.0.2/16"]`}}}
		if _, err := a.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodeA := a.client(a.podToken(t, "ovnedge-node", "node-a"))
	unbound := a.client(a.podToken(t, "ovnedge-node", ""))
	admin := a.cs
	review, err := nodeA.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != "node-a" {
		t.Fatalf("the bound token's user %+v: node-name %q, want node-a", review.Status.UserInfo, got)
	}
	annotate := func(key string, value any) string {
		return fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, mustJSON(value))
	}
	host := ovnknode.AnnotationHostEgress
	// The policy is compiled a moment after it is created: wait until it
	// refuses what it must.
	testbed.Eventually(t, 30*time.Second, func() error { // the policy in force
		err := patchNode(nodeA, "node-b", annotate(host, "poll"))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			return fmt.Errorf("patch of node-b: %v", err)
		}
		return nil
	})
	for _, tc := range []struct {
		name   string
		c      kubernetes.Interface
		node   string
		patch  string
		denied string // "" allowed; else in the error
	}{
		{"own annotation set", nodeA, "node-a", annotate(host, `{"eth1":["10.0.0.7/24"]}`), ""},
		{"own annotation changed", nodeA, "node-a", annotate(host, `{"eth1":["10.0.0.8/24"]}`), ""},
		{"own annotation removed", nodeA, "node-a", annotate(host, nil), ""},
		{"another node's annotation", nodeA, "node-b", annotate(host, `{"eth1":["10.0.0.7/24"]}`), "its own Node only: Node node-b is not node-a"},
		{"another node's annotation removed", nodeA, "node-b", annotate(host, nil), "its own Node only"},
		{"own node, another annotation", nodeA, "node-a", annotate("k8s.ovn.org/host-cidrs", `["10.0.0.0/8"]`), "annotation only"},
		{"own node, a new annotation", nodeA, "node-a", annotate("ovnedge.io/other", "x"), "annotation only"},
		{"own node, our annotation and another", nodeA, "node-a",
			`{"metadata":{"annotations":{"` + host + `":"{}","k8s.ovn.org/host-cidrs":null}}}`, "annotation only"},
		{"own node, a label", nodeA, "node-a", `{"metadata":{"labels":{"role":"egress"}}}`, "spec, labels"},
		{"own node, the spec", nodeA, "node-a", `{"spec":{"unschedulable":true}}`, "spec, labels"},
		{"own node, a finalizer", nodeA, "node-a", `{"metadata":{"finalizers":["ovnedge.io/x"]}}`, "spec, labels"},
		{"token bound to no pod", unbound, "node-a", annotate(host, `{"eth1":["10.0.0.7/24"]}`), "not named by its token"},
		{"administrator, another node", admin, "node-b", annotate(host, `{"eth1":["10.0.0.9/24"]}`), ""},
		{"administrator, a label", admin, "node-a", `{"metadata":{"labels":{"role":"egress"}}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := patchNode(tc.c, tc.node, tc.patch)
			switch {
			case tc.denied == "" && err != nil:
				t.Errorf("patch %s %s: %v, want allowed", tc.node, tc.patch, err)
			case tc.denied != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.denied)):
				t.Errorf("patch %s %s: %v, want forbidden with %q", tc.node, tc.patch, err, tc.denied)
			}
		})
	}
}

// patchNode merge-patches node as the node instance does.
func patchNode(c kubernetes.Interface, node, patch string) error {
	_, err := c.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func mustJSON(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", v)
}

// TestMetricsAuthChartRBAC serves secure metrics as a node instance does,
// asking the API server as the chart's ovnedge-node ServiceAccount (its
// ovnedge-metrics-auth binding), and scrapes them: no token 401, a
// ServiceAccount without the chart's ovnedge-metrics-reader 403, one
// bound to it 200.
func TestMetricsAuthChartRBAC(t *testing.T) {
	a := startChartAPI(t)
	ctx := context.Background()
	for _, sa := range []string{"scraper", "stranger"} {
		if _, err := a.cs.CoreV1().ServiceAccounts(releaseNS).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ovnedge-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: releaseNS}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	auth, err := metrics.NewKubeAuth(a.client(a.podToken(t, "ovnedge-node", "node-a")), log)
	if err != nil {
		t.Fatal(err)
	}
	tlsConf, err := metrics.TLSConfig("", "", "node-a", log)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + fmt.Sprint(testbed.FreePorts(t, 1)[0])
	stop, err := metrics.New().Serve(metrics.ServeOptions{MetricsAddr: addr, Auth: auth, TLS: tlsConf, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", 401},
		{"a ServiceAccount without ovnedge-metrics-reader", a.podToken(t, "stranger", ""), 403},
		{"a ServiceAccount bound to ovnedge-metrics-reader", a.podToken(t, "scraper", ""), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, body, err := scrape(addr, tc.token); err != nil || got != tc.want {
				t.Errorf("GET /metrics: %d %.200q %v, want %d", got, body, err, tc.want)
			}
		})
	}
}

// scrape GETs /metrics over HTTPS (the certificate is self-signed) with
// the bearer token (none when empty).
func scrape(addr, token string) (int, string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body), err
}
