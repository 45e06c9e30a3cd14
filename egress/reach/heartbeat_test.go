package reach_test

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/testbed"
)

// nsListenPacket opens the monitor's UDP socket inside ns.
func nsListenPacket(ns *testbed.Netns) func(context.Context) (net.PacketConn, error) {
	return func(ctx context.Context) (c net.PacketConn, err error) {
		if e := ns.Do(func() error {
			c, err = (&net.ListenConfig{}).ListenPacket(ctx, "udp", ":0")
			return nil
		}); e != nil {
			return nil, e
		}
		return c, err
	}
}

// serveIn binds a NodeServer inside ns and serves it until the test
// ends.
func serveIn(t *testing.T, ns *testbed.Netns, cfg reach.ServerConfig) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var s *reach.NodeServer
	if err := ns.Do(func() (err error) { s, err = reach.NewNodeServer(ctx, cfg); return err }); err != nil {
		cancel()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// The heartbeat monitor reports a node down once it stops answering (a
// blackhole route, as a dead management port), up when it answers again,
// and down at once when the node says it cannot serve (its uplink is
// down). The responder is bound before its address exists (IP_FREEBIND),
// as on a node whose ovn-k8s-mp0 comes and goes with ovs-vswitchd.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	a, b := twoHosts(t)
	const port = reach.DefaultHeartbeatPort // in the test's own namespaces
	var serving atomic.Bool
	serving.Store(true)
	var leaderBeats atomic.Int64
	serveIn(t, b, reach.ServerConfig{Addr: netip.MustParseAddr("192.0.2.20"), HeartbeatPort: port,
		Status: serving.Load, OnLeader: func() { leaderBeats.Add(1) }})
	b.Run(t, "ip", "addr", "add", "192.0.2.20/24", "dev", "vb") // after the bind

	changes := make(chan bool, 16)
	h, err := reach.NewHeartbeat(reach.HeartbeatConfig{Interval: 50 * time.Millisecond, Misses: 3, Port: port, Leader: true,
		ListenPacket: nsListenPacket(a)}, func(node string, up bool) {
		if node == "n" {
			changes <- up
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	h.SetTargets([]reach.Target{{Node: "n", Addr: netip.MustParseAddr("192.0.2.20")},
		{Node: "silent", Addr: netip.MustParseAddr("192.0.2.21")}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = h.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	want := func(up bool, what string) {
		t.Helper()
		select {
		case got := <-changes:
			if got != up {
				t.Fatalf("%s: reported up=%v, want %v", what, got, up)
			}
			if h.Reachable("n") != up {
				t.Fatalf("%s: Reachable disagrees", what)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no report", what)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.Reachable("silent") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if h.Reachable("silent") {
		t.Error("a target that never answers is still reachable")
	}
	if !h.Reachable("n") || !h.Reachable("not a target") {
		t.Error("an answering target, or one not monitored, is unreachable")
	}
	if leaderBeats.Load() == 0 {
		t.Error("the responder saw no leader heartbeat")
	}
	a.Run(t, "ip", "route", "add", "blackhole", "192.0.2.20/32")
	want(false, "blackholed")
	a.Run(t, "ip", "route", "del", "blackhole", "192.0.2.20/32")
	want(true, "route back")
	serving.Store(false)
	want(false, "not serving")
	serving.Store(true)
	want(true, "serving again")
}

// The gRPC health server of a node answers on its management IP bound
// before the address exists, with the node's status.
func TestServeHealth(t *testing.T) {
	t.Parallel()
	a, b := twoHosts(t)
	const port = 9107 // in the test's own namespaces
	certs := newCerts(t)
	var serving atomic.Bool
	serving.Store(true)
	serveIn(t, b, reach.ServerConfig{Addr: netip.MustParseAddr("192.0.2.30"), Port: port, TLS: certs.server, Status: serving.Load})
	b.Run(t, "ip", "addr", "add", "192.0.2.30/24", "dev", "vb")
	c, err := reach.NewClient(port, certs.client, nsDialer(a))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ip := netip.MustParseAddr("192.0.2.30")
	if up, err := c.Check(context.Background(), ip, 2*time.Second); !up {
		t.Fatalf("TLS check of the served node: %v", err)
	}
	serving.Store(false)
	if up, _ := c.Check(context.Background(), ip, 2*time.Second); up {
		t.Error("a node reporting NOT_SERVING is up")
	}
	insecure, _ := reach.NewClient(port, reach.TLSFiles{}, nsDialer(a))
	defer insecure.Close()
	if up, _ := insecure.Check(context.Background(), ip, time.Second); up {
		t.Error("an insecure client passed the TLS server")
	}
	_ = healthpb.HealthCheckResponse_SERVING
}
