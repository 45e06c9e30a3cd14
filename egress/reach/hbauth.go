package reach

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"
)

// Authenticated heartbeats (version 2), used when a key is configured
// (HeartbeatConfig.Key, ServerConfig.HeartbeatKey; the daemon's
// --egressip-heartbeat-key-file): every datagram carries a truncated
// HMAC-SHA256 under the shared key, so a forged request cannot renew a
// node's host lease and a forged reply cannot keep a dead node up.
//
//	request: "OEHB" | 2 | role   | session [8] | seq uint64 | unix ns int64 | mac [16]
//	reply:   "OEHR" | 2 | status | session [8] | seq uint64 | unix ns int64 | mac [16]
//
// The MAC covers the datagram before it and the responder's address (16
// bytes, IPv4 mapped), so a datagram meant for (or answered by) one node
// is worthless for another. Replays are refused:
//
//   - a request's session is the monitor's random identity, chosen once
//     per monitor; the responder takes a session's requests only with
//     increasing seq, and a request only within HeartbeatWindow of its
//     clock (so a captured request replayed to a responder that restarted
//     and forgot the session is refused too: node clocks must agree
//     within the window, as certificates need them to);
//   - a reply echoes the request's session and seq: the monitor takes it
//     only for its own session and its last Misses requests, as it does
//     unauthenticated replies.
//
// Without a key, heartbeats are version 1 and unauthenticated; a side
// with a key ignores version 1 datagrams and the other way round, so the
// key must be set on every instance or on none.
const (
	hbVersionAuth = 2
	hbMACLen      = 16
	hbAuthLen     = 4 + 1 + 1 + 8 + 8 + 8 + hbMACLen
	// HeartbeatWindow is how far a request's time may be from the
	// responder's clock.
	HeartbeatWindow = 10 * time.Second
	// MinHeartbeatKey is the shortest key accepted (bytes).
	MinHeartbeatKey = 16
)

// hbAuth is what an authenticated datagram says besides its magic.
type hbAuth struct {
	b       byte // role or status
	session [8]byte
	seq     uint64
	at      int64 // unix ns
}

// hbMAC is the MAC of an authenticated datagram's head for responder.
func hbMAC(key, head []byte, responder netip.Addr) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(head)
	a := responder.Unmap().As16()
	m.Write(a[:])
	return m.Sum(nil)[:hbMACLen]
}

func hbAuthPacket(key, magic []byte, p hbAuth, responder netip.Addr) []byte {
	b := make([]byte, hbAuthLen)
	copy(b, magic)
	b[4], b[5] = hbVersionAuth, p.b
	copy(b[6:14], p.session[:])
	binary.BigEndian.PutUint64(b[14:22], p.seq)
	binary.BigEndian.PutUint64(b[22:30], uint64(p.at))
	copy(b[30:], hbMAC(key, b[:30], responder))
	return b
}

// hbAuthParse checks an authenticated datagram's form and MAC.
func hbAuthParse(key, magic, b []byte, responder netip.Addr) (hbAuth, bool) {
	if len(b) != hbAuthLen || !bytes.Equal(b[:4], magic) || b[4] != hbVersionAuth {
		return hbAuth{}, false
	}
	if !hmac.Equal(b[30:], hbMAC(key, b[:30], responder)) {
		return hbAuth{}, false
	}
	var p hbAuth
	p.b = b[5]
	copy(p.session[:], b[6:14])
	p.seq = binary.BigEndian.Uint64(b[14:22])
	p.at = int64(binary.BigEndian.Uint64(b[22:30]))
	return p, true
}

func newSession() [8]byte {
	var s [8]byte
	_, _ = rand.Read(s[:]) // crypto/rand.Read never fails
	return s
}

// replayGuard remembers the last seq of every monitor session a
// responder heard within the window.
type replayGuard struct {
	mu       sync.Mutex
	window   time.Duration
	sessions map[[8]byte]seen
}

type seen struct {
	seq uint64
	at  time.Time
}

// maxSessions bounds the guard's memory: a cluster has a few monitors
// (the leader, and every node with L2 announce), each with one session
// per run.
const maxSessions = 4096

// fresh reports whether p is a request not heard before and within the
// window of now, and records it.
func (g *replayGuard) fresh(p hbAuth, now time.Time) bool {
	if d := now.Sub(time.Unix(0, p.at)); d > g.window || d < -g.window {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sessions == nil {
		g.sessions = map[[8]byte]seen{}
	}
	if s, ok := g.sessions[p.session]; ok && p.seq <= s.seq {
		return false
	}
	if len(g.sessions) >= maxSessions {
		for k, s := range g.sessions {
			if now.Sub(s.at) > g.window {
				delete(g.sessions, k)
			}
		}
		if len(g.sessions) >= maxSessions {
			return false
		}
	}
	g.sessions[p.session] = seen{seq: p.seq, at: now}
	return true
}

// ReadHeartbeatKey reads a heartbeat key file (a Secret's key, mounted):
// its bytes without surrounding white space, at least MinHeartbeatKey.
func ReadHeartbeatKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("heartbeat key: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < MinHeartbeatKey {
		return nil, fmt.Errorf("heartbeat key %s: %d bytes, want at least %d", path, len(b), MinHeartbeatKey)
	}
	return b, nil
}
