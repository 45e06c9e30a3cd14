// Package e2e runs ovnedge end to end on a multi-node cluster: the
// network namespaces, chassis and OVN central of testbed.StartCluster, a
// real etcd and kube-apiserver (testbed.StartKubeAPI), and the `ovnedge`
// binary started the way deploy/ starts it: one node instance per node
// (the DaemonSet's arguments, inside the node's network namespace, as its
// ServiceAccount ovnedge-node) and the leader (the Deployment's
// arguments, in a pod network namespace on the first node, as
// ovnedge-leader), with deploy/rbac.yaml applied. Nothing but ovnedge
// programs the dataplane beyond the topology ovnkube-master would have
// created.
//
// The harness plays the parts of Kubernetes that do not run here: Node
// objects with the annotations ovnkube-node writes, a kubelet (CreatePod:
// every Pod bound to a node gets a network namespace on that node's br-int, its IP
// and a Ready status, and a TCP server on each container port answering
// "<pod name> <client address>"), and an endpoint controller (one
// EndpointSlice per Service with a selector, of its ready pods). With
// StartKubeOVN the cluster also has Kube-OVN's default VPC (pods annotated
// ovn.kubernetes.io/logical_switch join its subnets), and SyncLBSvc plays
// the Deployment controller, scheduler, Kube-OVN/Multus and kubelet for
// the lb-svc Deployments ovnedge creates (--enable-lb-svc): their pods
// get net1 on the external segment and run the Deployment's command.
// StartMetalLB runs MetalLB itself (controller and a speaker per node in
// its network namespace, built by scripts/metallb.sh, with MetalLB's CRDs
// and RBAC), the harness again playing only the kubelet and the
// Deployment and DaemonSet controllers.
//
// Start needs root, the OVS/OVN binaries and the apiserver built by
// scripts/kube-apiserver.sh; without them a test is skipped, or fails
// when CI=true (testbed.Require).
package e2e

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/testbed"
)

// ClusterSubnets is --cluster-subnets (the chart's clusterSubnets) of
// the dual-stack cluster.
const ClusterSubnets = testbed.ClusterSubnet + "/24," + testbed.ClusterSubnet6 + "/64"

const clusterSubnets = ClusterSubnets

// Timeout bounds the harness's waits.
const Timeout = 60 * time.Second

// Options shape Start.
type Options struct {
	// Nodes is the number of nodes (default 3).
	Nodes int
	// EgressNodes are labelled k8s.ovn.org/egress-assignable.
	EgressNodes []string
	// NodeArgs and LeaderArgs are added to the node instances' and the
	// leader's `ovnedge daemon` arguments (after deploy/'s).
	NodeArgs, LeaderArgs []string
	// Bin is the ovnedge binary; Start builds ./daemon/cmd/ovnedge when
	// empty (or uses $OVNEDGE_BIN).
	Bin string
}

// Env is a running cluster with ovnedge.
type Env struct {
	*testbed.Cluster
	Kube *testbed.KubeAPI
	CS   kubernetes.Interface
	Dyn  dynamic.Interface
	// Bin is the ovnedge binary the instances run.
	Bin string
	// Leader runs in LeaderPod, a pod network namespace on the first node.
	Leader    *Instance
	LeaderPod *testbed.Pod

	t        testbed.T
	owner    testbed.T // the T Start was given: what the Env starts is cleaned up with it
	root     string
	applier  *Applier
	ctx      context.Context
	mu       *sync.Mutex // shared by every With copy
	nodes    map[string]*Instance
	kubecfgs map[string]string // ServiceAccount -> kubeconfig
	opts     *Options          // shared by every With copy
	// baseNodeArgs and baseLeaderArgs are Options.NodeArgs and
	// LeaderArgs as Start was given them.
	baseNodeArgs, baseLeaderArgs []string
	// leader is the Leader field of the Env Start made (With copies
	// update it through this).
	leader **Instance
	// underlay is the underlay of Kube-OVN's MetalLB underlay guide once a test asked for it
	// (Underlay), shared by every With copy.
	underlay **testbed.Underlay
	// kubeovn is the state of the Kube-OVN parts (StartKubeOVN).
	kubeovn *kubeOVNState
}

// Instance is one running `ovnedge daemon`.
type Instance struct {
	*testbed.Process
	// Node is the node name ("" for the leader), NS the namespace it
	// runs in, Log its log file, Args its arguments.
	Node string
	NS   *testbed.Netns
	Log  string
	Args []string
}

