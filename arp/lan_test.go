package arp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/packet"

	"github.com/ovnedge/ovnedge/testbed"
)

// Test addresses (documentation ranges), on links inside the test's own
// namespaces only.
var (
	vip4 = netip.MustParseAddr("192.0.2.50")
	vip6 = netip.MustParseAddr("2001:db8::50")
)

// lan is a client host and two nodes on one L2 segment: a Linux bridge
// in a fourth namespace. Each host's link is eth0. node[0] has no IPv4
// address at all (the case arp.Dial refuses); node[1] has 192.0.2.3.
type lan struct {
	client  *testbed.Netns
	node    [2]*testbed.Netns
	nodeMAC [2]string
}

func newLAN(t *testing.T) *lan {
	t.Helper()
	testbed.Require(t, "ip", "arping", "ndisc6", "ping")
	br := testbed.NewNetns(t, "arpbr")
	br.Run(t, "ip", "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	br.Run(t, "ip", "link", "set", "br0", "up")
	l := &lan{client: testbed.NewNetns(t, "arpc")}
	testbed.Link(t, l.client, "eth0", []string{"192.0.2.1/24", "2001:db8::1/64"}, br, "pc", nil)
	br.Run(t, "ip", "link", "set", "pc", "master", "br0")
	addrs := [2][]string{nil, {"192.0.2.3/24"}}
	for i := range l.node {
		l.node[i] = testbed.NewNetns(t, fmt.Sprintf("arpn%d", i))
		port := fmt.Sprintf("p%d", i)
		testbed.Link(t, l.node[i], "eth0", addrs[i], br, port, nil)
		br.Run(t, "ip", "link", "set", port, "master", "br0")
		l.nodeMAC[i] = l.node[i].Run(t, "cat", "/sys/class/net/eth0/address")
	}
	return l
}

// waitUntil polls cond every 20 ms until it returns nil, failing the test
// with cond's last error after timeout.
// waitStats waits until r's counters for addr satisfy ok. A reply is
// counted once its send returns, which can be after the client has read
// it and the test has gone on.
func waitStats(t testing.TB, r *Responder, addr netip.Addr, want string, ok func(Stats) bool) {
	t.Helper()
	testbed.Eventually(t, 2*time.Second, func() error {
		if st := r.Stats()[addr]; !ok(st) {
			return fmt.Errorf("stats for %s = %+v, want %s", addr, st, want)
		}
		return nil
	})
}

// inNetns runs fn inside ns (testbed.Netns.Do) on a goroutine of its own
// and returns its result when it ends.
func inNetns(ns *testbed.Netns, fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- ns.Do(fn) }()
	return done
}

// startResponder runs r inside ns until the returned stop is called (or
// the test ends) and waits until it is attached.
func startResponder(t testing.TB, ns *testbed.Netns, r *Responder) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := inNetns(ns, func() error { return r.Run(ctx) })
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run in %s: %v", ns.Name, err)
		}
	})
	t.Cleanup(stop)
	waitAttached(t, r)
	return stop
}

// waitAttached waits until r has its sockets open.
func waitAttached(t testing.TB, r *Responder) {
	t.Helper()
	testbed.Eventually(t, 10*time.Second, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.att == nil {
			return fmt.Errorf("responder on %s not attached", r.cfg.Interface)
		}
		return nil
	})
}

// newResponder returns a responder on iface with short announcement
// timing, failing the test on error.
func newResponder(t testing.TB, iface string) *Responder {
	t.Helper()
	r, err := New(Config{Interface: iface, Interval: 200 * time.Millisecond, Duration: time.Second, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var arpingReply = regexp.MustCompile(`reply from \S+ \[([0-9A-Fa-f:]+)\]`)

// arping sends up to count broadcast requests, one a second, for addr
// from the client's dev until count replies came, and returns the
// hardware addresses of the replies, lower case.
func arping(t testing.TB, ns *testbed.Netns, dev string, addr netip.Addr, count int) []string {
	t.Helper()
	// Exit status 1 means no reply: the caller judges the replies.
	out, _ := ns.RunErr("arping", "-b", "-c", fmt.Sprint(count), "-w", fmt.Sprint(count+1), "-I", dev, addr.String())
	var macs []string
	for _, m := range arpingReply.FindAllStringSubmatch(out, -1) {
		macs = append(macs, strings.ToLower(m[1]))
	}
	return macs
}

var ndiscReply = regexp.MustCompile(`Target link-layer address: ([0-9A-Fa-f:]+)`)

// ndisc solicits addr once from the client's dev, waits for every
// advertisement, and returns their target link-layer addresses.
func ndisc(t testing.TB, ns *testbed.Netns, dev string, addr netip.Addr) []string {
	t.Helper()
	out, _ := ns.RunErr("ndisc6", "-m", "-n", "-r", "1", "-w", "1000", addr.String(), dev)
	var macs []string
	for _, m := range ndiscReply.FindAllStringSubmatch(out, -1) {
		macs = append(macs, strings.ToLower(m[1]))
	}
	return macs
}

// neighMAC returns the client's neighbour entry's hardware address for
// addr on dev, or "" when there is none.
func neighMAC(t testing.TB, ns *testbed.Netns, dev string, addr netip.Addr) string {
	t.Helper()
	f := strings.Fields(ns.Run(t, "ip", "neigh", "show", addr.String(), "dev", dev))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "lladdr" {
			return strings.ToLower(f[i+1])
		}
	}
	return ""
}

// rawConn opens an AF_PACKET socket for the Ethernet protocol proto on
// dev inside ns, closed on cleanup; it sends and receives from any
// goroutine.
func rawConn(t testing.TB, ns *testbed.Netns, dev string, proto int) (*packet.Conn, *net.Interface) {
	t.Helper()
	var (
		c   *packet.Conn
		ifi *net.Interface
	)
	err := <-inNetns(ns, func() error {
		var err error
		if ifi, err = net.InterfaceByName(dev); err != nil {
			return err
		}
		c, err = packet.Listen(ifi, packet.Raw, proto, nil)
		return err
	})
	if err != nil {
		t.Fatalf("raw socket on %s in %s: %v", dev, ns.Name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, ifi
}
