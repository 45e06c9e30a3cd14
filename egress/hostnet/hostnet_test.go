package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/testbed"
)

// backend opens one SNAT backend on a namespace path.
type backend struct {
	name string
	open func(netnsPath string) (snatCloser, error)
}

type snatCloser interface {
	SNAT
	Close() error
}

var backends = []backend{
	{"iptables", func(p string) (snatCloser, error) { return NewIPTables(p) }},
	{"nftables", func(p string) (snatCloser, error) { return NewNFTables(p) }},
}

func nsPath(n *testbed.Netns) string { return "/var/run/netns/" + n.Name }

// recorder is an Announcer that records its calls.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) Announce(link string, ip netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, link+" "+ip.String())
	return nil
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// topology is the host-interface egress IP case in namespaces: a pod behind a
// node that forwards, the node's secondary link eg0 on 192.168.100.0/24
// to a far host that also owns 203.0.113.10 (on lo). The node's main table
// has no route to 203.0.113.10, so only the egress IP's rule and table
// take the pod there.
type topology struct {
	pod, node, far *testbed.Netns
	snat           snatCloser
	mgr            *Manager
	ann            *recorder
}

const (
	podIP    = "10.244.1.3"
	egressIP = "192.168.100.50"
	farIP    = "203.0.113.10"
)

