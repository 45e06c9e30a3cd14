package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/testbed"
)

// The BGP plan of the test clusters: FRR in the router namespace (AS
// FRRASN) peers with every node's ovnedge (AS NodeASN) over the external
// segment.
const (
	FRRASN, NodeASN = 64512, 64513
	frrDir          = "/usr/lib/frr"
)

// FRR is Debian's FRR (zebra, bfdd, bgpd) run by the test inside a
// cluster's router namespace, configured for the nodes' addresses only;
// zebra installs its routes (ECMP) in the namespace's kernel table.
type FRR struct {
	dir string
	ns  *testbed.Netns
	c   *testbed.Cluster
}

// StartFRR starts FRR in c's router namespace, passive towards every
// node (IPv4 and IPv6, BFD 100 ms x 3, graceful restart, hold time 9 s);
// it stops (and its routes go) when t ends.
func StartFRR(t testing.TB, c *testbed.Cluster) *FRR {
	t.Helper()
	if _, err := os.Stat(filepath.Join(frrDir, "bgpd")); err != nil {
		t.Fatalf("FRR is not installed (scripts/install-deps.sh installs Debian's frr): %v", err)
	}
	dir, err := os.MkdirTemp("", "ovnedge-frr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := &FRR{dir: dir, ns: c.Router, c: c}
	for name, text := range frrConfig(c) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The daemons drop to user frr: it owns the directory of their
	// sockets and pid files.
	if out, err := exec.Command("chown", "-R", "frr:frr", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown %s: %v: %s", dir, err, out)
	}
	// Stopped routes are flushed whatever the daemons leave behind.
	t.Cleanup(func() {
		_, _ = f.ns.RunErr("ip", "-4", "route", "flush", "proto", "bgp")
		_, _ = f.ns.RunErr("ip", "-6", "route", "flush", "proto", "bgp")
	})
	for _, d := range []struct {
		name string
		args []string
	}{
		{"zebra", nil},
		{"bfdd", []string{"--bfdctl", filepath.Join(dir, "bfdd.sock")}},
		{"bgpd", []string{"-p", "179"}},
	} {
		f.start(t, d.name, d.args...)
	}
	return f
}

// frrConfig is the daemons' configuration files for c's nodes.
func frrConfig(c *testbed.Cluster) map[string]string {
	var nbrs strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&nbrs, " neighbor %s peer-group nodes\n neighbor %s peer-group nodes6\n", n.IP, n.IP6)
	}
	return map[string]string{
		"zebra.conf": "hostname router\nno zebra nexthop kernel enable\n",
		"bfdd.conf":  "bfd\n profile fast\n  transmit-interval 100\n  receive-interval 100\n  detect-multiplier 3\n",
		"bgpd.conf": fmt.Sprintf(`router bgp %d
 bgp router-id %s
 no bgp ebgp-requires-policy
 bgp graceful-restart
 timers bgp 3 9
 neighbor nodes peer-group
 neighbor nodes remote-as %d
 neighbor nodes passive
 neighbor nodes update-source %s
 neighbor nodes bfd
 neighbor nodes bfd profile fast
 neighbor nodes6 peer-group
 neighbor nodes6 remote-as %d
 neighbor nodes6 passive
 neighbor nodes6 update-source %s
%s address-family ipv4 unicast
  no neighbor nodes6 activate
  maximum-paths 8
 exit-address-family
 address-family ipv6 unicast
  neighbor nodes6 activate
  maximum-paths 8
 exit-address-family
`, FRRASN, testbed.ClusterGatewayIP, NodeASN, testbed.ClusterGatewayIP, NodeASN, testbed.ClusterGatewayIP6, nbrs.String()),
	}
}

// start starts one FRR daemon in the router namespace and waits for its
// vty socket.
func (f *FRR) start(t testing.TB, name string, args ...string) {
	t.Helper()
	zserv := filepath.Join(f.dir, "zserv.api")
	argv := append([]string{"ip", "netns", "exec", f.ns.Name, filepath.Join(frrDir, name),
		"-f", filepath.Join(f.dir, name+".conf"), "-i", filepath.Join(f.dir, name+".pid"), "-z", zserv,
		"--vty_socket", f.dir, "-P", "0", "--log", "file:" + filepath.Join(f.dir, name+".log")}, args...)
	p := testbed.StartProcess(t, "frr "+name, filepath.Join(f.dir, name+".out"), nil, argv...)
	if err := poll(10*time.Second, func() error {
		if !p.Alive() {
			return fmt.Errorf("exited%s", p.Log())
		}
		_, err := os.Stat(filepath.Join(f.dir, name+".vty"))
		return err
	}); err != nil {
		t.Fatalf("frr %s: %v", name, err)
	}
}

