package arp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
	"github.com/ovnedge/ovnedge/testbed"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// nodeNames are the two nodes of a lan, in order.
var nodeNames = [2]string{"node-a", "node-b"}

// TestLANElection runs a responder on each of two nodes bridged with a
// client, all in real network namespaces, and checks with arping, ndisc6
// and the client kernel's neighbour table that exactly the owner answers,
// that the next owner takes over when the owner dies, and that a removed
// address is answered no more. Who owns an address is the caller's
// election (ovnedge's: lbsvc.VIPOwners); here the first live node owns
// both.
func TestLANElection(t *testing.T) {
	l := newLAN(t)
	var resp [2]*Responder
	var stop [2]func()
	all := []netip.Addr{vip4, vip6}
	// assign gives addrs to the first of alive and nothing to the other.
	assign := func(addrs []netip.Addr, alive ...int) {
		t.Helper()
		for i := range resp {
			var set []netip.Addr
			if i == alive[0] {
				set = addrs
			}
			if err := resp[i].SetAddresses(set); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range resp {
		resp[i] = newResponder(t, "eth0")
		stop[i] = startResponder(t, l.node[i], resp[i])
	}
	own4, own6 := 0, 0
	assign(all, 0, 1)
	testbed.Eventually(t, 5*time.Second, func() error {
		if !slices.Contains(resp[own4].Addresses(), vip4) || !slices.Contains(resp[own6].Addresses(), vip6) {
			return fmt.Errorf("owners not set yet: %v %v", resp[0].Addresses(), resp[1].Addresses())
		}
		return nil
	})

	t.Run("arping gets one reply per request, from the owner", func(t *testing.T) {
		got := arping(t, l.client, "eth0", vip4, 3)
		want := []string{l.nodeMAC[own4], l.nodeMAC[own4], l.nodeMAC[own4]}
		if !slices.Equal(got, want) {
			t.Fatalf("arping %s: replies from %v, want %v (owner %s)", vip4, got, want, nodeNames[own4])
		}
		waitStats(t, resp[own4], vip4, ">= 3 requests and replies, >= 2 gratuitous", func(st Stats) bool {
			return st.RequestsSeen >= 3 && st.RepliesSent >= 3 && st.GratuitousSent >= 2
		})
		if st, ok := resp[1-own4].Stats()[vip4]; ok {
			t.Errorf("non-owner has stats for %s: %+v", vip4, st)
		}
	})

	t.Run("ndisc6 gets one advertisement, from the owner", func(t *testing.T) {
		got := ndisc(t, l.client, "eth0", vip6)
		if want := []string{l.nodeMAC[own6]}; !slices.Equal(got, want) {
			t.Fatalf("ndisc6 %s: advertisements from %v, want %v (owner %s)", vip6, got, want, nodeNames[own6])
		}
		waitStats(t, resp[own6], vip6, ">= 1 reply and gratuitous", func(st Stats) bool {
			return st.RepliesSent >= 1 && st.GratuitousSent >= 1
		})
	})

	t.Run("failover moves the client's neighbour entry", func(t *testing.T) {
		// The client kernel resolves both VIPs (nobody answers the echo).
		_, _ = l.client.RunErr("ping", "-c1", "-W1", vip4.String())
		_, _ = l.client.RunErr("ping", "-6", "-c1", "-W1", vip6.String())
		if got := neighMAC(t, l.client, "eth0", vip4); got != l.nodeMAC[own4] {
			t.Fatalf("client's entry for %s = %q, want the owner's %s", vip4, got, l.nodeMAC[own4])
		}
		next := 1 - own4
		moved := []netip.Addr{vip4} // what the owner's death moves
		if own6 == own4 {
			moved = append(moved, vip6)
		}
		to := func(node int) map[netip.Addr]string {
			m := map[netip.Addr]string{}
			for _, a := range moved {
				m[a] = l.nodeMAC[node]
			}
			return m
		}
		elapsed := failover(t, l, to(next), func() {
			stop[own4]() // the owner dies ...
		}, func() {
			assign(all, next) // ... and the election notices
		})
		for _, a := range moved {
			t.Logf("failover: client's neighbour entry for %s points at %s %v after the kill and the new election", a, nodeNames[next], elapsed[a])
		}
		if got := arping(t, l.client, "eth0", vip4, 2); !slices.Equal(got, []string{l.nodeMAC[next], l.nodeMAC[next]}) {
			t.Errorf("arping %s after failover: replies from %v, want 2 from %s", vip4, got, l.nodeMAC[next])
		}
		if got := ndisc(t, l.client, "eth0", vip6); !slices.Equal(got, []string{l.nodeMAC[next]}) {
			t.Errorf("ndisc6 %s after failover: advertisements from %v, want one from %s", vip6, got, l.nodeMAC[next])
		}

		// The owner comes back: both nodes are alive, what it owned moves
		// back and only it answers (no stale second responder).
		startResponder(t, l.node[own4], resp[own4])
		elapsed = failover(t, l, to(own4), func() {}, func() {
			assign(all, own4, next)
		})
		for _, a := range moved {
			t.Logf("failback: client's neighbour entry for %s points at %s %v after the new election", a, nodeNames[own4], elapsed[a])
		}
		if got, want := arping(t, l.client, "eth0", vip4, 3), []string{l.nodeMAC[own4], l.nodeMAC[own4], l.nodeMAC[own4]}; !slices.Equal(got, want) {
			t.Errorf("arping %s after failback: replies from %v, want %v", vip4, got, want)
		}

		// A removed address is answered no more, from the next request on.
		assign(all[1:], own4, next)
		testbed.Eventually(t, 5*time.Second, func() error {
			if slices.Contains(resp[own4].Addresses(), vip4) {
				return fmt.Errorf("%s still owned", vip4)
			}
			return nil
		})
		if got := arping(t, l.client, "eth0", vip4, 1); len(got) != 0 {
			t.Errorf("arping removed %s: replies from %v", vip4, got)
		}
	})
}

// failover subscribes to the client's neighbour table, runs kill, then
// change, and returns the time from then until the client's entry for
// each address in want points at its hardware address.
func failover(t testing.TB, l *lan, want map[netip.Addr]string, kill, change func()) map[netip.Addr]time.Duration {
	t.Helper()
	h, err := netns.GetFromName(l.client.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	updates := make(chan netlink.NeighUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.NeighSubscribeAt(h, updates, done); err != nil {
		t.Fatalf("subscribe to neighbours in %s: %v", l.client.Name, err)
	}
	kill()
	start := time.Now()
	change()
	got := map[netip.Addr]time.Duration{}
	timeout := time.After(10 * time.Second)
	for len(got) < len(want) {
		select {
		case u := <-updates:
			a, ok := netip.AddrFromSlice(u.IP)
			if mac, wanted := want[a.Unmap()]; ok && wanted && u.HardwareAddr.String() == mac {
				if _, seen := got[a.Unmap()]; !seen {
					got[a.Unmap()] = time.Since(start)
				}
			}
		case <-timeout:
			for a, mac := range want {
				if _, ok := got[a]; !ok {
					t.Errorf("client's entry for %s never pointed at %s; now %q", a, mac, neighMAC(t, l.client, "eth0", a))
				}
			}
			t.FailNow()
		}
	}
	return got
}

// TestRobustness feeds a responder on a link with no address at all
// malformed frames, foreign and gratuitous requests, then takes its
// interface down and up, deletes it and creates it again: it keeps
// answering only what it owns, and reattaches each time.
func TestRobustness(t *testing.T) {
	testbed.Require(t, "ip", "arping")
	client := testbed.NewNetns(t, "arpc")
	node := testbed.NewNetns(t, "arpn")
	r := newResponder(t, "vx0")
	if err := r.Add(vip4); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := inNetns(node, func() error { return r.Run(ctx) }) // vx0 does not exist yet
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testbed.Link(t, client, "eth0", []string{"192.0.2.1/24"}, node, "vx0", nil)
	waitAttached(t, r)
	c, ifi := rawConn(t, client, "eth0", etherTypeARP)

	client4 := netip.MustParseAddr("192.0.2.1")
	valid := request(t, arp.OperationRequest, ifi.HardwareAddr, client4, vip4)
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"header only", valid[:14]},
		{"truncated ARP", valid[:20]},
		{"huge lengths", append(slices.Clone(valid[:18]), 0xff, 0xff, 0, 1)},
		{"foreign request", request(t, arp.OperationRequest, ifi.HardwareAddr, client4, netip.MustParseAddr("192.0.2.99"))},
		{"reply for the address", request(t, arp.OperationReply, ifi.HardwareAddr, client4, vip4)},
		{"gratuitous request", request(t, arp.OperationRequest, ifi.HardwareAddr, vip4, vip4)},
	} {
		if _, err := c.WriteTo(tc.frame, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
			t.Fatalf("send %s: %v", tc.name, err)
		}
	}
	if _, err := c.WriteTo(valid, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
		t.Fatal(err)
	}
	nodeMAC := node.Run(t, "cat", "/sys/class/net/vx0/address")
	if err := c.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := readReply(t, c, vip4); got.String() != nodeMAC {
		t.Fatalf("reply for %s from %s, want %s", vip4, got, nodeMAC)
	}
	waitStats(t, r, vip4, "1 seen and 1 sent after one valid request among junk", func(st Stats) bool {
		return st.RequestsSeen == 1 && st.RepliesSent == 1
	})

	// The interface goes down and up again ...
	node.Run(t, "ip", "link", "set", "vx0", "down")
	waitDetached(t, r)
	node.Run(t, "ip", "link", "set", "vx0", "up")
	waitAttached(t, r)
	if got := arping(t, client, "eth0", vip4, 1); !slices.Equal(got, []string{nodeMAC}) {
		t.Errorf("arping %s after the link came up again: replies from %v, want 1 from %s", vip4, got, nodeMAC)
	}
	// ... vanishes (deleting one end deletes the pair) ...
	node.Run(t, "ip", "link", "del", "vx0")
	waitDetached(t, r)
	// ... and comes back, with another hardware address, which the
	// responder announces again.
	announced := r.Stats()[vip4].GratuitousSent
	testbed.Link(t, client, "eth0", []string{"192.0.2.1/24"}, node, "vx0", nil)
	waitAttached(t, r)
	newMAC := node.Run(t, "cat", "/sys/class/net/vx0/address")
	testbed.Eventually(t, 5*time.Second, func() error {
		if n := r.Stats()[vip4].GratuitousSent; n <= announced {
			return fmt.Errorf("%s not announced again after reattaching (%d gratuitous sent)", vip4, n)
		}
		return nil
	})
	if got := arping(t, client, "eth0", vip4, 2); !slices.Equal(got, []string{newMAC, newMAC}) {
		t.Errorf("arping %s after the link came back: replies from %v, want 2 from %s", vip4, got, newMAC)
	}
}

// waitDetached waits until r has closed its sockets.
func waitDetached(t testing.TB, r *Responder) {
	t.Helper()
	testbed.Eventually(t, 5*time.Second, func() error {
		if r.attachedMAC() != nil {
			return fmt.Errorf("responder on %s still attached", r.cfg.Interface)
		}
		return nil
	})
}

// readReply reads from c until an ARP reply for addr arrives and returns
// its sender hardware address.
func readReply(t testing.TB, c *packet.Conn, addr netip.Addr) net.HardwareAddr {
	t.Helper()
	buf := make([]byte, 2048)
	for {
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatalf("waiting for a reply for %s: %v", addr, err)
		}
		if p, ok := parseReply(buf[:n]); ok && p.SenderIP == addr {
			return p.SenderHardwareAddr
		}
	}
}

// parseReply parses an Ethernet frame holding an ARP reply.
func parseReply(b []byte) (*arp.Packet, bool) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil || f.EtherType != ethernet.EtherTypeARP {
		return nil, false
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil || p.Operation != arp.OperationReply {
		return nil, false
	}
	return &p, true
}
