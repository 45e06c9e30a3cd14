package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// renderChart renders deploy/helm/ovnedge (CRDs included) with helm
// v3.22.0 (scripts/tool.sh) and the given --set values.
func renderChart(t testing.TB, set ...string) string {
	t.Helper()
	root := filepath.Join("..", "..")
	tool := exec.Command("scripts/tool.sh", "helm")
	tool.Dir = root
	helm, err := tool.Output()
	if err != nil {
		t.Fatalf("scripts/tool.sh helm: %v", err)
	}
	args := []string{"template", "ovnedge", "deploy/helm/ovnedge", "--namespace", "kube-system", "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(strings.TrimSpace(string(helm)), args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// serverSideApply applies every object of manifests with server-side
// apply (field manager ovnedge-e2e), CRDs first and served before the
// rest, and returns the objects.
func serverSideApply(t testing.TB, k *kube, manifests string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(manifests, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("rendered chart: %v\n%s", err, doc)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	isCRD := func(u *unstructured.Unstructured) bool { return u.GetKind() == "CustomResourceDefinition" }
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		switch {
		case isCRD(a) == isCRD(b):
			return 0
		case isCRD(a):
			return -1
		}
		return 1
	})
	dc, err := discovery.NewDiscoveryClientForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	ctx := context.Background()
	crdsServed := false
	for _, u := range objs {
		if !isCRD(u) && !crdsServed {
			// A custom resource is served a moment after its CRD is
			// Established: wait until each lists.
			for _, c := range objs {
				if !isCRD(c) {
					continue
				}
				group, _, _ := unstructured.NestedString(c.Object, "spec", "group")
				plural, _, _ := unstructured.NestedString(c.Object, "spec", "names", "plural")
				versions, _, _ := unstructured.NestedSlice(c.Object, "spec", "versions")
				version, _, _ := unstructured.NestedString(versions[0].(map[string]any), "name")
				gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
				k.poll(t, "CRD "+c.GetName()+" served", func(ctx context.Context) error {
					_, err := k.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
					return err
				})
			}
			mapper.Reset()
			crdsServed = true
		}
		gvk := u.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, u.GetName(), err)
		}
		var r dynamic.ResourceInterface = k.dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			r = k.dyn.Resource(mapping.Resource).Namespace(u.GetNamespace())
		}
		data, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Patch(ctx, u.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "ovnedge-e2e", Force: ptr.To(true)}); err != nil {
			t.Fatalf("server-side apply %s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
	}
	return objs
}

// freePort returns a TCP port free on every address now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// command is a rendered container's command line, $(VAR) references to
// its env expanded as the kubelet does.
func command(c corev1.Container, env map[string]string) []string {
	argv := append(slices.Clone(c.Command), c.Args...)
	for i, a := range argv {
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		argv[i] = a
	}
	return argv
}

