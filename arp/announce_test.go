package arp

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"github.com/ovnedge/ovnedge/testbed"
)

// requestFrame returns a broadcast ARP frame of op from mac and sender
// for target.
func requestFrame(op arp.Operation, mac net.HardwareAddr, sender, target netip.Addr) ([]byte, error) {
	p, err := arp.NewPacket(op, mac, sender, ethernet.Broadcast, target)
	if err != nil {
		return nil, fmt.Errorf("ARP packet: %w", err)
	}
	return marshalARP(p, ethernet.Broadcast, mac, nil, nil)
}

// request is requestFrame failing the test on error.
func request(t testing.TB, op arp.Operation, mac net.HardwareAddr, sender, target netip.Addr) []byte {
	t.Helper()
	b, err := requestFrame(op, mac, sender, target)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pair is a client and a node namespace joined by a veth, eth0 in the
// client and vx0 in the node, with a responder on vx0 and raw ARP and
// IPv6 sockets on the client's end.
type pair struct {
	client, node *testbed.Netns
	r            *Responder
	nodeMAC      net.HardwareAddr
	arpc, ndpc   *packet.Conn
	clientIfi    *net.Interface
}

// newPair builds a pair with neither end addressed, starts a responder
// with cfg on vx0 and opens the client's sockets.
func newPair(t testing.TB, cfg Config) *pair {
	t.Helper()
	p := newLink(t, cfg)
	p.arpc, p.clientIfi = rawConn(t, p.client, "eth0", etherTypeARP)
	p.ndpc, _ = rawConn(t, p.client, "eth0", int(ethernet.EtherTypeIPv6))
	return p
}

// newLink is newPair without the client's sockets.
func newLink(t testing.TB, cfg Config) *pair {
	t.Helper()
	testbed.Require(t, "ip")
	p := &pair{client: testbed.NewNetns(t, "arpc"), node: testbed.NewNetns(t, "arpn")}
	testbed.Link(t, p.client, "eth0", nil, p.node, "vx0", nil)
	cfg.Interface = "vx0"
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.r = r
	startResponder(t, p.node, r)
	p.nodeMAC = r.attachedMAC()
	return p
}

// attachedMAC returns the hardware address of the link r is attached to.
func (r *Responder) attachedMAC() net.HardwareAddr {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.att == nil {
		return nil
	}
	return r.att.ifi.HardwareAddr
}

// announcement is a gratuitous frame seen on the wire.
type announcement struct {
	kind string // "garp-request", "garp-reply" or "na"
	addr netip.Addr
	at   time.Time
}

// capture records the announcements from mac that arrive on c until the
// test ends.
type capture struct {
	mu   sync.Mutex
	seen []announcement
}

func (c *capture) add(a announcement) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, a)
}

// of returns the announcements of addr, of the given kinds.
func (c *capture) of(addr netip.Addr, kinds ...string) []announcement {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []announcement
	for _, a := range c.seen {
		if a.addr == addr && slices.Contains(kinds, a.kind) {
			out = append(out, a)
		}
	}
	return out
}

// captureAnnouncements reads p's client sockets until they are closed and
// records every well-formed announcement from the node: gratuitous ARP
// (sender = target, broadcast, the node's hardware address) and unsolicited
// advertisements with Override to all nodes carrying the node's address.
func captureAnnouncements(t testing.TB, p *pair) *capture {
	t.Helper()
	c := &capture{}
	read := func(conn *packet.Conn, parse func([]byte) (announcement, bool)) {
		buf := make([]byte, 2048)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return // closed at cleanup
			}
			if a, ok := parse(buf[:n]); ok {
				a.at = time.Now()
				c.add(a)
			}
		}
	}
	go read(p.arpc, func(b []byte) (announcement, bool) {
		var f ethernet.Frame
		var ap arp.Packet
		if f.UnmarshalBinary(b) != nil || ap.UnmarshalBinary(f.Payload) != nil ||
			!bytes.Equal(f.Destination, ethernet.Broadcast) || !bytes.Equal(f.Source, p.nodeMAC) ||
			!bytes.Equal(ap.SenderHardwareAddr, p.nodeMAC) || ap.SenderIP != ap.TargetIP {
			return announcement{}, false
		}
		kind := map[arp.Operation]string{arp.OperationRequest: "garp-request", arp.OperationReply: "garp-reply"}[ap.Operation]
		return announcement{kind: kind, addr: ap.SenderIP}, kind != ""
	})
	go read(p.ndpc, func(b []byte) (announcement, bool) {
		s, ok := parseNDP(b)
		if !ok || !bytes.Equal(s.srcMAC, p.nodeMAC) || s.dst != netip.IPv6LinkLocalAllNodes() ||
			!bytes.Equal(b[0:6], multicastMAC(s.dst)) {
			return announcement{}, false
		}
		na, ok := s.msg.(*ndp.NeighborAdvertisement)
		if !ok || !na.Override || na.Solicited || na.Router || len(na.Options) != 1 {
			return announcement{}, false
		}
		lla, ok := na.Options[0].(*ndp.LinkLayerAddress)
		if !ok || lla.Direction != ndp.Target || !bytes.Equal(lla.Addr, p.nodeMAC) {
			return announcement{}, false
		}
		return announcement{kind: "na", addr: na.TargetAddress}, true
	})
	return c
}

