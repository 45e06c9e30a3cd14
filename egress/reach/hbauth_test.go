package reach

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var testKey = []byte("0123456789abcdef-heartbeat")

// listenUDP listens on addr (loopback) and closes at the end of the test.
func listenUDP(t *testing.T, addr string) net.PacketConn {
	t.Helper()
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange sends b to to from c and returns the reply, or nil after
// 200 ms of silence.
func exchange(t *testing.T, c net.PacketConn, to net.Addr, b []byte) []byte {
	t.Helper()
	if _, err := c.WriteTo(b, to); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 128)
	n, _, err := c.ReadFrom(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

// TestHeartbeatAuthResponder: with a key, a node's responder answers
// (and renews its lease on) authenticated, fresh leader requests only: an
// unauthenticated one, one under another key, one signed for another
// node, a replayed one and one from outside the time window are ignored,
// unanswered and renew nothing.
func TestHeartbeatAuthResponder(t *testing.T) {
	t.Parallel()
	self := netip.MustParseAddr("127.0.0.1")
	conn := listenUDP(t, "127.0.0.1:0")
	var renewed atomic.Int64
	r := &Responder{Conn: conn, Key: testKey, Addr: self, OnLeader: func() { renewed.Add(1) }}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	to := conn.LocalAddr()
	c := listenUDP(t, "127.0.0.1:0")

	session := newSession()
	now := time.Now().UnixNano()
	genuine := hbAuthPacket(testKey, hbRequest, hbAuth{b: 1, session: session, seq: 7, at: now}, self)
	reply := exchange(t, c, to, genuine)
	if p, ok := hbAuthParse(testKey, hbReply, reply, self); !ok || p.seq != 7 || p.session != session || p.b != 1 {
		t.Fatalf("genuine request: reply %x (%+v, %v)", reply, p, ok)
	}
	if renewed.Load() != 1 {
		t.Fatalf("genuine request: %d renewals, want 1", renewed.Load())
	}
	for _, c2 := range []struct {
		name string
		b    []byte
	}{
		{"unauthenticated", hbPacket(hbRequest, 1, 8)},
		{"other key", hbAuthPacket([]byte("another key, 16+ bytes"), hbRequest, hbAuth{b: 1, session: session, seq: 8, at: now}, self)},
		{"signed for another node", hbAuthPacket(testKey, hbRequest, hbAuth{b: 1, session: session, seq: 8, at: now}, netip.MustParseAddr("127.0.0.2"))},
		{"replayed", genuine},
		{"older seq", hbAuthPacket(testKey, hbRequest, hbAuth{b: 1, session: session, seq: 6, at: now}, self)},
		{"stale", hbAuthPacket(testKey, hbRequest, hbAuth{b: 1, session: newSession(), seq: 1, at: now - int64(time.Minute)}, self)},
		{"from the future", hbAuthPacket(testKey, hbRequest, hbAuth{b: 1, session: newSession(), seq: 1, at: now + int64(time.Minute)}, self)},
		{"tampered", func() []byte { b := append([]byte(nil), genuine...); b[21]++; return b }()},
	} {
		if got := exchange(t, c, to, c2.b); got != nil {
			t.Errorf("%s request answered: %x", c2.name, got)
		}
	}
	if renewed.Load() != 1 {
		t.Errorf("%d renewals after forged and replayed requests, want 1", renewed.Load())
	}
	// The session goes on with a higher seq.
	next := hbAuthPacket(testKey, hbRequest, hbAuth{b: 1, session: session, seq: 9, at: time.Now().UnixNano()}, self)
	if got := exchange(t, c, to, next); got == nil || renewed.Load() != 2 {
		t.Errorf("next request of the session: reply %x, %d renewals", got, renewed.Load())
	}
}

// TestHeartbeatAuthMonitor: with a key, the monitor takes authenticated
// replies of its own session only. A target whose "replies" are forged
// (unauthenticated, under another key, from another monitor's session,
// or replays of an old answer) goes down as a silent one does; the same
// target answering with the key stays up.
func TestHeartbeatAuthMonitor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		answer func(req hbAuth, self netip.Addr, first *[]byte) []byte
		up     bool
	}{
		{"genuine", func(req hbAuth, self netip.Addr, _ *[]byte) []byte {
			return hbAuthPacket(testKey, hbReply, hbAuth{b: 1, session: req.session, seq: req.seq}, self)
		}, true},
		{"unauthenticated", func(req hbAuth, _ netip.Addr, _ *[]byte) []byte { return hbPacket(hbReply, 1, req.seq) }, false},
		{"other key", func(req hbAuth, self netip.Addr, _ *[]byte) []byte {
			return hbAuthPacket([]byte("another key, 16+ bytes"), hbReply, hbAuth{b: 1, session: req.session, seq: req.seq}, self)
		}, false},
		{"other session", func(req hbAuth, self netip.Addr, _ *[]byte) []byte {
			return hbAuthPacket(testKey, hbReply, hbAuth{b: 1, session: newSession(), seq: req.seq}, self)
		}, false},
		{"replayed", func(req hbAuth, self netip.Addr, first *[]byte) []byte {
			if *first == nil {
				*first = hbAuthPacket(testKey, hbReply, hbAuth{b: 1, session: req.session, seq: req.seq}, self)
			}
			return *first
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// The target: a socket on the heartbeat port of a loopback
			// address of its own, answering every request as c says.
			self := netip.MustParseAddr("127.0.0.1")
			target := listenUDP(t, "127.0.0.1:0")
			port := target.LocalAddr().(*net.UDPAddr).Port
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			t.Cleanup(func() { cancel(); target.Close(); wg.Wait() })
			wg.Go(func() {
				buf := make([]byte, 128)
				var first []byte
				for {
					n, from, err := target.ReadFrom(buf)
					if err != nil {
						return
					}
					if req, ok := hbAuthParse(testKey, hbRequest, buf[:n], self); ok {
						_, _ = target.WriteTo(c.answer(req, self, &first), from)
					}
				}
			})
			h, err := NewHeartbeat(HeartbeatConfig{Interval: 20 * time.Millisecond, Misses: 3, Port: port, Key: testKey}, nil)
			if err != nil {
				t.Fatal(err)
			}
			h.SetTargets([]Target{{Node: "n", Addr: self}})
			wg.Go(func() { _ = h.Run(ctx) })
			time.Sleep(400 * time.Millisecond) // 20 intervals
			if got := h.Reachable("n"); got != c.up {
				t.Errorf("reachable %v, want %v", got, c.up)
			}
		})
	}
}

