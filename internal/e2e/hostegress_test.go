package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/testbed"
)

// hostEgress gives the cluster its second host network (every node's
// eth2 on 172.19.0.0/24, a plain kernel link, and a host at
// 172.19.0.100), tells the Node objects (k8s.ovn.org/host-cidrs, as
// ovnkube-node would), and sets up namespace hostegr with a sender pod on
// ovn-worker and EgressIP hostegr whose IP ip is in that network: seed
// 002's host-interface case. It returns the pod.
func hostEgress(t *testing.T, e *Env, ip netip.Addr) *testbed.Pod {
	t.Helper()
	e.AddHostNetwork()
	for _, n := range e.Nodes {
		cidrs, _ := json.Marshal([]string{fmt.Sprintf("%s/%d", n.IP, testbed.ClusterExtPrefix),
			fmt.Sprintf("%s/%d", n.IP6, testbed.ClusterExtPrefix6), n.HostIP.String() + "/24"})
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ovnknode.AnnotationHostCIDRs: string(cidrs)}}})
		if _, err := e.CS.CoreV1().Nodes().Patch(e.Context(), n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("host-cidrs of %s: %v", n.Name, err)
		}
	}
	t.Cleanup(func() {
		_ = e.Dyn.Resource(EgressGVR).Delete(e.Context(), "hostegr", metav1.DeleteOptions{})
	})
	return senderEgress(e, "hostegr", ip)
}

// partition cuts node off from the leader (its health check and
// heartbeat ports) and from the API server (both directions of the
// forwarded apiserver port inside its namespace), and returns the undo.
func partition(e *Env, node string) func() {
	_, port, _ := strings.Cut(strings.TrimPrefix(e.Kube.URL, "https://"), ":")
	rules := [][]string{
		{"INPUT", "-p", "udp", "--dport", "9108", "-j", "DROP"},
		{"INPUT", "-p", "tcp", "--dport", "9107", "-j", "DROP"},
		{"OUTPUT", "-o", "lo", "-p", "tcp", "--dport", port, "-j", "DROP"},
		{"OUTPUT", "-o", "lo", "-p", "tcp", "--sport", port, "-j", "DROP"},
	}
	ns := e.Node(node).NS
	for _, r := range rules {
		ns.Run(e.t, append([]string{"iptables", "-I"}, r...)...)
	}
	return func() {
		for _, r := range rules {
			_, _ = ns.RunErr(append([]string{"iptables", "-D"}, r...)...)
		}
	}
}

// hostFailures are the ways the node hosting a host-interface egress IP
// is lost: its machine dies (chassis and ovnedge killed, eth2 silent), its
// eth2 goes down (the node refuses the IP: moved at once), or it is cut
// off from both the leader and the API server (the leader holds the IP
// until the node's host lease has run out; the node withdraws it then),
// also with its ovnedge restarted while cut off (the new process finds
// the IP its predecessor left and withdraws it, never having reconciled).
var hostFailures = []failure{
	failures[0],
	{"HostLinkDown", func(e *Env, n string) func() {
		e.Node(n).SetHostLink(false)
		return func() { e.Node(n).SetHostLink(true) }
	}},
	{"Partitioned", partition},
	{"PartitionedLeaderReplaced", partitionLeaderReplaced},
	{"PartitionedRestarted", partitionRestarted},
}

// partitionRestarted partitions node and restarts its ovnedge (SIGKILL)
// while it is cut off: the new process cannot reach the API server, so it
// never reconciles, yet it must withdraw the egress IP its predecessor
// left on eth2 (its host lease starts run out) before the leader gives
// the IP to the other node.
func partitionRestarted(e *Env, node string) func() {
	undo := partition(e, node)
	wait := e.RestartNodeUnready(node)
	return func() {
		undo()
		wait()
	}
}

// ownedBy makes node the owner of EgressIP name's ip: the current
// owner's k8s.ovn.org/egress-assignable label is taken off until the IP
// has moved, then put back.
func ownedBy(t *testing.T, e *Env, name string, ip netip.Addr, node string) {
	t.Helper()
	from := e.EgressNode(name, ip, "")
	if from == node {
		return
	}
	label := func(v any) {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"k8s.ovn.org/egress-assignable": v}}})
		if _, err := e.CS.CoreV1().Nodes().Patch(e.Context(), from, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("label %s: %v", from, err)
		}
	}
	label(nil)
	defer label("")
	if to := e.EgressNode(name, ip, from); to != node {
		t.Fatalf("%s moved from %s to %s, want %s", ip, from, to, node)
	}
}

