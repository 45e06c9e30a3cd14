package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/testbed"
)

// failure is one way an egress node stops serving, and how it comes back.
type failure struct {
	name string
	fail func(e *Env, node string) (restore func())
}

// failures are the ways an egress node is lost that the fast failover
// must handle: its chassis dies (with its ovnedge), its uplink goes down
// (the node reports NOT_SERVING), its uplink goes down while its
// ovn-controller lags (the chassis keeps the egress IP's NAT when its
// uplink is back: its ovnedge's fence must silence it), or only its
// ovnedge dies (the chassis keeps answering ARP for the egress IP until
// the leader silences it).
var failures = []failure{
	{"ChassisKilled", func(e *Env, n string) func() {
		e.KillNode(n)
		return func() { e.RestoreNode(n) }
	}},
	{"UplinkDown", func(e *Env, n string) func() {
		e.Node(n).SetUplink(false)
		return func() { e.Node(n).SetUplink(true) }
	}},
	{"UplinkDownControllerLagging", func(e *Env, n string) func() {
		e.Node(n).PauseController(true)
		e.Node(n).SetUplink(false)
		return func() {
			e.Node(n).SetUplink(true)
			// The chassis still has the egress IP's NAT: unless its
			// ovnedge fenced it, its gateway router answers ARP now.
			time.Sleep(time.Second)
			e.Node(n).PauseController(false)
		}
	}},
	{"OvnedgeKilled", func(e *Env, n string) func() {
		if err := e.Instance(n).Kill(); err != nil {
			e.t.Fatalf("e2e: %v", err)
		}
		return func() { e.RestoreNode(n) }
	}},
}

// fastEgress sets up namespace fast with a sender pod on ovn-worker and
// EgressIP fast (egress IP ip) and returns the pod.
func fastEgress(e *Env, ip netip.Addr) *testbed.Pod { return senderEgress(e, "fast", ip) }

// senderEgress sets up namespace name (label env=name) with a sender pod
// on ovn-worker and EgressIP name (egress IP ip) and returns the pod.
func senderEgress(e *Env, name string, ip netip.Addr) *testbed.Pod {
	e.CreateNamespace(name, map[string]string{"env": name})
	e.EnsurePod(ServerPod(name, "sender", w1, nil))
	e.ApplyYAML(`
apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: ` + name + `}
spec:
  egressIPs: [` + ip.String() + `]
  namespaceSelector: {matchLabels: {env: ` + name + `}}
`)
	return e.WaitPod(name, "sender")
}

// failoverOnce streams from pod to the external host (UDP port) every
// 10 ms while asking for the egress IP's MAC every 10 ms, fails the node
// EgressIP name puts ip on as f does, and returns the loss window, the old
// and new egress nodes, and the ARP watch (stopped). The node is restored
// before it returns.
func failoverOnce(t testbed.T, e *Env, pod *testbed.Pod, name string, eip netip.Addr, port uint16, f failure) (gap time.Duration, from, to string, w *ARPWatch) {
	t.Helper()
	return failoverTo(t, e, pod, name, eip, port, f, e.Client, netip.MustParseAddr(testbed.ClusterClientIP))
}

// failoverTo is failoverOnce with the stream to, and the ARP watch on the
// eth0 of, client (at dst).
func failoverTo(t testbed.T, e *Env, pod *testbed.Pod, name string, eip netip.Addr, port uint16, f failure, client *testbed.Netns, dst netip.Addr) (gap time.Duration, from, to string, w *ARPWatch) {
	t.Helper()
	from = e.EgressNode(name, eip, "")
	_, _ = client.RunErr("ip", "neigh", "flush", "dev", "eth0")
	w, err := StartARPWatch(client, "eth0", eip, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer w.Stop()
	s := egressStreamTo(t, e, pod, eip, client, dst, port, 30*time.Second)
	defer s.Stop()
	killed, sentAtKill := time.Now(), s.Sent()
	restore := f.fail(e, from)
	defer restore()
	to = e.EgressNode(name, eip, from)
	if err := poll(60*time.Second, func() error { return s.ArrivedAfter(sentAtKill+5, eip) }); err != nil {
		t.Fatalf("stream from the egress IP after %s (%s -> %s): %v\n%s\nleader:%s", f.name, from, to, err, e.Diagnose(), e.Leader.Process.Log())
	}
	time.Sleep(200 * time.Millisecond)
	gap, _ = s.Gap(killed)
	return gap, from, to, w
}

// TestFastFailover proves --egressip-fast-failover on real chassis: for
// each way of losing the egress node, the egress IP moves to the other
// egress node, packets leave with it again, and at no moment did two
// nodes answer ARP for it (the old owner is silenced before the new one
// announces); the last owner answering is the new node.
func TestFastFailover(t *testing.T) {
	env := shared.With(t)
	env.RestartLeader("--egressip-fast-failover")
	t.Cleanup(func() { shared.With(t).RestartLeader() })
	eip := netip.MustParseAddr("172.18.0.46")
	pod := fastEgress(env, eip)
	for i, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			e := env.With(t)
			gap, from, to, w := failoverOnce(t, e, pod, "fast", eip, uint16(9300+i), f)
			checkTakeover(t, e, f.name, eip, gap, from, to, w)
		})
	}
}

