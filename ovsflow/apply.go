package ovsflow

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
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

// FlowChange is a change another controller made to a bridge's flows, as
// a [FlowMonitor] reports it.
type FlowChange struct {
	// Event is "ADDED", "MODIFIED", "DELETED", or "PAUSED" when the
	// switch stopped reporting and what changed is unknown.
	Event    string
	Table    uint8
	Priority uint16
	Cookie   uint64
	// Key is the flow's key (table, priority, match) as a dump shows it,
	// "" when the match is outside the model.
	Key string
}

// FlowID is what [ApplierOptions].Owns knows of a flow on the bridge.
type FlowID struct {
	Table    uint8
	Priority uint16
	Cookie   uint64
}

// ID is the flow's FlowID.
func (f *Flow) ID() FlowID { return FlowID{Table: f.Table, Priority: f.Priority, Cookie: f.Cookie} }

// FlowMonitor is a [Transport] that reports the flows others change on a
// bridge ([NativeTransport] does, over OpenFlow 1.4+). [Applier.Run]
// repairs the flows it owns as soon as one is reported.
type FlowMonitor interface {
	MonitorFlows(ctx context.Context, bridge string) <-chan FlowChange
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
	// Owns, when not nil, says which flows are this Applier's even if it
	// never installed them, by table, priority and cookie: with
	// KeepForeign, such a flow that the program lacks is deleted (a flow
	// a previous process left for an owner that is gone). brex.Owns
	// knows the flows of a node's external bridge.
	Owns func(FlowID) bool
	// VerifyInterval is how often [Applier.Run] dumps the bridge to
	// check that it still holds the program, besides repairing at once
	// what a [FlowMonitor] reports: 30s when zero, never when negative.
	VerifyInterval time.Duration
	// RunDir is the directory of the bridge's <bridge>.mgmt socket for
	// the default native transport (/var/run/openvswitch when empty).
	RunDir string
	Logger *slog.Logger
}

// Applier keeps a bridge's flows equal to a program. It remembers what it
// installed, so an update sends only the difference; [Applier.Run] replays
// the program when ovs-vswitchd restarts and rewrites it when an ofport
// changes. It keeps the program it last applied resolved and indexed by
// flow key, so applying a program whose changes touch k owners resolves,
// diffs and sends those k owners only, whatever the size of the program.
// Its methods are safe for concurrent use.
type Applier struct {
	bridge string
	tr     Transport
	own    *NativeTransport // tr when NewApplier made it, closed by Close
	ports  PortSource
	opts   ApplierOptions
	log    *slog.Logger

	mu sync.Mutex
	st bridgeState
	// epoch identifies the program state last applied: a Program whose
	// base is epoch differs from it only in its dirty owners.
	epoch uint64
	// full makes every apply resolve and diff the whole program, as
	// before per-owner tracking (benchmarks compare the two).
	full bool

	repairs atomic.Uint64
}

// epochs numbers the program states Appliers apply, process-wide, so a
// Program applied by one Applier is never taken for another's.
var epochs atomic.Uint64

// bridgeState is what an Applier knows of its bridge: the program it
// last applied, resolved against the ports (hash ports) and indexed by
// flow key, and the flows the bridge holds.
type bridgeState struct {
	sets  map[string]*flowSet // nil: nothing applied yet
	ports uint64
	// want is the entry the bridge gets for each key; shared lists, in
	// owner order, every owner's entry for a key several owners emit.
	want   map[string]*entry
	shared map[string][]*entry
	// cookies counts want's entries by cookie.
	cookies map[uint64]int
	// installed is what the bridge holds (nil: unknown, dump before
	// diffing); strays are its flows that want lacks (another
	// controller's, kept).
	installed map[string]*entry
	strays    map[string]*entry
}

// plan is an apply worked out but not yet sent: the flow mods, and how
// the state changes once the bridge took them.
type plan struct {
	mods    []FlowMod
	res     Result
	changed []*entry
	// A full plan replaces the state's program (sets, want, shared,
	// cookies); an incremental one changes the owners of sets (nil: gone)
	// and the keys of keys (their new entries, in owner order).
	full    bool
	sets    map[string]*flowSet
	want    map[string]*entry
	shared  map[string][]*entry
	cookies map[uint64]int
	keys    map[string][]*entry
	ports   uint64
}