// Start builds the cluster, the API server and the ovnedge instances,
// and returns once every instance serves /readyz.
func Start(t testbed.T, o Options) *Env {
	t.Helper()
	begin := time.Now()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	bin := cmp.Or(o.Bin, os.Getenv("OVNEDGE_BIN"))
	if bin == "" {
		bin = Build(t, root)
	}
	e := &Env{t: t, owner: t, root: root, Bin: bin, mu: &sync.Mutex{}, nodes: map[string]*Instance{}, kubecfgs: map[string]string{}, opts: &o,
		baseNodeArgs: o.NodeArgs, baseLeaderArgs: o.LeaderArgs,
		kubeovn: &kubeOVNState{subnets: map[string]testbed.KubeOVNSubnet{}, lbsvc: map[string]*LBSvcPod{}}}
	e.leader = &e.Leader
	e.underlay = new(*testbed.Underlay)
	e.Cluster = testbed.StartCluster(t, testbed.ClusterOptions{Nodes: o.Nodes})
	e.Kube = testbed.StartKubeAPI(t)
	e.CS = kubernetes.NewForConfigOrDie(e.Kube.Config)
	e.Dyn = dynamic.NewForConfigOrDie(e.Kube.Config)
	e.applier = NewApplier(e.Kube.Config)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.ctx = ctx

	e.ApplyFile(filepath.Join(root, "deploy", "crds"))
	e.ApplyFile(filepath.Join(root, "deploy", "rbac.yaml"))
	for _, n := range e.Nodes {
		e.createNode(n, slices.Contains(o.EgressNodes, n.Name))
	}
	e.startEndpoints()

	// The leader is a Deployment pod: a pod on the first node.
	e.CreatePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ovnedge-leader",
		Labels: map[string]string{"app.kubernetes.io/name": "ovnedge", "app.kubernetes.io/component": "leader"}},
		Spec: corev1.PodSpec{NodeName: e.Nodes[0].Name, ServiceAccountName: "ovnedge-leader",
			Containers: []corev1.Container{{Name: "ovnedge", Image: "ovnedge"}}}})
	e.LeaderPod = e.WaitPod("kube-system", "ovnedge-leader")
	e.Leader = e.StartLeader()
	for _, n := range e.Nodes {
		e.StartNode(n.Name)
	}
	t.Logf("e2e: cluster with ovnedge up in %v", time.Since(begin).Round(time.Millisecond))
	return e
}

// RepoRoot finds the repository root (the directory of go.mod) above the
// working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

var buildOnce struct {
	sync.Mutex
	bin string
}

// ImageBuildFlags are the go build flags of the image's binary
// (scripts/image.sh): no cgo, -trimpath, no manifests mode.
var ImageBuildFlags = []string{"-trimpath", "-tags", "nomanifests"}

// BuildAsImage builds ./daemon/cmd/ovnedge as scripts/image.sh does
// (ImageBuildFlags, CGO_ENABLED=0) into a directory removed when t ends,
// and returns its path: what a pod runs, for measuring its memory.
func BuildAsImage(t testbed.T, root string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ovnedge-image-bin")
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "ovnedge")
	cmd := exec.Command("go", append(append([]string{"build"}, ImageBuildFlags...), "-o", bin, "./daemon/cmd/ovnedge")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("e2e: go build %v ./daemon/cmd/ovnedge: %v\n%s", ImageBuildFlags, err, out)
	}
	return bin
}

// Build builds ./daemon/cmd/ovnedge into a temporary directory and
// returns its path. The binary is shared by the callers until t ends: then
// the directory (~110 MB) is removed, and the next call builds again.
func Build(t testbed.T, root string) string {
	t.Helper()
	buildOnce.Lock()
	defer buildOnce.Unlock()
	if buildOnce.bin != "" {
		return buildOnce.bin
	}
	dir, err := os.MkdirTemp("", "ovnedge-bin")
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	t.Cleanup(func() {
		buildOnce.Lock()
		defer buildOnce.Unlock()
		buildOnce.bin = ""
		_ = os.RemoveAll(dir)
	})
	bin := filepath.Join(dir, "ovnedge")
	cmd := exec.Command("go", "build", "-o", bin, "./daemon/cmd/ovnedge")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("e2e: go build ./daemon/cmd/ovnedge: %v\n%s", err, out)
	}
	buildOnce.bin = bin
	return bin
}

// kubeconfig returns a kubeconfig of ServiceAccount kube-system/sa.
func (e *Env) kubeconfig(sa string) string {
	e.t.Helper()
	return e.kubeconfigIn("kube-system", sa)
}