// TestChart applies the Helm chart's rendering (CRDs, RBAC, DaemonSet,
// Deployment) to a real kube-apiserver with server-side apply, then runs
// the binary with exactly the arguments of the rendered node DaemonSet
// and leader Deployment, each with a token of its rendered ServiceAccount
// (the chart's RBAC is all they get): the node reports ready and the
// leader acquires the Lease. Outside a pod they need --kubeconfig (the
// in-cluster config otherwise) and, as both run in the host's network
// namespace here, the leader's metrics and health ports are moved off the
// node's. The node's /metrics answers 401 without a token.
func TestChart(t *testing.T) {
	t.Parallel()
	bin := buildOvnedge(t)
	api := testbed.StartKubeAPI(t)
	k := &kube{KubeAPI: api}
	var err error
	if k.cs, err = kubernetes.NewForConfig(api.Config); err != nil {
		t.Fatal(err)
	}
	if k.dyn, err = dynamic.NewForConfig(api.Config); err != nil {
		t.Fatal(err)
	}
	ovn := testbed.StartOVN(t)
	host := topology.Nodes[slices.IndexFunc(topology.Nodes, func(n ovsdbnb.Node) bool { return n.Name == egressNode })].ExternalIP
	ovs := testbed.StartOVS(t, testbed.OVSOptions{Node: egressNode, HostIP: host})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	nb, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{ovn.NB}})
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	if err := ovsdbnb.EnsureTopology(ctx, nb, topology); err != nil {
		t.Fatal(err)
	}

	metricsPort, healthPort := freePort(t), freePort(t)
	manifests := renderChart(t,
		"ovn.nbAddress="+ovn.NB, "ovn.sbAddress="+ovn.SB,
		"node.ovsDB="+ovs.DB, "node.ovsRunDir="+ovs.RunDir, "node.bridge="+ovs.Bridge, "node.uplink="+ovs.Uplink,
		"clusterSubnets="+clusterSubnets, "joinSubnet="+joinSubnet,
		"metricsPort="+strconv.Itoa(metricsPort), "healthPort="+strconv.Itoa(healthPort),
		"egress.healthCheckPort="+strconv.Itoa(freePort(t)), "egress.heartbeatPort="+strconv.Itoa(freePort(t)),
		"leader.replicas=1")
	begin := time.Now()
	k.poll(t, "namespace kube-system", func(ctx context.Context) error {
		_, err := k.cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		return err
	})
	objs := serverSideApply(t, k, manifests)
	t.Logf("server-side applied %d objects of the chart in %v", len(objs), time.Since(begin).Round(time.Millisecond))
	k.apply(t, demoDir) // the nodes, pods and Services the daemons watch

	var ds appsv1.DaemonSet
	var dep appsv1.Deployment
	for _, u := range objs {
		var into any
		switch u.GetKind() {
		case "DaemonSet":
			into = &ds
		case "Deployment":
			into = &dep
		default:
			continue
		}
		// What the API server stored, not the local rendering.
		got, err := k.dyn.Resource(appsv1.SchemeGroupVersion.WithResource(strings.ToLower(u.GetKind())+"s")).
			Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err == nil {
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, into)
		}
		if err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	kubeconfig := func(pod corev1.PodSpec) string {
		tr, err := k.cs.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, pod.ServiceAccountName,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of the rendered ServiceAccount %s: %v", pod.ServiceAccountName, err)
		}
		return k.KubeconfigFor(t, pod.ServiceAccountName, tr.Status.Token)
	}
	start := func(name string, pod corev1.PodSpec, argv []string) *instance {
		argv = append(argv, "--kubeconfig="+kubeconfig(pod))
		if argv[0] != "/usr/local/bin/ovnedge" {
			t.Fatalf("%s: command %q, want the image's /usr/local/bin/ovnedge", name, argv[0])
		}
		log := filepath.Join(t.TempDir(), name+".log")
		t.Logf("%s: ovnedge %s", name, strings.Join(argv[1:], " "))
		p := testbed.StartProcess(t, "ovnedge "+name, log, nil, append([]string{bin}, argv[1:]...)...)
		return &instance{Process: p, node: name, log: log}
	}

	nodeArgs := command(ds.Spec.Template.Spec.Containers[0], map[string]string{"NODE_NAME": egressNode})
	node := start("node", ds.Spec.Template.Spec, nodeArgs)
	leaderPort := freePort(t) // its health port
	leaderArgs := command(dep.Spec.Template.Spec.Containers[0], nil)
	movePort(t, leaderArgs, "--metrics-address=:", metricsPort, freePort(t))
	movePort(t, leaderArgs, "--health-address=:", healthPort, leaderPort)
	leader := start("leader", dep.Spec.Template.Spec, leaderArgs)

	// The node is ready on the rendered probe's port.
	probe := ds.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet
	node.metrics = "127.0.0.1:" + probe.Port.String()
	k.poll(t, "the node's "+probe.Path, func(ctx context.Context) error {
		if !node.Alive() {
			return fmt.Errorf("node exited: %s", node.Log())
		}
		_, err := node.get(ctx, probe.Path)
		return err
	})
	// The node's /metrics: HTTPS, for the tokens the API server allows.
	for _, c := range []struct {
		who, token string
		want       int
	}{{"no token", "", http.StatusUnauthorized}, {"an administrator", api.Config.BearerToken, http.StatusOK}} {
		if got, err := scrapeSecure(ctx, "127.0.0.1:"+strconv.Itoa(metricsPort), c.token); err != nil || got != c.want {
			t.Errorf("node /metrics, %s: %d %v, want %d", c.who, got, err, c.want)
		}
	}
	// The leader holds the Lease and is ready.
	hostname, _ := os.Hostname()
	k.poll(t, "the leader to hold the Lease", func(ctx context.Context) error {
		if !leader.Alive() {
			return fmt.Errorf("leader exited: %s", leader.Log())
		}
		l := daemon.DefaultLease("")
		lease, err := k.cs.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := ptr.Deref(lease.Spec.HolderIdentity, ""); !strings.HasPrefix(h, hostname+"_") {
			return fmt.Errorf("Lease held by %q", h)
		}
		return nil
	})
	leader.metrics = "127.0.0.1:" + strconv.Itoa(leaderPort)
	k.poll(t, "the leader's /readyz", func(ctx context.Context) error {
		_, err := leader.get(ctx, "/readyz")
		return err
	})
	for _, p := range []*instance{node, leader} {
		if data, err := os.ReadFile(p.log); err == nil && bytes.Contains(data, []byte("forbidden")) {
			t.Errorf("%s was denied by the chart's RBAC:\n%s", p.node, data)
		}
	}
	if err := errors.Join(node.Terminate(), leader.Terminate()); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// movePort replaces flag+from in args with flag+to.
func movePort(t *testing.T, args []string, flag string, from, to int) {
	t.Helper()
	i := slices.Index(args, flag+strconv.Itoa(from))
	if i < 0 {
		t.Fatalf("args %q: no %s%d", args, flag, from)
	}
	args[i] = flag + strconv.Itoa(to)
}

// scrapeSecure GETs /metrics over HTTPS (any certificate) with the
// bearer token (none when empty) and returns the status code.
func scrapeSecure(ctx context.Context, addr, token string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
