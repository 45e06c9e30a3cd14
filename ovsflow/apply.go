package ovsflow

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// ModOp is the kind of a flow modification in a bundle.
type ModOp uint8

// Flow modifications, named as ovs-ofctl's bundle file names them.
const (
	ModAdd ModOp = iota // add, or replace a flow with the same key
	ModModifyStrict
	ModDeleteStrict
)

func (op ModOp) String() string {
	return [...]string{"add", "modify_strict", "delete_strict"}[op]
}

// FlowMod is one modification: the flow in canonical text (for a delete,
// its key: table, priority and match).
type FlowMod struct {
	Op   ModOp
	Flow string
}

// Transport carries flow programs to a bridge. [NativeTransport], the
// default, speaks OpenFlow to the bridge itself; [OfctlTransport] forks
// ovs-ofctl, as OVN-Kubernetes and Kube-OVN do, and remains as a fallback.
type Transport interface {
	// Dump returns the bridge's flows as `ovs-ofctl -O OpenFlow13
	// --no-stats dump-flows` prints them ([NativeTransport] gives flows
	// outside the model opaque keys and actions instead).
	Dump(ctx context.Context, bridge string) ([]byte, error)
	// Replace atomically replaces every flow of the bridge by flows (one
	// per line, canonical text).
	Replace(ctx context.Context, bridge string, flows []byte) error
	// Bundle applies mods in one atomic bundle: all or nothing.
	Bundle(ctx context.Context, bridge string, mods []FlowMod) error
	// Watch sends a value each time the bridge's switch becomes
	// reachable, the first time and after every restart of ovs-vswitchd,
	// until ctx ends.
	Watch(ctx context.Context, bridge string) <-chan struct{}
}

// PortSource gives the ofports of a bridge's ports.
type PortSource interface {
	Ports(ctx context.Context) (PortMap, error)
	// Changed receives a value after an ofport changes (nil: never).
	Changed() <-chan struct{}
}

// StaticPorts is a PortSource with a fixed map.
type StaticPorts PortMap

// Ports returns the map.
func (s StaticPorts) Ports(context.Context) (PortMap, error) { return PortMap(s), nil }

// Changed returns nil: a static map never changes.
func (StaticPorts) Changed() <-chan struct{} { return nil }

// Result counts what an apply changed on the bridge.
type Result struct {
	Added, Modified, Deleted int
}

// Changed reports whether anything was sent.
func (r Result) Changed() bool { return r.Added+r.Modified+r.Deleted > 0 }

// ApplierOptions tune an Applier.
type ApplierOptions struct {
	// KeepForeign leaves alone flows whose cookie this Applier never
	// installed (another controller's flows). Otherwise the bridge ends
	// with exactly the program.
	KeepForeign bool
	// RunDir is the directory of the bridge's <bridge>.mgmt socket for
	// the default native transport (/var/run/openvswitch when empty).
	RunDir string
	Logger *slog.Logger
}

// Applier keeps a bridge's flows equal to a program. It remembers what it
// installed, so an update sends only the difference; [Applier.Run] replays
// the program when ovs-vswitchd restarts and rewrites it when an ofport
// changes. Its methods are safe for concurrent use.
type Applier struct {
	bridge string
	tr     Transport
	own    *NativeTransport // tr when NewApplier made it, closed by Close
	ports  PortSource
	opts   ApplierOptions
	log    *slog.Logger

	mu        sync.Mutex
	want      *Program
	installed map[string]*entry // nil: unknown, dump before diffing
	owned     map[uint64]bool   // cookies of flows this Applier installed
}

// NewApplier returns an Applier for bridge. A nil tr picks the native
// OpenFlow transport to the bridge's socket in opts.RunDir (close it with
// [Applier.Close]); pass an [OfctlTransport] to use ovs-ofctl instead.
func NewApplier(bridge string, tr Transport, ports PortSource, opts ApplierOptions) *Applier {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &Applier{bridge: bridge, tr: tr, ports: ports, opts: opts,
		log: log.With("bridge", bridge), owned: map[uint64]bool{}}
	if tr == nil {
		a.own = NewNativeTransport(opts.RunDir, NativeOptions{Logger: log})
		a.tr = a.own
	}
	return a
}

// Close drops the connection of the native transport NewApplier picked,
// once [Applier.Run] has returned; a transport given to NewApplier is left
// to its owner.
func (a *Applier) Close() error {
	if a.own == nil {
		return nil
	}
	return a.own.Close()
}

// Apply makes the bridge hold p, sending only the difference from what the
// Applier last installed (or, the first time, from a dump of the bridge)
// in one atomic bundle. On error the bridge is left as it was.
func (a *Applier) Apply(ctx context.Context, p *Program) (Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.apply(ctx, p.snapshot())
}

// Resync dumps the bridge and sends whatever brings it back to the last
// program given to Apply (nothing before the first Apply).
func (a *Applier) Resync(ctx context.Context) (Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.want == nil {
		return Result{}, nil
	}
	a.installed = nil
	return a.apply(ctx, a.want)
}

