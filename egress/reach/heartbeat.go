package reach

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// The heartbeat is ovnedge's fast failover detector (not part of
// OVN-Kubernetes; opt-in): the monitor sends a small UDP datagram to
// every target's management IP each Interval, the node's Responder echoes
// it with its status, and a target that has not answered for Misses
// intervals (or answers that it cannot serve) is down. With 100 ms and 3
// misses a dead node is reported 300-400 ms after its last answer.
//
// Datagrams (network byte order):
//
//	request: "OEHB" | version 1 | role (bit 0 leader, bit 1 asks heard) | seq uint64
//	reply:   "OEHR" | version 1 | status (0 not serving, else serving) | seq uint64
//
// The status answering a request that asks whether the requester is
// heard says that too (heard.go); other requests get 1 when serving.
//
// These version 1 datagrams are not authenticated; with a key, version 2
// datagrams carry an HMAC and are replay-protected (see hbauth.go).
const (
	DefaultHeartbeatInterval = 100 * time.Millisecond
	DefaultHeartbeatMisses   = 3
	// DefaultHeartbeatPort is the UDP port nodes answer heartbeats on.
	DefaultHeartbeatPort = 9108
)

var (
	hbRequest = []byte("OEHB")
	hbReply   = []byte("OEHR")
)

const (
	hbVersion = 1
	hbLen     = 14
)

func hbPacket(magic []byte, b byte, seq uint64) []byte {
	p := make([]byte, hbLen)
	copy(p, magic)
	p[4], p[5] = hbVersion, b
	binary.BigEndian.PutUint64(p[6:], seq)
	return p
}

func hbParse(magic, p []byte) (b byte, seq uint64, ok bool) {
	if len(p) != hbLen || !bytes.Equal(p[:4], magic) || p[4] != hbVersion {
		return 0, 0, false
	}
	return p[5], binary.BigEndian.Uint64(p[6:]), true
}

// Responder answers heartbeats on Conn until its context ends.
type Responder struct {
	Conn net.PacketConn
	// Status is asked for every reply; nil means serving.
	Status StatusFunc
	// OnLeader is called for every request a leader sent (role 1): the
	// node's proof that the leader still sees it.
	OnLeader func()
	// Hears, when not nil, tells a requester that asks (a node monitor
	// with AskHeard) how long ago this node's own monitor last heard the
	// requester's address (Heartbeat.Age of the node's monitor); ok
	// false when it does not monitor that address.
	Hears func(from netip.Addr) (age time.Duration, ok bool)
	// Key, when set, makes the responder take authenticated requests
	// only (version 2), fresh ones (not replayed, within Window of its
	// clock; HeartbeatWindow when 0), and sign its replies. Addr is the
	// responder's own address, which the MACs cover (Conn's local
	// address when invalid).
	Key    []byte
	Addr   netip.Addr
	Window time.Duration
}

// Run answers until ctx ends, then closes Conn.
func (r *Responder) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { r.Conn.Close() })
	defer stop()
	self := r.Addr
	if !self.IsValid() {
		if ua, ok := r.Conn.LocalAddr().(*net.UDPAddr); ok {
			self = ua.AddrPort().Addr().Unmap()
		}
	}
	guard := &replayGuard{window: cmp.Or(r.Window, HeartbeatWindow)}
	buf := make([]byte, 64)
	for {
		n, from, err := r.Conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("heartbeat responder: %w", err)
		}
		var role byte
		var req hbAuth
		if r.Key != nil {
			var ok bool
			if req, ok = hbAuthParse(r.Key, hbRequest, buf[:n], self); !ok || !guard.fresh(req, time.Now()) {
				continue // forged, replayed, stale or unauthenticated
			}
			role = req.b
		} else {
			var ok bool
			if role, req.seq, ok = hbParse(hbRequest, buf[:n]); !ok {
				continue
			}
		}
		if role&hbRoleLeader != 0 && r.OnLeader != nil {
			r.OnLeader()
		}
		st := r.status(role, from)
		reply := hbPacket(hbReply, st, req.seq)
		if r.Key != nil {
			reply = hbAuthPacket(r.Key, hbReply, hbAuth{b: st, session: req.session, seq: req.seq, at: time.Now().UnixNano()}, self)
		}
		_, _ = r.Conn.WriteTo(reply, from)
	}
}

// status is the reply's status byte to a request of role from from.
func (r *Responder) status(role byte, from net.Addr) byte {
	switch {
	case r.Status != nil && !r.Status():
		return hbNotServing
	case role&hbRoleAskHeard == 0 || r.Hears == nil:
		return hbServing
	}
	ua, ok := from.(*net.UDPAddr)
	if !ok {
		return hbServing
	}
	return heardStatus(r.Hears(ua.AddrPort().Addr().Unmap()))
}

