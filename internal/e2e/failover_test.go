package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/internal/testbed"
)

// failure is one way an egress node stops serving, and how it comes back.
type failure struct {
	name string
	fail func(e *Env, node string) (restore func())
}

// failures are the ways an egress node is lost that the fast failover
// must handle: its chassis dies (with its ovnedge), its uplink goes down
// (the node reports NOT_SERVING), or only its ovnedge dies (the chassis
// keeps answering ARP for the egress IP until the leader silences it).
var failures = []failure{
	{"ChassisKilled", func(e *Env, n string) func() {
		e.KillNode(n)
		return func() { e.RestoreNode(n) }
	}},
	{"UplinkDown", func(e *Env, n string) func() {
		e.Node(n).SetUplink(false)
		return func() { e.Node(n).SetUplink(true) }
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
func fastEgress(e *Env, ip netip.Addr) *testbed.Pod {
	e.CreateNamespace("fast", map[string]string{"env": "fast"})
	e.CreatePod(ServerPod("fast", "sender", w1, nil))
	e.ApplyYAML(`
apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: fast}
spec:
  egressIPs: [` + ip.String() + `]
  namespaceSelector: {matchLabels: {env: fast}}
`)
	return e.WaitPod("fast", "sender")
}

// failoverOnce streams from pod to the external host every 10 ms while
// asking for the egress IP's MAC every 10 ms, fails the egress node as f
// does, and returns the loss window, the old and new egress nodes, and
// the ARP watch (stopped).
func failoverOnce(t testbed.T, e *Env, pod *testbed.Pod, eip netip.Addr, port uint16, f failure) (gap time.Duration, from, to string, w *ARPWatch) {
	t.Helper()
	from = assignedNode(t, e, "fast", eip, "")
	_, _ = e.Client.RunErr("ip", "neigh", "flush", "dev", "eth0")
	w, err := StartARPWatch(e.Client, "eth0", eip, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("%v", err)
	}
	s, err := StartStream(pod.Netns, e.Client, netip.AddrPortFrom(netip.MustParseAddr(testbed.ClusterClientIP), port), 10*time.Millisecond)
	if err != nil {
		w.Stop()
		t.Fatalf("%v", err)
	}
	e.Eventually(30*time.Second, "stream from the egress IP", func() error {
		if s.LastFrom() != eip {
			return fmt.Errorf("last from %v", s.LastFrom())
		}
		return nil
	})
	killed, sentAtKill := time.Now(), s.Sent()
	restore := f.fail(e, from)
	to = assignedNode(t, e, "fast", eip, from)
	e.Eventually(60*time.Second, "stream from the egress IP after "+f.name, func() error {
		return s.ArrivedAfter(sentAtKill+5, eip)
	})
	time.Sleep(200 * time.Millisecond)
	gap, _ = s.Gap(killed)
	s.Stop()
	w.Stop()
	restore()
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
			gap, from, to, w := failoverOnce(t, e, pod, eip, uint16(9300+i), f)
			owners := w.Owners()
			named := make([]string, len(owners))
			for i, m := range owners {
				named[i] = nodeOfMAC(e, m)
			}
			t.Logf("%s: %s -> %s, loss window %v; ARP answered by %v (%d replies)", f.name, from, to,
				gap.Round(time.Millisecond), named, len(w.Replies()))
			if err := w.Overlap(); err != nil {
				t.Errorf("two nodes answered ARP for %s: %v (%v)", eip, err, named)
			}
			if len(named) == 0 || named[len(named)-1] != to {
				t.Errorf("ARP for %s last answered by %v, want the new owner %s", eip, named, to)
			}
		})
	}
}
