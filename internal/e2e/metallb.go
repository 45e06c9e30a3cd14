package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovnedge/ovnedge/testbed"
)

// MetalLBNamespace is the namespace of MetalLB's manifest.
const MetalLBNamespace = "metallb-system"

// MetalLB is MetalLB itself (go.universe.tf/metallb, the version
// scripts/metallb.sh pins) running on the cluster: its controller and one
// speaker per node, in native (L2) mode, with its CRDs and its manifest's
// RBAC (StartMetalLB).
type MetalLB struct {
	e          *Env
	Controller *testbed.Process
	// Speakers are the speakers by node name.
	Speakers map[string]*testbed.Process
}

// metallbManifestKinds are the kinds of MetalLB's metallb-native.yaml
// StartMetalLB applies: all but the CRDs (applied from the module's
// config/crd/bases, without the conversion webhook the manifest patches
// in) and the webhook's Secret, Service and ValidatingWebhookConfiguration
// (the controller runs with --webhook-mode=disabled).
var metallbManifestKinds = map[string]bool{"Namespace": true, "ServiceAccount": true, "Role": true, "ClusterRole": true,
	"RoleBinding": true, "ClusterRoleBinding": true, "ConfigMap": true, "Deployment": true, "DaemonSet": true}

// StartMetalLB runs MetalLB on the cluster until t ends, as its
// metallb-native.yaml deploys it, with the harness in the kubelet's and
// the Deployment and DaemonSet controllers' place:
//
//   - the binaries built by scripts/metallb.sh (controller and speaker of
//     the pinned release, `go install`ed on first use), its CRDs from the
//     Go module's config/crd/bases, and from config/manifests/
//     metallb-native.yaml its namespace, ServiceAccounts, RBAC (the
//     controller and the speakers use tokens of their own ServiceAccounts
//     controller and speaker, so MetalLB runs with MetalLB's RBAC), the
//     excludel2 ConfigMap and the (inert: no controller runs them)
//     Deployment and DaemonSet;
//   - the Pod objects the controllers would create (controller-0, and
//     speaker-<node> on every node, host network, their IP the node's),
//     which MetalLB reads for owner references and memberlist discovery;
//   - the controller (outside the nodes: it only talks to the API
//     server), its metrics off and its webhook disabled
//     (--webhook-mode=disabled; cert rotation is then off too), creating
//     the memberlist Secret as in the manifest (METALLB_ML_SECRET_NAME=
//     memberlist, METALLB_DEPLOYMENT=controller);
//   - a speaker inside every node's network namespace with the
//     DaemonSet's environment: METALLB_NODE_NAME, METALLB_POD_NAME,
//     METALLB_HOST and METALLB_ML_BIND_ADDR (the node's IP),
//     METALLB_ML_LABELS, and the memberlist key, the Secret's secretkey,
//     in a file under METALLB_ML_SECRET_KEY_PATH (where the kubelet would
//     mount it).
//
// It returns once every process runs; MetalLB's configuration
// (IPAddressPools, L2Advertisements) is the test's.
func (e *Env) StartMetalLB(t testbed.T) *MetalLB {
	t.Helper()
	bin := e.metallbScript(t)
	crds := e.metallbScript(t, "crds")
	e.ApplyFile(crds)
	manifest, err := os.ReadFile(filepath.Join(crds, "..", "..", "manifests", "metallb-native.yaml"))
	if err != nil {
		t.Fatalf("e2e: MetalLB manifest: %v", err)
	}
	e.applyYAML(string(manifest), func(u *unstructured.Unstructured) bool { return metallbManifestKinds[u.GetKind()] })

	m := &MetalLB{e: e, Speakers: map[string]*testbed.Process{}}
	labels := func(component string) map[string]string {
		return map[string]string{"app": "metallb", "component": component}
	}
	first := e.Nodes[0]
	e.metallbPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "controller-0", Labels: labels("controller")},
		Spec: corev1.PodSpec{NodeName: first.Name, ServiceAccountName: "controller",
			Containers: []corev1.Container{{Name: "controller", Image: "quay.io/metallb/controller"}}}}, first.IP.String())
	for _, n := range e.Nodes {
		e.metallbPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "speaker-" + n.Name, Labels: labels("speaker")},
			Spec: corev1.PodSpec{NodeName: n.Name, ServiceAccountName: "speaker", HostNetwork: true,
				Containers: []corev1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker"}}}}, n.IP.String())
	}

	env := []string{"METALLB_NAMESPACE=" + MetalLBNamespace, "KUBECONFIG=" + e.kubeconfigIn(MetalLBNamespace, "controller"),
		"METALLB_POD_NAME=controller-0", "METALLB_ML_SECRET_NAME=memberlist", "METALLB_DEPLOYMENT=controller"}
	m.Controller = testbed.StartProcess(t, "metallb controller", filepath.Join(e.Kube.Dir, "metallb-controller.log"), env,
		filepath.Join(bin, "controller"), "--port=0", "--health-probe-port=0", "--log-level=info", "--webhook-mode=disabled")

	var key []byte
	e.Eventually(Timeout, "MetalLB's memberlist Secret", func() error {
		if !m.Controller.Alive() {
			return fmt.Errorf("the controller exited%s", m.Controller.Log())
		}
		s, err := e.CS.CoreV1().Secrets(MetalLBNamespace).Get(e.ctx, "memberlist", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if key = s.Data["secretkey"]; len(key) == 0 {
			return errors.New("no secretkey")
		}
		return nil
	})
	keyDir := filepath.Join(e.Kube.Dir, "metallb-memberlist")
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	if err := os.WriteFile(filepath.Join(keyDir, "secretkey"), key, 0o600); err != nil {
		t.Fatalf("e2e: %v", err)
	}

	kubeconfig := e.kubeconfigIn(MetalLBNamespace, "speaker")
	for _, n := range e.Nodes {
		e.forwardAPI(n.NS)
		ip := n.IP.String()
		env := []string{"METALLB_NAMESPACE=" + MetalLBNamespace, "KUBECONFIG=" + kubeconfig,
			"METALLB_NODE_NAME=" + n.Name, "METALLB_POD_NAME=speaker-" + n.Name, "METALLB_HOST=" + ip,
			"METALLB_ML_BIND_ADDR=" + ip, "METALLB_ML_LABELS=app=metallb,component=speaker", "METALLB_ML_SECRET_KEY_PATH=" + keyDir}
		m.Speakers[n.Name] = testbed.StartProcess(t, "metallb speaker "+n.Name, filepath.Join(e.Kube.Dir, "metallb-speaker-"+n.Name+".log"), env,
			"ip", "netns", "exec", n.NS.Name, filepath.Join(bin, "speaker"), "--port=0", "--health-probe-port=0", "--log-level=info")
	}
	return m
}

