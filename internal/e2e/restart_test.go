package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/testbed"
)

// TestLeaderRestartKeepsEgress streams UDP from a pod served by an
// EgressIP to the external host every 10 ms and restarts the leader: the
// new process takes the Lease and syncs the NB starting from the rows
// already there, so not one packet sent after the restart began is lost
// and every one leaves with the egress IP. (Starting from nothing, its
// first make-before-break step deleted the reroute: packets left with
// the node's IP until the next step put it back.)
func TestLeaderRestartKeepsEgress(t *testing.T) {
	e := shared.With(t)
	eip := netip.MustParseAddr("172.18.0.46")
	pod := fastEgress(e, eip)
	s := egressStream(t, e, pod, eip, 9320, 30*time.Second)
	defer s.Stop()
	const started = "northbound: starting from the rows in the NB"
	starts := func(log string) int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), started)
	}
	oldLog := e.Leader.Log
	before := starts(oldLog)
	restarted, first := time.Now(), s.Sent()+1
	e.RestartLeader()
	want := 1
	if e.Leader.Log == oldLog {
		want = before + 1 // the instances share the log file
	}
	e.Eventually(Timeout, "the restarted leader syncing the NB", func() error {
		if starts(e.Leader.Log) < want {
			return fmt.Errorf("%s has not connected to the NB as the leader", e.Leader.Log)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // its first sync and the drift repair after it
	last := s.Sent()
	if err := poll(10*time.Second, func() error { return s.ArrivedAfter(last, eip) }); err != nil {
		t.Fatalf("%v\n%s", err, e.Diagnose())
	}
	got := map[uint64]bool{}
	for _, a := range s.Arrivals() {
		if a.Seq >= first && a.Seq <= last {
			got[a.Seq] = true
			if a.From != eip {
				t.Errorf("packet #%d arrived from %v, want the egress IP %v", a.Seq, a.From, eip)
			}
		}
	}
	lost := int(last-first+1) - len(got)
	gap, _ := s.Gap(restarted)
	t.Logf("leader restarted: %d packets sent in %v, %d lost, longest gap %v", last-first+1,
		time.Since(restarted).Round(time.Millisecond), lost, gap.Round(time.Millisecond))
	if lost != 0 {
		t.Errorf("%d packets of the stream lost while the leader restarted", lost)
	}
	if b, err := os.ReadFile(e.Leader.Log); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "northbound") {
				t.Log(l)
			}
		}
	}
}

// egressStream starts a 10 ms UDP stream from pod to the external host's
// port and waits, up to within, until it arrives from the egress IP eip.
func egressStream(t testbed.T, e *Env, pod *testbed.Pod, eip netip.Addr, port uint16, within time.Duration) *Stream {
	t.Helper()
	return egressStreamTo(t, e, pod, eip, e.Client, netip.MustParseAddr(testbed.ClusterClientIP), port, within)
}

// egressStreamTo is egressStream to client (at dst).
func egressStreamTo(t testbed.T, e *Env, pod *testbed.Pod, eip netip.Addr, client *testbed.Netns, dst netip.Addr, port uint16, within time.Duration) *Stream {
	t.Helper()
	s, err := StartStream(pod.Netns, client, netip.AddrPortFrom(dst, port), 10*time.Millisecond)
	if err != nil {
		t.Fatalf("%v", err)
	}
	e.Eventually(within, "stream arriving from the egress IP", func() error {
		if s.LastFrom() != eip {
			return fmt.Errorf("last from %v", s.LastFrom())
		}
		return nil
	})
	return s
}
