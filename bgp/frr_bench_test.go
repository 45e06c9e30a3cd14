package bgp

import (
	"github.com/ovnedge/ovnedge/testbed"

	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// frrBGPD starts Debian's FRR bgpd (without zebra: nothing reaches a
// kernel table) on loopback addr:port, peering passively with node, and
// returns its vty directory. It needs FRR installed and root (bgpd drops
// to user frr): testbed.Require skips without them, or fails with CI=true.
func frrBGPD(tb testing.TB, addr, node netip.Addr, port, nodePort int) string {
	tb.Helper()
	const bgpd = "/usr/lib/frr/bgpd"
	testbed.Require(tb, bgpd) // root and Debian's frr (scripts/install-deps.sh); fails under CI=true
	dir, err := os.MkdirTemp("", "ovnedge-bgpd")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "bgpd.log"))
			tb.Logf("bgpd.log:\n%s", log)
		}
		_ = os.RemoveAll(dir)
	})
	conf := fmt.Sprintf(`router bgp %d
 bgp router-id 10.255.0.1
 no bgp ebgp-requires-policy
 bgp allow-martian-nexthop
 bgp graceful-restart
 neighbor %s remote-as %d
 neighbor %s update-source %s
`, peerASN, node, nodeASN, node, addr)
	if nodePort == 0 {
		conf += fmt.Sprintf(" neighbor %s passive\n", node)
	} else {
		// Active: FRR connects to the node's listener, retrying every
		// second.
		conf += fmt.Sprintf(" neighbor %s port %d\n neighbor %s timers connect 1\n", node, nodePort, node)
	}
	if err := os.WriteFile(filepath.Join(dir, "bgpd.conf"), []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", "frr:frr", dir).CombinedOutput(); err != nil {
		tb.Fatalf("chown: %v: %s", err, out)
	}
	cmd := exec.Command(bgpd, "-Z", "-f", filepath.Join(dir, "bgpd.conf"), "-i", filepath.Join(dir, "bgpd.pid"),
		"--vty_socket", dir, "-P", "0", "-p", strconv.Itoa(port), "-l", addr.String(),
		"--log", "file:"+filepath.Join(dir, "bgpd.log"))
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "bgpd.vty")); err == nil {
			return dir
		}
		if time.Since(start) > 10*time.Second {
			tb.Fatal("bgpd did not start")
		}
	}
}

// frrPeer returns FRR's view of its neighbour: state and prefixes received.
func frrPeer(tb testing.TB, dir string, node netip.Addr) (string, int) {
	out, err := exec.Command("vtysh", "--vty_socket", dir, "-c", "show bgp summary json").Output()
	if err != nil {
		tb.Fatalf("vtysh: %v", err)
	}
	var sum struct {
		IPv4 struct {
			Peers map[string]struct {
				State  string `json:"state"`
				PfxRcd int    `json:"pfxRcd"`
			} `json:"peers"`
		} `json:"ipv4Unicast"`
	}
	_ = json.Unmarshal(out, &sum)
	p := sum.IPv4.Peers[node.String()]
	return p.State, p.PfxRcd
}

// BenchmarkTenThousandToFRR measures, at a real FRR bgpd, a node speaker
// started (as the daemon starts it: graceful restart, restart flag set)
// with 10,000 /32 VIPs: from Start to the session being established, and
// to FRR's table holding all 10,000 prefixes. (The session takes most of
// it: GoBGP's first connection attempt waits 0.75-1 x the 1 s connect
// retry.) FRR takes loopback next hops with allow-martian-nexthop.
func BenchmarkTenThousandToFRR(b *testing.B) {
	router, node := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	var set []netip.Prefix
	for i := range 10000 {
		set = append(set, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 32))
	}
	// router-passive: the speaker opens the session (GoBGP's first
	// attempt comes 1.5-2 s after start); router-active: the speaker
	// also listens (--bgp-listen-port) and FRR connects every second.
	for _, mode := range []string{"router-passive", "router-active"} {
		b.Run(mode, func(b *testing.B) {
			var up, table []time.Duration
			for range b.N {
				port, nodePort := freePort(b, router), 0
				if mode == "router-active" {
					nodePort = freePort(b, node)
				}
				dir := frrBGPD(b, router, node, port, nodePort)
				// ovnedge starts at any moment of FRR's retry cycle.
				time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
				start := time.Now()
				s, err := Start(context.Background(), Config{ASN: nodeASN, RouterID: node, GracefulRestart: 120 * time.Second,
					Restarting: true, ListenPort: nodePort, ListenAddresses: []netip.Addr{node},
					Peers: []Peer{{Address: router, ASN: peerASN, Port: uint16(port), LocalAddress: node}}}, quiet)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Announce(set); err != nil {
					b.Fatal(err)
				}
				var established time.Duration
				for {
					st, n := frrPeer(b, dir, node)
					if st == "Established" && established == 0 {
						established = time.Since(start)
					}
					if n == len(set) {
						break
					}
					if time.Since(start) > 60*time.Second {
						b.Fatalf("FRR holds %d prefixes (%s) after 60 s", n, st)
					}
					time.Sleep(5 * time.Millisecond)
				}
				up, table = append(up, established), append(table, time.Since(start))
				_ = s.Close(false)
			}
			last := len(up) - 1
			b.ReportMetric(float64(up[last].Milliseconds()), "session-up-ms")
			b.ReportMetric(float64(table[last].Milliseconds()), "10k-in-table-ms")
			b.ReportMetric(float64((table[last] - up[last]).Milliseconds()), "10k-after-up-ms")
			b.Logf("session established after %v, 10,000 prefixes in FRR's table after %v", up, table)
		})
	}
}