// metallbScript runs scripts/metallb.sh with args and returns what it
// prints (a directory).
func (e *Env) metallbScript(t testbed.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(e.root, "scripts", "metallb.sh"), args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = e.root, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("e2e: scripts/metallb.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// metallbPod creates (or re-creates) pod p in MetalLB's namespace as the
// Deployment or DaemonSet controller would, Running with IP ip, and
// deletes it when t ends.
func (e *Env) metallbPod(t testbed.T, p *corev1.Pod, ip string) {
	t.Helper()
	p.Namespace = MetalLBNamespace
	api := e.CS.CoreV1().Pods(MetalLBNamespace)
	err := api.Delete(e.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("e2e: delete pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	var created *corev1.Pod
	e.Eventually(Timeout, "pod "+p.Namespace+"/"+p.Name+" created", func() (err error) {
		created, err = api.Create(e.ctx, p, metav1.CreateOptions{})
		return err
	})
	t.Cleanup(func() { _ = api.Delete(e.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}) })
	now := metav1.Now()
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, HostIP: ip, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if _, err := api.UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("e2e: pod %s/%s status: %v", p.Namespace, p.Name, err)
	}
}

// StopSpeaker terminates node's speaker (SIGTERM: it leaves the
// memberlist cluster, as when its pod is deleted).
func (m *MetalLB) StopSpeaker(node string) {
	t := m.e.t
	t.Helper()
	if err := m.Speakers[node].Terminate(); err != nil {
		t.Fatalf("e2e: stop MetalLB speaker on %s: %v", node, err)
	}
}

// Logs returns the tails of the controller's and the speakers' logs, for
// failure messages.
func (m *MetalLB) Logs() string {
	var b strings.Builder
	b.WriteString(m.Controller.Log())
	for _, n := range m.e.Nodes {
		if s := m.Speakers[n.Name]; s != nil {
			b.WriteString(s.Log())
		}
	}
	return b.String()
}