// kubeconfigIn returns a kubeconfig of ServiceAccount ns/sa.
func (e *Env) kubeconfigIn(ns, sa string) string {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	user := sa
	if ns != "kube-system" {
		user = ns + "-" + sa
	}
	if p, ok := e.kubecfgs[user]; ok {
		return p
	}
	tr, err := e.CS.CoreV1().ServiceAccounts(ns).CreateToken(e.ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7200)}},
		metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("e2e: token of ServiceAccount %s/%s: %v", ns, sa, err)
	}
	p := e.Kube.KubeconfigFor(e.t, user, tr.Status.Token)
	e.kubecfgs[user] = p
	return p
}

// LeaderArgs are deploy/deployment.yaml's arguments as this cluster
// needs them, plus Options.LeaderArgs.
func (e *Env) LeaderArgs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string{"--leader-elect=true", "--nb-address=" + e.OVN.NB, "--sb-address=" + e.OVN.SB,
		"--cluster-subnets=" + clusterSubnets, "--join-subnet=" + testbed.ClusterJoin, "--v6-join-subnet=" + testbed.ClusterJoin6,
		"--metrics-address=127.0.0.1:9476"}, e.opts.LeaderArgs...)
}

// NodeArgs are deploy/daemonset.yaml's arguments for node, plus
// Options.NodeArgs.
func (e *Env) NodeArgs(node string) []string {
	n := e.Node(node)
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string{"--node-name=" + node, "--leader-elect=false",
		"--ovs-db=" + n.DB, "--ovs-rundir=" + n.RunDir, "--bridge=" + testbed.ClusterBridge,
		"--uplink=" + testbed.ClusterUplink, "--cluster-subnets=" + clusterSubnets,
		"--metrics-address=127.0.0.1:9476"}, e.opts.NodeArgs...)
}

// StartLeader starts the leader instance in LeaderPod.
func (e *Env) StartLeader() *Instance {
	e.t.Helper()
	return e.start("leader", "", e.LeaderPod.Netns, "ovnedge-leader", e.LeaderArgs())
}

// StartNode starts (or restarts) node's instance in the node's namespace.
func (e *Env) StartNode(node string) *Instance {
	e.t.Helper()
	i := e.start("node-"+node, node, e.Node(node).NS, "ovnedge-node", e.NodeArgs(node))
	e.mu.Lock()
	e.nodes[node] = i
	e.mu.Unlock()
	return i
}

// Instance returns node's running instance.
func (e *Env) Instance(node string) *Instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nodes[node]
}

var started sync.Map // namespace name -> the apiserver is forwarded there

// forwardAPI makes the API server's address reach it from ns too (once
// per namespace, for the cluster's lifetime).
func (e *Env) forwardAPI(ns *testbed.Netns) {
	e.t.Helper()
	if _, done := started.LoadOrStore(ns.Name, true); !done {
		ns.Forward(e.t, strings.TrimPrefix(e.Kube.URL, "https://"))
	}
}

// RestartNodeUnready SIGKILLs node's instance and starts it again
// without waiting for it to be ready (one cut off from the API server
// cannot be); wait waits until it is.
func (e *Env) RestartNodeUnready(node string) (wait func()) {
	e.t.Helper()
	if i := e.Instance(node); i != nil && i.Alive() {
		if err := i.Kill(); err != nil {
			e.t.Fatalf("e2e: %v", err)
		}
	}
	i := e.launch("node-"+node, node, e.Node(node).NS, "ovnedge-node", e.NodeArgs(node))
	e.mu.Lock()
	e.nodes[node] = i
	e.mu.Unlock()
	return func() { e.waitReady(i) }
}

func (e *Env) start(name, node string, ns *testbed.Netns, sa string, args []string) *Instance {
	e.t.Helper()
	i := e.launch(name, node, ns, sa, args)
	e.waitReady(i)
	return i
}

// launch starts an instance named name.
func (e *Env) launch(name, node string, ns *testbed.Netns, sa string, args []string) *Instance {
	e.t.Helper()
	e.forwardAPI(ns)
	args = append([]string{"daemon", "--kubeconfig=" + e.kubeconfig(sa)}, args...)
	log := filepath.Join(e.Kube.Dir, name+".log")
	argv := append([]string{"ip", "netns", "exec", ns.Name, e.Bin}, args...)
	p := testbed.StartProcess(e.t, "ovnedge "+name, log, nil, argv...)
	return &Instance{Process: p, Node: node, NS: ns, Log: log, Args: args}
}

// waitReady waits until i serves /readyz.
func (e *Env) waitReady(i *Instance) {
	e.t.Helper()
	err := poll(Timeout, func() error {
		if !i.Alive() {
			return fmt.Errorf("exited%s", i.Process.Log())
		}
		return i.ready()
	})
	if err != nil {
		e.t.Fatalf("e2e: ovnedge %s not ready: %v%s", filepath.Base(i.Log), err, i.Process.Log())
	}
}

