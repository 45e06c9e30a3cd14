// Tests of the real Kubernetes nodes (kubenode.go): a control plane and
// one or two nodes in network namespaces running kubelet-run pods.

package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeNode brings a control plane and a real node up in a network
// namespace, runs a pod of the local pause image on the CNI bridge and a
// hostNetwork one, and reaches the apiserver from the node's namespace
// through the `kubernetes` Service's ClusterIP (kube-proxy's DNAT), as an
// in-cluster client does, with a ServiceAccount token.
func TestKubeNode(t *testing.T) {
	begin := time.Now()
	c := StartKubeCluster(t)
	ns := NewNetns(t, "ovk")
	ovsRun := t.TempDir()
	WriteFile(t, ovsRun, "marker", "this node's OVS\n")
	n := c.AddNode(t, ns, KubeNodeOptions{Name: "kube-node1", OVSRunDir: ovsRun})
	nodeUp := time.Since(begin)

	podsBegin := time.Now()
	c.runPod(t, n.Name, "pause", false)
	c.runPod(t, n.Name, "host", true)
	c.waitRunning(t, "pause", "host")
	podsUp := time.Since(podsBegin)

	pod, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), "host", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.PodIP != n.IP.String() {
		t.Errorf("hostNetwork pod IP %s, want the node IP %s", pod.Status.PodIP, n.IP)
	}
	// The hostPath /var/run/openvswitch is the node's OVS run directory.
	pid := containerPid(t, n, pod)
	if b, err := os.ReadFile("/proc/" + pid + "/root/ovs/marker"); err != nil || string(b) != "this node's OVS\n" {
		t.Errorf("container pid %s: /ovs/marker: %q, %v", pid, b, err)
	}
	pod, err = c.Client.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), "pause", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(pod.Status.PodIP); ip == nil || !ip.IsPrivate() || ip.String() == n.IP.String() {
		t.Errorf("pod IP %q, want one of the CNI bridge's subnet %s", pod.Status.PodIP, KubeNodePodSubnet)
	}

	inCluster := time.Now()
	c.checkInCluster(t, n)
	t.Logf("bring-up: control plane + node Ready %v; two pods Running %v; in-cluster API through the ClusterIP %v",
		nodeUp.Round(time.Millisecond), podsUp.Round(time.Millisecond), time.Since(inCluster).Round(time.Millisecond))
}

// TestKubeNodes runs two real nodes, in two namespaces, of one control
// plane, and a hostNetwork pod on each.
func TestKubeNodes(t *testing.T) {
	begin := time.Now()
	c := StartKubeCluster(t)
	var nodes []*KubeNode
	for i := range 2 {
		ns := NewNetns(t, "ovk")
		nodes = append(nodes, c.AddNode(t, ns, KubeNodeOptions{Name: fmt.Sprintf("kube-node%d", i+1)}))
	}
	nodesUp := time.Since(begin)
	podsBegin := time.Now()
	for _, n := range nodes {
		c.runPod(t, n.Name, "host-"+n.Name, true)
	}
	c.waitRunning(t, "host-kube-node1", "host-kube-node2")
	for _, n := range nodes {
		pod, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), "host-"+n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != n.Name || pod.Status.PodIP != n.IP.String() {
			t.Errorf("pod %s on %s with IP %s, want %s with %s", pod.Name, pod.Spec.NodeName, pod.Status.PodIP, n.Name, n.IP)
		}
		c.checkInCluster(t, n)
	}
	t.Logf("bring-up: control plane + 2 nodes Ready %v; a hostNetwork pod on each Running %v",
		nodesUp.Round(time.Millisecond), time.Since(podsBegin).Round(time.Millisecond))
}

// runPod creates pod name of PauseImage on node (bound by the scheduler
// through a node selector); a hostNetwork one mounts the hostPath
// /var/run/openvswitch on /ovs, as the chart's DaemonSet does.
func (c *KubeCluster) runPod(t *testing.T, node, name string, hostNetwork bool) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			HostNetwork:                   hostNetwork,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "pause", Image: PauseImage, ImagePullPolicy: corev1.PullNever,
			}},
		},
	}
	if hostNetwork {
		dir := corev1.HostPathDirectory
		pod.Spec.Volumes = []corev1.Volume{{Name: "ovs-run", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/var/run/openvswitch", Type: &dir}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "ovs-run", MountPath: "/ovs"}}
	}
	if _, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
}

// waitRunning waits until the pods are Running and ready.
func (c *KubeCluster) waitRunning(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		var last string
		err := waitFor(2*time.Minute, func() error {
			pod, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			last = fmt.Sprintf("%s %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
			if pod.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s: %s", name, last)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v", err)
		}
	}
}

// checkInCluster does what rest.InClusterConfig's client does, from the
// node's network namespace (a hostNetwork pod's): GET /version at
// https://KubeServiceIP:443 with a ServiceAccount token, trusting the
// kube-root-ca.crt ConfigMap's CA.
func (c *KubeCluster) checkInCluster(t *testing.T, n *KubeNode) {
	t.Helper()
	ctx := context.Background()
	cm, err := c.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kube-root-ca.crt: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data["ca.crt"])) {
		t.Fatalf("kube-root-ca.crt holds no certificate")
	}
	tr, err := c.Client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).CreateToken(ctx, "default",
		&authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	// Connections are dialled from the node's namespace, where kube-proxy's
	// rules are.
	dial := func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
		err = n.NS.Do(func() error {
			conn, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	var body string
	err = waitFor(30*time.Second, func() error {
		req, err := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(KubeServiceIP, "443")+"/version", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("node %s: in-cluster API at %s:443: %v", n.Name, KubeServiceIP, err)
	}
	t.Logf("node %s: GET https://%s:443/version from the node's namespace: %.60s...", n.Name, KubeServiceIP, body)
}

// TestKubeClusterNode makes a StartCluster node a real Kubernetes node: a
// hostNetwork pod there has the node's addresses and, at the hostPath
// /var/run/openvswitch, that node's OVS (its ovsdb-server's db.sock).
func TestKubeClusterNode(t *testing.T) {
	begin := time.Now()
	cl := StartCluster(t, ClusterOptions{Nodes: 1})
	c := StartKubeCluster(t)
	cn := cl.Nodes[0]
	n := c.AddClusterNode(t, cn)
	nodeUp := time.Since(begin)
	c.runPod(t, n.Name, "host", true)
	c.waitRunning(t, "host")
	pod, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), "host", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.PodIP != cn.IP.String() {
		t.Errorf("hostNetwork pod IP %s, want the node IP %s", pod.Status.PodIP, cn.IP)
	}
	pid := containerPid(t, n, pod)
	if st, err := os.Stat("/proc/" + pid + "/root/ovs/db.sock"); err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("container pid %s: /ovs/db.sock is not %s's ovsdb-server socket: %v", pid, cn.Name, err)
	}
	c.checkInCluster(t, n)
	t.Logf("bring-up: 1-node OVN cluster + control plane + node Ready %v", nodeUp.Round(time.Millisecond))
}

// containerPid returns the PID of the pod's first container's process.
func containerPid(t *testing.T, n *KubeNode, pod *corev1.Pod) string {
	t.Helper()
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	for _, line := range strings.Split(mustRun(t, nil, "ctr", "-n", "k8s.io", "--address", n.Socket, "tasks", "ls"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			return f[1]
		}
	}
	t.Fatalf("no task of container %s on %s", id, n.Name)
	return ""
}
