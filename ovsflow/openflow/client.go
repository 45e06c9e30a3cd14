package openflow

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Options tune a Client.
type Options struct {
	// MaxVersion is the highest version offered in HELLO; Version15 when
	// zero. The client speaks Version13 up to it.
	MaxVersion uint8
	// EchoInterval is how long the connection may stay silent before an
	// ECHO_REQUEST probes it; three intervals without any message drop
	// it. 5s when zero.
	EchoInterval time.Duration
	Logger       *slog.Logger
}

// Client is an OpenFlow controller connection to one switch. It dials on
// first use and again after the connection drops; its operations are
// serialized and safe for concurrent use.
type Client struct {
	network, addr string
	opts          Options
	log           *slog.Logger

	op       sync.Mutex // one operation at a time
	mu       sync.Mutex // guards sess
	sess     *session
	bundleID atomic.Uint32
	// monitor receives flow updates once MonitorFlows was called; every
	// new session is asked for them.
	monitor atomic.Pointer[chan FlowUpdate]
	monID   atomic.Uint32
}

// NewClient returns a client for the switch at addr on network ("unix"
// for a bridge's <bridge>.mgmt socket, or "tcp").
func NewClient(network, addr string, opts Options) *Client {
	if opts.MaxVersion == 0 {
		opts.MaxVersion = Version15
	}
	if opts.EchoInterval == 0 {
		opts.EchoInterval = 5 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Client{network: network, addr: addr, opts: opts, log: log.With("switch", addr)}
}

// ModError is an error the switch returned for one flow-mod of a batch.
type ModError struct {
	// Index is the flow-mod's position in the batch.
	Index int
	Err   *Error
}

func (e *ModError) Error() string { return fmt.Sprintf("flow-mod #%d: %v", e.Index, e.Err) }

func (e *ModError) Unwrap() error { return e.Err }

// session is one connection after a successful handshake.
type session struct {
	conn     net.Conn
	version  uint8
	features Features
	xid      atomic.Uint32
	lastRecv atomic.Int64 // unix nanoseconds

	wmu sync.Mutex
	w   *bufio.Writer

	smu  sync.Mutex
	sink *subscription // the running operation's, or nil

	done chan struct{}
	once sync.Once
	err  error // set before done closes
}

// subscription receives the messages that arrive during an operation.
type subscription struct {
	ch  chan Message
	end chan struct{}
}

func (s *session) fail(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.done)
		s.conn.Close()
	})
}

func (s *session) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// write appends messages under the write lock; flush sends them.
func (s *session) write(f func(b []byte) []byte, flush bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	buf := f(nil)
	if _, err := s.w.Write(buf); err != nil {
		s.fail(err)
		return err
	}
	if flush {
		if err := s.w.Flush(); err != nil {
			s.fail(err)
			return err
		}
	}
	return nil
}

func (s *session) nextXid(n uint32) uint32 { return s.xid.Add(n) - n + 1 }

func (s *session) reader(log *slog.Logger, async func(Message)) {
	r := bufio.NewReaderSize(s.conn, 64<<10)
	for {
		m, err := ReadMessage(r)
		if err != nil {
			s.fail(fmt.Errorf("read: %w", err))
			log.Info("openflow connection closed", "err", s.err) // the first cause, such as an echo timeout
			return
		}
		s.lastRecv.Store(time.Now().UnixNano())
		switch m.Type {
		case TypeEchoRequest:
			_ = s.write(func(b []byte) []byte {
				return Message{Version: m.Version, Type: TypeEchoReply, Xid: m.Xid, Body: m.Body}.Append(b)
			}, true)
			continue
		case TypeEchoReply:
			continue
		}
		if IsFlowMonitorReply(m) {
			async(m)
			continue
		}
		s.smu.Lock()
		sub := s.sink
		s.smu.Unlock()
		if sub == nil {
			continue // nobody waits: an asynchronous message or a stale reply
		}
		select {
		case sub.ch <- m:
		case <-sub.end:
		case <-s.done:
			return
		}
	}
}

func (s *session) keepalive(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		silent := time.Since(time.Unix(0, s.lastRecv.Load()))
		if silent > 3*interval {
			s.fail(fmt.Errorf("no message for %v (echo timeout)", silent.Round(time.Millisecond)))
			return
		}
		if silent >= interval {
			xid := s.nextXid(1)
			_ = s.write(func(b []byte) []byte {
				return Message{Version: s.version, Type: TypeEchoRequest, Xid: xid}.Append(b)
			}, true)
		}
	}
}