// NewApplier returns an Applier for bridge. A nil tr picks the native
// OpenFlow transport to the bridge's socket in opts.RunDir (close it with
// [Applier.Close]); pass an [OfctlTransport] to use ovs-ofctl instead.
func NewApplier(bridge string, tr Transport, ports PortSource, opts ApplierOptions) *Applier {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &Applier{bridge: bridge, tr: tr, ports: ports, opts: opts, log: log.With("bridge", bridge)}
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
//
// Only the owners that differ from the program last applied are resolved
// and diffed. Apply records in p that it was applied, so the owners set
// or deleted in p (or in a [Program.Clone] of it) afterwards are all the
// next Apply looks at; any other program is compared with the last one
// owner by owner (flow sets a Clone shares are not looked into).
func (a *Applier) Apply(ctx context.Context, p *Program) (Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var dirty []string
	if a.st.sets != nil && p.base != 0 && p.base == a.epoch && !a.full {
		dirty = slices.Collect(maps.Keys(p.dirty))
	} else {
		dirty = changedOwners(a.st.sets, p.sets)
	}
	res, owners, err := a.applyOwners(ctx, p.sets, dirty)
	if err != nil {
		return res, err
	}
	p.base, p.dirty = a.epoch, nil
	if res.Changed() {
		a.log.Info("flows applied", "added", res.Added, "modified", res.Modified, "deleted", res.Deleted, "owners", firstOf(owners, 20))
	}
	return res, nil
}

// changedOwners lists the owners whose flow set differs between from and
// to (compared by identity: Set replaces a changed set whole).
func changedOwners(from, to map[string]*flowSet) []string {
	var out []string
	for o, s := range to {
		if from[o] != s {
			out = append(out, o)
		}
	}
	for o := range from {
		if _, ok := to[o]; !ok {
			out = append(out, o)
		}
	}
	return out
}

// Resync dumps the bridge and sends whatever brings it back to the last
// program given to Apply (nothing before the first Apply).
func (a *Applier) Resync(ctx context.Context) (Result, error) {
	res, _, err := a.resync(ctx)
	return res, err
}

// resync is Resync that also names the owners whose flows it repaired
// ("cookie 0x..." for a flow the program lacks).
func (a *Applier) resync(ctx context.Context) (Result, []string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.sets == nil {
		return Result{}, nil, nil
	}
	a.st.installed = nil
	epoch := a.epoch
	res, owners, err := a.applyOwners(ctx, a.st.sets, nil)
	if err == nil {
		a.epoch = epoch // the same program: its descendants stay incremental
	}
	return res, owners, err
}

// Replace replaces every flow of the bridge by p in one atomic
// `replace-flows` bundle, whatever it holds, as OVN-Kubernetes does on
// every sync. Foreign flows are removed too.
func (a *Applier) Replace(ctx context.Context, p *Program) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ports, h, err := a.portMap(ctx)
	if err != nil {
		return err
	}
	want, shared, err := resolveSets(p.sets, ports, h)
	if err != nil {
		return fmt.Errorf("program for %s: %w", a.bridge, err)
	}
	if err := a.tr.Replace(ctx, a.bridge, renderEntries(sortedEntries(want))); err != nil {
		a.st.installed = nil
		return fmt.Errorf("replace flows on %s: %w", a.bridge, err)
	}
	a.st.installed, a.st.strays = maps.Clone(want), nil
	a.commit(&plan{full: true, sets: maps.Clone(p.sets), want: want, shared: shared, cookies: cookiesOf(want), ports: h})
	p.base, p.dirty = a.epoch, nil
	return nil
}

func (a *Applier) portMap(ctx context.Context) (PortMap, uint64, error) {
	ports, err := a.ports.Ports(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("ports of %s: %w", a.bridge, err)
	}
	return ports, portsHash(ports), nil
}

func cookiesOf(m map[string]*entry) map[uint64]int {
	c := make(map[uint64]int)
	for _, e := range m {
		c[e.cookie]++
	}
	return c
}