// WaitEstablished waits until FRR's IPv4 session with every node is
// established; on failure it shows FRR's view of the session and what
// logs(node) returns (ovnedge's side, "" when unknown).
func (f *FRR) WaitEstablished(t testing.TB, timeout time.Duration, logs func(node string) string) {
	t.Helper()
	err := poll(timeout, func() error {
		out := f.Vtysh("show bgp summary json")
		var sum struct {
			IPv4 struct {
				Peers map[string]struct {
					State string `json:"state"`
				} `json:"peers"`
			} `json:"ipv4Unicast"`
		}
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, n := range f.c.Nodes {
			if st := sum.IPv4.Peers[n.IP.String()].State; st != "Established" {
				return fmt.Errorf("%s: %q\n%s\novnedge's bgp log lines:\n%s", n.Name, st,
					f.Vtysh("show bgp neighbors "+n.IP.String()), logs(n.Name))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("every node's BGP session established at FRR: %v", err)
	}
}

// WaitBFD waits until FRR's BFD session with each of nodes (every node
// when none are given) is up.
func (f *FRR) WaitBFD(t testing.TB, nodes ...string) {
	t.Helper()
	if len(nodes) == 0 {
		for _, n := range f.c.Nodes {
			nodes = append(nodes, n.Name)
		}
	}
	err := poll(30*time.Second, func() error {
		out := f.Vtysh("show bfd peers json")
		type peer struct {
			Peer   string `json:"peer"`
			Status string `json:"status"`
		}
		var peers []peer
		if err := json.Unmarshal([]byte(out), &peers); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, n := range nodes {
			ip := f.c.Node(n).IP.String()
			if !slices.ContainsFunc(peers, func(p peer) bool { return p.Peer == ip && p.Status == "up" }) {
				return fmt.Errorf("%s: %s", n, out)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the nodes' BFD sessions up at FRR: %v", err)
	}
}

// Vtysh runs FRR commands.
func (f *FRR) Vtysh(cmds ...string) string {
	argv := []string{"--vty_socket", f.dir}
	for _, c := range cmds {
		argv = append(argv, "-c", c)
	}
	out, err := exec.Command("vtysh", argv...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("vtysh %v: %v: %s", cmds, err, out)
	}
	return string(out)
}

// NextHops returns the next hops of the router's kernel route to vip
// (none without a route), sorted.
func (f *FRR) NextHops(vip netip.Addr) ([]netip.Addr, error) {
	fam := "-4"
	if vip.Is6() {
		fam = "-6"
	}
	out, err := f.ns.RunErr("ip", fam, "-j", "route", "show", netip.PrefixFrom(vip, vip.BitLen()).String(), "proto", "bgp")
	if err != nil {
		return nil, fmt.Errorf("ip route: %v: %s", err, out)
	}
	var routes []struct {
		Gateway  string `json:"gateway"`
		NextHops []struct {
			Gateway string `json:"gateway"`
		} `json:"nexthops"`
	}
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		return nil, fmt.Errorf("ip route %q: %w", out, err)
	}
	var hops []netip.Addr
	for _, r := range routes {
		gws := []string{r.Gateway}
		for _, nh := range r.NextHops {
			gws = append(gws, nh.Gateway)
		}
		for _, g := range gws {
			if a, err := netip.ParseAddr(g); err == nil {
				hops = append(hops, a)
			}
		}
	}
	slices.SortFunc(hops, netip.Addr.Compare)
	return hops, nil
}

// WaitHops waits until the router's route to vip goes through exactly
// the nodes named (none: no route) and returns how long that took.
func (f *FRR) WaitHops(t testing.TB, vip netip.Addr, timeout time.Duration, nodes ...string) time.Duration {
	t.Helper()
	var want []netip.Addr
	for _, n := range nodes {
		if vip.Is6() {
			want = append(want, f.c.Node(n).IP6)
		} else {
			want = append(want, f.c.Node(n).IP)
		}
	}
	slices.SortFunc(want, netip.Addr.Compare)
	start := time.Now()
	if err := poll(timeout, func() error {
		hops, err := f.NextHops(vip)
		if err != nil {
			return err
		}
		if !slices.Equal(hops, want) {
			return fmt.Errorf("next hops %v, want %v", hops, want)
		}
		return nil
	}); err != nil {
		t.Fatalf("route to %s at the router: %v\n%s", vip, err, f.Vtysh("show bgp summary", "show bfd peers brief", "show ip bgp"))
	}
	return time.Since(start)
}

// Path returns the node the router forwards the remote client's packets
// to vip through (with the L3 hash policy a flow's path depends on its
// addresses only).
func (f *FRR) Path(t testing.TB, vip netip.Addr) string {
	t.Helper()
	var dev []struct {
		Dev string `json:"dev"`
	}
	out := f.ns.Run(t, "ip", "-j", "route", "get", testbed.ClusterRemoteClientIP)
	if err := json.Unmarshal([]byte(out), &dev); err != nil || len(dev) == 0 {
		t.Fatalf("route to the remote client %q: %v", out, err)
	}
	var hop []struct {
		Gateway string `json:"gateway"`
	}
	out = f.ns.Run(t, "ip", "-j", "route", "get", vip.String(), "from", testbed.ClusterRemoteClientIP, "iif", dev[0].Dev)
	if err := json.Unmarshal([]byte(out), &hop); err != nil || len(hop) == 0 {
		t.Fatalf("route to %s from the remote client %q: %v", vip, out, err)
	}
	for _, n := range f.c.Nodes {
		if n.IP.String() == hop[0].Gateway {
			return n.Name
		}
	}
	t.Fatalf("route to %s goes through %q, no node", vip, hop[0].Gateway)
	return ""
}

// ECMPHash sets the router's multipath hash policy (0: addresses only,
// one client's flow keeps one path; 1: ports too, a client's connections
// spread) until t ends, then puts back what it replaced.
func (f *FRR) ECMPHash(t testing.TB, policy int) {
	t.Helper()
	keys := []string{"net.ipv4.fib_multipath_hash_policy", "net.ipv6.fib_multipath_hash_policy"}
	var was []string
	for _, k := range keys {
		was = append(was, k+"="+strings.TrimSpace(f.ns.Run(t, "sysctl", "-n", k)))
	}
	args := []string{"sysctl", "-qw"}
	for _, k := range keys {
		args = append(args, fmt.Sprintf("%s=%d", k, policy))
	}
	f.ns.Run(t, args...)
	t.Cleanup(func() { _, _ = f.ns.RunErr(append([]string{"sysctl", "-qw"}, was...)...) })
}