// partitionLeaderReplaced partitions node, waits until the leader has
// released the egress IP of EgressIP hostegr (its status names no node:
// the leader holds it until the node's host lease has run out), and
// replaces the leader then: the new leader, which never saw the release,
// must read the hold back from the node's report in the API server and
// not give the IP to another node while the partitioned one may still
// answer for it.
func partitionLeaderReplaced(e *Env, node string) func() {
	undo := partition(e, node)
	e.Eventually(10*time.Second, "hostegr's egress IP released", func() error {
		u, err := e.Dyn.Resource(EgressGVR).Get(e.Context(), "hostegr", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st, _, _ := unstructured.NestedSlice(u.Object, "status", "items"); len(st) > 0 {
			return fmt.Errorf("status %v", st)
		}
		return nil
	})
	e.RestartLeader("--egressip-fast-failover")
	return undo
}

// TestHostEgressFailover proves an egress IP on a host interface (the
// secondary-interface case of OVN-Kubernetes' EgressIP feature page) on
// the cluster with --egressip-fast-failover: the pod's packets reach the
// host on the second network from the egress IP, through the egress
// node's eth2 (its ip rules and SNAT); for each way of losing that node
// the IP moves to the other egress node, packets leave with it again, the
// loss window is logged, and an ARP request every 10 ms never got two
// answers nor answers that went back to the old node (the old node's
// kernel is silent before the new one adds the address; its gratuitous
// ARP then points the host at it). A node whose eth2 is down reports the
// IP refused on its Node, with an EgressIPHostRequirement event. An
// ovs-vswitchd crash, on the sender's node or the egress node, costs
// packets but moves nothing.
func TestHostEgressFailover(t *testing.T) {
	env := shared.With(t)
	env.RestartLeader("--egressip-fast-failover")
	t.Cleanup(func() { shared.With(t).RestartLeader() })
	eip := netip.MustParseAddr("172.19.0.50")
	begin := time.Now()
	pod := hostEgress(t, env, eip)
	podWatchesOnlyOn(t, env, env.EgressNode("hostegr", eip, ""), begin)
	dst := netip.MustParseAddr(testbed.ClusterHostClientIP)
	for i, f := range hostFailures {
		t.Run(f.name, func(t *testing.T) {
			e := env.With(t)
			if f.name == "PartitionedLeaderReplaced" {
				// With the nodes' loads equal, a new leader with no hold
				// would give the IP to w2 (ties go by name) at once.
				ownedBy(t, e, "hostegr", eip, w3)
			}
			gap, from, to, w := failoverTo(t, e, pod, "hostegr", eip, uint16(9400+i), f, e.HostClient, dst)
			checkTakeover(t, e, f.name, eip, gap, from, to, w)
			if f.name == "HostLinkDown" {
				hostRefusal(t, e, from, eip)
			}
		})
	}
	for i, node := range []string{w1, ""} {
		t.Run(fmt.Sprintf("VswitchdCrash/%d", i), func(t *testing.T) {
			vswitchdCrash(t, env.With(t), pod, eip, node, uint16(9410+i))
		})
	}
}

// podWatchesOnlyOn checks that since begin the node instance of host, the
// node hosting an egress IP on a host interface, started a pod watch for
// it and no other node instance did: a node watches only the pods its
// host-interface egress IPs serve (kubewatch.PodsOnDemand).
func podWatchesOnlyOn(t *testing.T, e *Env, host string, begin time.Time) {
	t.Helper()
	for _, n := range []string{w1, w2, w3} {
		started := logLines(e.Instance(n).Log, begin.Add(time.Second), time.Now(), `msg="pod watch started"`)
		if n == host && len(started) == 0 {
			t.Errorf("%s hosts the egress IP on a host interface, but its node instance started no pod watch", n)
		}
		if n != host && len(started) > 0 {
			t.Errorf("%s hosts no egress IP on a host interface, but its node instance watches pods:\n%s", n, strings.Join(started, "\n"))
		}
	}
}

// vswitchdCrash crashes ovs-vswitchd on node (the egress node when "")
// under a stream from pod to the host client, as OVS 3.1.0's userspace
// conntrack assertion does: its monitor restarts it, ovn-controller and
// ovnedge program it again, and the stream arrives from eip once more,
// with the egress IP where it was.
func vswitchdCrash(t *testing.T, e *Env, pod *testbed.Pod, eip netip.Addr, node string, port uint16) {
	owner := e.EgressNode("hostegr", eip, "")
	if node == "" {
		node = owner
	}
	s := egressStreamTo(t, e, pod, eip, e.HostClient, netip.MustParseAddr(testbed.ClusterHostClientIP), port, 30*time.Second)
	defer s.Stop()
	at, sent := time.Now(), s.Sent()
	e.Node(node).CrashVswitchd()
	e.Eventually(30*time.Second, "stream from the egress IP after the crash", func() error {
		return s.ArrivedAfter(sent+5, eip)
	})
	gap, _ := s.Gap(at)
	t.Logf("ovs-vswitchd of %s crashed (egress node %s): loss window %v", node, owner, gap.Round(time.Millisecond))
	if now := e.EgressNode("hostegr", eip, ""); now != owner {
		t.Errorf("egress IP moved from %s to %s on a crash of %s's ovs-vswitchd; the leader's decisions:\n%s\n%s's:\n%s", owner, now, node,
			strings.Join(leaderLines(e, at, time.Now()), "\n"), owner,
			strings.Join(logLines(e.Instance(owner).Log, at, time.Now(), "heartbeat", "host", "egress", "WARN", "ERROR"), "\n"))
	}
}

// hostRefusal checks that node reported eip refused (its Node's
// annotation, as written before its eth2 came back) through the event
// the node recorded on the EgressIP.
func hostRefusal(t *testing.T, e *Env, node string, eip netip.Addr) {
	t.Helper()
	evs, err := e.CS.CoreV1().Events("").List(e.Context(), metav1.ListOptions{FieldSelector: "reason=" + egress.ReasonHostRequirement})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if ev.InvolvedObject.Name == "hostegr" && strings.Contains(ev.Message, node) && strings.Contains(ev.Message, eip.String()) {
			t.Logf("event on EgressIP hostegr: %s", ev.Message)
			return
		}
	}
	t.Errorf("no %s event of %s for %s", egress.ReasonHostRequirement, node, eip)
}