// mine reports whether flow id is the Applier's to keep equal to the
// program: every flow without KeepForeign, else the flows of the cookies
// of the program last applied (was) or of the one being applied (is), and
// those Owns claims.
func (a *Applier) mine(id FlowID, was, is bool) bool {
	return !a.opts.KeepForeign || was || is || (a.opts.Owns != nil && a.opts.Owns(id))
}

// applyOwners makes the bridge hold the program of sets, where only the
// dirty owners differ from the program last applied. The whole program
// is resolved and diffed when the bridge's flows are unknown (the first
// time, after a failure, on Resync), when the ofports changed, or with
// a.full.
func (a *Applier) applyOwners(ctx context.Context, sets map[string]*flowSet, dirty []string) (Result, []string, error) {
	ports, h, err := a.portMap(ctx)
	if err != nil {
		return Result{}, nil, err
	}
	if a.st.installed == nil {
		dump, err := a.tr.Dump(ctx, a.bridge)
		if err != nil {
			return Result{}, nil, fmt.Errorf("dump flows of %s: %w", a.bridge, err)
		}
		if a.st.installed, err = parseDump(dump); err != nil {
			return Result{}, nil, fmt.Errorf("dump flows of %s: %w", a.bridge, err)
		}
		a.st.strays = nil
	}
	var pl *plan
	if a.full || a.st.sets == nil || a.st.strays == nil || h != a.st.ports {
		pl, err = a.planFull(sets, ports, h)
	} else {
		pl, err = a.planOwners(sets, dirty, ports, h)
	}
	if err != nil {
		return Result{}, nil, fmt.Errorf("program for %s: %w", a.bridge, err)
	}
	if len(pl.mods) > 0 {
		if err := a.tr.Bundle(ctx, a.bridge, pl.mods); err != nil {
			a.st.installed = nil // a transport may fail after the switch committed
			return Result{}, nil, fmt.Errorf("apply %d flow changes to %s: %w", len(pl.mods), a.bridge, err)
		}
	}
	a.commit(pl)
	return pl.res, owners(pl.changed), nil
}

// planFull resolves and diffs the whole program against what the bridge
// holds.
func (a *Applier) planFull(sets map[string]*flowSet, ports PortMap, h uint64) (*plan, error) {
	want, shared, err := resolveSets(sets, ports, h)
	if err != nil {
		return nil, err
	}
	cookies := cookiesOf(want)
	mods, res, changed := diff(a.st.installed, want, func(e *entry) bool {
		return a.mine(e.id(), a.st.cookies[e.cookie] > 0, cookies[e.cookie] > 0)
	})
	return &plan{mods: mods, res: res, changed: changed, full: true, sets: maps.Clone(sets),
		want: want, shared: shared, cookies: cookies, ports: h}, nil
}

// planOwners diffs the dirty owners only: the keys their old and new
// flows touch, and the flows of other controllers a cookie change makes
// the Applier's.
func (a *Applier) planOwners(sets map[string]*flowSet, dirty []string, ports PortMap, h uint64) (*plan, error) {
	st := &a.st
	pl := &plan{sets: make(map[string]*flowSet, len(dirty)), keys: make(map[string][]*entry), ports: h}
	var olds, news []*resolvedSet
	for _, o := range dirty {
		old, cur := st.sets[o], sets[o]
		if old == cur {
			continue
		}
		pl.sets[o] = cur
		if old != nil {
			if r := old.resolvedFor(o, ports, h); r.err == nil {
				olds = append(olds, r)
			}
		}
		if cur != nil {
			r := cur.resolvedFor(o, ports, h)
			if r.err != nil {
				return nil, r.err
			}
			news = append(news, r)
		}
	}
	// Each touched key starts from its entries of unchanged owners.
	touch := func(e *entry) {
		if _, ok := pl.keys[e.key]; ok {
			return
		}
		var kept []*entry
		if list, ok := st.shared[e.key]; ok {
			for _, x := range list {
				if _, changed := pl.sets[x.owner]; !changed {
					kept = append(kept, x)
				}
			}
		} else if x, ok := st.want[e.key]; ok {
			if _, changed := pl.sets[x.owner]; !changed {
				kept = append(kept, x)
			}
		}
		pl.keys[e.key] = kept
	}
	for _, r := range olds {
		for _, e := range r.entries {
			touch(e)
		}
	}
	for _, r := range news {
		for _, e := range r.entries {
			touch(e)
			pl.keys[e.key] = insertByOwner(pl.keys[e.key], e)
		}
	}
	// Cookies counted as they will be once applied.
	delta := map[uint64]int{}
	for k, list := range pl.keys {
		if old, ok := st.want[k]; ok {
			delta[old.cookie]--
		}
		if len(list) > 0 {
			delta[list[0].cookie]++
		}
	}
	mayDelete := func(e *entry) bool {
		n := st.cookies[e.cookie]
		return a.mine(e.id(), n > 0, n+delta[e.cookie] > 0)
	}
	var dels, ups []*entry
	for k, list := range pl.keys {
		inst, ok := st.installed[k]
		switch {
		case len(list) == 0:
			if ok && mayDelete(inst) {
				dels = append(dels, inst)
			}
		case !ok || inst.cookie != list[0].cookie || inst.actions != list[0].actions:
			ups = append(ups, list[0])
		}
	}
	for k, e := range st.strays {
		if _, ok := pl.keys[k]; !ok && mayDelete(e) {
			dels = append(dels, e)
		}
	}
	pl.mods, pl.res, pl.changed = modsFor(st.installed, dels, ups)
	return pl, nil
}

