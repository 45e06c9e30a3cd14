package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// testPeer is a plain GoBGP speaker on loopback standing in for the
// upstream router: it listens on addr:port and accepts the speaker's
// session from its neighbour address.
type testPeer struct {
	t    *testing.T
	srv  *server.BgpServer
	addr netip.Addr
	port int
}

const peerASN, nodeASN = 64512, 64513

var quiet = slog.New(slog.DiscardHandler)

func freePort(t testing.TB, addr netip.Addr) int {
	t.Helper()
	l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newTestPeer starts the router; gr makes it a graceful restart helper
// for every neighbour.
func newTestPeer(t *testing.T, addr netip.Addr, gr bool, neighbours ...netip.Addr) *testPeer {
	t.Helper()
	p := &testPeer{t: t, addr: addr, port: freePort(t, addr)}
	lvl := &slog.LevelVar{}
	lvl.Set(slog.LevelError + 4)
	p.srv = server.NewBgpServer(server.LoggerOption(quiet, lvl))
	go p.srv.Serve()
	t.Cleanup(p.srv.Stop)
	ctx := context.Background()
	if err := p.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: peerASN, RouterId: "10.255.0.1", ListenPort: int32(p.port), ListenAddresses: []string{addr.String()},
		UseMultiplePaths: true,
	}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range neighbours {
		fam := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
		if n.Is6() {
			fam.Afi = api.Family_AFI_IP6
		}
		peer := &api.Peer{
			Conf:      &api.PeerConf{NeighborAddress: n.String(), PeerAsn: nodeASN},
			Transport: &api.Transport{PassiveMode: true},
			AfiSafis: []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: fam, Enabled: true},
				MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: gr}}}},
		}
		if gr {
			peer.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: 60}
		}
		if err := p.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peer}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// route is one path the router holds.
type route struct {
	NextHop     netip.Addr
	Communities []uint32
	Stale       bool
}