// ready asks the instance's /readyz inside its namespace. The connection
// is dialled on the namespace's thread (an http.Transport would dial from
// another goroutine, in the test's own namespace).
func (i *Instance) ready() error {
	return i.NS.Do(func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:9476", time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:9476/readyz", nil)
		req.Close = true
		if err := req.Write(c); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("readyz: %s: %s", resp.Status, b)
		}
		return nil
	})
}

// poll calls cond every 50 ms until it returns nil or timeout passes.
func poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Eventually fails the test unless cond returns nil within timeout.
func (e *Env) Eventually(timeout time.Duration, what string, cond func() error) {
	e.t.Helper()
	if err := poll(timeout, cond); err != nil {
		e.t.Fatalf("e2e: %s: still failing after %v: %v", what, timeout, err)
	}
}

// ApplyFile creates the objects of a YAML file, or of every *.yaml file
// of a directory, in file order (server-side apply with the admin's
// client, so re-applying updates).
func (e *Env) ApplyFile(path string) {
	e.t.Helper()
	for _, f := range testbed.YAMLFiles(path) {
		data, err := os.ReadFile(f)
		if err != nil {
			e.t.Fatalf("e2e: %v", err)
		}
		e.ApplyYAML(string(data))
	}
}

// ApplyYAML server-side-applies every object of a multi-document YAML.
func (e *Env) ApplyYAML(doc string) {
	e.t.Helper()
	e.applyYAML(doc, func(*unstructured.Unstructured) bool { return true })
}

// applyYAML server-side-applies the objects of a multi-document YAML
// that keep accepts.
func (e *Env) applyYAML(doc string, keep func(*unstructured.Unstructured) bool) {
	e.t.Helper()
	if err := e.applier.Apply(e.ctx, doc, keep); err != nil {
		e.t.Fatalf("e2e: %v", err)
	}
}

// Applier server-side-applies YAML documents, as `kubectl apply
// --server-side` does (field manager e2e).
type Applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

// NewApplier is an Applier with cfg's credentials.
func NewApplier(cfg *rest.Config) *Applier {
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	return &Applier{dyn: dynamic.NewForConfigOrDie(cfg),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// Apply applies the objects of a multi-document YAML that keep accepts
// (nil: all), in order.
func (a *Applier) Apply(ctx context.Context, doc string, keep func(*unstructured.Unstructured) bool) error {
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096)
	for {
		var u unstructured.Unstructured
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decode YAML: %w", err)
		}
		if len(u.Object) == 0 || (keep != nil && !keep(&u)) {
			continue
		}
		if err := a.apply(ctx, &u); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

func (a *Applier) apply(ctx context.Context, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	var m *meta.RESTMapping
	err := poll(Timeout, func() error { // a CRD applied just before needs discovery to catch up
		var err error
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			a.mapper.(meta.ResettableRESTMapper).Reset()
		}
		return err
	})
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = a.dyn.Resource(m.Resource).Namespace(cmp.Or(u.GetNamespace(), "default"))
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, u.GetName(), "application/apply-patch+yaml", data,
		metav1.PatchOptions{FieldManager: "e2e", Force: ptr.To(true)})
	return err
}

// NodeAnnotations are the annotations ovnkube-node writes on the Node of
// n (its subnets, addresses, gateway router port and chassis), which
// ovnedge reads: createNode creates Nodes with them, and a test whose
// Nodes a real kubelet registers patches them on.
func NodeAnnotations(n *testbed.ClusterNode) map[string]string {
	ip, ip6 := n.IP.String(), n.IP6.String()
	return map[string]string{
		"k8s.ovn.org/node-subnets": fmt.Sprintf(`{"default":["%s","%s"]}`, n.Subnet, n.Subnet6),
		"k8s.ovn.org/node-primary-ifaddr": fmt.Sprintf(`{"ipv4":"%s/%d","ipv6":"%s/%d"}`,
			ip, testbed.ClusterExtPrefix, ip6, testbed.ClusterExtPrefix6),
		"k8s.ovn.org/host-cidrs":                     fmt.Sprintf(`["%s/%d","%s/%d"]`, ip, testbed.ClusterExtPrefix, ip6, testbed.ClusterExtPrefix6),
		"k8s.ovn.org/node-gateway-router-lrp-ifaddr": fmt.Sprintf(`{"ipv4":"%s/16","ipv6":"%s/64"}`, n.JoinIP, n.JoinIP6),
		// The chassis is named after the node (its system-id).
		"k8s.ovn.org/node-chassis-id": n.Name,
	}
}