// commit makes the state what it is once pl's mods were sent.
func (a *Applier) commit(pl *plan) {
	st := &a.st
	for _, m := range pl.mods {
		if m.Op == ModDeleteStrict {
			delete(st.installed, m.Flow)
			delete(st.strays, m.Flow)
		}
	}
	st.ports = pl.ports
	if pl.full {
		st.sets, st.want, st.shared, st.cookies = pl.sets, pl.want, pl.shared, pl.cookies
		st.strays = make(map[string]*entry)
		for k, e := range st.installed {
			if _, ok := st.want[k]; !ok {
				st.strays[k] = e
			}
		}
		maps.Copy(st.installed, st.want)
	} else {
		for o, s := range pl.sets {
			if s == nil {
				delete(st.sets, o)
			} else {
				st.sets[o] = s
			}
		}
		for k, list := range pl.keys {
			if old, ok := st.want[k]; ok {
				if st.cookies[old.cookie]--; st.cookies[old.cookie] == 0 {
					delete(st.cookies, old.cookie)
				}
			}
			switch {
			case len(list) == 0:
				delete(st.want, k)
				delete(st.shared, k)
				if e, ok := st.installed[k]; ok {
					st.strays[k] = e
				}
				continue
			case len(list) == 1:
				delete(st.shared, k)
			default:
				if st.shared == nil {
					st.shared = make(map[string][]*entry)
				}
				st.shared[k] = list
			}
			st.want[k] = list[0]
			st.cookies[list[0].cookie]++
			st.installed[k] = list[0]
			delete(st.strays, k)
		}
	}
	a.epoch = epochs.Add(1)
}