// HeartbeatConfig configures a Heartbeat monitor.
type HeartbeatConfig struct {
	// Interval between heartbeats (DefaultHeartbeatInterval when 0) and
	// Misses, the intervals without an answer after which a target is
	// down (DefaultHeartbeatMisses when 0).
	Interval time.Duration
	Misses   int
	// Port is the targets' heartbeat port (DefaultHeartbeatPort when 0).
	Port int
	// Leader marks the requests as the leader's (Responder.OnLeader),
	// to the targets that are up and for which Renew (when not nil) says
	// so: a node the leader no longer counts on (one whose answers stopped
	// arriving, though it may still hear the requests) gets requests that
	// do not renew its host lease.
	Leader bool
	Renew  func(node string) bool
	// AskHeard makes the requests ask every target whether it hears this
	// node, for Hearing (a node monitor among nodes: see heard.go);
	// targets are then down after Misses+2 intervals. OnHearing, when not
	// nil, is called (from one goroutine) when a target's Hearing
	// changes.
	AskHeard  bool
	OnHearing func(node string)
	// Key, when set, authenticates the heartbeats (version 2, see
	// hbauth.go); the responders must have the same key.
	Key []byte
	// ListenPacket opens the monitor's socket; nil listens on an
	// ephemeral UDP port of every address.
	ListenPacket func(ctx context.Context) (net.PacketConn, error)
	Logger       *slog.Logger
}

// Heartbeat monitors targets with heartbeats and reports when one becomes
// reachable or unreachable.
type Heartbeat struct {
	cfg      HeartbeatConfig
	onChange func(node string, up bool)

	mu      sync.Mutex
	targets map[string]*hbTarget
	byAddr  map[netip.Addr]*hbTarget // the targets by address (Age)
	seq     uint64
	sent    []time.Time // when request seq was sent, at seq % len
	kick    chan struct{}
	session [8]byte // this monitor's identity in authenticated requests
}

type hbTarget struct {
	addr   netip.Addr
	lastOK time.Time // last serving answer, or when the target was added
	up     bool
	// grant is until when (AskHeard) the target cannot count this node
	// down, by the answer to request grantSeq; hearing is the last state
	// reported.
	grant    time.Time
	grantSeq uint64
	hearing  hearing
}

// NewHeartbeat returns a monitor calling onChange (from one goroutine)
// with each change of a target's state; a target starts up and is
// reported only when that changes.
func NewHeartbeat(cfg HeartbeatConfig, onChange func(node string, up bool)) (*Heartbeat, error) {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultHeartbeatInterval
	}
	if cfg.Misses == 0 {
		cfg.Misses = DefaultHeartbeatMisses
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultHeartbeatPort
	}
	switch {
	case cfg.Interval < 0 || cfg.Misses < 0:
		return nil, fmt.Errorf("heartbeat: negative interval or misses")
	case cfg.Port < 0 || cfg.Port > 65535:
		return nil, fmt.Errorf("heartbeat: port %d out of range", cfg.Port)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if onChange == nil {
		onChange = func(string, bool) {}
	}
	if cfg.Key != nil && len(cfg.Key) < MinHeartbeatKey {
		return nil, fmt.Errorf("heartbeat: key of %d bytes, want at least %d", len(cfg.Key), MinHeartbeatKey)
	}
	return &Heartbeat{cfg: cfg, onChange: onChange, targets: map[string]*hbTarget{}, byAddr: map[netip.Addr]*hbTarget{}, kick: make(chan struct{}, 1),
		session: newSession(), sent: make([]time.Time, cfg.Misses+1)}, nil
}

// SetTargets replaces the targets. A new target (or one whose address
// changed) starts up, with Misses intervals to answer.
func (h *Heartbeat) SetTargets(targets []Target) {
	h.mu.Lock()
	defer h.mu.Unlock()
	keep := map[string]bool{}
	for _, t := range targets {
		keep[t.Node] = true
		if cur, ok := h.targets[t.Node]; ok && cur.addr == t.Addr {
			continue
		}
		h.targets[t.Node] = &hbTarget{addr: t.Addr, lastOK: time.Now(), up: true}
	}
	for n := range h.targets {
		if !keep[n] {
			delete(h.targets, n)
		}
	}
	clear(h.byAddr)
	for _, t := range h.targets {
		h.byAddr[t.addr.Unmap()] = t
	}
}

// Reachable reports whether node answers its heartbeats; a node that is
// not a target is reachable.
func (h *Heartbeat) Reachable(node string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.targets[node]
	return !ok || t.up
}

