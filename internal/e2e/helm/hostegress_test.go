package helm

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/testbed"
)

const (
	// the HostEgress step's EgressIP (also its namespace) and port
	hostEgressName = "hostegr"
	hostEgressPort = 9500
)

var hostEgressIP = netip.MustParseAddr("172.19.0.50")

// hostEgress proves an EgressIP on a host interface (the secondary host
// network of OVN-Kubernetes' EgressIP feature page) on the kubelet
// deployment, with egress.fastFailover on: every node gets a second host
// network (testbed's AddHostNetwork: eth2 on 172.19.0.0/24, a host at
// 172.19.0.100) and says so on its Node (k8s.ovn.org/host-cidrs, as
// ovnkube-node would); EgressIP hostegr's IP is in it. Its node pod alone
// starts a pod watch (kubewatch.PodsOnDemand), and a kubelet-run pod on
// the other node reaches the host from the egress IP through the egress
// node's eth2 (the Lease's holder on the other node). That machine is
// then killed as in Failover, while the pod
// streams UDP every 10 ms and the host asks ARP for the egress IP every
// 10 ms: the IP must move to the surviving node, the stream arrive from
// it again, and no two nodes answer ARP at once, the new owner last. The
// node is then restored.
func (h *harness) hostEgress(t *testing.T) {
	h.cl.AddHostNetwork()
	for _, n := range h.cl.Nodes {
		h.labelEgress(t, n.Name, `""`)
		h.hostCIDRs(t, n)
	}
	h.guarded(t)
	begin := time.Now()
	owner := h.hostEgressIP(t)
	// The Lease's holder on the other node: with every node
	// egress-assignable, it cannot keep off the one that dies, and a
	// leader dying with the egress node is bound by the Lease
	// (internal/e2e's TestLeaderDiesWithEgressNode).
	if on, _ := h.holder(t); on == owner {
		owner = h.moveOff(t, hostEgressName, hostEgressIP, owner)
	}
	var senderNode *testbed.ClusterNode
	for _, n := range h.cl.Nodes {
		if n.Name != owner {
			senderNode = n
		}
	}
	pod := h.env.RunPod(h.ctx, t, hostEgressName, senderName, senderNode.Name, map[string]string{"app": senderName})
	sender := h.env.KubeNode(senderNode.Name).PodNetns(h.t, pod.Status.ContainerStatuses[0].ContainerID)
	dst := netip.AddrPortFrom(netip.MustParseAddr(testbed.ClusterHostClientIP), hostEgressPort)
	s, err := e2e.StartStream(sender, h.cl.HostClient, dst, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	h.eventually(t, 30*time.Second, "the stream to the host arriving from "+hostEgressIP.String(), func() error {
		if from := s.LastFrom(); from != hostEgressIP {
			return fmt.Errorf("last from %v", from)
		}
		return nil
	})
	h.measured("host-interface EgressIP applied -> its pod's stream arriving from it", time.Since(begin))
	h.podWatchesOnlyOn(t, owner)

	w, err := e2e.StartARPWatch(h.cl.HostClient, "eth0", hostEgressIP, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var sentAtKill uint64
	m := h.killMachine(t, owner, func() { sentAtKill = s.Sent() })
	var moved time.Duration
	h.eventually(t, 90*time.Second, "the EgressIP moved and the stream back from "+hostEgressIP.String(), func() error {
		if moved == 0 {
			if n := h.hostEgressNode(t); n != owner && n != "" {
				moved = time.Since(m.at)
			}
		}
		if moved == 0 {
			return fmt.Errorf("EgressIP %s on %q", hostEgressName, h.hostEgressNode(t))
		}
		return s.ArrivedAfter(sentAtKill+5, hostEgressIP)
	})
	time.Sleep(300 * time.Millisecond) // the stream after its return, for the window's end
	w.Stop()
	gap, gapAt, other := egressGap(s, hostEgressIP, m.at, time.Now())
	_, lost := s.Gap(m.at)
	now := h.hostEgressNode(t)
	t.Logf("host-interface failover of %s: EgressIP %s on %s after %v; loss window %v (from %v after the kill), %d packets lost of %d; ARP answered by %v (%d replies)",
		owner, hostEgressName, now, moved.Round(time.Millisecond), gap.Round(time.Millisecond), gapAt.Sub(m.at).Round(time.Millisecond),
		lost, s.Sent(), h.hostOwners(w.Owners()), len(w.Replies()))
	h.note("host-interface failover: loss window", fmt.Sprintf("%v (%d packets lost)", gap.Round(time.Millisecond), lost))
	h.measured("host-interface failover: machine kill -> EgressIP status moved", moved)
	if now != senderNode.Name {
		t.Errorf("EgressIP %s on %q after %s died, want %s", hostEgressName, now, owner, senderNode.Name)
	}
	// The new egress node's ip rules and SNAT can lag the leader's
	// reroute to it (as in OVN-Kubernetes, whose ovnkube-node and
	// ovnkube-controller program them independently): its leak guard
	// drops what would leave unSNATed meanwhile.
	t.Logf("%s's leak guard: %s", now, h.guardDrops(t, now))
	if other > 0 {
		t.Errorf("%d packets of the stream arrived from another source than %s after the kill (all sources: %v)", other, hostEgressIP, s.Sources())
	}
	if on, _ := h.holder(t); on == owner {
		t.Errorf("the Lease's holder ran on %s, the killed egress node", owner)
	}
	if err := w.Overlap(); err != nil {
		t.Errorf("two nodes answered ARP for %s: %v (%v)", hostEgressIP, err, h.hostOwners(w.Owners()))
	}
	if o := h.hostOwners(w.Owners()); len(o) == 0 || o[len(o)-1] != now {
		t.Errorf("ARP for %s last answered by %v, want the owner %s", hostEgressIP, o, now)
	}
	h.restore(t, m.kn, owner)
}

// guarded waits for every node's leak guard on eth2, the link of its
// second host network, before any egress IP is assigned there.
func (h *harness) guarded(t *testing.T) {
	for _, n := range h.cl.Nodes {
		h.eventually(t, 30*time.Second, n.Name+"'s leak guard on eth2", func() error {
			out, err := n.NS.RunErr("nft", "list", "table", "inet", hostnet.GuardTable)
			if err != nil {
				return err
			}
			if !strings.Contains(out, `oifname "eth2" ct direction original`) {
				return fmt.Errorf("no rule on eth2:\n%s", out)
			}
			return nil
		})
	}
}

// guardDrops is what node's leak guard counted.
func (h *harness) guardDrops(t *testing.T, node string) string {
	out, err := h.cl.Node(node).NS.RunErr("nft", "list", "table", "inet", hostnet.GuardTable)
	if err != nil {
		return err.Error()
	}
	var counts []string
	for _, l := range strings.Split(out, "\n") {
		if _, after, ok := strings.Cut(l, "counter "); ok {
			c, _, _ := strings.Cut(after, " drop")
			counts = append(counts, c)
		}
	}
	return strings.Join(counts, "; ")
}

// hostCIDRs adds n's address on the second host network to its Node's
// k8s.ovn.org/host-cidrs, as ovnkube-node reports the node's addresses.
func (h *harness) hostCIDRs(t *testing.T, n *testbed.ClusterNode) {
	cidrs, err := json.Marshal([]string{fmt.Sprintf("%s/%d", n.IP, testbed.ClusterExtPrefix),
		fmt.Sprintf("%s/%d", n.IP6, testbed.ClusterExtPrefix6), n.HostIP.String() + "/24"})
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ovnknode.AnnotationHostCIDRs: string(cidrs)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.cs.CoreV1().Nodes().Patch(h.ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("host-cidrs of %s: %v", n.Name, err)
	}
}

// hostEgressIP creates namespace hostegr and EgressIP hostegr, whose IP
// is on the second host network and which selects that namespace, and
// returns the node it is assigned to.
func (h *harness) hostEgressIP(t *testing.T) string {
	if _, err := h.cs.CoreV1().Namespaces().Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostEgressName,
		Labels: map[string]string{"env": hostEgressName}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eip := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
		"metadata": map[string]any{"name": hostEgressName},
		"spec": map[string]any{"egressIPs": []any{hostEgressIP.String()},
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"env": hostEgressName}}}}}
	if _, err := h.dyn.Resource(e2e.EgressGVR).Create(h.ctx, eip, metav1.CreateOptions{}); err != nil {
		t.Fatalf("EgressIP %s: %v", hostEgressName, err)
	}
	t.Cleanup(func() { _ = h.dyn.Resource(e2e.EgressGVR).Delete(h.ctx, hostEgressName, metav1.DeleteOptions{}) })
	var owner string
	h.eventually(t, wait, "EgressIP "+hostEgressName+" assigned", func() error {
		if owner = h.hostEgressNode(t); owner == "" {
			return fmt.Errorf("not assigned")
		}
		return nil
	})
	return owner
}

