// Package helmenv installs ovnedge as users do, for the tests of
// internal/e2e/helm and for `make demo`: OVN chassis that are real
// kubelet nodes (their pods on OVN through examples/ovncni), the image
// scripts/image.sh builds, imported into every node's containerd, and the
// real `helm install --wait` of deploy/helm/ovnedge.
//
// Where it stands in for OVN-Kubernetes: StartCluster makes the OVN
// topology and Start patches the Node annotations ovnkube-node would
// write (e2e.NodeAnnotations); the NB is the test's, reached from every
// node at testbed.KubeAPIAddress through a forwarder.
package helmenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/testbed"
)

const (
	// Release and Namespace are the release's name and namespace.
	Release   = "ovnedge"
	Namespace = "kube-system"
	// ImageRepo is the repository the image is imported and installed as.
	ImageRepo = "ghcr.io/ovnedge/ovnedge"
	// HelmVersion and CraneVersion are scripts/tool.sh's pins.
	HelmVersion  = "v3.22.0"
	CraneVersion = "v0.22.1"
)

// ToolPath is where scripts/tool.sh keeps the pinned tool (it would `go
// install` it when missing: not offline, so callers only look).
func ToolPath(name, version string) string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".cache")
	}
	return filepath.Join(cache, "ovnedge", "bin", name+"-"+version)
}

// BuildImage runs scripts/image.sh of the repository at root into dir
// and returns the OCI archive and its tag.
func BuildImage(root, dir string) (archive, tag string, err error) {
	cmd := exec.Command("scripts/image.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "IMAGE_OUT="+filepath.Join(dir, "image"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("scripts/image.sh: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "image", "tag"))
	if err != nil {
		return "", "", err
	}
	return filepath.Join(dir, "image", "ovnedge.tar"), strings.TrimSpace(string(b)), nil
}

// Cluster is an OVN cluster whose chassis are kubelet nodes.
type Cluster struct {
	OVN   *testbed.Cluster
	Kube  *testbed.KubeCluster
	Nodes []*testbed.KubeNode
	// Root is the repository (charts, scripts, examples).
	Root string
}

// Start starts an OVN cluster of n chassis and makes each a node of kc
// whose pods examples/ovncni (built here) plugs into OVN, forwards the NB
// into every node's namespace and patches the OVN-Kubernetes annotations
// onto the Nodes. measured, if not nil, gets the steps' durations.
func Start(t testbed.T, kc *testbed.KubeCluster, root string, n int, measured func(string, time.Duration)) *Cluster {
	t.Helper()
	if measured == nil {
		measured = func(string, time.Duration) {}
	}
	begin := time.Now()
	c := &Cluster{OVN: testbed.StartCluster(t, testbed.ClusterOptions{Nodes: n}), Kube: kc, Root: root}
	measured(fmt.Sprintf("StartCluster (%d OVN chassis)", n), time.Since(begin))
	plugin := filepath.Join(TempDir(t), "ovncni")
	build := exec.Command("go", "build", "-o", plugin, "./examples/ovncni")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build examples/ovncni: %v\n%s", err, out)
	}
	port, sbPort := c.nbPort(t), tcpPort(t, c.OVN.OVN.SBTCP)
	for _, cn := range c.OVN.Nodes {
		nbegin := time.Now()
		c.Nodes = append(c.Nodes, kc.AddOVNClusterNode(t, cn, plugin))
		measured("AddClusterNode "+cn.Name+" (Ready)", time.Since(nbegin))
		cn.NS.ForwardTo(t, testbed.KubeAPIAddress+":"+port, "127.0.0.1:"+port)
		cn.NS.ForwardTo(t, testbed.KubeAPIAddress+":"+sbPort, "127.0.0.1:"+sbPort)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": e2e.NodeAnnotations(cn)}})
		if err != nil {
			t.Fatalf("%v", err)
		}
		if _, err := kc.Client.CoreV1().Nodes().Patch(context.Background(), cn.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("annotate node %s: %v", cn.Name, err)
		}
	}
	measured("StartCluster + nodes Ready + annotated", time.Since(begin))
	return c
}