// Run sends heartbeats and watches the answers until ctx ends.
func (h *Heartbeat) Run(ctx context.Context) error {
	listen := h.cfg.ListenPacket
	if listen == nil {
		listen = func(ctx context.Context) (net.PacketConn, error) {
			return (&net.ListenConfig{}).ListenPacket(ctx, "udp", ":0")
		}
	}
	conn, err := listen(ctx)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { h.receive(ctx, conn) })
	send := time.NewTicker(h.cfg.Interval)
	defer send.Stop()
	check := time.NewTicker(max(h.cfg.Interval/4, time.Millisecond))
	defer check.Stop()
	h.send(conn)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-send.C:
			h.send(conn)
		case <-check.C:
			h.evaluate(time.Now())
		case <-h.kick:
			h.evaluate(time.Now())
		}
	}
}

func (h *Heartbeat) send(conn net.PacketConn) {
	h.mu.Lock()
	h.seq++
	seq := h.seq
	h.sent[seq%uint64(len(h.sent))] = time.Now()
	type dest struct {
		node string
		addr netip.Addr
		up   bool
	}
	dests := make([]dest, 0, len(h.targets))
	for n, t := range h.targets {
		dests = append(dests, dest{n, t.addr, t.up})
	}
	h.mu.Unlock()
	now := time.Now().UnixNano()
	for _, d := range dests {
		var role byte
		if h.cfg.Leader && d.up && (h.cfg.Renew == nil || h.cfg.Renew(d.node)) {
			role = hbRoleLeader
		}
		if h.cfg.AskHeard {
			role |= hbRoleAskHeard
		}
		p := hbPacket(hbRequest, role, seq)
		if h.cfg.Key != nil {
			p = hbAuthPacket(h.cfg.Key, hbRequest, hbAuth{b: role, session: h.session, seq: seq, at: now}, d.addr)
		}
		to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(d.addr, uint16(h.cfg.Port)))
		if _, err := conn.WriteTo(p, to); err != nil {
			h.cfg.Logger.Debug("heartbeat not sent", "to", to.String(), "err", err)
		}
	}
}

func (h *Heartbeat) receive(ctx context.Context, conn net.PacketConn) {
	buf := make([]byte, 64)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		ua, isUDP := from.(*net.UDPAddr)
		if !isUDP || int(ua.Port) != h.cfg.Port {
			continue
		}
		src := ua.AddrPort().Addr().Unmap()
		var st byte
		var seq uint64
		if h.cfg.Key != nil {
			p, ok := hbAuthParse(h.cfg.Key, hbReply, buf[:n], src)
			if !ok || p.session != h.session {
				continue // forged, another monitor's, or unauthenticated
			}
			st, seq = p.b, p.seq
		} else {
			var ok bool
			if st, seq, ok = hbParse(hbReply, buf[:n]); !ok {
				continue
			}
		}
		now := time.Now()
		h.mu.Lock()
		fresh := seq <= h.seq && h.seq-seq < uint64(h.cfg.Misses)
		changed := false
		for _, t := range h.targets {
			if t.addr != src || !fresh {
				continue
			}
			if st != hbNotServing {
				t.lastOK = now
				changed = changed || !t.up
			} else {
				changed = changed || t.up // told: not serving
				t.lastOK = time.Time{}
			}
			if h.cfg.AskHeard && seq >= t.grantSeq {
				t.grant, t.grantSeq = grantUntil(st, h.sent[seq%uint64(len(h.sent))], h.downAfter()), seq
				changed = changed || t.hearing != h.hearingOf(t, now)
			}
		}
		h.mu.Unlock()
		if changed {
			select {
			case h.kick <- struct{}{}:
			default:
			}
		}
	}
}

// evaluate updates every target's state at now and reports the changes.
func (h *Heartbeat) evaluate(now time.Time) {
	limit := h.downAfter()
	type change struct {
		node     string
		up       bool
		hearing  hearing // a change of the hearing state, when not 0
		wasHeard bool    // with it: it was heard before (a loss)
	}
	var changes []change
	h.mu.Lock()
	for _, n := range slices.Sorted(maps.Keys(h.targets)) {
		t := h.targets[n]
		up := now.Sub(t.lastOK) <= limit
		if up != t.up {
			t.up = up
			changes = append(changes, change{node: n, up: up})
		}
		if hg := h.hearingOf(t, now); h.cfg.AskHeard && hg != t.hearing {
			changes = append(changes, change{node: n, hearing: hg, wasHeard: t.hearing == heard})
			t.hearing = hg
		}
	}
	h.mu.Unlock()
	for _, c := range changes {
		if c.hearing != 0 {
			level := slog.LevelDebug
			if c.wasHeard {
				level = slog.LevelInfo
			}
			h.cfg.Logger.Log(context.Background(), level, "heartbeat: hearing", "node", c.node, "state", c.hearing.String())
			if h.cfg.OnHearing != nil {
				h.cfg.OnHearing(c.node)
			}
			continue
		}
		h.cfg.Logger.Info("egress heartbeat", "node", c.node, "reachable", c.up)
		h.onChange(c.node, c.up)
	}
}
