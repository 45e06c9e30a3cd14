package reach_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/testbed"
)

// hbNode is one node of TestHeartbeatHeard: its monitor (asking whether
// it is heard) of the other node and its responder, which answers with
// the monitor's Age.
type hbNode struct {
	hb *reach.Heartbeat
	mu sync.Mutex
	// unheard is when this node first had no target that hears it, or
	// one that answers without hearing it (Hearing); down when it counted
	// the other down (zero: not yet).
	unheard, down time.Time
}

func (n *hbNode) times() (unheard, down time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.unheard, n.down
}

func (n *hbNode) reset() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.unheard, n.down = time.Time{}, time.Time{}
}

const hbInterval = 50 * time.Millisecond

// startHBNode runs a node on ns with address self monitoring other.
func startHBNode(t *testing.T, ns *testbed.Netns, self, other netip.Addr) *hbNode {
	t.Helper()
	n := &hbNode{}
	stamp := func(at *time.Time, bad bool) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if bad && at.IsZero() {
			*at = time.Now()
		}
	}
	var err error
	n.hb, err = reach.NewHeartbeat(reach.HeartbeatConfig{Interval: hbInterval, Misses: 3, Port: reach.DefaultHeartbeatPort,
		AskHeard: true, ListenPacket: nsListenPacket(ns), OnHearing: func(string) {
			_, heard, deaf := n.hb.Hearing()
			stamp(&n.unheard, heard == 0 || deaf > 0)
		}},
		func(_ string, up bool) { stamp(&n.down, !up) })
	if err != nil {
		t.Fatal(err)
	}
	n.hb.SetTargets([]reach.Target{{Node: "other", Addr: other}})
	serveIn(t, ns, reach.ServerConfig{Addr: self, HeartbeatPort: reach.DefaultHeartbeatPort, Hears: n.hb.Age})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.hb.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return n
}

// A node cut off in either direction stops counting itself heard (the
// daemon's L2 announcer then stops answering for its VIPs) at least one
// interval before the other node counts it down and takes over: with
// its requests dropped (it still hears the other's answers: the other
// is deaf to it), with both directions dropped (the other is silent),
// and with its answers' replies dropped (then the other never counts it
// down).
func TestHeartbeatHeard(t *testing.T) {
	t.Parallel()
	a, b := twoHosts(t)
	ipA, ipB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	na, nb := startHBNode(t, a, ipA, ipB), startHBNode(t, b, ipB, ipA)
	heardBoth := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			_, ha, _ := na.hb.Hearing()
			_, hb, _ := nb.hb.Hearing()
			if ha == 1 && hb == 1 && na.hb.Reachable("other") && nb.hb.Reachable("other") {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s: the nodes do not hear each other", what)
	}
	heardBoth("start")
	tests := []struct {
		name string
		drop [][]string // iptables rules in a's namespace
		// takeover: b counts a down.
		takeover bool
	}{
		{"requests to a dropped", [][]string{{"INPUT", "-p", "udp", "--dport", "9108", "-j", "DROP"}}, true},
		{"both ways", [][]string{{"INPUT", "-p", "udp", "--dport", "9108", "-j", "DROP"},
			{"INPUT", "-p", "udp", "--sport", "9108", "-j", "DROP"}}, true},
		{"answers to a dropped", [][]string{{"INPUT", "-p", "udp", "--sport", "9108", "-j", "DROP"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			na.reset()
			nb.reset()
			for _, r := range tc.drop {
				a.Run(t, append([]string{"iptables", "-I"}, r...)...)
			}
			cut := time.Now()
			time.Sleep(10 * hbInterval)
			for _, r := range tc.drop {
				a.Run(t, append([]string{"iptables", "-D"}, r...)...)
			}
			unheard, _ := na.times()
			_, down := nb.times()
			if unheard.IsZero() {
				t.Fatal("a still counts itself heard")
			}
			switch {
			case tc.takeover && down.IsZero():
				t.Error("b never counted a down")
			case tc.takeover && down.Sub(unheard) < hbInterval/2:
				t.Errorf("a stopped counting itself heard %v after the cut, b counted it down %v after: not an interval apart",
					unheard.Sub(cut), down.Sub(cut))
			case !tc.takeover && !down.IsZero():
				t.Errorf("b counted a down %v after the cut", down.Sub(cut))
			}
			if t.Logf("a unheard after %v", unheard.Sub(cut)); !down.IsZero() {
				t.Logf("b counted a down after %v", down.Sub(cut))
			}
			heardBoth("healed")
		})
	}
}