// dial connects and runs the HELLO and FEATURES handshake.
func (c *Client) dial(ctx context.Context) (*session, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, c.network, c.addr)
	if err != nil {
		return nil, err
	}
	s := &session{conn: conn, w: bufio.NewWriterSize(conn, 64<<10), done: make(chan struct{})}
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) > 10*time.Second {
		deadline = time.Now().Add(10 * time.Second)
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := c.handshake(s); err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("handshake: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	s.lastRecv.Store(time.Now().UnixNano())
	go s.reader(c.log, c.deliver)
	go s.keepalive(c.opts.EchoInterval)
	c.log.Info("openflow connected", "version", VersionName(s.version), "dpid", fmt.Sprintf("%016x", s.features.DatapathID))
	return s, nil
}

func (c *Client) handshake(s *session) error {
	if _, err := s.conn.Write(AppendHello(nil, c.opts.MaxVersion, s.nextXid(1))); err != nil {
		return err
	}
	r := bufio.NewReader(s.conn)
	hello, err := ReadMessage(r)
	if err != nil {
		return err
	}
	if hello.Type == TypeError {
		if e, err := DecodeError(hello.Body); err == nil {
			return e
		}
	}
	if s.version, err = Negotiate(hello, c.opts.MaxVersion); err != nil {
		return err
	}
	xid := s.nextXid(1)
	if _, err := s.conn.Write(Message{Version: s.version, Type: TypeFeaturesRequest, Xid: xid}.Append(nil)); err != nil {
		return err
	}
	for {
		m, err := ReadMessage(r)
		if err != nil {
			return err
		}
		switch {
		case m.Type == TypeEchoRequest:
			if _, err := s.conn.Write(Message{Version: m.Version, Type: TypeEchoReply, Xid: m.Xid, Body: m.Body}.Append(nil)); err != nil {
				return err
			}
		case m.Type == TypeError && m.Xid == xid:
			e, err := DecodeError(m.Body)
			if err != nil {
				return err
			}
			return fmt.Errorf("features request: %w", e)
		case m.Type == TypeFeaturesReply && m.Xid == xid:
			s.features, err = DecodeFeatures(m.Body)
			if r.Buffered() > 0 {
				return errors.New("unexpected message after features reply")
			}
			return err
		}
	}
}

// session returns the live session, dialing when there is none.
func (c *Client) session(ctx context.Context) (*session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil && c.sess.alive() {
		return c.sess, nil
	}
	s, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.addr, err)
	}
	c.sess = s
	if c.monitor.Load() != nil {
		c.arm(s)
	}
	return s, nil
}

// Connect dials the switch unless connected and returns the negotiated
// version.
func (c *Client) Connect(ctx context.Context) (uint8, error) {
	s, err := c.session(ctx)
	if err != nil {
		return 0, err
	}
	return s.version, nil
}

// Features returns the switch's FEATURES_REPLY, connecting if needed.
func (c *Client) Features(ctx context.Context) (Features, error) {
	s, err := c.session(ctx)
	if err != nil {
		return Features{}, err
	}
	return s.features, nil
}

// Close drops the connection; a later operation dials again.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		c.sess.fail(errors.New("client closed"))
		c.sess = nil
	}
	return nil
}

// call runs one operation on the live session with a subscription to the
// messages that arrive meanwhile.
func (c *Client) call(ctx context.Context, f func(*exchange) error) error {
	c.op.Lock()
	defer c.op.Unlock()
	s, err := c.session(ctx)
	if err != nil {
		return err
	}
	sub := &subscription{ch: make(chan Message, 256), end: make(chan struct{})}
	s.smu.Lock()
	s.sink = sub
	s.smu.Unlock()
	defer func() {
		s.smu.Lock()
		s.sink = nil
		s.smu.Unlock()
		close(sub.end)
	}()
	return f(&exchange{ctx: ctx, s: s, sub: sub})
}

// exchange is one running operation.
type exchange struct {
	ctx context.Context
	s   *session
	sub *subscription
}

// recv waits for the next message. A canceled context drops the
// connection: the operation's state on the switch is unknown.
func (x *exchange) recv() (Message, error) {
	select {
	case m := <-x.sub.ch:
		return m, nil
	case <-x.s.done:
		return Message{}, fmt.Errorf("connection lost: %w", x.s.err)
	case <-x.ctx.Done():
		x.s.fail(x.ctx.Err())
		return Message{}, x.ctx.Err()
	}
}