// checkTakeover logs a failover's loss window and ARP answers and fails t
// unless one node answered ARP for eip at a time, the new owner to last.
// On an overlap it logs the old owner's log and every answer.
func checkTakeover(t *testing.T, e *Env, what string, eip netip.Addr, gap time.Duration, from, to string, w *ARPWatch) {
	t.Helper()
	owners := w.Owners()
	named := make([]string, len(owners))
	for i, m := range owners {
		named[i] = nodeOfMAC(e, m)
	}
	t.Logf("%s: %s -> %s, loss window %v; ARP answered by %v (%d replies)", what, from, to,
		gap.Round(time.Millisecond), named, len(w.Replies()))
	if err := w.Overlap(); err != nil {
		t.Errorf("two nodes answered ARP for %s: %v (%v)", eip, err, named)
		if b, err := os.ReadFile(e.Instance(from).Log); err == nil {
			t.Logf("%s's ovnedge:\n%s", from, b)
		}
		for _, r := range w.Replies() {
			t.Logf("reply to request %d at %s from %s", r.Request, r.At.Format("15:04:05.000"), nodeOfMAC(e, r.MAC))
		}
	}
	if len(named) == 0 || named[len(named)-1] != to {
		t.Errorf("ARP for %s last answered by %v, want the new owner %s", eip, named, to)
	}
	if t.Failed() {
		// What the leader saw and decided: reachability and statuses.
		lines := leaderLines(e, time.Time{}, time.Now())
		t.Logf("the leader's egress lines:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// leads reports whether instance i's log says it became the leader.
func leads(i *Instance) error {
	b, err := os.ReadFile(i.Log)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), "became the cluster-wide leader") {
		return fmt.Errorf("%s does not lead", i.Log)
	}
	return nil
}

// TestLeaderDiesWithEgressNode: the leader runs on the egress node (a
// second leader pod there, as the Deployment's two replicas may land) and
// both die together. Nothing moves until the standby leader holds the
// Lease (15 s after the last renewal); then the egress IP moves and
// traffic leaves with it again. The window is the Lease's, and logged.
func TestLeaderDiesWithEgressNode(t *testing.T) {
	env := shared.With(t)
	env.RestartLeader("--egressip-fast-failover")
	t.Cleanup(func() { shared.With(t).RestartLeader() })
	eip := netip.MustParseAddr("172.18.0.46")
	pod := fastEgress(env, eip)
	from := env.EgressNode("fast", eip, "")
	env.EnsurePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ovnedge-leader-" + from},
		Spec: corev1.PodSpec{NodeName: from, ServiceAccountName: "ovnedge-leader",
			Containers: []corev1.Container{{Name: "ovnedge", Image: "ovnedge"}}}})
	lp := env.WaitPod("kube-system", "ovnedge-leader-"+from)
	second := env.start("leader-"+from, "", lp.Netns, "ovnedge-leader", env.LeaderArgs())
	t.Cleanup(func() {
		if second.Alive() {
			_ = second.Terminate()
		}
	})
	// Hand the Lease to the leader on the egress node: the first one
	// releases it on its way out, then comes back as the standby.
	if err := env.Leader.Terminate(); err != nil {
		t.Fatal(err)
	}
	env.Eventually(Timeout, "the leader on "+from+" leading", func() error { return leads(second) })
	env.RestartLeader("--egressip-fast-failover")

	f := failure{"LeaderAndChassisKilled", func(e *Env, n string) func() {
		if err := second.Kill(); err != nil {
			e.t.Fatalf("e2e: %v", err)
		}
		e.KillNode(n)
		return func() { e.RestoreNode(n) }
	}}
	gap, from2, to, w := failoverOnce(t, env, pod, "fast", eip, 9310, f)
	if from2 != from {
		t.Fatalf("the egress IP moved to %s before the kill", from2)
	}
	if err := w.Overlap(); err != nil {
		t.Errorf("two nodes answered ARP for %s: %v", eip, err)
	}
	t.Logf("leader and egress node %s killed together: %s took the egress IP after a loss window of %v (the Lease's %v bounds it)",
		from, to, gap.Round(time.Millisecond), 15*time.Second)
}