// createNode creates the Node object of n with the annotations
// ovnkube-node writes (NodeAnnotations), Ready.
func (e *Env) createNode(n *testbed.ClusterNode, egress bool) {
	e.t.Helper()
	ip, ip6 := n.IP.String(), n.IP6.String()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name,
		Labels:      map[string]string{"kubernetes.io/hostname": n.Name},
		Annotations: NodeAnnotations(n)}}
	if egress {
		node.Labels["k8s.ovn.org/egress-assignable"] = ""
	}
	created, err := e.CS.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("e2e: create node %s: %v", n.Name, err)
	}
	created.Status = corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeInternalIP, Address: ip6},
			{Type: corev1.NodeHostName, Address: n.Name}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
	}
	if _, err := e.CS.CoreV1().Nodes().UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("e2e: node %s status: %v", n.Name, err)
	}
}

// SetNodeReady sets node's Ready condition, as its kubelet (or the node
// lifecycle controller, for a dead node) would.
func (e *Env) SetNodeReady(node string, ready bool) {
	e.t.Helper()
	n, err := e.CS.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("e2e: %v", err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now()}}
	if _, err := e.CS.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("e2e: node %s status: %v", node, err)
	}
}

// CreatePod creates a Pod; one bound to a node (spec.nodeName) is then
// started as its kubelet would (see runPod) before CreatePod returns.
func (e *Env) CreatePod(p *corev1.Pod) {
	e.t.Helper()
	p.Namespace = cmp.Or(p.Namespace, "default")
	e.ensureNamespace(p.Namespace, nil)
	created, err := e.CS.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("e2e: create pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	if p.Spec.NodeName != "" {
		e.runPod(created)
	}
}

// EnsurePod creates p unless a pod of its name exists (a benchmark's
// setup runs once per b.N round).
func (e *Env) EnsurePod(p *corev1.Pod) {
	e.t.Helper()
	if _, err := e.CS.CoreV1().Pods(cmp.Or(p.Namespace, "default")).Get(e.ctx, p.Name, metav1.GetOptions{}); err == nil {
		return
	}
	e.CreatePod(p)
}

// ServerPod is a pod on node with labels whose containers listen on
// ports (TCP): each connection is answered "<pod name> <client ip:port>".
func ServerPod(namespace, name, node string, labels map[string]string, ports ...int32) *corev1.Pod {
	c := corev1.Container{Name: "server", Image: "e2e-server"}
	for _, p := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: p, Protocol: corev1.ProtocolTCP})
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{c}}}
}

// ensureNamespace creates namespace ns (with labels) unless it exists.
func (e *Env) ensureNamespace(ns string, lbls map[string]string) {
	_, err := e.CS.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: lbls}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatalf("e2e: namespace %s: %v", ns, err)
	}
}

// CreateNamespace creates namespace ns with labels.
func (e *Env) CreateNamespace(ns string, lbls map[string]string) { e.ensureNamespace(ns, lbls) }

// WaitPod waits until the kubelet has started pod namespace/name and
// returns it.
func (e *Env) WaitPod(namespace, name string) *testbed.Pod {
	e.t.Helper()
	var p *testbed.Pod
	e.Eventually(Timeout, "pod "+namespace+"/"+name+" running", func() error {
		if p = e.Pod(namespace, name); p == nil {
			return errors.New("not started")
		}
		return nil
	})
	return p
}

// runPod is the kubelet's part for p: a pod of the cluster on its node
// (on the node switch, or on the Kube-OVN subnet of its annotation
// ovn.kubernetes.io/logical_switch), servers on its container ports, and
// a Running, Ready status with its IP.
func (e *Env) runPod(p *corev1.Pod) {
	e.t.Helper()
	var pod *testbed.Pod
	e.mu.Lock()
	u := *e.underlay
	e.mu.Unlock()
	if u != nil && p.Annotations[annotationLogicalSwitch] == testbed.UnderlaySwitch {
		// Kube-OVN's CNI puts a pod annotated with an underlay subnet's
		// switch on that subnet (IPv4 only here).
		pod = u.AddPod(p.Spec.NodeName, p.Namespace, p.Name, netip.Addr{})
	} else {
		subnet, err := e.kubeOVNSubnet(p)
		if err != nil {
			e.t.Fatalf("e2e: %v", err)
		}
		pod = e.AddPod(p.Spec.NodeName, p.Namespace, p.Name, testbed.ClusterPodOptions{Subnet: subnet})
	}
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if err := Serve(e.ctx, pod.Netns, pod.Name, int(port.ContainerPort)); err != nil {
				e.t.Fatalf("e2e: pod %s/%s: serve %d: %v", p.Namespace, p.Name, port.ContainerPort, err)
			}
		}
	}
	now := metav1.Now()
	ips := []corev1.PodIP{{IP: pod.IP.String()}}
	if pod.IP6.IsValid() {
		ips = append(ips, corev1.PodIP{IP: pod.IP6.String()})
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: pod.IP.String(),
		PodIPs: ips, HostIP: e.Node(p.Spec.NodeName).IP.String(), StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if _, err := e.CS.CoreV1().Pods(p.Namespace).UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("e2e: pod %s/%s status: %v", p.Namespace, p.Name, err)
	}
}

