package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/readiness"
)

// TestReadinessAndUninstall runs `ovnedge daemon` as a Pod's process
// would (POD_NAME, POD_NAMESPACE) and checks that it is ready only while
// its own work succeeds, with the reason on /readyz, in the Pod's
// ovnedge.io/Reconciled condition and in an event:
//   - an uplink that is not on the bridge: not ready (NodeReconcileFailed);
//   - no uplink given: found from the bridge, ready;
//   - a leader whose NB cannot be reached: not ready (ClusterReconcileFailed),
//     and with --leader-step-down-after it releases the Lease;
//
// then that `ovnedge uninstall` has it remove everything it wrote: the NB
// rows it owns, its flows, the Lease, and leaves it idle.
//
// The Pod is an object only (no kubelet here); its status is what the
// daemon writes.
func TestReadinessAndUninstall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startCluster(t)
	const ns, name = "kube-system", "ovnedge-node-test"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": "ovnedge"}},
		Spec: corev1.PodSpec{NodeName: egressNode, Containers: []corev1.Container{{Name: "ovnedge", Image: "ovnedge:test"}}}}
	if _, err := c.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env := []string{"POD_NAME=" + name, "POD_NAMESPACE=" + ns}

	a := c.startWith(t, egressNode, nil, env, false, "--uplink", "nope")
	c.notReady(t, a, daemonReason("NodeReconcileFailed"), `"nope"`)
	c.podReady(t, ns, name, corev1.ConditionFalse, "NodeReconcileFailed", "NotReady")
	if err := a.Terminate(); err != nil {
		t.Fatal(err)
	}

	a = c.startWith(t, egressNode, a.ovs, env, true)
	c.podReady(t, ns, name, corev1.ConditionTrue, "Reconciled", "Ready")
	if log, _ := os.ReadFile(a.log); !strings.Contains(string(log), `msg=uplink bridge=br-ex port=eth0 found=true`) {
		t.Errorf("the uplink found from the bridge is not logged:\n%s", a.Log())
	}
	c.waitLeader(t, a)
	if err := a.Terminate(); err != nil {
		t.Fatal(err)
	}

	dead := fmt.Sprintf("tcp:127.0.0.1:%d", freePort(t))
	a = c.startWith(t, egressNode, a.ovs, env, false, "--nb-address", dead)
	c.waitLeader(t, a)
	c.notReady(t, a, daemonReason("ClusterReconcileFailed"), "127.0.0.1")
	c.podReady(t, ns, name, corev1.ConditionFalse, "ClusterReconcileFailed", "NotReady")
	if err := a.Terminate(); err != nil {
		t.Fatal(err)
	}

	// With --leader-step-down-after the leader that cannot reach the NB
	// releases the Lease for another candidate.
	a = c.startWith(t, egressNode, a.ovs, env, false, "--nb-address", dead, "--leader-step-down-after", "1s")
	c.poll(t, "the leader to step down and release the Lease", func(ctx context.Context) error {
		log, _ := os.ReadFile(a.log)
		l, err := c.lease(ctx)
		switch {
		case err != nil:
			return err
		case !strings.Contains(string(log), "stepping down"):
			return fmt.Errorf("not stepped down; Lease held by %q", l.holder)
		case l.holder != "" && a.holds(l.holder):
			return fmt.Errorf("stepped down, but the Lease is still held by %q", l.holder)
		}
		return nil
	})
	if err := a.Terminate(); err != nil {
		t.Fatal(err)
	}

	a = c.startWith(t, egressNode, a.ovs, env, true)
	c.poll(t, "the Northbound rows of the demo", func(context.Context) error { return wantNB(c.nbRows(), podIP) })
	c.reconciled(t, a, "node")
	if owned := ownedFlowLines(flows(a.ovs)); len(owned) == 0 {
		t.Fatal("no ovnedge flow on the bridge before the uninstall")
	}
	uninstall := exec.Command(c.bin, "uninstall", "--kubeconfig", c.kubeconfig, "--namespace", ns, "--uninstall-timeout", "60s")
	out, err := uninstall.CombinedOutput()
	t.Logf("ovnedge uninstall:\n%s", out)
	if err != nil || !strings.Contains(string(out), "every instance removed what it wrote") {
		t.Fatalf("ovnedge uninstall: %v", err)
	}
	c.podReady(t, ns, name, corev1.ConditionFalse, "Uninstalled", "NotReady")
	if rows := c.nbRows(); len(rows) != 0 {
		t.Errorf("NB rows left after the uninstall:\n%s", strings.Join(rows, "\n"))
	}
	if owned := ownedFlowLines(flows(a.ovs)); len(owned) != 0 {
		t.Errorf("ovnedge flows left after the uninstall:\n%s", strings.Join(owned, "\n"))
	}
	if l, err := c.lease(ctx); err == nil {
		t.Errorf("the Lease is still there, held by %q", l.holder)
	}
	if _, err := c.cs.CoreV1().ConfigMaps(ns).Get(ctx, daemon.UninstallMarker, metav1.GetOptions{}); err == nil {
		t.Error("the uninstall marker is still there")
	}
	if !a.Alive() {
		t.Errorf("the instance exited after the uninstall instead of staying idle:%s", a.Log())
	}
}

// ownedFlowLines are the flows of lines (a dump) that are ovnedge's
// (brex.Owns with the gateway flows: its cookies and the gateway's shape).
func ownedFlowLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if f, err := ovsflow.ParseFlow(l); err == nil && brex.Owns(true)(f.ID()) {
			out = append(out, l)
		}
	}
	return out
}

// daemonReason is a readiness reason as /readyz gives it.
func daemonReason(r string) string { return "not ready: " + r }

// notReady waits until the instance's /readyz answers 503 with all of want
// in its body.
func (c *cluster) notReady(t testing.TB, i *instance, want ...string) {
	t.Helper()
	c.poll(t, "ovnedge "+i.node+" not ready with "+strings.Join(want, ", "), func(ctx context.Context) error {
		body, err := i.get(ctx, "/readyz")
		if err == nil {
			return fmt.Errorf("ready: %s", body)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				return fmt.Errorf("/readyz says %q", body)
			}
		}
		return nil
	})
}

// podReady waits until the Pod's ovnedge.io/Reconciled condition has
// status and reason and an event of eventReason is recorded on the Pod.
func (c *cluster) podReady(t testing.TB, ns, name string, status corev1.ConditionStatus, reason, eventReason string) {
	t.Helper()
	c.poll(t, fmt.Sprintf("Pod %s/%s %s=%s (%s)", ns, name, readiness.Condition, status, reason), func(ctx context.Context) error {
		p, err := c.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == readiness.Condition {
				if cond.Status != status || cond.Reason != reason || (status == corev1.ConditionTrue) != (cond.Message == "") {
					return fmt.Errorf("%s %s: %s", cond.Status, cond.Reason, cond.Message)
				}
				t.Logf("Pod %s/%s: %s=%s %s: %s", ns, name, cond.Type, cond.Status, cond.Reason, cond.Message)
				return nil
			}
		}
		return fmt.Errorf("no %s condition: %v", readiness.Condition, p.Status.Conditions)
	})
	c.poll(t, "a "+eventReason+" event on Pod "+name, func(ctx context.Context) error {
		evs, err := c.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == name && e.Reason == eventReason &&
				(status == corev1.ConditionTrue || strings.Contains(e.Message, reason)) {
				return nil
			}
		}
		var seen []string
		for _, e := range evs.Items {
			seen = append(seen, fmt.Sprintf("%s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message))
		}
		return fmt.Errorf("none among %q", seen)
	})
}
