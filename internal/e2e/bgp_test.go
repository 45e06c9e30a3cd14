package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovnedge/ovnedge/bgp/metallb"
	"github.com/ovnedge/ovnedge/testbed"
)

// The BGP plan of the e2e cluster: FRR in the router namespace (AS 64512)
// peers with every node's ovnedge (AS 64513) over the external segment.
const (
	frrASN, nodeASN = 64512, 64513
	frrDir          = "/usr/lib/frr"
)

// bgpNodeArgs are the node instances' BGP flags: BFD 100 ms x 3 and
// graceful restart, hold time 9 s.
var bgpNodeArgs = []string{"--enable-bgp", "--bgp-peer-address=" + testbed.ClusterGatewayIP + "," + testbed.ClusterGatewayIP6,
	fmt.Sprintf("--bgp-asn=%d", nodeASN), fmt.Sprintf("--bgp-peer-asn=%d", frrASN),
	"--bgp-bfd", "--bgp-bfd-interval=100ms", "--bgp-bfd-multiplier=3", "--bgp-hold-time=9s", "--bgp-graceful-restart=30s",
	"--bgp-announce-egress-ips"}

// frr is Debian's FRR (zebra, bfdd, bgpd) run by the test inside the
// cluster's router namespace, configured for the nodes' addresses only;
// zebra installs its routes (ECMP) in the namespace's kernel table.
type frr struct {
	dir string
	ns  *testbed.Netns
}