// annotationLogicalSwitch is Kube-OVN's pod annotation naming the subnet
// (logical switch) the pod is plugged into.
const annotationLogicalSwitch = "ovn.kubernetes.io/logical_switch"

// Underlay returns the underlay of Kube-OVN's MetalLB underlay guide
// (testbed's AddUnderlay), adding it
// to the cluster the first time: from then on pods annotated
// ovn.kubernetes.io/logical_switch=underlay-subnet are plugged into it.
func (e *Env) Underlay() *testbed.Underlay {
	e.t.Helper()
	e.mu.Lock()
	u := *e.underlay
	e.mu.Unlock()
	if u != nil {
		return u
	}
	u = e.AddUnderlay()
	e.mu.Lock()
	*e.underlay = u
	e.mu.Unlock()
	return u
}

// Serve listens on port inside ns until ctx ends and answers every
// connection with one line "<name> <client ip:port>", then echoes what it
// reads.
func Serve(ctx context.Context, ns *testbed.Netns, name string, port int) error {
	var ln net.Listener
	err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", ":"+strconv.Itoa(port))
		return err
	})
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr())
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return nil
}

// Reply connects from ns to addr (host:port) over TCP, sends payload
// bytes, and returns the server's first line ("<pod> <client>") once the
// payload has come back whole.
func Reply(ns *testbed.Netns, addr string, payload int, timeout time.Duration) (string, error) {
	var line string
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		r := bufio.NewReader(c)
		if line, err = r.ReadString('\n'); err != nil {
			return fmt.Errorf("read greeting: %w", err)
		}
		line = strings.TrimSpace(line)
		if payload > 0 {
			go func() { _, _ = c.Write(make([]byte, payload)) }()
			if _, err := io.CopyN(io.Discard, r, int64(payload)); err != nil {
				return fmt.Errorf("echo of %d bytes: %w", payload, err)
			}
		}
		return nil
	})
	return line, err
}

// startEndpoints runs the endpoint controller part: every Service with a
// selector gets one EndpointSlice "<service>-e2e" listing its ready pods
// (by IP, with their node), ports from the Service's numeric target
// ports.
func (e *Env) startEndpoints() {
	f := informers.NewSharedInformerFactory(e.CS, 0)
	svcs, pods := f.Core().V1().Services(), f.Core().V1().Pods()
	kick := make(chan struct{}, 1)
	h := cacheFuncs(func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	_, _ = svcs.Informer().AddEventHandler(h)
	_, _ = pods.Informer().AddEventHandler(h)
	f.Start(e.ctx.Done())
	go func() {
		for {
			select {
			case <-e.ctx.Done():
				return
			case <-kick:
			}
			all, _ := svcs.Lister().List(labels.Everything())
			for _, s := range all {
				if len(s.Spec.Selector) == 0 {
					continue
				}
				ps, _ := pods.Lister().Pods(s.Namespace).List(labels.SelectorFromSet(s.Spec.Selector))
				if err := e.writeSlice(s, ps); err != nil && e.ctx.Err() == nil {
					e.t.Logf("e2e: endpoints of %s/%s: %v", s.Namespace, s.Name, err)
				}
			}
		}
	}()
}

func (e *Env) writeSlice(s *corev1.Service, pods []*corev1.Pod) error {
	families := s.Spec.IPFamilies
	if len(families) == 0 {
		families = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	var errs []error
	for _, fam := range []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol} {
		name, v6 := s.Name+"-e2e", fam == corev1.IPv6Protocol
		if v6 {
			name += "6"
		}
		if !slices.Contains(families, fam) {
			err := e.CS.DiscoveryV1().EndpointSlices(s.Namespace).Delete(e.ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, e.writeFamilySlice(s, pods, name, v6))
	}
	return errors.Join(errs...)
}

// writeFamilySlice writes the EndpointSlice name of s's ready pods' IPv4
// (or IPv6) addresses.
func (e *Env) writeFamilySlice(s *corev1.Service, pods []*corev1.Pod, name string, v6 bool) error {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: s.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if v6 {
		slice.AddressType = discoveryv1.AddressTypeIPv6
	}
	for _, p := range s.Spec.Ports {
		port := p.TargetPort.IntVal
		if port == 0 {
			port = p.Port
		}
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(port)})
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		var addr string
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is6() == v6 {
				addr = ip.IP
			}
		}
		if addr == "" {
			continue
		}
		ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr},
			NodeName: ptr.To(p.Spec.NodeName), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name}})
	}
	api := e.CS.DiscoveryV1().EndpointSlices(s.Namespace)
	old, err := api.Get(e.ctx, slice.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(e.ctx, slice, metav1.CreateOptions{})
	case err == nil:
		slice.ResourceVersion = old.ResourceVersion
		_, err = api.Update(e.ctx, slice, metav1.UpdateOptions{})
	}
	return err
}