// TempDir is a new directory removed at cleanup.
func TempDir(t testbed.T) string {
	dir, err := os.MkdirTemp("", "helmenv")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// nbPort is the port of the NB's TCP remote.
func (c *Cluster) nbPort(t testbed.T) string { return tcpPort(t, c.OVN.OVN.NBTCP) }

// tcpPort is the port of a "tcp:127.0.0.1:PORT" remote.
func tcpPort(t testbed.T, remote string) string {
	_, port, ok := strings.Cut(strings.TrimPrefix(remote, "tcp:"), ":")
	if !ok {
		t.Fatalf("TCP remote %q", remote)
	}
	return port
}

// NBAddress is the NB as a pod on the host network sees it.
func (c *Cluster) NBAddress(t testbed.T) string {
	return "tcp:" + testbed.KubeAPIAddress + ":" + c.nbPort(t)
}

// SBAddress is the SB as a pod on the host network sees it.
func (c *Cluster) SBAddress(t testbed.T) string {
	return "tcp:" + testbed.KubeAPIAddress + ":" + tcpPort(t, c.OVN.OVN.SBTCP)
}

// KubeNode returns the kubelet node called name, or nil.
func (c *Cluster) KubeNode(name string) *testbed.KubeNode {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Values are the chart values for this cluster: the image at tag
// (pullPolicy Never), its subnets and NB, breth0, leaders on the host
// network, then extra (YAML of further top-level keys).
func (c *Cluster) Values(t testbed.T, tag string, leaders int, extra string) string {
	return fmt.Sprintf(`image:
  repository: %s
  tag: %q
  pullPolicy: Never
clusterSubnets: %q
joinSubnet: %q
joinSubnetV6: %q
ovn:
  nbAddress: %q
  sbAddress: %q
node:
  bridge: %s
  uplink: %s
  ovsDB: unix:/var/run/openvswitch/db.sock
  ovsRunDir: /var/run/openvswitch
leader:
  replicas: %d
  hostNetwork: true
`, ImageRepo, tag, e2e.ClusterSubnets, testbed.ClusterJoin, testbed.ClusterJoin6, c.NBAddress(t), c.SBAddress(t),
		testbed.ClusterBridge, testbed.ClusterUplink, leaders) + extra
}

// Helm runs the pinned helm against the cluster, its configuration and
// cache in a directory of its own.
type Helm struct {
	Bin, Kubeconfig string
	Env             []string
}

// NewHelm is helm with its state under dir.
func NewHelm(kc *testbed.KubeCluster, dir string) *Helm {
	return &Helm{Bin: ToolPath("helm", HelmVersion), Kubeconfig: kc.Kubeconfig,
		Env: append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(dir, "config"),
			"HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HELM_DATA_HOME="+filepath.Join(dir, "data"))}
}

// Run runs helm args with the cluster's admin kubeconfig.
func (h *Helm) Run(args ...string) (string, error) {
	cmd := exec.Command(h.Bin, append(args, "--kubeconfig", h.Kubeconfig)...)
	cmd.Env = h.Env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Install imports the image archive into every node's containerd and
// runs `helm install --wait` of the chart with values; it returns helm's
// output and how long the install took.
func (c *Cluster) Install(t testbed.T, h *Helm, archive, values string) (string, time.Duration, error) {
	t.Helper()
	for _, n := range c.Nodes {
		n.ImportImage(t, archive, ImageRepo)
	}
	file := filepath.Join(TempDir(t), "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
		return "", 0, err
	}
	begin := time.Now()
	out, err := h.Run("install", Release, filepath.Join(c.Root, "deploy", "helm", "ovnedge"),
		"--namespace", Namespace, "--values", file, "--wait", "--timeout", "150s")
	return out, time.Since(begin), err
}

// RunPod runs namespace/name on node, a /netserver of testbed.PauseImage
// serving TCP 8080, labelled labels, and returns it once it is Ready
// (its address from examples/ovncni).
func (c *Cluster) RunPod(ctx context.Context, t testbed.T, namespace, name, node string, labels map[string]string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "server", Image: testbed.PauseImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/netserver", "8080"}, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}}
	pods := c.Kube.Client.CoreV1().Pods(namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("pod %s/%s: %v", namespace, name, err)
	}
	testbed.Eventually(t, 60*time.Second, func() (err error) {
		if pod, err = pods.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && pod.Status.PodIP != "" {
				return nil
			}
		}
		return fmt.Errorf("pod %s/%s not Ready: %s", namespace, name, pod.Status.Phase)
	})
	return pod
}

// LeaderLog is the lines of the leader pods' container logs, on every
// node, that contain one of words ("" for every line), each prefixed with
// its pod's log directory.
func (c *Cluster) LeaderLog(words ...string) string {
	return c.podLog(c.Nodes, Release+"-leader*", words)
}

// NodeLog is LeaderLog for the node instance's pods on node.
func (c *Cluster) NodeLog(node string, words ...string) string {
	return c.podLog([]*testbed.KubeNode{c.KubeNode(node)}, Release+"-node-*", words)
}

// podLog is the lines of the container logs, on nodes, of the pods in
// Namespace whose names match pattern, that contain one of words.
func (c *Cluster) podLog(nodes []*testbed.KubeNode, pattern string, words []string) string {
	var out []string
	for _, n := range nodes {
		if n == nil {
			continue
		}
		logs, _ := filepath.Glob(filepath.Join(n.Dir, "log", "pods", Namespace+"_"+pattern, "*", "*.log"))
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			for line := range strings.SplitSeq(string(data), "\n") {
				if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(line, w) }) {
					out = append(out, filepath.Base(filepath.Dir(filepath.Dir(l)))+": "+line)
				}
			}
		}
	}
	return strings.Join(out, "\n")
}