// owners names the owners of changed entries, sorted: the program's
// owner of a flow, else "cookie 0x..." for a flow read from the bridge.
func owners(changed []*entry) []string {
	var out []string
	for _, e := range changed {
		o := e.owner
		if o == "" {
			o = fmt.Sprintf("cookie %#x", e.cookie)
		}
		out = append(out, o)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// diff returns the modifications turning installed into want: deletes
// first, then adds and modifies, each in key order, and the entries they
// delete or write. Installed flows that want lacks are deleted only when
// mayDelete says so.
func diff(installed, want map[string]*entry, mayDelete func(*entry) bool) ([]FlowMod, Result, []*entry) {
	var dels, ups []*entry
	for k, e := range installed {
		if _, ok := want[k]; !ok && mayDelete(e) {
			dels = append(dels, e)
		}
	}
	for k, e := range want {
		if old, ok := installed[k]; !ok || old.cookie != e.cookie || old.actions != e.actions {
			ups = append(ups, e)
		}
	}
	return modsFor(installed, dels, ups)
}

// modsFor turns the installed flows to delete (dels) and the entries to
// write (ups) into flow mods: deletes first, then adds and modifies, each
// in key order.
func modsFor(installed map[string]*entry, dels, ups []*entry) ([]FlowMod, Result, []*entry) {
	var mods []FlowMod
	var res Result
	slices.SortFunc(dels, compareEntries)
	for _, e := range dels {
		mods = append(mods, FlowMod{Op: ModDeleteStrict, Flow: e.key})
	}
	res.Deleted = len(dels)
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
	return mods, res, append(dels, ups...)
}

// Run keeps the bridge holding the last applied program until ctx ends:
// it resyncs when ovs-vswitchd (re)connects, which replays the program
// after a restart, when an ofport changes, when a [FlowMonitor]
// transport reports that another controller changed a flow the Applier
// owns (a flow deleted by hand comes back within milliseconds), and every
// VerifyInterval. A resync sends only what differs, so only the owners
// whose flows were changed are rewritten; each repair is logged with
// what it changed and whose flows. A failed resync is retried with
// backoff.
func (a *Applier) Run(ctx context.Context) error {
	up := a.tr.Watch(ctx, a.bridge)
	changed := a.ports.Changed()
	var drift <-chan FlowChange
	if m, ok := a.tr.(FlowMonitor); ok {
		drift = m.MonitorFlows(ctx, a.bridge)
	}
	every := a.opts.VerifyInterval
	if every == 0 {
		every = 30 * time.Second
	}
	var verify <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		verify = t.C
	}
	var retry <-chan time.Time
	backoff := 50 * time.Millisecond
	for {
		var reason string
		var seen []FlowChange
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-up:
			if !ok {
				up = nil
				continue
			}
			a.log.Info("switch connected, resyncing")
			reason = "switch connected"
		case <-changed:
			a.log.Info("ofports changed, resyncing")
			reason = "ofports changed"
		case c := <-drift:
			if seen = a.relevant(append(seen, c), drift); len(seen) == 0 {
				continue
			}
			reason = "flows changed by another controller"
		case <-verify:
			reason = "periodic verification"
		case <-retry:
			reason = "retry"
		}
		retry = nil
		start := time.Now()
		res, owners, err := a.resync(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.log.Warn("resync failed, retrying", "err", err, "in", backoff)
			retry = time.After(backoff)
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if res.Changed() {
			a.repairs.Add(1)
			args := []any{"trigger", reason, "added", res.Added, "modified", res.Modified, "deleted", res.Deleted,
				"owners", firstOf(owners, 20), "took", time.Since(start).Round(time.Microsecond)}
			if len(seen) > 0 {
				args = append(args, "changes", describe(seen, 10))
			}
			a.log.Warn("bridge flows repaired", args...)
		}
	}
}

// relevant drains the flow changes already waiting on drift after seen
// and keeps those that touch the Applier's flows: a flow with one of its
// cookies, a flow it installed with the same key (another controller's
// add replaced it), or a paused monitor.
func (a *Applier) relevant(seen []FlowChange, drift <-chan FlowChange) []FlowChange {
	for more := true; more; {
		select {
		case c := <-drift:
			seen = append(seen, c)
		default:
			more = false
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.sets == nil {
		return nil // nothing applied yet: the first Apply reads the bridge
	}
	return slices.DeleteFunc(seen, func(c FlowChange) bool {
		if c.Event == "PAUSED" || a.mine(FlowID{Table: c.Table, Priority: c.Priority, Cookie: c.Cookie}, a.st.cookies[c.Cookie] > 0, false) {
			return false
		}
		e, ok := a.st.installed[c.Key]
		return c.Key == "" || !ok || e.owner == ""
	})
}

// Repairs counts the resyncs of Run that found the bridge differing from
// the program and changed it.
func (a *Applier) Repairs() uint64 { return a.repairs.Load() }

func firstOf(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... %d more", len(s)-n))
	}
	return s
}

// describe renders up to n flow changes for a log line.
func describe(cs []FlowChange, n int) []string {
	out := make([]string, 0, min(len(cs), n+1))
	for i, c := range cs {
		if i == n {
			out = append(out, fmt.Sprintf("... %d more", len(cs)-n))
			break
		}
		key := c.Key
		if key == "" {
			key = fmt.Sprintf("table=%d, priority=%d", c.Table, c.Priority)
		}
		out = append(out, fmt.Sprintf("%s cookie=%#x %s", c.Event, c.Cookie, key))
	}
	return out
}