// startFRR starts FRR in the router namespace; it stops (and its routes
// go) when t ends.
func startFRR(t testing.TB, e *Env) *frr {
	t.Helper()
	if _, err := os.Stat(filepath.Join(frrDir, "bgpd")); err != nil {
		t.Fatalf("FRR is not installed (scripts/install-deps.sh installs Debian's frr): %v", err)
	}
	dir, err := os.MkdirTemp("", "ovnedge-frr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := &frr{dir: dir, ns: e.Router}
	var nbrs strings.Builder
	for _, n := range e.Nodes {
		fmt.Fprintf(&nbrs, " neighbor %s peer-group nodes\n neighbor %s peer-group nodes6\n", n.IP, n.IP6)
	}
	files := map[string]string{
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
`, frrASN, testbed.ClusterGatewayIP, nodeASN, testbed.ClusterGatewayIP, nodeASN, testbed.ClusterGatewayIP6, nbrs.String()),
	}
	for name, text := range files {
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
	zserv := filepath.Join(dir, "zserv.api")
	for _, d := range []struct {
		name string
		args []string
	}{
		{"zebra", nil},
		{"bfdd", []string{"--bfdctl", filepath.Join(dir, "bfdd.sock")}},
		{"bgpd", []string{"-p", "179"}},
	} {
		argv := append([]string{"ip", "netns", "exec", f.ns.Name, filepath.Join(frrDir, d.name),
			"-f", filepath.Join(dir, d.name+".conf"), "-i", filepath.Join(dir, d.name+".pid"), "-z", zserv,
			"--vty_socket", dir, "-P", "0", "--log", "file:" + filepath.Join(dir, d.name+".log")}, d.args...)
		p := testbed.StartProcess(t, "frr "+d.name, filepath.Join(dir, d.name+".out"), nil, argv...)
		if err := poll(10*time.Second, func() error {
			if !p.Alive() {
				return fmt.Errorf("exited%s", p.Log())
			}
			_, err := os.Stat(filepath.Join(dir, d.name+".vty"))
			return err
		}); err != nil {
			t.Fatalf("frr %s: %v", d.name, err)
		}
	}
	return f
}

// waitBFD waits until FRR's BFD session with each of nodes (every node
// when none are given) is up.
func (f *frr) waitBFD(t testing.TB, e *Env, nodes ...string) {
	t.Helper()
	if len(nodes) == 0 {
		for _, n := range e.Nodes {
			nodes = append(nodes, n.Name)
		}
	}
	e.Eventually(30*time.Second, "the nodes' BFD sessions up at FRR", func() error {
		out := f.vtysh("show bfd peers json")
		type peer struct {
			Peer   string `json:"peer"`
			Status string `json:"status"`
		}
		var peers []peer
		if err := json.Unmarshal([]byte(out), &peers); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, n := range nodes {
			ip := e.Node(n).IP.String()
			if !slices.ContainsFunc(peers, func(p peer) bool { return p.Peer == ip && p.Status == "up" }) {
				return fmt.Errorf("%s: %s", n, out)
			}
		}
		return nil
	})
}

// vtysh runs FRR commands.
func (f *frr) vtysh(cmds ...string) string {
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

// nextHops returns the next hops of the router's kernel route to vip
// (none without a route), sorted.
func (f *frr) nextHops(vip netip.Addr) ([]netip.Addr, error) {
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

// waitHops waits until the router's route to vip goes through exactly
// the nodes named and returns how long that took.
func (f *frr) waitHops(t testing.TB, e *Env, vip netip.Addr, timeout time.Duration, nodes ...string) time.Duration {
	t.Helper()
	var want []netip.Addr
	for _, n := range nodes {
		if vip.Is6() {
			want = append(want, e.Node(n).IP6)
		} else {
			want = append(want, e.Node(n).IP)
		}
	}
	slices.SortFunc(want, netip.Addr.Compare)
	start := time.Now()
	if err := poll(timeout, func() error {
		hops, err := f.nextHops(vip)
		if err != nil {
			return err
		}
		if !slices.Equal(hops, want) {
			return fmt.Errorf("next hops %v, want %v", hops, want)
		}
		return nil
	}); err != nil {
		t.Fatalf("route to %s at the router: %v\n%s", vip, err, f.vtysh("show bgp summary", "show bfd peers brief", "show ip bgp"))
	}
	return time.Since(start)
}

// path returns the node the router forwards the remote client's packets
// to vip through (with the L3 hash policy a flow's path depends on its
// addresses only).
func (f *frr) path(t testing.TB, e *Env, vip netip.Addr) string {
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
	for _, n := range e.Nodes {
		if n.IP.String() == hop[0].Gateway {
			return n.Name
		}
	}
	t.Fatalf("route to %s goes through %q, no node", vip, hop[0].Gateway)
	return ""
}

// l3Hash makes the router hash ECMP on addresses only until t ends: one
// client's flow then keeps one path, which path says.
func l3Hash(t testing.TB, e *Env) {
	e.Router.Run(t, "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=0")
	t.Cleanup(func() { _, _ = e.Router.RunErr("sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1") })
}

// otherThan is the first node of all that is not n.
func otherThan(all []string, n string) string {
	for _, m := range all {
		if m != n {
			return m
		}
	}
	return ""
}

// nodeOfJoinIP names the node whose gateway router has join address a
// (the source an ETP=Cluster backend sees).
func nodeOfJoinIP(e *Env, a netip.Addr) string {
	for _, n := range e.Nodes {
		if n.JoinIP == a || n.JoinIP6 == a {
			return n.Name
		}
	}
	return "?" + a.String()
}

// bgpSetup restarts the node instances with BGP and starts FRR; the
// router hashes ECMP on ports (L4), so connections of one client spread
// over the nodes.
func bgpSetup(t testing.TB) (*Env, *frr) {
	e := shared.With(t)
	e.RestartNodes(bgpNodeArgs...)
	t.Cleanup(func() { shared.With(t).RestartNodes() })
	f := startFRR(t, e)
	e.Router.Run(t, "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1")
	t.Cleanup(func() {
		_, _ = e.Router.RunErr("sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=0", "net.ipv6.fib_multipath_hash_policy=0")
	})
	e.Eventually(30*time.Second, "every node's BGP session established at FRR", func() error {
		out := f.vtysh("show bgp summary json")
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
		for _, n := range e.Nodes {
			if st := sum.IPv4.Peers[n.IP.String()].State; st != "Established" {
				// What both ends say, for the failure message.
				var logged strings.Builder
				if i := e.Instance(n.Name); i != nil {
					b, _ := os.ReadFile(i.Log)
					for _, l := range strings.Split(string(b), "\n") {
						if strings.Contains(l, "bgp") {
							logged.WriteString(l + "\n")
						}
					}
				}
				return fmt.Errorf("%s: %q\n%s\novnedge's bgp log lines:\n%s", n.Name, st,
					f.vtysh("show bgp neighbors "+n.IP.String()), logged.String())
			}
		}
		return nil
	})
	f.waitBFD(t, e)
	return e, f
}

// lbService is a LoadBalancer Service app=<selector> port (TCP 80 ->
// 8080, or UDP port -> port) with the given traffic policy.
func lbService(ns, name, selector string, etp corev1.ServiceExternalTrafficPolicy, udp int32) *corev1.Service {
	s := service(ns, name, selector, corev1.ServiceTypeLoadBalancer, etp)
	if udp > 0 {
		s.Spec.Ports = []corev1.ServicePort{{Name: "udp", Protocol: corev1.ProtocolUDP, Port: udp, TargetPort: intstr.FromInt32(udp)}}
	}
	return s
}

// setPodReady sets a pod's Ready condition, as its kubelet would.
func setPodReady(t testing.TB, e *Env, ns, name string, ready bool) {
	t.Helper()
	pods := e.CS.CoreV1().Pods(ns)
	p, err := pods.Get(e.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status = st
		}
	}
	if _, err := pods.UpdateStatus(e.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("pod %s/%s ready=%v: %v", ns, name, ready, err)
	}
}

// TestBGP proves --enable-bgp against a real FRR peer: ECMP routes in the
// router's kernel table bring an external client's connections to a VIP
// through several nodes, over IPv4 and IPv6 sessions; an ETP=Local Service's route leaves a node as
// soon as its local endpoint goes, while connections keep working through
// the others; an egress IP is announced from its assigned node alone
// (--bgp-announce-egress-ips); a dead node is removed by BFD (loss window
// of a stream measured); a restarted ovnedge keeps traffic flowing
// (graceful restart).
func TestBGP(t *testing.T) {
	e, f := bgpSetup(t)
	all := []string{w1, w2, w3}

	t.Run("ECMP", func(t *testing.T) {
		e := e.With(t)
		createService(t, e, lbService("shop", "bgp-cluster", "web", corev1.ServiceExternalTrafficPolicyCluster, 0))
		vip := e.LoadBalancerIP("shop", "bgp-cluster")
		took := f.waitHops(t, e, vip, 30*time.Second, all...)
		t.Logf("%s: routes through %v at FRR %v after the VIP was known", vip, all, took.Round(time.Millisecond))
		via := map[string]int{}
		for range 24 {
			_, client := answers(t, e, e.RemoteClient, vip.String()+":80")
			ap, err := netip.ParseAddrPort(client)
			if err != nil {
				t.Fatalf("client %q: %v", client, err)
			}
			via[nodeOfJoinIP(e, ap.Addr())]++
		}
		t.Logf("24 connections from %s to %s entered through %v", testbed.ClusterRemoteClientIP, vip, via)
		if len(via) < 2 {
			t.Errorf("connections entered through %v, want several nodes (ECMP)", via)
		}
	})

	t.Run("IPv6", func(t *testing.T) {
		e := e.With(t)
		createService(t, e, v6(lbService("shop", "bgp-cluster6", "web", corev1.ServiceExternalTrafficPolicyCluster, 0)))
		vip := e.LoadBalancerIP("shop", "bgp-cluster6")
		f.waitHops(t, e, vip, 30*time.Second, all...)
		via := map[string]int{}
		for range 24 {
			_, client := answers(t, e, e.RemoteClient, net.JoinHostPort(vip.String(), "80"))
			ap, err := netip.ParseAddrPort(client)
			if err != nil {
				t.Fatalf("client %q: %v", client, err)
			}
			via[nodeOfJoinIP(e, ap.Addr())]++
		}
		t.Logf("IPv6: %s/128 from every node over the IPv6 sessions; 24 connections from %s entered through %v",
			vip, testbed.ClusterRemoteClientIP6, via)
		if len(via) < 2 {
			t.Errorf("connections entered through %v, want several nodes (ECMP)", via)
		}
	})

	t.Run("LocalEndpointGone", func(t *testing.T) {
		e := e.With(t)
		for _, p := range []*corev1.Pod{ServerPod("shop", "bgp-a", w2, map[string]string{"app": "bgplocal"}, 8080),
			ServerPod("shop", "bgp-b", w3, map[string]string{"app": "bgplocal"}, 8080)} {
			e.EnsurePod(p)
			e.WaitPod("shop", p.Name)
		}
		createService(t, e, lbService("shop", "bgp-local", "bgplocal", corev1.ServiceExternalTrafficPolicyLocal, 0))
		vip := e.LoadBalancerIP("shop", "bgp-local")
		f.waitHops(t, e, vip, 30*time.Second, w2, w3)
		answers(t, e, e.RemoteClient, vip.String()+":80")
		// bgp-a stops being ready (its readiness probe fails, or it
		// terminates): the endpoint controller drops it from the ready
		// endpoints.
		deleted := time.Now()
		setPodReady(t, e, "shop", "bgp-a", false)
		t.Cleanup(func() { setPodReady(t, shared.With(t), "shop", "bgp-a", true) })
		failed, total := 0, 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			for time.Since(deleted) < 3*time.Second {
				total++
				if _, err := Reply(e.RemoteClient, vip.String()+":80", 1000, time.Second); err != nil {
					failed++
				}
			}
		}()
		took := f.waitHops(t, e, vip, 10*time.Second, w3)
		<-done
		t.Logf("bgp-a not ready: %s's route to %s withdrawn at FRR after %v; %d of %d connections during 3 s failed",
			w2, vip, took.Round(time.Millisecond), failed, total)
		for range 10 {
			if pod, _ := answers(t, e, e.RemoteClient, vip.String()+":80"); pod != "bgp-b" {
				t.Errorf("answered by %q, want bgp-b", pod)
			}
		}
	})

	t.Run("EgressIP", func(t *testing.T) {
		e := e.With(t)
		eip := netip.MustParseAddr("172.18.0.47")
		e.ApplyYAML(`
apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: bgp}
spec:
  egressIPs: [` + eip.String() + `]
  namespaceSelector: {matchLabels: {env: bgp-egress}}
`)
		t.Cleanup(func() { _ = e.Dyn.Resource(EgressGVR).Delete(e.Context(), "bgp", metav1.DeleteOptions{}) })
		node := e.EgressNode("bgp", eip, "")
		took := f.waitHops(t, e, eip, 30*time.Second, node)
		t.Logf("egress IP %s assigned to %s: announced from it alone (at FRR %v after the assignment was seen)", eip, node,
			took.Round(time.Millisecond))
	})

	t.Run("NodeDeathBFD", func(t *testing.T) {
		e := e.With(t)
		l3Hash(t, e)
		const port = 9410
		// The receiver's Service: its VIP's path decides the receiver's
		// node, so the selector is set once the path is known.
		svc := createService(t, e, lbService("shop", "bgp-udp", "none", corev1.ServiceExternalTrafficPolicyCluster, port))
		vip := e.LoadBalancerIP("shop", "bgp-udp")
		f.waitHops(t, e, vip, 30*time.Second, all...)
		// The stream enters through node `through`; its receiver lives
		// on another node.
		through := f.path(t, e, vip)
		svc = e.Service("shop", svc.Name)
		svc.Spec.Selector = map[string]string{"app": "bgpudp-" + otherThan(all, through)}
		if _, err := e.CS.CoreV1().Services("shop").Update(e.Context(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		rx := "bgp-udp-" + otherThan(all, through) // one receiver per node, kept for later runs
		e.EnsurePod(ServerPod("shop", rx, otherThan(all, through), map[string]string{"app": "bgpudp-" + otherThan(all, through)}))
		pod := e.WaitPod("shop", rx)
		s, err := StartStream(e.RemoteClient, pod.Netns, netip.AddrPortFrom(vip, port), 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		e.Eventually(30*time.Second, "stream to "+vip.String(), func() error { return s.ArrivedAfter(0, netip.Addr{}) })
		rest := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == through })
		// The machine dies: no packet leaves it any more (no FIN, no
		// notification), then its processes are gone.
		killed := time.Now()
		e.Node(through).SetUplink(false)
		e.KillNode(through)
		t.Cleanup(func() {
			e := shared.With(t)
			e.Node(through).SetUplink(true)
			e.RestoreNode(through)
		})
		removed := f.waitHops(t, e, vip, 10*time.Second, rest...)
		sent := s.Sent()
		if err := poll(10*time.Second, func() error { return s.ArrivedAfter(sent, netip.Addr{}) }); err != nil {
			t.Fatalf("stream after %s died: %v", through, err)
		}
		time.Sleep(200 * time.Millisecond)
		gap, lost := s.Gap(killed)
		t.Logf("%s died: its route removed at FRR (BFD 100 ms x 3) after %v; stream loss window %v (%d packets), now through %s",
			through, removed.Round(time.Millisecond), gap.Round(time.Millisecond), lost, f.path(t, e, vip))
		if gap > 2*time.Second {
			t.Errorf("loss window %v", gap)
		}
	})

	t.Run("GracefulRestart", func(t *testing.T) {
		e := e.With(t)
		l3Hash(t, e)
		const port = 9411
		svc := createService(t, e, lbService("shop", "bgp-gr", "none", corev1.ServiceExternalTrafficPolicyCluster, port))
		vip := e.LoadBalancerIP("shop", "bgp-gr")
		alive := all
		f.waitHops(t, e, vip, 60*time.Second, alive...)
		through := f.path(t, e, vip)
		rx := "bgp-gr-" + otherThan(all, through)
		e.EnsurePod(ServerPod("shop", rx, otherThan(all, through), map[string]string{"app": rx}))
		pod := e.WaitPod("shop", rx)
		svc = e.Service("shop", svc.Name)
		svc.Spec.Selector = map[string]string{"app": rx}
		if _, err := e.CS.CoreV1().Services("shop").Update(e.Context(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		s, err := StartStream(e.RemoteClient, pod.Netns, netip.AddrPortFrom(vip, port), 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		e.Eventually(30*time.Second, "stream to "+vip.String(), func() error { return s.ArrivedAfter(0, netip.Addr{}) })
		start := time.Now()
		// SIGTERM: ovnedge leaves without a notification; FRR keeps the
		// routes (stale) until the new instance's End-of-RIB. BFD goes
		// down too, after the TCP session: FRR's BFD only stops
		// established sessions, so a restart keeps the routes while a
		// dead node (BFD down first) loses them at once. (FRR's
		// "bfd check-control-plane-failure" would ignore BFD for every
		// graceful restart capable peer, dead nodes included: not set.)
		if err := e.Instance(through).Terminate(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // BFD would have removed the node 3 times over
		if hops, _ := f.nextHops(vip); len(hops) != len(alive) {
			t.Errorf("during the restart the route has next hops %v, want all of %v kept", hops, alive)
		}
		e.StartNode(through)
		f.waitHops(t, e, vip, 30*time.Second, alive...)
		time.Sleep(500 * time.Millisecond)
		gap, lost := s.Gap(start)
		t.Logf("ovnedge on %s (carrying the stream) restarted: routes kept throughout, stream loss window %v (%d packets)",
			through, gap.Round(time.Millisecond), lost)
		if gap > 500*time.Millisecond {
			t.Errorf("loss window %v during a graceful restart", gap)
		}
	})
}

// cordon sets node's spec.unschedulable and waits until its ovnedge has
// seen it (the line the node instance logs when the node's service state
// changes).
func cordon(t testing.TB, e *Env, node string, on bool) {
	t.Helper()
	n, err := e.CS.CoreV1().Nodes().Get(e.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Unschedulable = on
	if _, err := e.CS.CoreV1().Nodes().Update(e.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if i := e.Instance(node); on && i != nil && i.Alive() {
		e.Eventually(10*time.Second, node+"'s ovnedge sees the cordon", func() error {
			b, _ := os.ReadFile(i.Log)
			if !strings.Contains(string(b), "node service state changed") || !strings.Contains(string(b), "leaving=true") {
				return fmt.Errorf("not logged yet")
			}
			return nil
		})
	}
}

// TestBGPShutdownAndPeerCRDs (after TestBGP's graceful restart, which
// keeps the routes): a node that is leaving (cordoned) withdraws its
// routes when its ovnedge stops, so the router drops it at once instead
// of after the restart time; and the peers can come from MetalLB's
// BGPPeer and BFDProfile objects, per node by their nodeSelectors.
func TestBGPShutdownAndPeerCRDs(t *testing.T) {
	e, f := bgpSetup(t)
	all := []string{w1, w2, w3}

	t.Run("CordonedNodeWithdraws", func(t *testing.T) {
		e := e.With(t)
		createService(t, e, lbService("shop", "bgp-leave", "web", corev1.ServiceExternalTrafficPolicyCluster, 0))
		vip := e.LoadBalancerIP("shop", "bgp-leave")
		f.waitHops(t, e, vip, 60*time.Second, all...)
		cordon(t, e, w3, true)
		t.Cleanup(func() { cordon(t, e, w3, false) })
		if err := e.Instance(w3).Terminate(); err != nil {
			t.Fatal(err)
		}
		// The graceful restart time is 30 s (bgpNodeArgs): a route kept
		// for a restart would stay that long.
		took := f.waitHops(t, e, vip, 10*time.Second, w1, w2)
		t.Logf("cordoned %s's ovnedge stopped: its next hop left the router's route in %v (graceful restart would keep it 30 s)",
			w3, took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("route through the leaving node kept %v", took)
		}
		cordon(t, e, w3, false)
		e.StartNode(w3)
		f.waitHops(t, e, vip, 30*time.Second, all...)
	})

	t.Run("PeerCRDs", func(t *testing.T) {
		e := e.With(t)
		e.ApplyYAML(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: metallb-system}
---
apiVersion: metallb.io/v1beta1
kind: BFDProfile
metadata: {name: fast, namespace: metallb-system}
spec: {transmitInterval: 100, receiveInterval: 100, detectMultiplier: 3}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec:
  myASN: %d
  peerASN: %d
  peerAddress: %s
  holdTime: 9s
  bfdProfile: fast
  enableGracefulRestart: true
  nodeSelectors:
  - matchExpressions:
    - {key: kubernetes.io/hostname, operator: In, values: [%s, %s]}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: broken, namespace: metallb-system}
spec: {myASN: %d, peerAddress: 192.0.2.1}
`, nodeASN, frrASN, testbed.ClusterGatewayIP, w1, w2, nodeASN))
		// Nothing is left for later tests: MetalLB's native (L2) mode
		// refuses a configuration with a BFD profile or BGP peers in its
		// namespace (TestUnderlayMetalLB runs it there).
		t.Cleanup(func() {
			for _, name := range []string{"router", "broken"} {
				_ = e.Dyn.Resource(metallb.BGPPeerResource).
					Namespace("metallb-system").Delete(e.Context(), name, metav1.DeleteOptions{})
			}
			_ = e.Dyn.Resource(metallb.BFDProfileResource).
				Namespace("metallb-system").Delete(e.Context(), "fast", metav1.DeleteOptions{})
		})
		// The nodes' peers now come from the objects only.
		e.RestartNodes(append(slices.DeleteFunc(slices.Clone(bgpNodeArgs), func(a string) bool {
			return strings.HasPrefix(a, "--bgp-peer-address=")
		}), "--bgp-peer-crds")...)
		createService(t, e, lbService("shop", "bgp-crd", "web", corev1.ServiceExternalTrafficPolicyCluster, 0))
		vip := e.LoadBalancerIP("shop", "bgp-crd")
		took := f.waitHops(t, e, vip, 60*time.Second, w1, w2)
		t.Logf("BGPPeer selecting %s and %s: %s routed through them only (%v)", w1, w2, vip, took.Round(time.Millisecond))
		// FRR runs BFD with every neighbour; the sessions come up only
		// where ovnedge runs it too, from the BGPPeer's BFDProfile.
		f.waitBFD(t, e, w1, w2)
		ev := e.WaitEvent("metallb-system", "broken", metallb.ReasonInvalid)
		t.Logf("the broken BGPPeer: %s", ev)
		// Every node selected: the third node peers too, the others'
		// sessions stay up.
		e.ApplyYAML(fmt.Sprintf(`apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec: {myASN: %d, peerASN: %d, peerAddress: %s, holdTime: 9s, bfdProfile: fast, enableGracefulRestart: true}
`, nodeASN, frrASN, testbed.ClusterGatewayIP))
		took = f.waitHops(t, e, vip, 30*time.Second, all...)
		t.Logf("BGPPeer without nodeSelectors: %s through all three nodes after %v", vip, took.Round(time.Millisecond))
	})
}