// moveOff moves EgressIP name's ip off node (its egress-assignable
// label taken off until the IP has moved, then put back: ovnedge keeps
// an assignment that is still valid) and returns where it went.
func (h *harness) moveOff(t *testing.T, name string, ip netip.Addr, node string) string {
	h.labelEgress(t, node, "null")
	var to string
	h.eventually(t, wait, "EgressIP "+name+" off "+node, func() error {
		if to = h.statusNode(t, name, ip); to == node || to == "" {
			return fmt.Errorf("on %q", to)
		}
		return nil
	})
	h.labelEgress(t, node, `""`)
	time.Sleep(time.Second) // the leader sees node egress-assignable again (it must not move the IP)
	if now := h.statusNode(t, name, ip); now != to {
		t.Fatalf("EgressIP %s moved to %q once %s was egress-assignable again", name, now, node)
	}
	return to
}

// hostEgressNode is the node EgressIP hostegr's status puts its IP on.
func (h *harness) hostEgressNode(t *testing.T) string {
	return h.statusNode(t, hostEgressName, hostEgressIP)
}

// podWatchesOnlyOn checks that host's node pod, the one serving a
// host-interface egress IP, runs a pod watch, in the namespace the
// EgressIP selects, and no other node pod does (one that served the IP
// before has stopped its watch): a node watches only the pods its
// host-interface egress IPs serve.
func (h *harness) podWatchesOnlyOn(t *testing.T, host string) {
	for _, n := range h.cl.Nodes {
		started := strings.TrimSpace(h.env.NodeLog(n.Name, "pod watch started"))
		running := strings.Count(started, "pod watch started") - strings.Count(h.env.NodeLog(n.Name, "pod watch stopped"), "pod watch stopped")
		switch {
		case n.Name == host && running < 1:
			t.Errorf("%s serves a host-interface egress IP, but its node pod runs no pod watch:\n%s", n.Name, started)
		case n.Name == host && !strings.Contains(started, "namespace="+hostEgressName):
			t.Errorf("%s's node pod watches pods beyond namespace %s, the only one EgressIP %s selects:\n%s", n.Name, hostEgressName, hostEgressName, started)
		case n.Name != host && running != 0:
			t.Errorf("%s serves no host-interface egress IP, but its node pod runs %d pod watches:\n%s", n.Name, running, started)
		case started != "":
			t.Logf("%s's node pod: %s (%d running)", n.Name, started, running)
		}
	}
}

// hostOwners names the nodes whose second host interface has each of
// macs.
func (h *harness) hostOwners(macs []string) []string {
	out := make([]string, len(macs))
	for i, m := range macs {
		out[i] = "?" + m
		for _, n := range h.cl.Nodes {
			if strings.EqualFold(n.HostMAC, m) {
				out[i] = n.Name
			}
		}
	}
	return out
}