// Service returns the Service namespace/name as the API server has it.
func (e *Env) Service(namespace, name string) *corev1.Service {
	e.t.Helper()
	s, err := e.CS.CoreV1().Services(namespace).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("e2e: %v", err)
	}
	return s
}

// Context is the harness's context, ended at cleanup.
func (e *Env) Context() context.Context { return e.ctx }

// KillNode kills node's chassis (ovn-controller, ovs-vswitchd,
// ovsdb-server) and its ovnedge instance, as a machine dying would.
func (e *Env) KillNode(node string) {
	e.t.Helper()
	// The chassis first, as a node losing power goes silent: with its
	// ovs-vswitchd gone the management port is gone too, so the leader's
	// health-check connection gets no FIN or RST from the dying ovnedge
	// and finds the node dead only by probing (killing ovnedge first
	// closed that connection at once: an early detection no real node
	// death gives).
	e.Node(node).Kill()
	if i := e.Instance(node); i != nil && i.Alive() {
		if err := i.Kill(); err != nil {
			e.t.Fatalf("e2e: %v", err)
		}
	}
}

// cacheFuncs calls f on every add, update and delete.
func cacheFuncs(f func(any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: f,
		UpdateFunc: func(_, n any) { f(n) },
		DeleteFunc: f}
}

// With returns the Env for a subtest of the test that started it (or of
// TestMain's program): failures go to t, while what the subtest starts
// through the Env (processes, pods, a restarted chassis) lives as long as
// the cluster, as the cluster's own parts do. Subtests must not run in
// parallel.
func (e *Env) With(t testbed.T) *Env {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := *e
	sc := scoped{T: t, owner: e.owner, done: &atomic.Bool{}}
	c.t = sc
	t.Cleanup(e.Cluster.Use(c.t))
	t.Cleanup(func() { sc.done.Store(true) })
	return &c
}

// scoped is a subtest's T whose Cleanup registers with the cluster's
// owner. Once the subtest has ended, what is still reported through it
// (a cleanup that runs with the owner's, logging why it keeps a failed
// test's directory) goes to the owner: testing panics on a Log after the
// test completed.
type scoped struct {
	testbed.T
	owner testbed.T
	done  *atomic.Bool
}

func (s scoped) Cleanup(f func()) { s.owner.Cleanup(f) }

func (s scoped) Logf(format string, args ...any) {
	if s.done.Load() {
		s.owner.Logf(format, args...)
		return
	}
	s.T.Logf(format, args...)
}

func (s scoped) Errorf(format string, args ...any) {
	if s.done.Load() {
		s.owner.Errorf(format, args...)
		return
	}
	s.T.Errorf(format, args...)
}

// RestoreNode brings a killed node back: its chassis (testbed's
// Restart), its ovnedge instance and its Ready condition.
func (e *Env) RestoreNode(node string) {
	e.t.Helper()
	n := e.Node(node)
	if !n.Alive() {
		n.Restart()
	}
	e.SetNodeReady(node, true)
	if i := e.Instance(node); i == nil || !i.Alive() {
		e.StartNode(node)
	}
}

// RestartNodes restarts every node instance with extra arguments added to
// NodeArgs (nil: as configured), one at a time.
func (e *Env) RestartNodes(extra ...string) {
	e.t.Helper()
	e.mu.Lock()
	e.opts.NodeArgs = append(slices.Clip(e.baseNodeArgs), extra...)
	e.mu.Unlock()
	for _, n := range e.Nodes {
		if i := e.Instance(n.Name); i != nil && i.Alive() {
			if err := i.Terminate(); err != nil {
				e.t.Fatalf("e2e: %v", err)
			}
		}
		e.StartNode(n.Name)
	}
}

// RestartLeader restarts the leader instance with extra arguments added
// to LeaderArgs (nil: as configured).
func (e *Env) RestartLeader(extra ...string) {
	e.t.Helper()
	e.mu.Lock()
	e.opts.LeaderArgs = append(slices.Clip(e.baseLeaderArgs), extra...)
	e.mu.Unlock()
	if e.Leader.Alive() {
		if err := e.Leader.Terminate(); err != nil {
			e.t.Fatalf("e2e: %v", err)
		}
	}
	l := e.StartLeader()
	e.mu.Lock()
	*e.leader = l
	e.mu.Unlock()
	e.Leader = l
}