// routes returns the router's table of the family: prefix -> paths.
func (p *testPeer) routes(family gobgp.Family) map[netip.Prefix][]route {
	out := map[netip.Prefix][]route{}
	err := p.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: family},
		func(nlri gobgp.NLRI, paths []*apiutil.Path) {
			pfx, err := netip.ParsePrefix(nlri.String())
			if err != nil {
				p.t.Errorf("prefix %q: %v", nlri, err)
				return
			}
			for _, path := range paths {
				r := route{Stale: path.Stale}
				for _, a := range path.Attrs {
					switch a := a.(type) {
					case *gobgp.PathAttributeNextHop:
						r.NextHop = a.Value
					case *gobgp.PathAttributeMpReachNLRI:
						r.NextHop = a.Nexthop
					case *gobgp.PathAttributeCommunities:
						r.Communities = a.Value
					}
				}
				out[pfx] = append(out[pfx], r)
			}
		})
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// session returns the router's view of a neighbour: state and flops.
func (p *testPeer) session(n netip.Addr) (api.PeerState_SessionState, uint32) {
	var st api.PeerState_SessionState
	var flops uint32
	_ = p.srv.ListPeer(context.Background(), &api.ListPeerRequest{Address: n.String()}, func(pe *api.Peer) {
		st, flops = pe.State.SessionState, pe.State.Flops
	})
	return st, flops
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func keys(m map[netip.Prefix][]route) []netip.Prefix {
	var out []netip.Prefix
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

func startSpeaker(t *testing.T, cfg Config) *Speaker {
	t.Helper()
	s, err := Start(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(false) })
	return s
}

func TestAnnounceWithdrawKeepsSession(t *testing.T) {
	router, node := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	rt := newTestPeer(t, router, false, node)
	var mu sync.Mutex
	var states []string
	s := startSpeaker(t, Config{ASN: nodeASN, RouterID: node,
		Peers: []Peer{{Address: router, ASN: peerASN, Port: uint16(rt.port), LocalAddress: node}},
		Pools: []Pool{{Name: "public", Prefixes: prefixes("172.18.0.200/29"),
			Communities: []Community{64513<<16 | 100}, LocalPref: 200}},
		OnPeerState: func(ps PeerStatus) {
			mu.Lock()
			defer mu.Unlock()
			states = append(states, ps.State)
		},
	})
	eventually(t, 10*time.Second, "session established", func() bool {
		st, _ := rt.session(node)
		return st == api.PeerState_SESSION_STATE_ESTABLISHED
	})

	if err := s.Announce(prefixes("172.18.0.201/32", "172.18.0.50/32", "172.18.0.51/32")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "three routes at the router", func() bool { return len(rt.routes(gobgp.RF_IPv4_UC)) == 3 })
	got := rt.routes(gobgp.RF_IPv4_UC)
	for pfx, paths := range got {
		if len(paths) != 1 || paths[0].NextHop != node {
			t.Errorf("%v: paths %+v, want one with next hop %v (self)", pfx, paths, node)
		}
	}
	if c := got[netip.MustParsePrefix("172.18.0.201/32")][0].Communities; !slices.Equal(c, []uint32{64513<<16 | 100}) {
		t.Errorf("pool route communities %v, want 64513:100", c)
	}
	if c := got[netip.MustParsePrefix("172.18.0.50/32")][0].Communities; c != nil {
		t.Errorf("route outside the pools has communities %v", c)
	}

	// Many Service changes: routes come and go, the session stays up.
	for i := range 20 {
		set := prefixes("172.18.0.50/32")
		if i%2 == 0 {
			set = append(set, netip.MustParsePrefix(fmt.Sprintf("172.18.1.%d/32", i)))
		}
		if err := s.Announce(set); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "only 172.18.0.50/32 left", func() bool {
		return slices.Equal(keys(rt.routes(gobgp.RF_IPv4_UC)), prefixes("172.18.0.50/32"))
	})
	if st, flops := rt.session(node); st != api.PeerState_SESSION_STATE_ESTABLISHED || flops != 0 {
		t.Errorf("session %v with %d flops after route changes, want established and 0", st, flops)
	}
	if got := s.Announced(); !slices.Equal(got, prefixes("172.18.0.50/32")) {
		t.Errorf("Announced() = %v", got)
	}
	st := s.Stats()
	if st.Announced != 1 || st.Sessions != 1 || st.Updates != 3+3+19 {
		t.Errorf("Stats() = %+v, want 1 announced, 1 session, 25 updates", st)
	}
	peers, err := s.Peers(context.Background())
	if err != nil || len(peers) != 1 || !peers[0].Established || peers[0].Address != router {
		t.Errorf("Peers() = %+v, %v", peers, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(states, "established") {
		t.Errorf("OnPeerState saw %v, want established", states)
	}
}

func TestIPv6HostRoutes(t *testing.T) {
	lo := netip.MustParseAddr("::1")
	rt := newTestPeer(t, lo, false, lo)
	s := startSpeaker(t, Config{ASN: nodeASN, RouterID: netip.MustParseAddr("10.0.0.2"),
		Peers: []Peer{{Address: lo, ASN: peerASN, Port: uint16(rt.port)}}})
	if err := s.Announce(prefixes("fd00:18::50/128", "172.18.0.50/32")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the /128 at the router", func() bool { return len(rt.routes(gobgp.RF_IPv6_UC)) == 1 })
	got := rt.routes(gobgp.RF_IPv6_UC)[netip.MustParsePrefix("fd00:18::50/128")]
	if len(got) != 1 || got[0].NextHop != lo {
		t.Errorf("IPv6 route %+v, want next hop %v", got, lo)
	}
	if v4 := rt.routes(gobgp.RF_IPv4_UC); len(v4) != 0 {
		t.Errorf("IPv4 prefixes sent to an IPv6 peer: %v", v4)
	}
}

// TestECMPFromTwoNodes: two nodes announce the same VIP; the router holds
// both paths, and a withdrawal leaves the other.
func TestECMPFromTwoNodes(t *testing.T) {
	router := netip.MustParseAddr("127.0.0.1")
	n1, n2 := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	rt := newTestPeer(t, router, false, n1, n2)
	var sp []*Speaker
	for _, n := range []netip.Addr{n1, n2} {
		sp = append(sp, startSpeaker(t, Config{ASN: nodeASN, RouterID: n,
			Peers: []Peer{{Address: router, ASN: peerASN, Port: uint16(rt.port), LocalAddress: n}}}))
	}
	vip := prefixes("172.18.0.50/32")
	for _, s := range sp {
		if err := s.Announce(vip); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "two paths", func() bool { return len(rt.routes(gobgp.RF_IPv4_UC)[vip[0]]) == 2 })
	start := time.Now()
	if err := sp[0].Announce(nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "one path left", func() bool {
		paths := rt.routes(gobgp.RF_IPv4_UC)[vip[0]]
		return len(paths) == 1 && paths[0].NextHop == n2
	})
	t.Logf("withdrawal at the router after %v", time.Since(start))
}

// TestHardStopWithdraws: without graceful restart a stop withdraws at once.
func TestHardStopWithdraws(t *testing.T) {
	router, node := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	rt := newTestPeer(t, router, true, node)
	s := startSpeaker(t, Config{ASN: nodeASN, RouterID: node, GracefulRestart: 30 * time.Second,
		Peers: []Peer{{Address: router, ASN: peerASN, Port: uint16(rt.port), LocalAddress: node}}})
	if err := s.Announce(prefixes("172.18.0.50/32")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the route", func() bool { return len(rt.routes(gobgp.RF_IPv4_UC)) == 1 })
	if err := s.Close(false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "route withdrawn", func() bool { return len(rt.routes(gobgp.RF_IPv4_UC)) == 0 })
}

func TestSetPeersLeavesOthersAlone(t *testing.T) {
	router := netip.MustParseAddr("127.0.0.1")
	node := netip.MustParseAddr("127.0.0.2")
	rt := newTestPeer(t, router, false, node)
	p := Peer{Address: router, ASN: peerASN, Port: uint16(rt.port), LocalAddress: node}
	s := startSpeaker(t, Config{ASN: nodeASN, RouterID: node, Peers: []Peer{p}})
	eventually(t, 10*time.Second, "session established", func() bool {
		st, _ := rt.session(node)
		return st == api.PeerState_SESSION_STATE_ESTABLISHED
	})
	other := Peer{Address: netip.MustParseAddr("127.0.0.9"), ASN: 64999, Port: uint16(rt.port)}
	if err := s.SetPeers(context.Background(), []Peer{p, other}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPeers(context.Background(), []Peer{p}); err != nil {
		t.Fatal(err)
	}
	if st, flops := rt.session(node); st != api.PeerState_SESSION_STATE_ESTABLISHED || flops != 0 {
		t.Errorf("session %v, %d flops after another peer came and went", st, flops)
	}
	if peers, _ := s.Peers(context.Background()); len(peers) != 1 {
		t.Errorf("Peers() = %+v, want one", peers)
	}
}

func TestTenThousandPrefixes(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	router, node := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	rt := newTestPeer(t, router, false, node)
	s := startSpeaker(t, Config{ASN: nodeASN, RouterID: node,
		Peers: []Peer{{Address: router, ASN: peerASN, Port: uint16(rt.port), LocalAddress: node}}})
	eventually(t, 10*time.Second, "session established", func() bool {
		st, _ := rt.session(node)
		return st == api.PeerState_SESSION_STATE_ESTABLISHED
	})
	var set []netip.Prefix
	for i := range 10000 {
		set = append(set, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 32))
	}
	start := time.Now()
	if err := s.Announce(set); err != nil {
		t.Fatal(err)
	}
	d := eventually(t, 20*time.Second, "10,000 routes", func() bool { return len(rt.routes(gobgp.RF_IPv4_UC)) == 10000 })
	t.Logf("10,000 prefixes at the router in %v (announce call %v)", d, time.Since(start)-d)
	start = time.Now()
	if err := s.Announce(set[:5000]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "5,000 withdrawn", func() bool { return len(rt.routes(gobgp.RF_IPv4_UC)) == 5000 })
	t.Logf("5,000 withdrawals at the router in %v", time.Since(start))
}

func TestConfigValidate(t *testing.T) {
	ok := Config{ASN: 65000, RouterID: netip.MustParseAddr("10.0.0.1"),
		Peers: []Peer{{Address: netip.MustParseAddr("10.0.0.254"), ASN: 65001}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"no ASN":         func(c *Config) { c.ASN = 0 },
		"IPv6 router ID": func(c *Config) { c.RouterID = netip.MustParseAddr("fd00::1") },
		"peer ASN 0":     func(c *Config) { c.Peers[0].ASN = 0 },
		"peer twice":     func(c *Config) { c.Peers = append(c.Peers, c.Peers[0]) },
		"hold time 1s":   func(c *Config) { c.Peers[0].HoldTime = time.Second },
		"BFD mult 300":   func(c *Config) { c.Peers[0].BFD = BFD{Enabled: true, Multiplier: 300} },
		"GR too long":    func(c *Config) { c.GracefulRestart = time.Hour * 2 },
	} {
		c := ok
		c.Peers = slices.Clone(ok.Peers)
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseCommunity(t *testing.T) {
	for in, want := range map[string]Community{"64513:100": 64513<<16 | 100, "0:1": 1, "4227858432": 4227858432} {
		c, err := ParseCommunity(in)
		if err != nil || c != want {
			t.Errorf("ParseCommunity(%q) = %v, %v; want %v", in, c, err, want)
		}
	}
	if c := Community(64513<<16 | 100); c.String() != "64513:100" {
		t.Errorf("String() = %q", c.String())
	}
	for _, bad := range []string{"", "65536:1", "1:65536", "a:b", "x"} {
		if _, err := ParseCommunity(bad); err == nil {
			t.Errorf("ParseCommunity(%q): no error", bad)
		}
	}
}

func TestBFDConfig(t *testing.T) {
	s := &Speaker{cfg: Config{GracefulRestart: 120 * time.Second}}
	p := Peer{Address: netip.MustParseAddr("172.18.0.1"), ASN: 64512, HoldTime: 9 * time.Second,
		BFD: BFD{Enabled: true, Interval: 100 * time.Millisecond}}.withDefaults()
	a := s.apiPeer(p)
	if a.Bfd == nil || !a.Bfd.Enabled || a.Bfd.DesiredMinimumTxInterval != 100000 || a.Bfd.RequiredMinimumReceive != 100000 ||
		a.Bfd.DetectionMultiplier != 3 {
		t.Errorf("BFD config %v, want 100 ms x 3", a.Bfd)
	}
	if a.Timers.Config.HoldTime != 9 || a.Timers.Config.KeepaliveInterval != 3 || a.Timers.Config.ConnectRetry != 1 {
		t.Errorf("timers %v, want hold 9, keepalive 3, connect retry 1", a.Timers.Config)
	}
	if a.GracefulRestart == nil || a.GracefulRestart.RestartTime != 120 || !a.AfiSafis[0].MpGracefulRestart.Config.Enabled {
		t.Errorf("graceful restart %v / %v, want 120 s on ipv4-unicast", a.GracefulRestart, a.AfiSafis[0].MpGracefulRestart)
	}
}
