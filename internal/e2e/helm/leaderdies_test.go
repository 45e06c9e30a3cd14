package helm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/internal/e2e/helmenv"
)

// leaderDiesWithEgressNode: with every node egress-assignable the
// Lease's holder cannot keep off the egress nodes (leader.avoidEgressNodes
// finds no successor), so it may die with one. The holder is moved onto
// the node that hosts the Upgrade step's EgressIP (the replicas elsewhere
// deleted until the one there leads) and that machine is killed as in
// Failover, while the sender pod on the other node streams UDP every
// 10 ms and the client asks ARP for the egress IP every 10 ms. Nothing can
// move the IP until the surviving replica holds the Lease, once it has
// expired: the loss window is the Lease's (internal/e2e's
// TestLeaderDiesWithEgressNode), and measured. The IP must then move to
// the surviving node, the stream arrive from it, and never two nodes
// answer ARP at once. The node is then restored.
func (h *harness) leaderDiesWithEgressNode(t *testing.T) {
	sender, node := h.cl.Nodes[0].Name, h.cl.Nodes[len(h.cl.Nodes)-1].Name
	for _, n := range h.cl.Nodes {
		h.labelEgress(t, n.Name, `""`)
	}
	h.egressOn(t, node, sender)
	h.leaseOn(t, node)
	_, _ = h.cl.Client.RunErr("ip", "neigh", "flush", "dev", "eth0")
	w, err := e2e.StartARPWatch(h.cl.Client, "eth0", egressIP, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	s := h.egressStream(t, matrixPort+10)
	defer s.Stop()
	var sentAtKill uint64
	m := h.killMachine(t, node, func() { sentAtKill = s.Sent() })
	if m.deadHolder == "" {
		t.Fatalf("the Lease's holder did not run on %s", node)
	}
	var takeover time.Duration
	h.eventually(t, 90*time.Second, "the stream from "+egressIP.String()+" through "+sender, func() error {
		if hold := h.leaseHolder(t); takeover == 0 && hold != "" && !strings.HasPrefix(hold, m.deadHolder+"_") {
			takeover = time.Since(m.at)
		}
		if on := h.egressNode(t); on != sender {
			return fmt.Errorf("EgressIP %s on %q", egressName, on)
		}
		return s.ArrivedAfter(sentAtKill+5, egressIP)
	})
	time.Sleep(300 * time.Millisecond) // the stream after its return, for the window's end
	w.Stop()
	gap, _, _ := egressGap(s, egressIP, m.at, time.Now())
	_, lost := s.Gap(m.at)
	lease := daemon.DefaultLease("")
	t.Logf("leader and egress node %s killed together: the Lease taken over by %q %v after the kill (its duration %v after the last renewal, then a candidate's next try); the EgressIP on %s after a loss window of %v (%d packets lost); ARP answered by %v",
		node, h.leaseHolder(t), takeover.Round(time.Millisecond), lease.Duration, sender, gap.Round(time.Millisecond), lost, h.namedOwners(w.Owners()))
	h.note("leader and egress node killed together: loss window", fmt.Sprintf("%v (the Lease taken over after %v)", gap.Round(time.Millisecond), takeover.Round(time.Millisecond)))
	if err := w.Overlap(); err != nil {
		t.Errorf("two nodes answered ARP for %s: %v", egressIP, err)
	}
	h.restore(t, m.kn, node)
}

// leaseOn deletes leader pods elsewhere (each releases the Lease on its
// way out; the Deployment makes another) until the Lease's holder runs on
// node.
func (h *harness) leaseOn(t *testing.T, node string) {
	h.eventually(t, 120*time.Second, "the Lease held by the leader pod on "+node, func() error {
		on, pod := h.holder(t)
		if on == node {
			return nil
		}
		if on != "" {
			_ = h.cs.CoreV1().Pods(helmenv.Namespace).Delete(h.ctx, pod, metav1.DeleteOptions{})
			time.Sleep(5 * time.Second) // the standby's next try
		}
		return fmt.Errorf("held by %q on %q", pod, on)
	})
	h.eventually(t, 90*time.Second, "every ovnedge pod Ready after the leader pods' deletion", func() error {
		return h.everyPodReady(func(*corev1.Pod) error { return nil })
	})
}

// namedOwners names the nodes whose breth0 has each of macs.
func (h *harness) namedOwners(macs []string) []string {
	out := make([]string, len(macs))
	for i, m := range macs {
		out[i] = h.nodeOfMAC(m)
	}
	return out
}
