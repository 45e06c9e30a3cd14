package ovsdbnb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// lagProxy relays a unix socket to an OVSDB server and, while held,
// keeps back the server's update notifications (not the replies): the
// client's cache then lags committed transactions, as in libovsdb#212.
type lagProxy struct {
	ln    net.Listener
	queue chan json.RawMessage // held notifications, in order
	held  atomic.Bool
	mu    chan struct{} // a one-slot lock serialising writes to the client
	cl    net.Conn
	// all holds every message of the server, replies too (see
	// holdUntil); transacts counts the transactions relayed to the
	// server, until the client has sent that many.
	all       atomic.Bool
	transacts atomic.Int32
	until     atomic.Int32
	base      int32      // transacts when holdUntil was called
	released  chan int32 // the transactions relayed since, when all was released
}

// newLagProxy listens on a socket in a temp dir and relays its first
// connection to the server socket at server ("unix:<path>").
func newLagProxy(t *testing.T, server string) (*lagProxy, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &lagProxy{ln: ln, queue: make(chan json.RawMessage, 1<<16), mu: make(chan struct{}, 1)}
	t.Cleanup(func() { ln.Close() })
	go p.serve(t, strings.TrimPrefix(server, "unix:"))
	return p, "unix:" + path
}

func (p *lagProxy) serve(t *testing.T, server string) {
	cl, err := p.ln.Accept()
	if err != nil {
		return
	}
	defer cl.Close()
	srv, err := net.Dial("unix", server)
	if err != nil {
		t.Errorf("proxy: %v", err)
		return
	}
	defer srv.Close()
	p.cl = cl
	go p.relay(srv, cl)
	dec := json.NewDecoder(srv)
	for {
		var msg json.RawMessage
		if err := dec.Decode(&msg); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.Logf("proxy: %v", err)
			}
			return
		}
		var head struct{ Method string }
		_ = json.Unmarshal(msg, &head)
		p.mu <- struct{}{}
		if p.all.Load() || p.held.Load() && strings.HasPrefix(head.Method, "update") {
			p.queue <- msg
		} else if _, err := cl.Write(msg); err != nil {
			<-p.mu
			return
		}
		<-p.mu
	}
}

// relay copies the client's messages to the server, counting the
// transactions.
func (p *lagProxy) relay(srv, cl net.Conn) {
	dec := json.NewDecoder(cl)
	for {
		var msg json.RawMessage
		if err := dec.Decode(&msg); err != nil {
			return
		}
		if _, err := srv.Write(msg); err != nil {
			return
		}
		var head struct{ Method string }
		_ = json.Unmarshal(msg, &head)
		if head.Method == "transact" && p.transacts.Add(1) == p.until.Load() && p.all.Load() {
			p.release()
		}
	}
}

// hold starts keeping back update notifications.
func (p *lagProxy) hold() { p.held.Store(true) }

// holdUntil keeps back every message of the server, replies included,
// until the client has sent n more transactions, or for at most max;
// the channel returned then gets the number of transactions the client
// had sent since.
func (p *lagProxy) holdUntil(n int32, max time.Duration) <-chan int32 {
	p.released = make(chan int32, 1)
	p.base = p.transacts.Load()
	p.until.Store(p.base + n)
	p.all.Store(true)
	time.AfterFunc(max, p.release)
	return p.released
}

// release sends the held messages and stops holding.
func (p *lagProxy) release() {
	p.mu <- struct{}{}
	defer func() { <-p.mu }()
	p.held.Store(false)
	if p.all.Swap(false) {
		p.released <- p.transacts.Load() - p.base
	}
	for {
		select {
		case msg := <-p.queue:
			_, _ = p.cl.Write(msg)
		default:
			return
		}
	}
}

