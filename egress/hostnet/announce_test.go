package hostnet

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/arp"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestAnnounceAfterAdd: with the arp package's Announcer wired in, the
// node that adds an egress IP to its host link tells its neighbours at
// once. A far host whose neighbour table still holds a stale entry for
// the egress IP (the old owner's MAC) learns the node's MAC without
// sending anything: the gratuitous ARP (IPv4) and the unsolicited
// neighbour advertisement (IPv6) did it. Without an announcer the entry
// keeps the old MAC.
func TestAnnounceAfterAdd(t *testing.T) {
	testbed.Require(t, "ip", "sysctl", "nft")
	node, far := testbed.NewNetns(t, "hgnode"), testbed.NewNetns(t, "hgfar")
	for _, n := range []*testbed.Netns{node, far} {
		n.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	}
	testbed.Link(t, node, "eg0", []string{"192.168.100.2/24", "fd00:100::2/64"}, far, "eth0", []string{"192.168.100.1/24", "fd00:100::1/64"})
	node.Run(t, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	// A link up for less than a second drops unsolicited neighbour
	// advertisements (IPv6 on it is still being set up); a node's links
	// are older than that.
	time.Sleep(time.Second)
	mac := strings.TrimSpace(node.Run(t, "cat", "/sys/class/net/eg0/address"))
	const oldMAC = "02:00:00:00:00:99"
	v4, v6, quiet := netip.MustParseAddr("192.168.100.50"), netip.MustParseAddr("fd00:100::50"), netip.MustParseAddr("192.168.100.51")
	for _, a := range []netip.Addr{v4, v6, quiet} {
		far.Run(t, "ip", "neigh", "replace", a.String(), "lladdr", oldMAC, "dev", "eth0", "nud", "stale")
	}
	neigh := func(a netip.Addr) string { return far.Run(t, "ip", "neigh", "show", a.String(), "dev", "eth0") }
	pod4, pod6 := netip.MustParseAddr("10.244.1.3"), netip.MustParseAddr("fd00:10:244:1::3")
	ctx := context.Background()

	// Without an announcer: the far host keeps the old owner's MAC.
	_, plain := openManager(t, backends[1], node, nil)
	if _, err := plain.Converge(ctx, State{{Link: "eg0", EgressIP: quiet, PodIPs: []netip.Addr{pod4}}}); err != nil {
		t.Fatalf("Converge: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if got := neigh(quiet); !strings.Contains(got, oldMAC) {
		t.Fatalf("without an announcer the far host's entry changed: %q", got)
	}
	if _, err := plain.Converge(ctx, nil); err != nil {
		t.Fatalf("Converge: %v", err)
	}

	ann, err := arp.NewAnnouncer(arp.AnnouncerConfig{Interval: 100 * time.Millisecond, Duration: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ann.Close)
	_, mgr := openManager(t, backends[1], node, ann)
	begin := time.Now()
	state := State{{Link: "eg0", EgressIP: v4, PodIPs: []netip.Addr{pod4}}, {Link: "eg0", EgressIP: v6, PodIPs: []netip.Addr{pod6}}}
	if _, err := mgr.Converge(ctx, state); err != nil {
		t.Fatalf("Converge: %v", err)
	}
	for _, a := range []netip.Addr{v4, v6} {
		err := waitUntil(2*time.Second, func() error {
			if got := neigh(a); !strings.Contains(got, mac) {
				return fmt.Errorf("far host's entry for %s: %q, want %s", a, got, mac)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("the far host learned %s and %s at %s %v after the converge began", v4, v6, mac, time.Since(begin).Round(time.Millisecond))

	// Removed (another node takes it over): the repeats stop, so no late
	// announcement points the far host back at this node.
	if _, err := mgr.Converge(ctx, nil); err != nil {
		t.Fatalf("Converge: %v", err)
	}
	for _, a := range []netip.Addr{v4, v6} {
		far.Run(t, "ip", "neigh", "replace", a.String(), "lladdr", oldMAC, "dev", "eth0", "nud", "stale")
	}
	time.Sleep(500 * time.Millisecond) // five intervals
	for _, a := range []netip.Addr{v4, v6} {
		if got := neigh(a); !strings.Contains(got, oldMAC) {
			t.Errorf("announced after its removal: the far host's entry for %s is %q", a, got)
		}
	}
}

// waitUntil polls cond every 10 ms until it returns nil or timeout.
func waitUntil(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