// poll returns a message that already arrived, if any.
func (x *exchange) poll() (Message, bool) {
	select {
	case m := <-x.sub.ch:
		return m, true
	default:
		return Message{}, false
	}
}

// Barrier sends a BARRIER_REQUEST and waits for its reply.
func (c *Client) Barrier(ctx context.Context) error {
	return c.call(ctx, func(x *exchange) error {
		return x.barrier(func(Message) error { return nil })
	})
}

// barrier sends a barrier and waits for its reply, handing every other
// message to other.
func (x *exchange) barrier(other func(Message) error) error {
	xid := x.s.nextXid(1)
	if err := x.s.write(func(b []byte) []byte {
		return Message{Version: x.s.version, Type: TypeBarrierRequest, Xid: xid}.Append(b)
	}, true); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	for {
		m, err := x.recv()
		if err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
		if m.Xid == xid {
			if m.Type == TypeBarrierReply {
				return nil
			}
			return fmt.Errorf("barrier: %w", asError(m))
		}
		if err := other(m); err != nil {
			return err
		}
	}
}

// asError decodes an ERROR message, or describes an unexpected one.
func asError(m Message) error {
	if m.Type != TypeError {
		return fmt.Errorf("unexpected message type %d", m.Type)
	}
	e, err := DecodeError(m.Body)
	if err != nil {
		return err
	}
	return e
}