// TestCacheLagNoDuplicate syncs an owner through a client whose cache
// lags: another client (another instance of the daemon) has just written
// the same rows and the update has not reached the first client's cache.
// The server refuses the inserts (derived UUIDs), nothing is written, and
// once the cache catches up the plan is empty: no duplicate row.
func TestCacheLagNoDuplicate(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0", "--", "lr-add", "lr0")
	proxy, endpoint := newLagProxy(t, o.NB)
	lagging := dial(t, endpoint)
	other := dial(t, o.NB)
	want := map[ovsdbnb.Owner]ovsdbnb.State{svc: webState("10.244.1.5:8080"), eip: eipState("100.64.0.3")}

	proxy.hold()
	if res := sync(t, other, want); res.Inserts != 4 {
		t.Fatalf("other client's sync: %+v, want 4 inserts", res)
	}
	release := time.AfterFunc(500*time.Millisecond, proxy.release)
	defer release.Stop()
	res := sync(t, lagging, want)
	if res.Replans == 0 || res.Ops() != 0 || res.Transactions != 0 {
		t.Errorf("lagging client's sync: %+v, want >= 1 replan and nothing written", res)
	}
	for _, args := range [][]string{
		{"--bare", "--columns=name", "find", "Load_Balancer", "name=Service_default/web_TCP_cluster"},
		{"--bare", "--columns=priority", "list", "Logical_Router_Policy"},
		{"--bare", "--columns=external_ip", "list", "NAT"},
		{"--bare", "--columns=name", "list", "Address_Set"},
	} {
		if got := strings.Fields(o.Nbctl(args...)); len(got) != 1 {
			t.Errorf("%s: %q, want exactly one row", strings.Join(args, " "), got)
		}
	}
}

// TestParentReplacedNoOrphan syncs an owner's router policy and NAT
// through a client whose cache still shows a router that was deleted and
// created again (a new UUID), as after the NB was wiped and its topology
// restored while the cache lagged. Without a guard the transaction
// commits, its mutation of the old router matches nothing and the server
// garbage-collects the new rows at once: they never show in the cache.
// The guard on the router fails the transaction instead, and once the
// cache has caught up the rows land on the new router.
func TestParentReplacedNoOrphan(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("lr-add", "lr0")
	proxy, endpoint := newLagProxy(t, o.NB)
	lagging := dial(t, endpoint)

	proxy.hold()
	o.Nbctl("lr-del", "lr0", "--", "lr-add", "lr0")
	release := time.AfterFunc(300*time.Millisecond, proxy.release)
	defer release.Stop()
	res := sync(t, lagging, map[ovsdbnb.Owner]ovsdbnb.State{eip: eipState("100.64.0.3")})
	if res.Replans == 0 {
		t.Errorf("sync: %+v, want >= 1 replan", res)
	}
	for _, args := range [][]string{
		{"--bare", "--columns=policies", "list", "Logical_Router", "lr0"},
		{"--bare", "--columns=nat", "list", "Logical_Router", "lr0"},
	} {
		if got := strings.Fields(o.Nbctl(args...)); len(got) != 1 {
			t.Errorf("%s: %q, want exactly one row", strings.Join(args, " "), got)
		}
	}
}

// TestCommitThenConnectionLost: the server commits a Sync's transaction
// and the connection is lost before the update reaches the cache (the NB
// killed, its database about to be replaced). Sync does not wait for rows
// the reloaded cache may never show: it returns as the connection goes,
// without the "cache still lags" warning of a wait that timed out.
func TestCommitThenConnectionLost(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("lr-add", "lr0")
	proxy, endpoint := newLagProxy(t, o.NB)
	var log lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{endpoint},
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	proxy.hold()
	go func() {
		for ctx.Err() == nil && len(strings.Fields(o.Nbctl("--bare", "--columns=policies", "list", "Logical_Router", "lr0"))) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		proxy.ln.Close() // no reconnection: it would hang on a proxy that serves no more
		proxy.cl.Close() // committed: the connection goes before the update
	}()
	if _, err := c.Sync(ctx, map[ovsdbnb.Owner]ovsdbnb.State{eip: eipState("100.64.0.3")}); err != nil {
		t.Fatal(err)
	}
	if l := log.String(); strings.Contains(l, "cache still lags") || !strings.Contains(l, "connection lost after a commit") {
		t.Errorf("Sync waited for the cache of a lost connection:\n%s", l)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu  gosync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