// TestAnnounceSchedule checks on the wire that a takeover is announced at
// once and then every Interval for Duration (a gratuitous ARP request and
// reply per round for IPv4, an unsolicited advertisement with Override for
// IPv6), that the counters match what was sent, and that a release stops
// the announcements.
func TestAnnounceSchedule(t *testing.T) {
	const interval, duration = 100 * time.Millisecond, 450 * time.Millisecond
	const rounds = 5 // at 0, 100, 200, 300 and 400 ms
	p := newPair(t, Config{Interval: interval, Duration: duration, Poll: 50 * time.Millisecond})
	c := captureAnnouncements(t, p)
	if err := p.r.SetAddresses([]netip.Addr{vip4, vip6}); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 5*time.Second, func() error {
		st := p.r.Stats()
		if st[vip4].GratuitousSent < 2*rounds || st[vip6].GratuitousSent < rounds {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	time.Sleep(3 * interval) // room for a round too many
	st := p.r.Stats()
	if st[vip4].GratuitousSent != 2*rounds || st[vip6].GratuitousSent != rounds {
		t.Errorf("gratuitous sent: %s %d, %s %d; want %d and %d", vip4, st[vip4].GratuitousSent, vip6, st[vip6].GratuitousSent, 2*rounds, rounds)
	}
	for _, tc := range []struct {
		addr netip.Addr
		kind string
	}{{vip4, "garp-request"}, {vip4, "garp-reply"}, {vip6, "na"}} {
		got := c.of(tc.addr, tc.kind)
		if len(got) != rounds {
			t.Errorf("%s %s on the wire: %d, want %d", tc.addr, tc.kind, len(got), rounds)
			continue
		}
		// The rounds' spacing on the wire is BenchmarkAnnounceSchedule's
		// to report.
		var gaps []time.Duration
		for i := 1; i < len(got); i++ {
			gaps = append(gaps, got[i].at.Sub(got[i-1].at).Round(time.Millisecond))
		}
		t.Logf("%s %s: %d rounds, gaps %v", tc.addr, tc.kind, len(got), gaps)
	}

	// Released in the middle of a schedule: the announcements stop.
	if err := p.r.SetAddresses(nil); err != nil {
		t.Fatal(err)
	}
	before := len(c.of(vip4, "garp-request", "garp-reply"))
	if err := p.r.Add(vip4); err != nil { // taken over again: announced again
		t.Fatal(err)
	}
	testbed.Eventually(t, 5*time.Second, func() error {
		if n := len(c.of(vip4, "garp-request", "garp-reply")); n == before {
			return fmt.Errorf("no announcement after the second takeover")
		}
		return nil
	})
	p.r.Remove(vip4)
	time.Sleep(duration + 2*interval)
	if n := len(c.of(vip4, "garp-request", "garp-reply")) - before; n >= 2*rounds {
		t.Errorf("%d gratuitous frames after a release in the first round, want fewer than a full schedule (%d)", n, 2*rounds)
	}
}

// answered sends the frames in order on p's client socket and returns the
// addresses answered, reading until the reply for last (the last frame's
// target, which must be owned) arrives: the responder handles frames in
// order, so whatever is not answered by then was not answered.
func answered(t testing.TB, p *pair, last netip.Addr, frames ...[]byte) []netip.Addr {
	t.Helper()
	for _, f := range frames {
		if _, err := p.arpc.WriteTo(f, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.arpc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var got []netip.Addr
	buf := make([]byte, 2048)
	for {
		n, _, err := p.arpc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("waiting for the reply for %s (answered so far: %v): %v", last, got, err)
		}
		rep, ok := parseReply(buf[:n])
		if !ok || !bytes.Equal(rep.TargetHardwareAddr, p.clientIfi.HardwareAddr) {
			continue // not a reply to us (e.g. a gratuitous one)
		}
		got = append(got, rep.SenderIP)
		if rep.SenderIP == last {
			return got
		}
	}
}

// TestSetChanges checks that a removed address is not answered from the
// very next request on, and that changing the owned set many times while
// requests stream in loses none of them.
func TestSetChanges(t *testing.T) {
	p := newPair(t, Config{Poll: 50 * time.Millisecond})
	other := netip.MustParseAddr("192.0.2.51")
	client := netip.MustParseAddr("192.0.2.1")
	if err := p.r.SetAddresses([]netip.Addr{vip4, other}); err != nil {
		t.Fatal(err)
	}
	mac := p.clientIfi.HardwareAddr
	reqVIP := request(t, arp.OperationRequest, mac, client, vip4)
	reqOther := request(t, arp.OperationRequest, mac, client, other)

	t.Run("removed address is not answered from the next request on", func(t *testing.T) {
		if got := answered(t, p, other, reqVIP, reqOther); !slices.Equal(got, []netip.Addr{vip4, other}) {
			t.Fatalf("answered %v before the removal, want both", got)
		}
		p.r.Remove(vip4)
		if got := answered(t, p, other, reqVIP, reqOther); !slices.Equal(got, []netip.Addr{other}) {
			t.Fatalf("answered %v right after removing %s, want only %s", got, vip4, other)
		}
		if err := p.r.Add(vip4); err != nil {
			t.Fatal(err)
		}
		if got := answered(t, p, other, reqVIP, reqOther); !slices.Equal(got, []netip.Addr{vip4, other}) {
			t.Fatalf("answered %v right after adding %s back, want both", got, vip4)
		}
	})

	t.Run("no request lost while the set changes", func(t *testing.T) {
		// Every request answered so far is counted as sent (the last
		// reply may still be in flight), then the counters are taken.
		waitStats(t, p.r, other, "every request seen answered", func(st Stats) bool { return st.RepliesSent == st.RequestsSeen })
		start := p.r.Stats()[other]
		stop := make(chan struct{})
		churned := make(chan int)
		go func() {
			n := 0
			// An IPv6 address: its announcements do not crowd the ARP socket.
			extra := netip.MustParseAddr("2001:db8::52")
			for {
				select {
				case <-stop:
					churned <- n
					return
				default:
				}
				var err error
				if n%2 == 0 {
					err = p.r.SetAddresses([]netip.Addr{other, extra})
				} else {
					err = p.r.SetAddresses([]netip.Addr{other})
				}
				if err != nil {
					t.Error(err)
				}
				n++
			}
		}()
		const requests = 300
		for i := range requests {
			if got := answered(t, p, other, reqOther); !slices.Equal(got, []netip.Addr{other}) {
				t.Fatalf("request %d: answered %v", i, got)
			}
		}
		close(stop)
		changes := <-churned
		waitStats(t, p.r, other, fmt.Sprintf("%d more requests seen and replies sent than %+v", requests, start), func(st Stats) bool {
			return st.RequestsSeen-start.RequestsSeen == requests && st.RepliesSent-start.RepliesSent == requests
		})
		t.Logf("%d requests answered during %d changes of the owned set", requests, changes)
	})
}

// BenchmarkAnnounceSchedule reports how a takeover's announcements are
// spaced on the wire (Interval 100 ms, Duration 450 ms: 5 rounds):
// span-ms from the first to the last gratuitous ARP request (400 ms when
// timers fire on time) and min-gap-ms, the shortest gap between rounds.
func BenchmarkAnnounceSchedule(b *testing.B) {
	const interval, duration = 100 * time.Millisecond, 450 * time.Millisecond
	const rounds = 5
	p := newPair(b, Config{Interval: interval, Duration: duration, Poll: 50 * time.Millisecond})
	c := captureAnnouncements(b, p)
	var span time.Duration
	minGap := time.Hour
	for b.Loop() {
		before := len(c.of(vip4, "garp-request"))
		if err := p.r.SetAddresses([]netip.Addr{vip4}); err != nil {
			b.Fatal(err)
		}
		testbed.Eventually(b, 5*time.Second, func() error {
			if n := len(c.of(vip4, "garp-request")) - before; n < rounds {
				return fmt.Errorf("%d of %d rounds", n, rounds)
			}
			return nil
		})
		got := c.of(vip4, "garp-request")[before : before+rounds]
		span += got[rounds-1].at.Sub(got[0].at)
		for i := 1; i < rounds; i++ {
			minGap = min(minGap, got[i].at.Sub(got[i-1].at))
		}
		if err := p.r.SetAddresses(nil); err != nil {
			b.Fatal(err)
		}
		time.Sleep(duration) // let the schedule's timers lapse
	}
	b.ReportMetric(float64(span.Microseconds())/1000/float64(b.N), "span-ms")
	b.ReportMetric(float64(minGap.Microseconds())/1000, "min-gap-ms")
}