func newTopology(t *testing.T, b backend) *topology {
	t.Helper()
	testbed.Require(t, "ip", "sysctl", "iptables", "ip6tables", "nft")
	tp := &topology{
		pod:  testbed.NewNetns(t, "hnpod"),
		node: testbed.NewNetns(t, "hnnode"),
		far:  testbed.NewNetns(t, "hnfar"),
		ann:  &recorder{},
	}
	testbed.Link(t, tp.pod, "eth0", []string{podIP + "/24"}, tp.node, "pod0", []string{"10.244.1.1/24"})
	testbed.Link(t, tp.node, "eg0", []string{"192.168.100.2/24"}, tp.far, "eth0", []string{"192.168.100.1/24"})
	tp.pod.Run(t, "ip", "route", "add", "default", "via", "10.244.1.1")
	tp.node.Run(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	tp.far.Run(t, "ip", "addr", "add", farIP+"/32", "dev", "lo")
	tp.far.Run(t, "ip", "route", "add", "10.244.0.0/16", "via", "192.168.100.2")
	tp.open(t, b)
	return tp
}

// open (re)opens the backend and the Manager, as a restarted daemon would.
func (tp *topology) open(t *testing.T, b backend) {
	t.Helper()
	tp.snat, tp.mgr = openManager(t, b, tp.node, tp.ann)
}

// openManager opens b's SNAT backend in node and a Manager on it
// announcing through ann (nil: none), both closed by t's cleanup.
func openManager(t testing.TB, b backend, node *testbed.Netns, ann Announcer) (snatCloser, *Manager) {
	t.Helper()
	snat, err := b.open(nsPath(node))
	if err != nil {
		t.Fatalf("open %s backend: %v", b.name, err)
	}
	mgr, err := New(Config{Netns: nsPath(node), SNAT: snat, Announcer: ann})
	if err != nil {
		_ = snat.Close()
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := errors.Join(mgr.Close(), snat.Close()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return snat, mgr
}

// sourceSeen opens a TCP connection from the pod to the far host and
// returns the source address the far host's listener sees, or the dial
// error.
func (tp *topology) sourceSeen(t *testing.T) (string, error) {
	t.Helper()
	far := mustNamespace(t, tp.far)
	var ln net.Listener
	if err := far.do(func() (err error) { ln, err = net.Listen("tcp", farIP+":0"); return err }); err != nil {
		t.Fatalf("listen on the far host: %v", err)
	}
	defer ln.Close()
	type accepted struct {
		peer string
		err  error
	}
	got := make(chan accepted, 1)
	go func() {
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			got <- accepted{err: err}
			return
		}
		defer c.Close()
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		got <- accepted{peer: host}
	}()
	pod := mustNamespace(t, tp.pod)
	var conn net.Conn
	err := pod.do(func() (err error) {
		conn, err = net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	a := <-got
	return a.peer, a.err
}

func mustNamespace(t *testing.T, n *testbed.Netns) *namespace {
	t.Helper()
	ns, err := openNamespace(nsPath(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.close() })
	return ns
}

// leftovers lists, with the system's own tools, everything of the Manager
// still in the node namespace.
func (tp *topology) leftovers(t *testing.T, b backend) []string {
	t.Helper()
	var left []string
	if out := tp.node.Run(t, "ip", "addr", "show", "dev", "eg0"); strings.Contains(out, egressIP) {
		left = append(left, "address: "+out)
	}
	for _, fam := range []string{"-4", "-6"} {
		for _, l := range strings.Split(tp.node.Run(t, "ip", fam, "rule"), "\n") {
			if strings.HasPrefix(l, "6000:") {
				left = append(left, "rule: "+l)
			}
		}
		if out := tp.node.Run(t, "ip", fam, "route", "show", "table", "all", "proto", "77"); out != "" {
			left = append(left, "routes: "+out)
		}
	}
	switch b.name {
	case "iptables":
		for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
			if out := tp.node.Run(t, cmd, "-t", "nat"); strings.Contains(out, ChainName) {
				left = append(left, cmd+": "+out)
			}
		}
	case "nftables":
		if out := tp.node.Run(t, "nft", "list", "ruleset"); strings.Contains(out, NFTablesTable) {
			left = append(left, "nft: "+out)
		}
	}
	return left
}

// TestSeed002HostInterface reproduces the host-interface egress IP of OVN-Kubernetes' example
// in real namespaces, for each SNAT backend: the pod's TCP connection
// reaches the far host with the egress IP as source; converging again
// changes nothing; a restarted Manager converging to an empty State
// removes the address, the priority-6000 rule, the table and the SNAT
// rules and chain, after which the pod's traffic no longer leaves by eg0.
func TestSeed002HostInterface(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			tp := newTopology(t, b)
			ctx := context.Background()
			if _, err := tp.sourceSeen(t); err == nil {
				t.Fatal("before any assignment the pod reached the far host; the test topology is wrong")
			}
			state := State{{Link: "eg0", EgressIP: netip.MustParseAddr(egressIP), PodIPs: []netip.Addr{netip.MustParseAddr(podIP)}}}
			res, err := tp.mgr.Converge(ctx, state)
			if err != nil {
				t.Fatalf("Converge: %v", err)
			}
			if res.AddrsAdded != 1 || res.RulesAdded != 1 || res.SNATAdded != 1 || res.RoutesAdded < 3 {
				t.Errorf("first converge: %+v, want 1 address, 1 rule, 1 SNAT, >= 3 routes", res)
			}
			if got, want := tp.ann.get(), []string{"eg0 " + egressIP}; !slices.Equal(got, want) {
				t.Errorf("announcements %v, want %v", got, want)
			}

			// The kernel state, as `ip` shows it.
			idx := tp.node.Run(t, "cat", "/sys/class/net/eg0/ifindex")
			table := strconv.Itoa(TableBase + mustAtoi(t, idx))
			if out := tp.node.Run(t, "ip", "rule"); !strings.Contains(out, "6000:\tfrom "+podIP+" lookup "+table) {
				t.Errorf("ip rule has no `6000: from %s lookup %s`:\n%s", podIP, table, out)
			}
			routes := tp.node.Run(t, "ip", "route", "show", "table", table)
			for _, want := range []string{"default dev eg0", "192.168.100.0/24 dev eg0"} {
				if !strings.Contains(routes, want) {
					t.Errorf("table %s lacks %q:\n%s", table, want, routes)
				}
			}
			if out := tp.node.Run(t, "ip", "addr", "show", "dev", "eg0"); !strings.Contains(out, egressIP+"/24") {
				t.Errorf("eg0 lacks %s/24:\n%s", egressIP, out)
			}

			src, err := tp.sourceSeen(t)
			if err != nil || src != egressIP {
				t.Fatalf("far host saw source %q (err %v), want %s", src, err, egressIP)
			}

			if res, err := tp.mgr.Converge(ctx, state); err != nil || res.Changes() != 0 {
				t.Errorf("second converge: %+v, %v; want no changes", res, err)
			}

			tp.open(t, b) // a restarted process knows nothing but the host
			res, err = tp.mgr.Converge(ctx, nil)
			if err != nil {
				t.Fatalf("Converge(empty): %v", err)
			}
			if res.AddrsRemoved != 1 || res.RulesRemoved != 1 || res.SNATRemoved != 1 || res.RoutesRemoved < 3 {
				t.Errorf("empty converge: %+v, want 1 address, 1 rule, 1 SNAT, >= 3 routes removed", res)
			}
			if left := tp.leftovers(t, b); len(left) > 0 {
				t.Errorf("left behind:\n%s", strings.Join(left, "\n"))
			}
			if rules, present, err := tp.snat.List(ctx); err != nil || present || len(rules) > 0 {
				t.Errorf("SNAT backend List: %v present=%v err=%v, want nothing", rules, present, err)
			}
			if src, err := tp.sourceSeen(t); err == nil {
				t.Errorf("after cleanup the pod still reached the far host (source %s)", src)
			}
			// With a plain route to the far host the pod now leaves unSNATed.
			tp.node.Run(t, "ip", "route", "add", farIP+"/32", "dev", "eg0")
			if src, err := tp.sourceSeen(t); err != nil || src != podIP {
				t.Errorf("after cleanup the far host saw source %q (err %v), want the pod's own %s", src, err, podIP)
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// snapshot is the node namespace's whole networking configuration.
func snapshot(t *testing.T, n *testbed.Netns) string {
	t.Helper()
	var b strings.Builder
	for _, argv := range [][]string{
		{"ip", "-d", "addr"}, {"ip", "-4", "rule"}, {"ip", "-6", "rule"},
		{"ip", "-4", "route", "show", "table", "all"}, {"ip", "-6", "route", "show", "table", "all"},
		{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"},
	} {
		fmt.Fprintf(&b, "## %s\n%s\n", strings.Join(argv, " "), n.Run(t, argv...))
	}
	// iptables-save prints a generation timestamp; drop comment lines.
	lines := strings.Split(b.String(), "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "# ") })
	return strings.Join(lines, "\n")
}

// settled returns the namespace's snapshot once carrier changes and IPv6
// link-local addresses of a fresh setup have stopped changing it: two
// snapshots alike and no address still tentative (duplicate address
// detection turns it into a plain one later).
func settled(t *testing.T, n *testbed.Netns) string {
	t.Helper()
	prev := snapshot(t, n)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		cur := snapshot(t, n)
		if cur == prev && !strings.Contains(cur, "tentative") {
			return cur
		}
		prev = cur
	}
	t.Fatal("the namespace's networking never settled")
	return ""
}

// TestRequirements checks each host-interface requirement against real links:
// every failing assignment is rejected with its reason, the host is left
// exactly as it was, and a valid assignment next to them still converges.
func TestRequirements(t *testing.T) {
	testbed.Require(t, "ip", "sysctl", "iptables", "ip6tables", "nft")
	node := testbed.NewNetns(t, "hnreq")
	peer := testbed.NewNetns(t, "hnpeer")
	testbed.Link(t, node, "eg0", []string{"192.168.100.2/24"}, peer, "p0", []string{"192.168.100.1/24"})
	testbed.Link(t, node, "down0", []string{"192.168.101.2/24"}, peer, "p1", nil)
	testbed.Link(t, node, "noaddr0", nil, peer, "p2", nil)
	testbed.Link(t, node, "fwoff0", []string{"192.168.102.2/24"}, peer, "p3", nil)
	testbed.Link(t, node, "fwoff6", []string{"fd00:102::2/64"}, peer, "p4", nil)
	testbed.Link(t, node, "peerdn0", []string{"192.168.103.2/24"}, peer, "p5", nil)
	node.Run(t, "ip", "link", "set", "down0", "down")
	peer.Run(t, "ip", "link", "set", "p5", "down")
	node.Run(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	node.Run(t, "sysctl", "-qw", "net.ipv4.conf.fwoff0.forwarding=0")
	node.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	node.Run(t, "sysctl", "-qw", "net.ipv6.conf.fwoff6.forwarding=0")
	// Other owners' NAT, which must stay untouched.
	node.Run(t, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", "eg0", "-j", "MASQUERADE")
	node.Run(t, "ip6tables", "-t", "nat", "-A", "POSTROUTING", "-o", "eg0", "-j", "MASQUERADE")
	node.Run(t, "nft", "add table inet other; add chain inet other post { type nat hook postrouting priority srcnat + 1; }; add rule inet other post oifname eg0 masquerade")

	pod := []netip.Addr{netip.MustParseAddr("10.244.1.3")}
	a := func(link, eip string, pods ...netip.Addr) Assignment {
		ip, _ := netip.ParseAddr(eip)
		return Assignment{Link: link, EgressIP: ip, PodIPs: pods}
	}
	bad := []struct {
		name string
		a    Assignment
		want Reason
	}{
		{"link missing", a("nosuch0", "192.168.100.60", pod...), ReasonLinkNotFound},
		{"link admin down", a("down0", "192.168.101.50", pod...), ReasonLinkDown},
		{"peer down (no carrier)", a("peerdn0", "192.168.103.50", pod...), ReasonLinkDown},
		{"no global address", a("noaddr0", "192.168.104.50", pod...), ReasonNoGlobalAddress},
		{"outside the link's networks", a("eg0", "10.99.0.5", pod...), ReasonNotInLinkNetwork},
		{"IPv4 forwarding off", a("fwoff0", "192.168.102.50", pod...), ReasonForwardingDisabled},
		{"IPv6 forwarding off", a("fwoff6", "fd00:102::50", netip.MustParseAddr("fd00:10:244::3")), ReasonForwardingDisabled},
		{"invalid egress IP", a("eg0", "", pod...), ReasonInvalid},
		{"loopback egress IP", a("eg0", "127.0.0.5", pod...), ReasonInvalid},
		{"pod of the other family", a("eg0", "192.168.100.61", netip.MustParseAddr("fd00::3")), ReasonInvalid},
		{"bad link name", a("a/b", "192.168.100.62", pod...), ReasonInvalid},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			_, mgr := openManager(t, b, node, nil)
			ctx := context.Background()
			t.Run("LinkOf", func(t *testing.T) {
				for network, want := range map[string]string{
					"192.168.100.0/24": "eg0", "192.168.102.0/24": "fwoff0", "fd00:102::/64": "fwoff6",
					"192.168.100.0/25": "", "10.99.0.0/16": "",
				} {
					got, err := mgr.LinkOf(netip.MustParsePrefix(network))
					if got != want || (err != nil) != (want == "") {
						t.Errorf("LinkOf(%s) = %q, %v; want %q", network, got, err, want)
					}
				}
			})
			before := settled(t, node)
			for _, tc := range bad {
				t.Run(tc.name, func(t *testing.T) {
					res, err := mgr.Converge(ctx, State{tc.a})
					var re *RequirementError
					if !errors.As(err, &re) || re.Reason != tc.want {
						t.Fatalf("err = %v, want a RequirementError %s", err, tc.want)
					}
					if !strings.Contains(err.Error(), tc.a.Link) {
						t.Errorf("error %q does not name the link", err)
					}
					if len(res.Rejected) != 1 || res.Changes() != 0 {
						t.Errorf("result %+v, want one rejection and no change", res)
					}
					if after := snapshot(t, node); after != before {
						t.Errorf("host changed:\n--- before\n%s\n--- after\n%s", before, after)
					}
				})
			}
			t.Run("partial success", func(t *testing.T) {
				state := State{a("eg0", "192.168.100.50", pod...)}
				for _, tc := range bad {
					state = append(state, tc.a)
				}
				res, err := mgr.Converge(ctx, state)
				if len(res.Rejected) != len(bad) {
					t.Errorf("%d rejected, want %d: %v", len(res.Rejected), len(bad), err)
				}
				if res.AddrsAdded != 1 || res.RulesAdded != 1 || res.SNATAdded != 1 {
					t.Errorf("valid assignment not converged: %+v", res)
				}
				for _, tc := range bad {
					if !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.a.Link)) {
						t.Errorf("aggregated error does not name %s", tc.a.Link)
					}
				}
				if _, err := mgr.Converge(ctx, nil); err != nil {
					t.Fatal(err)
				}
				if after := snapshot(t, node); after != before {
					t.Errorf("host not restored:\n--- before\n%s\n--- after\n%s", before, after)
				}
			})
		})
	}
}

// TestChanges converges a sequence of States and checks the exact changes
// of each step against a real namespace: pods and egress IPs coming and
// going, a pod moving to another egress IP, a conflict, IPv6.
func TestChanges(t *testing.T) {
	testbed.Require(t, "ip", "sysctl", "iptables", "ip6tables", "nft")
	ip := netip.MustParseAddr
	eg0 := func(eip string, pods ...string) Assignment {
		a := Assignment{Link: "eg0", EgressIP: ip(eip)}
		for _, p := range pods {
			a.PodIPs = append(a.PodIPs, ip(p))
		}
		return a
	}
	steps := []struct {
		name     string
		state    State
		want     Result // counts only
		rejected int
	}{
		{"one pod", State{eg0("192.168.100.50", "10.244.1.3")},
			Result{AddrsAdded: 1, RoutesAdded: 3, RulesAdded: 1, SNATAdded: 1}, 0},
		{"second pod", State{eg0("192.168.100.50", "10.244.1.3", "10.244.1.4")},
			Result{RulesAdded: 1, SNATAdded: 1}, 0},
		{"pod leaves", State{eg0("192.168.100.50", "10.244.1.4")},
			Result{RulesRemoved: 1, SNATRemoved: 1}, 0},
		{"second egress IP", State{eg0("192.168.100.50", "10.244.1.4"), eg0("192.168.100.51", "10.244.1.5")},
			Result{AddrsAdded: 1, RoutesAdded: 1, RulesAdded: 1, SNATAdded: 1}, 0},
		{"pod moves to the other egress IP", State{eg0("192.168.100.50"), eg0("192.168.100.51", "10.244.1.4", "10.244.1.5")},
			Result{SNATAdded: 1, SNATRemoved: 1}, 0},
		{"same pod in two assignments", State{eg0("192.168.100.50", "10.244.1.4"), eg0("192.168.100.51", "10.244.1.4", "10.244.1.5")},
			Result{AddrsRemoved: 1, RoutesRemoved: 1, RulesRemoved: 1, SNATAdded: 1, SNATRemoved: 2}, 1},
		{"IPv6", State{eg0("192.168.100.50", "10.244.1.4"), eg0("fd00:100::50", "fd00:10:244::4")},
			Result{AddrsAdded: 1, RoutesAdded: 3, RulesAdded: 1, SNATAdded: 1}, 0},
		{"empty", nil,
			Result{AddrsRemoved: 2, RoutesRemoved: 6, RulesRemoved: 2, SNATRemoved: 2}, 0},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			node := testbed.NewNetns(t, "hnchg")
			peer := testbed.NewNetns(t, "hnpeer")
			testbed.Link(t, node, "eg0", []string{"192.168.100.2/24", "fd00:100::2/64"}, peer, "p0", nil)
			node.Run(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
			node.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
			_, mgr := openManager(t, b, node, nil)
			for _, s := range steps {
				res, err := mgr.Converge(context.Background(), s.state)
				if len(res.Rejected) != s.rejected || (s.rejected == 0 && err != nil) {
					t.Fatalf("%s: rejected %v, err %v; want %d rejections", s.name, res.Rejected, err, s.rejected)
				}
				rejected := res.Rejected
				res.Rejected = nil
				if !reflect.DeepEqual(res, s.want) {
					t.Errorf("%s: %+v, want %+v", s.name, res, s.want)
				}
				if again, err := mgr.Converge(context.Background(), s.state); again.Changes() != 0 || (s.rejected == 0 && err != nil) {
					t.Errorf("%s again: %+v, %v; want no changes", s.name, again, err)
				}
				checkLeftover(t, s.name, node, s.state, rejected)
			}
		})
	}
}

// checkLeftover checks that Leftover finds the egress IPs of state that
// were not rejected, as a process started next would.
func checkLeftover(t *testing.T, step string, node *testbed.Netns, state State, rejected []*RequirementError) {
	t.Helper()
	var want []netip.Addr
	for _, a := range state {
		if !slices.ContainsFunc(rejected, func(r *RequirementError) bool { return r.EgressIP == a.EgressIP.Unmap() }) &&
			!slices.Contains(want, a.EgressIP.Unmap()) {
			want = append(want, a.EgressIP.Unmap())
		}
	}
	slices.SortFunc(want, netip.Addr.Compare)
	got, err := Leftover(nsPath(node))
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("%s: Leftover %v, %v; want %v", step, got, err, want)
	}
}

// TestFlowBeforeSNAT: a pod's UDP flow that left unSNATed before its
// assignment (its first packet made a conntrack entry without NAT, which
// every later packet refreshes, as when the reroute to this node comes
// before this node's rules) leaves from the egress IP once Converge has
// added the SNAT rule: the pod's connection tracking entries are deleted.
func TestFlowBeforeSNAT(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			tp := newTopology(t, b)
			tp.node.Run(t, "ip", "route", "add", farIP+"/32", "dev", "eg0")
			// Another pod's assignment first: the backend's NAT rules
			// exist, so connection tracking is on in the node and the
			// flow's first packet makes an entry.
			other := Assignment{Link: "eg0", EgressIP: netip.MustParseAddr(egressIP), PodIPs: []netip.Addr{netip.MustParseAddr("10.244.1.99")}}
			if _, err := tp.mgr.Converge(context.Background(), State{other}); err != nil {
				t.Fatalf("Converge: %v", err)
			}
			var sink *net.UDPConn
			if err := mustNamespace(t, tp.far).do(func() (err error) {
				sink, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(farIP+":9500")))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sink.Close() })
			var src net.Conn
			if err := mustNamespace(t, tp.pod).do(func() (err error) { src, err = net.Dial("udp", farIP+":9500"); return err }); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { src.Close() })
			seen := func(want string) error { // the flow's next packets arrive from want
				for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
					_, _ = src.Write([]byte("x"))
					_ = sink.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
					buf := make([]byte, 16)
					if _, from, err := sink.ReadFromUDP(buf); err == nil && from.AddrPort().Addr().String() == want {
						return nil
					}
				}
				return fmt.Errorf("no packet of the flow from %s", want)
			}
			if err := seen(podIP); err != nil {
				t.Fatalf("before the assignment: %v", err)
			}
			other.PodIPs = append(other.PodIPs, netip.MustParseAddr(podIP))
			res, err := tp.mgr.Converge(context.Background(), State{other})
			if err != nil {
				t.Fatalf("Converge: %v", err)
			}
			if res.ConntrackDeleted == 0 {
				t.Errorf("Converge deleted no connection tracking entry of %s: %+v", podIP, res)
			}
			if err := seen(egressIP); err != nil {
				t.Errorf("after the assignment: %v", err)
			}
		})
	}
}