// WaitServing waits until node answers the egress health check on its
// management IP (gRPC, port 9107, as the cluster's instances serve it)
// from the leader's pod, then settle more: the time the leader's checks
// take to see it.
func (e *Env) WaitServing(node string, settle time.Duration) {
	e.t.Helper()
	dial := func(ctx context.Context, network, address string) (conn net.Conn, err error) {
		if ee := e.LeaderPod.Do(func() error {
			conn, err = (&net.Dialer{}).DialContext(ctx, network, address)
			return nil
		}); ee != nil {
			return nil, ee
		}
		return conn, err
	}
	c, err := reach.NewClient(9107, reach.TLSFiles{}, dial)
	if err != nil {
		e.t.Fatalf("e2e: %v", err)
	}
	defer c.Close()
	e.Eventually(Timeout, node+" serving the egress health check", func() error {
		_, err := c.Check(e.ctx, e.Node(node).MgmtIP, time.Second)
		return err
	})
	time.Sleep(settle)
}

// Diagnose returns what a failing traffic check wants to see: every
// node's breth0 flows with their counters, and the NB's router policies,
// NATs and load balancers.
func (e *Env) Diagnose() string {
	var b strings.Builder
	for _, n := range e.Nodes {
		out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow13", "dump-flows", n.Mgmt(testbed.ClusterBridge)).CombinedOutput()
		fmt.Fprintf(&b, "--- %s breth0 flows (%v):\n%s", n.Name, err, out)
	}
	for _, args := range [][]string{{"lr-policy-list", "ovn_cluster_router"}, {"lb-list"}, {"show"}} {
		out, err := exec.Command("ovn-nbctl", append([]string{"--db=" + e.OVN.NB}, args...)...).CombinedOutput()
		fmt.Fprintf(&b, "--- ovn-nbctl %s (%v):\n%s", strings.Join(args, " "), err, out)
	}
	for _, n := range e.Nodes {
		out, err := exec.Command("ovn-nbctl", "--db="+e.OVN.NB, "lr-nat-list", "GR_"+n.Name).CombinedOutput()
		fmt.Fprintf(&b, "--- NATs of GR_%s (%v):\n%s", n.Name, err, out)
	}
	return b.String()
}

// EgressGVR is the EgressIP resource (k8s.ovn.org/v1).
var EgressGVR = schema.GroupVersionResource{Group: "k8s.ovn.org", Version: "v1", Resource: "egressips"}

// EgressNode waits until EgressIP name's status assigns ip to a node
// other than not ("" for any) and returns that node.
func (e *Env) EgressNode(name string, ip netip.Addr, not string) string {
	e.t.Helper()
	var node string
	e.Eventually(Timeout, "EgressIP "+name+" assigned", func() error {
		u, err := e.Dyn.Resource(EgressGVR).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node = EgressStatusNode(u, ip, not); node == "" {
			return fmt.Errorf("status %v", u.Object["status"])
		}
		return nil
	})
	return node
}

// EgressStatusNode is the node an EgressIP's status puts ip on, other
// than not ("" for any), or "" when there is none.
func EgressStatusNode(u *unstructured.Unstructured, ip netip.Addr, not string) string {
	items, _, _ := unstructured.NestedSlice(u.Object, "status", "items")
	for _, it := range items {
		m, _ := it.(map[string]any)
		if node, _ := m["node"].(string); m["egressIP"] == ip.String() && node != "" && node != not {
			return node
		}
	}
	return ""
}

// LoadBalancerIP waits until Service namespace/name has a LoadBalancer
// ingress IP (LB IPAM's) and returns the first.
func (e *Env) LoadBalancerIP(namespace, name string) netip.Addr {
	e.t.Helper()
	var vip netip.Addr
	e.Eventually(Timeout, "a LoadBalancer IP for "+namespace+"/"+name, func() error {
		s, err := e.CS.CoreV1().Services(namespace).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet")
		}
		vip, err = netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		return err
	})
	return vip
}

// WaitEvent waits for an event with reason about the object ns/name and
// returns its message.
func (e *Env) WaitEvent(ns, name, reason string) string {
	e.t.Helper()
	var msg string
	e.Eventually(30*time.Second, "event "+reason+" about "+ns+"/"+name, func() error {
		evs, err := e.CS.CoreV1().Events(ns).List(e.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Name == name && ev.Reason == reason {
				msg = ev.Message
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(evs.Items))
	})
	return msg
}
