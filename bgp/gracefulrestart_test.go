//go:build !race

// GoBGP v4.8.0, as the graceful restart helper, marks paths stale in its
// FSM goroutine while ListPath reads them in its server goroutine, with no
// lock between them: -race reports GoBGP's race, not ours. This test is
// therefore built without -race only, and `make test` runs it in a pass of
// its own without -race (the restart is also proven with -race against FRR:
// internal/e2e TestBGP/GracefulRestart).

package bgp

import (
	"net/netip"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// TestGracefulRestart: the speaker goes away without a notification; the
// router keeps its routes (stale) until the restarted speaker's
// End-of-RIB, then holds exactly what it announced again. (That traffic
// keeps flowing meanwhile is proven against FRR: internal/e2e TestBGP.)
func TestGracefulRestart(t *testing.T) {
	router, node := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	rt := newTestPeer(t, router, true, node)
	cfg := Config{ASN: nodeASN, RouterID: node, GracefulRestart: 30 * time.Second,
		Peers: []Peer{{Address: router, ASN: peerASN, Port: uint16(rt.port), LocalAddress: node}}}
	s := startSpeaker(t, cfg)
	if err := s.Announce(prefixes("172.18.0.50/32", "172.18.0.51/32")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "session up", func() bool {
		st, _ := rt.session(node)
		return st == api.PeerState_SESSION_STATE_ESTABLISHED
	})
	time.Sleep(500 * time.Millisecond)
	if got := rt.routes(gobgp.RF_IPv4_UC); len(got) != 2 {
		t.Fatalf("the router holds %v, want two routes", got)
	}
	if err := s.Close(true); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "session down", func() bool {
		st, _ := rt.session(node)
		return st != api.PeerState_SESSION_STATE_ESTABLISHED
	})
	time.Sleep(500 * time.Millisecond)
	got := rt.routes(gobgp.RF_IPv4_UC)
	if len(got) != 2 || !got[netip.MustParsePrefix("172.18.0.50/32")][0].Stale {
		t.Fatalf("after a graceful stop the router holds %+v, want both routes, stale", got)
	}

	cfg.Restarting = true
	s2 := startSpeaker(t, cfg)
	if err := s2.Announce(prefixes("172.18.0.50/32")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "session back", func() bool {
		st, _ := rt.session(node)
		return st == api.PeerState_SESSION_STATE_ESTABLISHED
	})
	time.Sleep(time.Second) // End-of-RIB both ways, stale routes swept
	got = rt.routes(gobgp.RF_IPv4_UC)
	p := got[netip.MustParsePrefix("172.18.0.50/32")]
	if len(got) != 1 || len(p) != 1 || p[0].Stale {
		t.Errorf("after the restart the router holds %+v, want only 172.18.0.50/32, fresh", got)
	}
}