// TestHeartbeatRenew: a leader's requests renew a node's lease only while
// Renew says so.
func TestHeartbeatRenew(t *testing.T) {
	t.Parallel()
	conn := listenUDP(t, "127.0.0.1:0")
	var renewed atomic.Int64
	r := &Responder{Conn: conn, Key: testKey, OnLeader: func() { renewed.Add(1) }}
	var renew atomic.Bool
	renew.Store(true)
	h, err := NewHeartbeat(HeartbeatConfig{Interval: 10 * time.Millisecond, Port: conn.LocalAddr().(*net.UDPAddr).Port,
		Key: testKey, Leader: true, Renew: func(string) bool { return renew.Load() }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.SetTargets([]Target{{Node: "n", Addr: netip.MustParseAddr("127.0.0.1")}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	wg.Go(func() { _ = h.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	time.Sleep(100 * time.Millisecond)
	if renewed.Load() == 0 {
		t.Fatal("no renewal while Renew says yes")
	}
	renew.Store(false)
	time.Sleep(50 * time.Millisecond)
	before := renewed.Load()
	time.Sleep(200 * time.Millisecond)
	if after := renewed.Load(); after != before {
		t.Errorf("%d renewals while Renew says no", after-before)
	}
	if !h.Reachable("n") {
		t.Error("the node went down: it still answers")
	}
}