// Replace replaces every flow of the bridge by p in one atomic
// `replace-flows` bundle, whatever it holds, as OVN-Kubernetes does on
// every sync. Foreign flows are removed too.
func (a *Applier) Replace(ctx context.Context, p *Program) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	p = p.snapshot()
	want, err := a.desired(ctx, p)
	if err != nil {
		return err
	}
	if err := a.tr.Replace(ctx, a.bridge, renderEntries(sortedEntries(want))); err != nil {
		a.installed = nil
		return fmt.Errorf("replace flows on %s: %w", a.bridge, err)
	}
	a.want, a.installed = p, want
	a.owned = cookiesOf(want)
	return nil
}

func (a *Applier) desired(ctx context.Context, p *Program) (map[string]*entry, error) {
	ports, err := a.ports.Ports(ctx)
	if err != nil {
		return nil, fmt.Errorf("ports of %s: %w", a.bridge, err)
	}
	want, err := p.entries(ports)
	if err != nil {
		return nil, fmt.Errorf("program for %s: %w", a.bridge, err)
	}
	return want, nil
}

func cookiesOf(m map[string]*entry) map[uint64]bool {
	c := make(map[uint64]bool)
	for _, e := range m {
		c[e.cookie] = true
	}
	return c
}

func (a *Applier) apply(ctx context.Context, p *Program) (Result, error) {
	want, err := a.desired(ctx, p)
	if err != nil {
		return Result{}, err
	}
	if a.installed == nil {
		dump, err := a.tr.Dump(ctx, a.bridge)
		if err != nil {
			return Result{}, fmt.Errorf("dump flows of %s: %w", a.bridge, err)
		}
		if a.installed, err = parseDump(dump); err != nil {
			return Result{}, fmt.Errorf("dump flows of %s: %w", a.bridge, err)
		}
	}
	owned := cookiesOf(want)
	for c := range a.owned {
		owned[c] = true
	}
	mods, res := diff(a.installed, want, func(e *entry) bool { return !a.opts.KeepForeign || owned[e.cookie] })
	if len(mods) > 0 {
		if err := a.tr.Bundle(ctx, a.bridge, mods); err != nil {
			a.installed = nil // a transport may fail after the switch committed
			return Result{}, fmt.Errorf("apply %d flow changes to %s: %w", len(mods), a.bridge, err)
		}
	}
	for _, m := range mods {
		if m.Op == ModDeleteStrict {
			delete(a.installed, m.Flow)
		}
	}
	for k, e := range want {
		a.installed[k] = e
	}
	a.want = p
	a.owned = cookiesOf(want)
	if res.Changed() {
		a.log.Info("flows applied", "added", res.Added, "modified", res.Modified, "deleted", res.Deleted)
	}
	return res, nil
}

// diff returns the modifications turning installed into want: deletes
// first, then adds and modifies, each in key order. Installed flows that
// want lacks are deleted only when mayDelete says so.
func diff(installed, want map[string]*entry, mayDelete func(*entry) bool) ([]FlowMod, Result) {
	var mods []FlowMod
	var res Result
	var dels []*entry
	for k, e := range installed {
		if _, ok := want[k]; !ok && mayDelete(e) {
			dels = append(dels, e)
		}
	}
	slices.SortFunc(dels, compareEntries)
	for _, e := range dels {
		mods = append(mods, FlowMod{Op: ModDeleteStrict, Flow: e.key})
	}
	res.Deleted = len(dels)
	var ups []*entry
	for k, e := range want {
		if old, ok := installed[k]; !ok || old.cookie != e.cookie || old.actions != e.actions {
			ups = append(ups, e)
		}
	}
	slices.SortFunc(ups, compareEntries)
	for _, e := range ups {
		old, ok := installed[e.key]
		switch {
		case ok && old.cookie == e.cookie:
			// modify_strict keeps the cookie: right when only actions change.
			mods = append(mods, FlowMod{Op: ModModifyStrict, Flow: e.line()})
			res.Modified++
		case ok:
			// A new cookie needs add, which replaces the flow whole.
			mods = append(mods, FlowMod{Op: ModAdd, Flow: e.line()})
			res.Modified++
		default:
			mods = append(mods, FlowMod{Op: ModAdd, Flow: e.line()})
			res.Added++
		}
	}
	return mods, res
}

// Run keeps the bridge holding the last applied program until ctx ends:
// it resyncs when ovs-vswitchd (re)connects, which replays the program
// after a restart, and when an ofport changes. A failed resync is retried
// with backoff.
func (a *Applier) Run(ctx context.Context) error {
	up := a.tr.Watch(ctx, a.bridge)
	changed := a.ports.Changed()
	var retry <-chan time.Time
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-up:
			if !ok {
				up = nil
				continue
			}
			a.log.Info("switch connected, resyncing")
		case <-changed:
			a.log.Info("ofports changed, resyncing")
		case <-retry:
		}
		retry = nil
		if _, err := a.Resync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.log.Warn("resync failed, retrying", "err", err, "in", backoff)
			retry = time.After(backoff)
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}