// DumpFlows returns every flow of every table (a multipart flow-stats
// request).
func (c *Client) DumpFlows(ctx context.Context) ([]FlowStats, error) {
	var flows []FlowStats
	err := c.call(ctx, func(x *exchange) error {
		xid := x.s.nextXid(1)
		if err := x.s.write(func(b []byte) []byte { return AppendFlowStatsRequest(b, x.s.version, xid) }, true); err != nil {
			return err
		}
		for {
			m, err := x.recv()
			if err != nil {
				return err
			}
			if m.Xid != xid {
				continue
			}
			if m.Type != TypeMultipartReply {
				return asError(m)
			}
			part, more, err := DecodeFlowStatsReply(m.Version, m.Body)
			if err != nil {
				return err
			}
			flows = append(flows, part...)
			if !more {
				return nil
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("dump flows: %w", err)
	}
	return flows, nil
}

// Bundle applies mods in one atomic, ordered bundle: every flow-mod or
// none. A flow-mod the switch refuses comes back as a *ModError naming
// its index, and the bundle is discarded.
func (c *Client) Bundle(ctx context.Context, mods []FlowMod) error {
	err := c.call(ctx, func(x *exchange) error { return x.bundle(c.bundleID.Add(1), mods) })
	if err != nil {
		return fmt.Errorf("bundle of %d flow-mods: %w", len(mods), err)
	}
	return nil
}

func (x *exchange) bundle(id uint32, mods []FlowMod) error {
	v := x.s.version
	flags := BundleAtomic | BundleOrdered
	ignore := func(Message) error { return nil }
	if err := x.control(id, BundleOpen, BundleOpenReply, flags, ignore); err != nil {
		return err
	}
	n := uint32(len(mods))
	base := x.s.nextXid(max(n, 1))
	var modErr error
	collect := func(m Message) error {
		if m.Type != TypeError || m.Xid < base || m.Xid-base >= n {
			return nil // a stale reply
		}
		e, err := DecodeError(m.Body)
		if err != nil {
			return err
		}
		if modErr == nil {
			modErr = &ModError{Index: int(m.Xid - base), Err: e}
		}
		return nil
	}
	const batch = 256
	for i := 0; i < len(mods); i += batch {
		end := min(i+batch, len(mods))
		if err := x.s.write(func(b []byte) []byte {
			for j := i; j < end; j++ {
				b = AppendBundleAdd(b, v, base+uint32(j), id, flags, &mods[j])
			}
			return b
		}, false); err != nil {
			return fmt.Errorf("bundle add: %w", err)
		}
		for m, ok := x.poll(); ok; m, ok = x.poll() {
			if err := collect(m); err != nil {
				return err
			}
		}
	}
	if err := x.barrier(collect); err != nil {
		return err
	}
	if modErr != nil {
		if err := x.control(id, BundleDiscard, BundleDiscardReply, flags, ignore); err != nil {
			return errors.Join(modErr, err)
		}
		return modErr
	}
	if err := x.control(id, BundleCommit, BundleCommitReply, flags, collect); err != nil {
		// OVS sends the failing flow-mod's own error before the commit's.
		if modErr != nil {
			return modErr
		}
		return err
	}
	return nil
}

// control sends a bundle control message and waits for its reply,
// handing every other message to other.
func (x *exchange) control(id uint32, typ, want, flags uint16, other func(Message) error) error {
	xid := x.s.nextXid(1)
	if err := x.s.write(func(b []byte) []byte {
		return AppendBundleControl(b, x.s.version, xid, id, typ, flags)
	}, true); err != nil {
		return fmt.Errorf("bundle control %d: %w", typ, err)
	}
	for {
		m, err := x.recv()
		if err != nil {
			return fmt.Errorf("bundle control %d: %w", typ, err)
		}
		if m.Xid != xid {
			if err := other(m); err != nil {
				return err
			}
			continue
		}
		r, ok, err := DecodeBundleControl(m)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("bundle control %d: %w", typ, asError(m))
		case r.Type != want || r.ID != id:
			return fmt.Errorf("bundle control %d: reply type %d for bundle %d", typ, r.Type, r.ID)
		}
		return nil
	}
}

// Watch keeps the client connected until ctx ends and sends a value after
// every successful handshake: the first one and each one after the switch
// restarted. Failed dials are retried with exponential backoff (50 ms to
// 1 s). The channel is closed when ctx ends.
func (c *Client) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		backoff := 50 * time.Millisecond
		for ctx.Err() == nil {
			s, err := c.session(ctx)
			if err == nil {
				backoff = 50 * time.Millisecond
				select {
				case ch <- struct{}{}:
				default: // a signal is already pending
				}
				select {
				case <-s.done:
				case <-ctx.Done():
					return
				}
			} else {
				c.log.Debug("openflow dial failed", "err", err, "retry_in", backoff)
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			if err != nil {
				backoff = min(2*backoff, time.Second)
			}
		}
	}()
	return ch
}

// MonitorFlows asks the switch to report every flow that another
// connection adds, modifies or removes (OFPMP_FLOW_MONITOR), now and on
// every connection after a reconnect, and returns the channel of those
// updates until ctx ends (the channel is not closed). The switch does not
// report this client's own flow-mods. Updates that find the channel full
// are dropped (a consumer woken by one should read the switch's flows
// anyway). An OpenFlow 1.3 connection reports nothing:
// [Client.Monitoring] says whether the live connection does.
func (c *Client) MonitorFlows(ctx context.Context) <-chan FlowUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan FlowUpdate, 256)
	c.monitor.Store(&ch)
	if c.sess != nil && c.sess.alive() {
		c.arm(c.sess)
	}
	context.AfterFunc(ctx, func() { c.monitor.CompareAndSwap(&ch, nil) })
	return ch
}

// Monitoring reports whether the live connection reports flow updates
// (MonitorFlows was called and the connection speaks OpenFlow 1.4+).
func (c *Client) Monitoring() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.monitor.Load() != nil && c.sess != nil && c.sess.alive() && c.sess.version >= Version14
}

// arm sends the flow monitor request on s; c.mu is held.
func (c *Client) arm(s *session) {
	if s.version < Version14 {
		c.log.Info("flow monitoring off", "reason", ErrNoMonitor, "version", VersionName(s.version))
		return
	}
	xid, id := s.nextXid(1), c.monID.Add(1)
	if err := s.write(func(b []byte) []byte { return AppendFlowMonitorRequest(b, s.version, xid, id) }, true); err != nil {
		c.log.Warn("flow monitor request failed", "err", err)
	}
}

// deliver hands the updates of a flow monitor message to the monitor.
func (c *Client) deliver(m Message) {
	ch := c.monitor.Load()
	if ch == nil {
		return
	}
	ups, err := DecodeFlowMonitorReply(m.Body)
	if err != nil {
		c.log.Warn("undecodable flow monitor update", "err", err)
		ups = append(ups, FlowUpdate{Event: EventPaused}) // something changed: say so
	}
	for _, u := range ups {
		if u.Event == EventAbbrev {
			continue // the client's own flow-mod
		}
		select {
		case *ch <- u:
		default: // full: the consumer is awake
		}
	}
}
