package helm

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovnedge/ovnedge/testbed"
)

// failoverPort is the UDP port of the Failover step's egress stream.
const failoverPort = egressPort + 1

// failover kills the node the EgressIP of Upgrade is assigned to as a
// machine dying would (its kubelet, its chassis, the kubelet-run ovnedge
// containers on it: the node pod and a leader pod if one runs there)
// while the sender pod on the other node streams UDP to the external
// client through the EgressIP; it measures the loss window until the
// stream arrives from the egress IP again (now via the surviving node),
// the time until the EgressIP's status names the surviving node and, if
// the dead node's leader pod held the Lease, the Lease's takeover; it
// reports what moved the IP (the leader's reachability check, before the
// Node goes NotReady). It then restores the node (chassis and kubelet
// restarted, every ovnedge pod Ready and Reconciled again) for Uninstall.
func (h *harness) failover(t *testing.T) {
	senderNode := h.cl.Nodes[0]
	// Both nodes egress-assignable: the surviving one can take the IP.
	for _, n := range h.cl.Nodes {
		h.labelEgress(t, n.Name, `""`)
	}
	time.Sleep(time.Second) // the leader sees the second egress node (it must not move the IP)
	from := h.egressNode(t)
	if from == "" || from == senderNode.Name {
		t.Fatalf("EgressIP %s on %q: want it on the node other than the sender's %s", egressName, from, senderNode.Name)
	}
	to := senderNode.Name
	stream := h.egressStream(t, failoverPort)
	defer stream.Stop()

	var sentAtKill uint64
	m := h.killMachine(t, from, func() { sentAtKill = stream.Sent() })
	kn, deadHolder, killed := m.kn, m.deadHolder, m.at

	// Until the status names the surviving node, the stream arrives from
	// the egress IP again and the Lease (if its holder died) is taken
	// over.
	var moved, back, takeover time.Duration
	var movedTo string
	var nodeReadyAtMove *corev1.NodeCondition
	var notReadyAt time.Duration
	h.eventually(t, 90*time.Second, "the EgressIP's status moved, the stream back from "+egressIP.String()+" and the Lease held", func() error {
		node, err := h.cs.CoreV1().Nodes().Get(h.ctx, from, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := nodeCondition(node, corev1.NodeReady)
		if notReadyAt == 0 && ready != nil && ready.Status != corev1.ConditionTrue {
			notReadyAt = time.Since(killed)
		}
		if moved == 0 {
			if n := h.egressNode(t); n != from && n != "" {
				moved, movedTo, nodeReadyAtMove = time.Since(killed), n, ready
			}
		}
		if back == 0 && stream.ArrivedAfter(sentAtKill+5, egressIP) == nil {
			back = time.Since(killed)
		}
		if deadHolder != "" && takeover == 0 {
			if hold := h.leaseHolder(t); hold != "" && !strings.HasPrefix(hold, deadHolder+"_") {
				takeover = time.Since(killed)
				t.Logf("the Lease taken over by %q after %v", hold, takeover.Round(time.Millisecond))
			}
		}
		switch {
		case moved == 0:
			return fmt.Errorf("EgressIP %s still on %q", egressName, h.egressNode(t))
		case back == 0:
			return fmt.Errorf("the stream not arriving from %s (last from %v)", egressIP, stream.LastFrom())
		case deadHolder != "" && takeover == 0:
			return fmt.Errorf("the Lease still held by %s", deadHolder)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // the stream after its return, for the window's end
	end := time.Now()
	gap, gapAt, other := egressGap(stream, egressIP, killed, end)
	_, lost := stream.Gap(killed)

	if movedTo != to {
		t.Errorf("EgressIP %s moved to %q, want the surviving node %s", egressName, movedTo, to)
	}
	if other > 0 {
		t.Errorf("%d packets of the stream arrived from another source than %s after the kill", other, egressIP)
	}
	// What moved it: the Node still Ready (its grace period not over) and
	// the leader's reachability line.
	var by string
	if nodeReadyAtMove != nil && nodeReadyAtMove.Status == corev1.ConditionTrue {
		by = fmt.Sprintf("Node %s still Ready (%s) when the status moved", from, nodeReadyAtMove.Reason)
	} else {
		by = fmt.Sprintf("Node %s %+v when the status moved", from, nodeReadyAtMove)
	}
	reach, reachAt := h.reachabilityLine(from, killed)
	if reach != "" {
		by += "; the leader's log: " + reach
	} else {
		by += "; no reachability line about " + from + " in the leaders' logs"
	}
	if notReadyAt > 0 {
		by += fmt.Sprintf("; the Node NotReady %v after the kill", notReadyAt.Round(time.Millisecond))
	}
	t.Logf("failover of %s: status moved to %s after %v, stream back from %s after %v; loss window %v (from %v after the kill), %d packets lost of %d; %s",
		from, movedTo, moved.Round(time.Millisecond), egressIP, back.Round(time.Millisecond), gap.Round(time.Millisecond),
		gapAt.Sub(killed).Round(time.Millisecond), lost, stream.Sent(), by)
	t.Logf("EgressIP events:\n%s", h.egressEvents())
	t.Logf("the leaders' egress lines:\n%s", h.env.LeaderLog("egress node reachability", "EgressIP status", "leader"))
	h.note("failover: egress stream loss window", fmt.Sprintf("%v (%d packets lost)", gap.Round(time.Millisecond), lost))
	h.measured("failover: chassis kill -> EgressIP status moved", moved)
	if reachAt > 0 {
		h.measured("failover: kill -> leader logs node unreachable", reachAt)
	}
	if deadHolder != "" {
		h.measured("failover: chassis kill -> Lease taken over", takeover)
	} else {
		h.note("failover: Lease takeover", "none (the holder ran on "+to+")")
	}
	if nodeReadyAtMove == nil || nodeReadyAtMove.Status != corev1.ConditionTrue || reach == "" {
		t.Errorf("the reachability check did not move the IP: %s", by)
	}

	h.restore(t, kn, from)
}

// victim is an ovnedge container a machine's death kills.
type victim struct {
	pod corev1.Pod
	pid int
}

// machineKill is what killMachine killed, and when.
type machineKill struct {
	kn      *testbed.KubeNode
	victims []victim
	// deadHolder is the leader pod that held the Lease and died with
	// the machine ("": the holder runs elsewhere).
	deadHolder string
	at         time.Time
}

// killMachine kills node as a machine dying would: its kubelet first (so
// that it restarts nothing; nothing the dataplane sees), then, after
// atKill, its chassis (silent, as a machine losing power), then its
// ovnedge containers (by PID: the node pod, and a leader pod if one runs
// there). A failure after it stops the test with the node dead: the
// cluster's teardown stops what is left of it by PID; h.restore brings
// it back.
func (h *harness) killMachine(t *testing.T, node string, atKill func()) *machineKill {
	m := &machineKill{kn: h.env.KubeNode(node)}
	if m.kn == nil {
		t.Fatalf("no kubelet node %s", node)
	}
	pods, err := h.pods(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName != node {
			continue
		}
		pid, err := containerPID(m.kn, &p)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); !strings.Contains(string(b), "ovnedge") {
			t.Fatalf("pid %d is %q, not ovnedge", pid, b)
		}
		m.victims = append(m.victims, victim{p, pid})
	}
	if !slices.ContainsFunc(m.victims, func(v victim) bool { return v.pod.Labels["app.kubernetes.io/component"] == "node" }) {
		t.Fatalf("no node pod on %s: %d pods there", node, len(m.victims))
	}
	holder := h.leaseHolder(t)
	var names []string
	for _, v := range m.victims {
		if v.pod.Labels["app.kubernetes.io/component"] == "leader" && strings.HasPrefix(holder, v.pod.Name+"_") {
			m.deadHolder = v.pod.Name
		}
		names = append(names, fmt.Sprintf("%s (pid %d)", v.pod.Name, v.pid))
	}
	t.Logf("killing %s: the Lease is held by %q (on the dying node: %v); pods there: %s",
		node, holder, m.deadHolder != "", strings.Join(names, ", "))
	kubeletPID := m.kn.KillKubelet(t)
	atKill()
	m.at = time.Now()
	h.cl.Node(node).Kill()
	for _, v := range m.victims {
		if err := syscall.Kill(v.pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s's pid %d: %v", v.pod.Name, v.pid, err)
		}
	}
	t.Logf("killed %s's kubelet (pid %d), chassis and %d ovnedge containers within %v", node, kubeletPID, len(m.victims),
		time.Since(m.at).Round(time.Millisecond))
	return m
}

func nodeCondition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// reachabilityLine is the first line of a leader container's log (on
// any node) written after since that says node is unreachable, and when
// it was written after since.
func (h *harness) reachabilityLine(node string, since time.Time) (string, time.Duration) {
	for line := range strings.SplitSeq(h.env.LeaderLog("egress node reachability"), "\n") {
		if !strings.Contains(line, "node="+node) || !strings.Contains(line, "reachable=false") {
			continue
		}
		// "<pod dir>: <RFC 3339 time> stdout F <message>"
		_, rest, _ := strings.Cut(line, ": ")
		ts, _, _ := strings.Cut(rest, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(since) {
			continue
		}
		return line, at.Sub(since)
	}
	return "", 0
}

// egressEvents are the events about EgressIP egressName.
func (h *harness) egressEvents() string {
	evs, err := h.cs.CoreV1().Events(metav1.NamespaceAll).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "EgressIP" && e.InvolvedObject.Name == egressName {
			out = append(out, fmt.Sprintf("%s %s %s: %s (x%d)", e.LastTimestamp.Format(time.TimeOnly), e.Type, e.Reason, e.Message, e.Count))
		}
	}
	return strings.Join(out, "\n")
}

// restore brings the killed node back as a rebooted machine: its chassis
// (testbed's Restart), its kubelet, which restarts the killed ovnedge
// containers; it returns once every ovnedge pod is Ready and Reconciled
// again, those on the node since the restore.
func (h *harness) restore(t *testing.T, kn *testbed.KubeNode, node string) {
	begin := time.Now()
	if cn := h.cl.Node(node); !cn.Alive() {
		cn.Restart()
	}
	chassis := time.Since(begin)
	kn.RestartKubelet(t)
	kubelet := time.Since(begin)
	h.eventually(t, 120*time.Second, "every ovnedge pod Running, Ready and Reconciled after the restore", func() error {
		return h.everyPodReady(func(p *corev1.Pod) error {
			if p.Spec.NodeName != node {
				return nil
			}
			if c := condition(p, corev1.PodReady); c != nil && !c.LastTransitionTime.After(begin.Add(-time.Second)) {
				return fmt.Errorf("pod %s Ready since %s, before the restore", p.Name, c.LastTransitionTime)
			}
			return nil
		})
	})
	h.measured("restore: chassis restarted", chassis)
	h.measured("restore: + kubelet restarted, Node Ready", kubelet)
	h.measured("restore: -> every ovnedge pod Ready again", time.Since(begin))
	t.Logf("after the restore, EgressIP %s on %s", egressName, h.egressNode(t))
}

// handOff proves leader.avoidEgressNodes on the two nodes: if the Lease's
// holder runs on the other node, that node is labelled egress-assignable
// and its leader must hand the Lease to the replica on node (then the
// label goes); then node is labelled, and its leader must hand the Lease
// to the replica on the other node. Each hand-over is timed from the
// label. (Deleting the holder's pod instead races the standby against the
// Deployment's new pod on the same node.)
func (h *harness) handOff(t *testing.T, node string) {
	other := h.cl.Nodes[0].Name
	if other == node {
		other = h.cl.Nodes[1].Name
	}
	if on, _ := h.holder(t); on == other {
		h.labelEgress(t, other, `""`)
		h.handedOff(t, other, node)
		h.labelEgress(t, other, "null")
	}
	h.labelEgress(t, node, `""`)
	h.handedOff(t, node, other)
	t.Logf("the leaders' hand-overs:\n%s", h.env.LeaderLog("handing the Lease"))
}

// labelEgress sets node's k8s.ovn.org/egress-assignable label to value
// (JSON: `""`, or null to remove it).
func (h *harness) labelEgress(t *testing.T, node, value string) {
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"k8s.ovn.org/egress-assignable":%s}}}`, value)
	if _, err := h.cs.CoreV1().Nodes().Patch(h.ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// handedOff waits until the Lease is held by the leader pod on to, once
// from was labelled egress-assignable, and measures the wait.
func (h *harness) handedOff(t *testing.T, from, to string) {
	labelled := time.Now()
	defer func() {
		if t.Failed() {
			t.Logf("the leaders' log on the Lease:\n%s", h.env.LeaderLog("Lease", "leader"))
		}
	}()
	h.eventually(t, wait, "the Lease handed from "+from+", now egress-assignable, to the replica on "+to, func() error {
		if on, pod := h.holder(t); on != to {
			return fmt.Errorf("held by %q on %q", pod, on)
		}
		return nil
	})
	took := time.Since(labelled)
	h.measured("node labelled egress-assignable -> its leader handed the Lease to the replica elsewhere", took)
	t.Logf("the leader on %s handed the Lease to the replica on %s %v after %s was labelled egress-assignable", from, to,
		took.Round(time.Millisecond), from)
}

// holder is the node and name of the leader pod holding the Lease (no
// node: the holder's identity, "" while the Lease is free).
func (h *harness) holder(t *testing.T) (node, pod string) {
	id := h.leaseHolder(t)
	pods, err := h.pods(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Labels["app.kubernetes.io/component"] == "leader" && strings.HasPrefix(id, p.Name+"_") {
			return p.Spec.NodeName, p.Name
		}
	}
	return "", id
}
