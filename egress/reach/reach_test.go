package reach_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/testbed"
)

// nsDialer dials from ns.
func nsDialer(ns *testbed.Netns) reach.DialFunc {
	return func(ctx context.Context, network, address string) (conn net.Conn, err error) {
		if e := ns.Do(func() error {
			conn, err = (&net.Dialer{}).DialContext(ctx, network, address)
			return nil
		}); e != nil {
			return nil, e
		}
		return conn, err
	}
}

// nsListen listens on address inside ns.
func nsListen(t *testing.T, ns *testbed.Netns, address string) net.Listener {
	t.Helper()
	var l net.Listener
	if err := ns.Do(func() (err error) { l, err = net.Listen("tcp", address); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// twoHosts gives namespaces a (192.0.2.1) and b (192.0.2.2) on one link;
// a has a blackhole route to 198.51.100.0/24 and an unreachable route to
// 203.0.113.0/24.
func twoHosts(t testing.TB) (a, b *testbed.Netns) {
	a, b = testbed.NewNetns(t, "rcha"), testbed.NewNetns(t, "rchb")
	testbed.Link(t, a, "va", []string{"192.0.2.1/24"}, b, "vb", []string{"192.0.2.2/24"})
	a.Run(t, "ip", "route", "add", "blackhole", "198.51.100.0/24")
	a.Run(t, "ip", "route", "add", "unreachable", "203.0.113.0/24")
	return a, b
}

func TestProbeDiscard(t *testing.T) {
	t.Parallel()
	a, b := twoHosts(t)
	tests := []struct {
		name   string
		addr   string
		listen bool
		up     bool
	}{
		{"connection refused: host up", "192.0.2.2", false, true},
		{"listening: host up", "192.0.2.2", true, true},
		{"silent address: timeout", "192.0.2.3", false, false},
		{"blackhole route", "198.51.100.1", false, false},
		{"unreachable route: EHOSTUNREACH", "203.0.113.1", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.listen {
				nsListen(t, b, "192.0.2.2:9")
			}
			start := time.Now()
			up, err := reach.ProbeDiscard(context.Background(), nsDialer(a), netip.MustParseAddr(tc.addr), 300*time.Millisecond)
			if up != tc.up {
				t.Errorf("up = %v (%v), want %v", up, err, tc.up)
			}
			if up != (err == nil) {
				t.Errorf("up %v with error %v", up, err)
			}
			// How long a probe takes is BenchmarkProbeDiscard's to report.
			t.Logf("%s: up=%v err=%v in %v", tc.addr, up, err, time.Since(start).Round(time.Millisecond))
		})
	}
}

// belowEphemeral, as serveHealth's port, serves on a free port below the
// kernel's ephemeral range (testbed.FreePorts).
const belowEphemeral = -1

// serveHealth serves the health service on host:port (a loopback
// address) until the test ends or stop is called.
func serveHealth(t *testing.T, host string, port int, files reach.TLSFiles) (stop func(), bound int) {
	t.Helper()
	var l net.Listener
	var err error
	for range 100 {
		p := port
		if port == belowEphemeral {
			p = testbed.FreePorts(t, 1)[0]
		}
		l, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		// A picked port another test took meanwhile is picked again; a
		// server started again on its port retries, as a restarting
		// daemon does, while the old one's sockets wind down.
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := reach.NewServer(files)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Serve(l) })
	var once sync.Once
	stop = func() { once.Do(func() { s.Stop(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop, l.Addr().(*net.TCPAddr).Port
}

func TestHealthCheck(t *testing.T) {
	t.Parallel()
	certs := newCerts(t)
	lo := netip.MustParseAddr("127.0.0.1")
	tests := []struct {
		name           string
		server, client reach.TLSFiles
		noServer       bool
		grace          time.Duration
		up             bool
	}{
		{name: "insecure", up: true},
		{name: "no server: refused, within the restart grace", noServer: true, grace: time.Minute, up: true},
		{name: "no server: refused, no restart grace", noServer: true},
		{name: "TLS", server: certs.server, client: certs.client, up: true},
		{name: "TLS with server name", server: certs.server, client: withName(certs.client, "node.egress"), up: true},
		{name: "TLS, wrong server name", server: certs.server, client: withName(certs.client, "other")},
		{name: "TLS server, insecure client", server: certs.server},
		{name: "TLS, client without certificate", server: certs.server, client: reach.TLSFiles{CAFile: certs.client.CAFile}},
		{name: "TLS, client trusts another CA", server: certs.server, client: certs.otherCA},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var port int
			if tc.noServer {
				port = testbed.FreePorts(t, 1)[0]
			} else {
				_, port = serveHealth(t, "127.0.0.1", 0, tc.server)
			}
			c, err := reach.NewClient(port, tc.client, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetRestartGrace(tc.grace)
			up, err := c.Check(context.Background(), lo, 500*time.Millisecond)
			if up != tc.up {
				t.Errorf("up = %v (%v), want %v", up, err, tc.up)
			}
		})
	}
}

func withName(f reach.TLSFiles, name string) reach.TLSFiles { f.ServerName = name; return f }

// A session that bounces (the node's server restarts) is not a failure; a
// server that stays down is, within one timeout.
func TestHealthCheckBouncedSession(t *testing.T) {
	t.Parallel()
	lo := netip.MustParseAddr("127.0.0.1")
	// A port no client connection can be given while the server is
	// down (below the ephemeral range), as it is served again.
	stop, port := serveHealth(t, "127.0.0.1", belowEphemeral, reach.TLSFiles{})
	c, err := reach.NewClient(port, reach.TLSFiles{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if up, err := c.Check(ctx, lo, time.Second); !up {
		t.Fatalf("first check: %v", err)
	}
	stop()
	serveHealth(t, "127.0.0.1", port, reach.TLSFiles{}) // the same port: the session bounces
	if up, err := c.Check(ctx, lo, time.Second); !up {
		t.Errorf("check after the session bounced: down (%v)", err)
	}
	c2, _ := reach.NewClient(port, reach.TLSFiles{}, nil)
	defer c2.Close()
	if up, err := c2.Check(ctx, netip.MustParseAddr("127.0.0.9"), time.Second); up {
		t.Errorf("nothing listens on 127.0.0.9 but it is up (%v)", err)
	}
}

// A node whose agent stops listening (its host refuses the health port:
// a restart, a rolling update) stays up for the restart grace, then is
// down; listening again resets it. A silent host is down at once.
func TestHealthCheckRestartGrace(t *testing.T) {
	t.Parallel()
	lo := netip.MustParseAddr("127.0.0.1")
	stop, port := serveHealth(t, "127.0.0.1", belowEphemeral, reach.TLSFiles{})
	c, err := reach.NewClient(port, reach.TLSFiles{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A second of timeout and a grace of two: a loaded machine (-race, CI
	// beside other jobs) took over 200 ms to see the refusal.
	const grace = 2 * time.Second
	c.SetRestartGrace(grace)
	ctx := context.Background()
	check := func(what string, want bool) {
		t.Helper()
		if up, err := c.Check(ctx, lo, time.Second); up != want {
			t.Errorf("%s: up %v (%v), want %v", what, up, err, want)
		}
	}
	check("serving", true)
	stop()
	check("refusing, just stopped", true)
	time.Sleep(grace)
	check("refusing for the whole grace", false)
	serveHealth(t, "127.0.0.1", port, reach.TLSFiles{})
	check("serving again", true)
	a, _ := twoHosts(t)
	silent, err := reach.NewClient(port, reach.TLSFiles{}, nsDialer(a))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if up, err := silent.Check(ctx, netip.MustParseAddr("198.51.100.1"), 200*time.Millisecond); up {
		t.Errorf("a blackholed host is up (%v)", err)
	}
}

// The checker reports each node's first state, then changes; a node made
// unreachable (blackhole route) is reported down, and up again once the
// route goes. How fast is BenchmarkCheckerDetect's to report.
func TestCheckerDiscard(t *testing.T) {
	t.Parallel()
	a, _ := twoHosts(t)
	// A generous timeout: on a loaded machine a 200 ms connect to the
	// healthy host once timed out (CI, load 15 on 2 cores).
	const interval, timeout = 200 * time.Millisecond, time.Second
	type change struct {
		node string
		up   bool
		at   time.Time
	}
	changes := make(chan change, 16)
	c, err := reach.NewChecker(reach.Config{Interval: interval, Timeout: timeout, Dial: nsDialer(a)},
		func(node string, up bool) { changes <- change{node, up, time.Now()} })
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets([]reach.Target{
		{Node: "up", Addr: netip.MustParseAddr("192.0.2.2")},
		{Node: "blackholed", Addr: netip.MustParseAddr("198.51.100.1")},
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case ch := <-changes:
			got[ch.node] = ch.up
		case <-time.After(5 * time.Second):
			t.Fatalf("first results: %v", got)
		}
	}
	if !got["up"] || got["blackholed"] {
		t.Errorf("first results = %v", got)
	}
	if !c.Reachable("up") || c.Reachable("blackholed") {
		t.Error("Reachable disagrees with the reports")
	}
	cut := time.Now()
	a.Run(t, "ip", "route", "add", "blackhole", "192.0.2.2/32")
	select {
	case ch := <-changes:
		if ch.node != "up" || ch.up {
			t.Fatalf("unexpected change %+v", ch)
		}
		d := ch.at.Sub(cut)
		t.Logf("detected in %v (interval %v, timeout %v)", d.Round(time.Millisecond), interval, timeout)
	case <-time.After(5 * time.Second):
		t.Fatal("node never reported down")
	}
	a.Run(t, "ip", "route", "del", "blackhole", "192.0.2.2/32")
	select {
	case ch := <-changes:
		if ch.node != "up" || !ch.up {
			t.Fatalf("unexpected change %+v", ch)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("node never reported up again")
	}
}

// The gRPC checker on loopback: two nodes on 127.0.0.2 and 127.0.0.3, the
// second without server; stopping the first is reported.
func TestCheckerGRPC(t *testing.T) {
	t.Parallel()
	stop, port := serveHealth(t, "127.0.0.2", 0, reach.TLSFiles{})
	var mu sync.Mutex
	state := map[string]bool{}
	changes := make(chan struct{}, 16)
	c, err := reach.NewChecker(reach.Config{Interval: 200 * time.Millisecond, Timeout: 300 * time.Millisecond, Port: port},
		func(node string, up bool) {
			mu.Lock()
			state[node] = up
			mu.Unlock()
			changes <- struct{}{}
		})
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets([]reach.Target{{Node: "n1", Addr: netip.MustParseAddr("127.0.0.2")}, {Node: "n2", Addr: netip.MustParseAddr("127.0.0.3")}})
	ctx := context.Background()
	c.Round(ctx)
	c.Round(ctx)
	mu.Lock()
	if !state["n1"] || state["n2"] {
		t.Errorf("state = %v, want n1 up, n2 down", state)
	}
	mu.Unlock()
	stop()
	c.Round(ctx)
	mu.Lock()
	if state["n1"] {
		t.Error("n1 still up after its server stopped")
	}
	mu.Unlock()
}

func TestCheckerTimeoutZero(t *testing.T) {
	var reports []bool
	c, err := reach.NewChecker(reach.Config{Port: 1}, func(_ string, up bool) { reports = append(reports, up) })
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets([]reach.Target{{Node: "n", Addr: netip.MustParseAddr("192.0.2.200")}})
	c.Round(context.Background())
	if len(reports) != 1 || !reports[0] || !c.Reachable("n") {
		t.Errorf("timeout 0: reports %v", reports)
	}
	if _, err := reach.NewChecker(reach.Config{Timeout: -1}, nil); err == nil {
		t.Error("negative timeout accepted")
	}
	if _, err := reach.NewClient(70000, reach.TLSFiles{}, nil); err == nil {
		t.Error("port 70000 accepted")
	}
	if _, err := reach.NewServer(reach.TLSFiles{CAFile: "/nonexistent"}); err == nil {
		t.Error("server without certificate accepted")
	}
}

type testCerts struct {
	server, client, otherCA reach.TLSFiles
}

// newCerts writes a CA, a server certificate for "node.egress" and
// 127.0.0.1, a client certificate, and a client certificate of a second CA.
func newCerts(t *testing.T) testCerts {
	t.Helper()
	dir := t.TempDir()
	ca, other := testbed.WriteCert(t, dir, "ca", nil), testbed.WriteCert(t, dir, "other-ca", nil)
	files := func(c, ca *testbed.Cert) reach.TLSFiles {
		return reach.TLSFiles{CertFile: c.CertFile, KeyFile: c.KeyFile, CAFile: ca.CertFile}
	}
	return testCerts{
		server:  files(testbed.WriteCert(t, dir, "node.egress", ca), ca),
		client:  files(testbed.WriteCert(t, dir, "leader.egress", ca), ca),
		otherCA: files(testbed.WriteCert(t, dir, "stranger.egress", other), other),
	}
}

func TestNewConfig(t *testing.T) {
	tests := []struct {
		name          string
		timeout, port int
		interval      time.Duration
		want          reach.Config
		err           string
	}{
		{name: "defaults as the daemon parses them", timeout: 1, want: reach.DefaultConfig()},
		{name: "0 skips reachability", timeout: 0, interval: time.Second,
			want: reach.Config{Interval: time.Second}},
		{name: "gRPC port", timeout: 3, port: 9107, interval: 2 * time.Second,
			want: reach.Config{Interval: 2 * time.Second, Timeout: 3 * time.Second, Port: 9107}},
		{name: "negative timeout", timeout: -1, err: "egressip-reachability-total-timeout -1"},
		{name: "port out of range", port: 65536, err: "egressip-node-healthcheck-port 65536"},
		{name: "negative interval", interval: -time.Second, err: "interval -1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reach.NewConfig(tc.timeout, tc.port, tc.interval, reach.TLSFiles{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("NewConfig = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// A probe that fails after the node was heard from (Heard: the heartbeat
// heard it again) while the probe was under way is stale and not
// reported; one that fails after a Heard before it began is. The case
// of a CI run: a gRPC probe sent while the node was down timed out a
// second later, 700 ms after the heartbeat had heard the node again, and
// moved its egress IP back and forth.
func TestCheckerHeardDuringProbe(t *testing.T) {
	tests := []struct {
		name string
		// heard: before the failing round, during its probe, or never.
		heard    string
		wantDown bool
	}{
		{"heard during the probe", "during", false},
		{"heard before the probe", "before", true},
		{"not heard", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			down := false
			dialing, release := make(chan struct{}, 1), make(chan struct{})
			dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
				mu.Lock()
				d := down
				mu.Unlock()
				if !d {
					return nil, fmt.Errorf("dial: %w", syscall.ECONNREFUSED) // a refused DISCARD: up
				}
				dialing <- struct{}{}
				<-release
				return nil, fmt.Errorf("dial: %w", os.ErrDeadlineExceeded)
			}
			var reports []bool
			c, err := reach.NewChecker(reach.Config{Interval: time.Hour, Timeout: time.Minute, Dial: dial},
				func(_ string, up bool) { reports = append(reports, up) })
			if err != nil {
				t.Fatal(err)
			}
			c.SetTargets([]reach.Target{{Node: "n", Addr: netip.MustParseAddr("192.0.2.9")}})
			ctx := context.Background()
			c.Round(ctx)
			mu.Lock()
			down = true
			mu.Unlock()
			if tt.heard == "before" {
				c.Heard("n")
				time.Sleep(time.Millisecond) // the round begins strictly later
			}
			done := make(chan struct{})
			go func() { c.Round(ctx); close(done) }()
			<-dialing
			if tt.heard == "during" {
				c.Heard("n")
			}
			close(release)
			<-done
			want := []bool{true}
			if tt.wantDown {
				want = append(want, false)
			}
			if !slices.Equal(reports, want) || c.Reachable("n") == tt.wantDown {
				t.Errorf("reports %v, Reachable %v; want reports %v", reports, c.Reachable("n"), want)
			}
		})
	}
}
