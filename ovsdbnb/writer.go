package ovsdbnb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Writer keeps the Northbound rows of its owner types what the caller
// last asked for, as ovsflow.Applier keeps a bridge's flows: it is the
// one place that compares desired rows with written ones. It owns what
// it last wrote (and when that is unknown, reads it back from the NB),
// the owners the server refused (sent again on every Write until
// written), the owners of a previous run found in the NB (deleted when no
// longer wanted), the owners the caller marked dirty that no Write has
// taken yet, and the drift repair: the echo of its own writes is told
// from another writer's change by comparing the rows with what it wrote,
// and owners that really drifted are written again (see Run).
//
// Owners of the stepped types (WriterOptions.SteppedTypes: EgressIPs,
// whose moves go make-before-break) are written in the steps
// WriterOptions.Steps makes from their old and new rows; the other
// owners go with the first step.
//
// A Writer is safe for concurrent use; Write and the repair exclude each
// other.
type Writer struct {
	opts WriterOptions

	mu sync.Mutex
	c  *Client
	// stop ends the repair of c.
	stop context.CancelFunc
	rec  record
	// repairing is why the repair asked for the next Write (logged with
	// what it writes), zero when it did not.
	repairing repairReason
	stats     writerCounters
}

// record is what a Writer knows of the NB: what it wrote.
type record struct {
	// synced is each owner's State as last written; nil until a Write
	// compared every owner (the first, or the next after a lost sync).
	synced map[Owner]State
	// stepped are the stepped owners' rows last written: on connecting,
	// those read back from the NB (the first steps start from them).
	stepped map[Owner]State
	// plain are the other owners last written with rows.
	plain map[Owner]bool
	// refused are the owners whose last write the server refused (never
	// in synced while here).
	refused map[Owner]bool
	// stale are the owners found in the NB on connecting (rows of a
	// previous run): those no longer wanted are deleted.
	stale []Owner
	// pending are the owners marked dirty that no Write has taken yet.
	pending map[Owner]bool
	// reread is set when a sync's outcome is unknown: the next Write
	// starts its steps from the NB's rows.
	reread bool
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Dial is how to reach the NB.
	Dial Options
	// OwnerTypes are the owner types the Writer owns: those found in the
	// NB on connecting and wanted by no Write are deleted.
	OwnerTypes []string
	// SteppedTypes are the owner types written in steps (Steps).
	SteppedTypes []string
	// Steps returns the steps from the stepped owners' old rows to their
	// new ones (egress.SilenceFirst); nil writes new in one step.
	Steps func(old, new map[Owner]State) []map[Owner]State
	// Wake, when not nil, asks the caller for a Write: the repair calls it
	// for owners it cannot repair alone (refused, or not written yet).
	Wake func()
	// RepairDelay lets a burst of NB changes settle before the repair
	// (default 200 ms); FullResync is how often every owner is compared
	// with the NB (default 5 minutes).
	RepairDelay, FullResync time.Duration
	Logger                  *slog.Logger
}

// Desired is what a Write makes the NB hold.
type Desired struct {
	// Stepped are the rows of the stepped owner types, Plain the others',
	// by owner; an owner of the Writer's types in neither has its rows
	// deleted.
	Stepped, Plain map[Owner]State
	// Dirty, when not nil, are the only owners whose rows may differ from
	// the previous Write's (besides those refused or never written);
	// nil compares every owner.
	Dirty map[Owner]bool
	// Keep are owners whose rows stay as they are (their objects could
	// not be read).
	Keep []Owner
	// Settle, when not nil, is called after a step that gives routers
	// NATs they did not have, before the next step: it waits until their
	// chassis have installed them (or gives up).
	Settle func(ctx context.Context, routers []string)
	// Drain, when not nil, is called after a step that takes NATs away
	// from routers, before the next step: it waits until their chassis
	// have removed them (or gives up), so that a router that goes on
	// answering ARP for a NAT's external IP stops before another starts.
	Drain func(ctx context.Context, routers []string)
}

// WriteResult is what a Write did.
type WriteResult struct {
	Result
	// Refused are the owners the server refused: they are sent again by
	// the next Write.
	Refused []*OwnerError
}

// NewWriter returns a Writer; it connects on the first Write (or
// Connect).
func NewWriter(opts WriterOptions) *Writer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.RepairDelay = cmpOr(opts.RepairDelay, 200*time.Millisecond)
	opts.FullResync = cmpOr(opts.FullResync, 5*time.Minute)
	return &Writer{opts: opts, rec: record{stepped: map[Owner]State{}, plain: map[Owner]bool{}}}
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Connect connects the Writer once and returns its client. It reads what
// a previous writer (or this process before a restart) left in the NB:
// the owners to delete if no Write wants them, and the stepped owners'
// rows the first steps start from, so unchanged rows are neither deleted
// nor inserted again. It starts the drift repair.
func (w *Writer) Connect(ctx context.Context) (*Client, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.connect(ctx); err != nil {
		return nil, err
	}
	return w.c, nil
}

func (w *Writer) connect(ctx context.Context) error {
	if w.c != nil {
		return nil
	}
	c, err := Dial(ctx, w.opts.Dial)
	if err != nil {
		return fmt.Errorf("northbound: %w", err)
	}
	stale, err := c.Owners(w.opts.OwnerTypes...)
	var stepped map[Owner]State
	if err == nil {
		stepped, err = c.Current(w.opts.SteppedTypes...)
	}
	if err != nil {
		c.Close()
		return fmt.Errorf("northbound: %w", err)
	}
	w.c = c
	w.rec.stale, w.rec.stepped, w.rec.synced = stale, stepped, nil
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.stop = cancel
	go w.run(rctx, c)
	w.opts.Logger.Info("northbound: starting from the rows in the NB", "owners", len(stale), "egress-owners", len(stepped))
	return nil
}

// Client is the Writer's client, nil while not connected.
func (w *Writer) Client() *Client {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c
}

// Close stops the repair, closes the client and forgets what was
// written: the next Write connects again and starts from what the NB
// holds, as a new process does. A former leader calls it: another has
// written since.
func (w *Writer) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c == nil {
		return
	}
	w.stop()
	w.c.Close()
	w.c, w.stop, w.repairing = nil, nil, repairReason{}
	w.rec = record{stepped: map[Owner]State{}, plain: map[Owner]bool{}, pending: w.rec.pending}
}

// FullDue reports whether the next Write compares every owner: none has
// completed since connecting (or one was lost).
func (w *Writer) FullDue() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rec.synced == nil
}

// Write makes the NB hold d: the stepped owners' rows make-before-break
// from those last written, the others with the first step, each owner
// sent only when its rows differ from what was written (every owner is
// compared when d.Dirty is nil or a full comparison is due). An owner the
// server refuses is in the result and the error (a *SyncError), and is
// sent again by the next Write; the others are written. An error that
// does not say what was committed makes the next Write compare every
// owner and start its steps from the NB's rows.
func (w *Writer) Write(ctx context.Context, d Desired) (WriteResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	dirty := w.takeDirty(d.Dirty)
	if err := w.connect(ctx); err != nil {
		return WriteResult{}, err
	}
	if err := w.startFromNB(); err != nil {
		return WriteResult{}, err
	}
	full := w.rec.synced == nil
	if full {
		dirty = nil
		w.rec.synced, w.rec.refused = map[Owner]State{}, map[Owner]bool{}
	}
	plain := w.plainSends(d, dirty)
	stepped := w.withKept(d)
	oldS, newS := w.steppedSends(stepped, d.Keep, dirty, full)
	res, err := w.send(ctx, w.planSteps(oldS, newS, plain, d.Settle != nil, d.Drain != nil), d, stepped)
	var se *SyncError
	if err != nil && !errors.As(err, &se) {
		return res, err
	}
	w.noteStepped(full, stepped, oldS, newS)
	w.loggedRepair(res.Result, err)
	if err == nil {
		w.rec.stale = nil
	}
	w.notePlain(dirty, d.Plain, plain)
	w.rec.pending = nil // taken
	return res, err
}

// takeDirty is dirty with the owners marked dirty before that no Write
// took (a Write that failed before its sync), and keeps it so until a
// Write takes it; nil (every owner) forgets them.
func (w *Writer) takeDirty(dirty map[Owner]bool) map[Owner]bool {
	if dirty == nil {
		w.rec.pending = nil
		return nil
	}
	if len(w.rec.pending) > 0 {
		dirty = maps.Clone(dirty)
		for o := range w.rec.pending {
			dirty[o] = true
		}
	}
	w.rec.pending = dirty
	return dirty
}

// plainSends are the plain owners to look at: every owner (the wanted
// ones, and those written before, now with no rows) when dirty is nil,
// else the dirty and refused ones; plus the stale owners no longer
// wanted, with no rows.
func (w *Writer) plainSends(d Desired, dirty map[Owner]bool) map[Owner]State {
	var plain map[Owner]State
	if dirty == nil {
		plain = maps.Clone(d.Plain)
		if plain == nil {
			plain = map[Owner]State{}
		}
		for o := range w.rec.plain {
			if _, ok := plain[o]; !ok {
				plain[o] = State{}
			}
		}
	} else {
		plain = map[Owner]State{}
		for o := range dirty {
			if st, ok := d.Plain[o]; ok {
				plain[o] = st
			} else if w.rec.plain[o] {
				plain[o] = State{}
			}
		}
		for o := range w.rec.refused {
			if st, ok := d.Plain[o]; ok && !st.Empty() {
				plain[o] = st
			}
		}
	}
	for _, o := range w.rec.stale {
		_, wanted := d.Stepped[o]
		_, wantedPlain := d.Plain[o]
		// A stepped owner read back goes in the last step instead.
		_, stepped := w.rec.stepped[o]
		if _, ok := plain[o]; !ok && !wanted && !wantedPlain && !stepped && !slices.Contains(d.Keep, o) {
			plain[o] = State{}
		}
	}
	return plain
}

// withKept is d.Stepped with the kept owners' rows as last written.
func (w *Writer) withKept(d Desired) map[Owner]State {
	if len(d.Keep) == 0 {
		return d.Stepped
	}
	stepped := maps.Clone(d.Stepped) // maybe the caller's: read only
	if stepped == nil {
		stepped = map[Owner]State{}
	}
	for _, o := range d.Keep {
		if st, ok := w.rec.stepped[o]; ok {
			stepped[o] = st
		}
	}
	return stepped
}

// steppedSends are the old and new rows of the stepped owners that
// changed (all of them when full): an unchanged owner is not sent, one
// not written (refused) is.
func (w *Writer) steppedSends(stepped map[Owner]State, keep []Owner, dirty map[Owner]bool, full bool) (oldS, newS map[Owner]State) {
	if full {
		return w.rec.stepped, stepped
	}
	oldS, newS = map[Owner]State{}, map[Owner]State{}
	consider := func(o Owner) {
		prev, had := w.rec.stepped[o]
		st, wanted := stepped[o]
		_, written := w.rec.synced[o]
		switch {
		case !wanted && had:
			oldS[o] = prev
		case wanted && (!had || !prev.Equal(st) || !written):
			newS[o] = st
			if had {
				oldS[o] = prev
			}
		}
	}
	if dirty == nil {
		for o := range stepped {
			consider(o)
		}
		for o := range w.rec.stepped {
			if _, ok := stepped[o]; !ok {
				consider(o)
			}
		}
		return oldS, newS
	}
	// Only the owners that may have changed: the dirty ones (an owner
	// gone is one), those kept, and those refused (the only wanted owners
	// not in synced between full comparisons). Looking every EgressIP's
	// owner up in synced cost a pass half a millisecond at 1,000
	// EgressIPs.
	for o := range dirty {
		consider(o)
	}
	for _, o := range keep {
		consider(o)
	}
	for o := range w.rec.refused {
		consider(o)
	}
	return oldS, newS
}

// stepSend is one step's owners to send, the routers it gives new NATs
// and whether their chassis are waited for after it.
type stepSend struct {
	send           map[Owner]State
	added, removed []string // routers the step gives, takes NATs
	wait           bool     // Settle or Drain before the next step
}

// planSteps are the steps from oldS to newS (the plain owners with the
// first), each step's owners found against what the steps before it
// write, as if written; steps sending nothing are left out.
func (w *Writer) planSteps(oldS, newS, plain map[Owner]State, settle, drain bool) []stepSend {
	var steps []map[Owner]State
	if w.opts.Steps != nil {
		steps = w.opts.Steps(oldS, newS)
	} else if len(newS) > 0 || len(oldS) > 0 {
		steps = []map[Owner]State{maps.Clone(newS)}
		for o := range oldS {
			if _, ok := newS[o]; !ok {
				steps[0][o] = State{}
			}
		}
	}
	if len(steps) == 0 {
		steps = []map[Owner]State{{}}
	}
	maps.Copy(steps[0], plain)
	ahead := map[Owner]State{}
	var sends []stepSend
	for i, step := range steps {
		send, before := map[Owner]State{}, map[Owner]State{}
		for o, st := range step {
			prev, ok := ahead[o]
			if !ok {
				prev, ok = w.rec.synced[o]
			}
			if !ok || !prev.Equal(st) {
				send[o], before[o] = st, prev
			}
		}
		if len(send) == 0 {
			continue
		}
		maps.Copy(ahead, send)
		ss := stepSend{send: send, added: natRouters(send, before), removed: natRouters(before, send)}
		ss.wait = i < len(steps)-1 && ((settle && len(ss.added) > 0) || (drain && len(ss.removed) > 0))
		sends = append(sends, ss)
	}
	return sends
}

// natRouters are the routers that send gives a NAT before does not hold.
func natRouters(send, before map[Owner]State) []string {
	var out []string
	for o, st := range send {
		had := map[string]bool{}
		for _, n := range before[o].NATs {
			had[n.Router+"/"+n.ExternalIP+"/"+n.LogicalIP] = true
		}
		for _, n := range st.NATs {
			if !had[n.Router+"/"+n.ExternalIP+"/"+n.LogicalIP] && !slices.Contains(out, n.Router) {
				out = append(out, n.Router)
			}
		}
	}
	slices.Sort(out)
	return out
}

// send sends the steps in runs that end where a step's chassis are waited
// for: within a run, SyncSteps sends a step behind the one before when it
// can, its commit still after that one's. It records each owner written
// (or refused). An error that is not a *SyncError left the outcome
// unknown: every owner is compared again next time, from the NB's rows.
func (w *Writer) send(ctx context.Context, sends []stepSend, d Desired, stepped map[Owner]State) (WriteResult, error) {
	var res WriteResult
	var syncErr error
	for len(sends) > 0 {
		n := 1 + slices.IndexFunc(sends, func(ss stepSend) bool { return ss.wait })
		if n == 0 {
			n = len(sends)
		}
		run := sends[:n]
		sends = sends[n:]
		sets := make([]map[Owner]State, len(run))
		for j, ss := range run {
			sets[j] = ss.send
		}
		for j, r := range w.c.SyncSteps(ctx, sets) {
			if !errors.Is(r.Err, ErrNotStarted) {
				w.stats.synced(r.Result)
				res.Add(r.Result)
			}
			var se *SyncError
			if r.Err != nil && !errors.As(r.Err, &se) {
				w.syncLost()
				return res, fmt.Errorf("northbound sync: %w", r.Err)
			}
			w.noteSent(run[j].send, d, stepped)
			if se != nil {
				for _, oe := range se.Owners {
					w.refuse(oe.Owner)
				}
				res.Refused = append(res.Refused, se.Owners...)
				syncErr = r.Err
			}
			if ss := run[j]; r.Err == nil && ss.wait {
				if d.Drain != nil && len(ss.removed) > 0 {
					d.Drain(ctx, ss.removed)
				}
				if d.Settle != nil && len(ss.added) > 0 {
					d.Settle(ctx, ss.added)
				}
			}
		}
	}
	if syncErr != nil {
		return res, fmt.Errorf("northbound sync: %w", syncErr)
	}
	return res, nil
}

// noteSent records the owners of send as written.
func (w *Writer) noteSent(send map[Owner]State, d Desired, stepped map[Owner]State) {
	for o, st := range send {
		_, wantedStepped := stepped[o]
		_, wantedPlain := d.Plain[o]
		if st.Empty() && !wantedStepped && !wantedPlain {
			delete(w.rec.synced, o) // gone
		} else {
			// An owner still desired with no rows (the reply fallback
			// with no ETP=Local Service) is written too: it is not sent
			// again on every Write.
			w.rec.synced[o] = st
		}
		delete(w.rec.refused, o)
	}
}

// noteStepped records the stepped owners' rows written: every one's when
// full, else only those that may have changed (copying a thousand
// EgressIPs' States cost every pass 2 ms).
func (w *Writer) noteStepped(full bool, stepped, oldS, newS map[Owner]State) {
	if full {
		w.rec.stepped = maps.Clone(stepped)
		if w.rec.stepped == nil {
			w.rec.stepped = map[Owner]State{}
		}
		return
	}
	for o := range newS {
		w.rec.stepped[o] = stepped[o]
	}
	for o := range oldS {
		if st, ok := stepped[o]; ok {
			w.rec.stepped[o] = st
		} else {
			delete(w.rec.stepped, o)
		}
	}
}

// notePlain records which plain owners have rows written.
func (w *Writer) notePlain(dirty map[Owner]bool, want, sent map[Owner]State) {
	if dirty == nil {
		clear(w.rec.plain)
		for o, st := range want {
			if !st.Empty() {
				w.rec.plain[o] = true
			}
		}
		return
	}
	for o := range sent {
		if st, ok := want[o]; ok && !st.Empty() {
			w.rec.plain[o] = true
		} else {
			delete(w.rec.plain, o)
		}
	}
}

// refuse takes o out of synced: its write was refused, and the next
// Write sends it again.
func (w *Writer) refuse(o Owner) {
	delete(w.rec.synced, o)
	if w.rec.refused == nil {
		w.rec.refused = map[Owner]bool{}
	}
	w.rec.refused[o] = true
}

// syncLost is called when a sync failed without saying which owners were
// written (the connection lost, the context ended while a transaction
// was out): every owner is compared again, and the next Write's steps
// start from the stepped rows the NB holds: steps from the rows before
// the lost sync would take back what it committed (its reroutes deleted,
// then inserted again).
func (w *Writer) syncLost() {
	w.rec.synced, w.rec.reread = nil, true
}

// startFromNB reads the stepped rows back from the NB after syncLost, as
// connecting does.
func (w *Writer) startFromNB() error {
	if !w.rec.reread {
		return nil
	}
	cur, err := w.c.Current(w.opts.SteppedTypes...)
	if err != nil {
		return fmt.Errorf("northbound: reading back the egress rows after a failed sync: %w", err)
	}
	w.rec.stepped, w.rec.reread = cur, false
	return nil
}

// RepairReasons are the reason labels of WriterStats.Repairs: rows
// changed by another writer, a reconnection, routers, switches or groups
// created or deleted, the periodic full comparison.
var RepairReasons = []string{"changed", "reconnected", "topology", "periodic"}

// WriterStats are a Writer's counts since it was made.
type WriterStats struct {
	// Syncs counts the syncs Write sent (one plan of the owners whose
	// rows may differ; one transaction when they do).
	Syncs uint64
	// Inserts, Updates, Mutates and Deletes count the operations sent by
	// Write and the repair.
	Inserts, Updates, Mutates, Deletes uint64
	// Repairs counts the repairs that wrote rows and RepairedOwners the
	// owners they wrote, by reason label (RepairReasons).
	Repairs, RepairedOwners map[string]uint64
	// Comparing is set while the repair compares owners' rows with what
	// was written.
	Comparing bool
}

// Stats returns the Writer's counts.
func (w *Writer) Stats() WriterStats { return w.stats.snapshot() }

// writerCounters are the counts behind Stats.
type writerCounters struct {
	syncs, inserts, updates, mutates, deletes atomic.Uint64
	comparing                                 atomic.Bool
	mu                                        sync.Mutex
	repairs, repaired                         map[string]uint64
}

func (s *writerCounters) synced(r Result) {
	s.syncs.Add(1)
	s.ops(r)
}

func (s *writerCounters) ops(r Result) {
	s.inserts.Add(uint64(r.Inserts))
	s.updates.Add(uint64(r.Updates))
	s.mutates.Add(uint64(r.Mutates))
	s.deletes.Add(uint64(r.Deletes))
}

func (s *writerCounters) repair(reason string, owners int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.repairs == nil {
		s.repairs, s.repaired = map[string]uint64{}, map[string]uint64{}
	}
	s.repairs[reason]++
	s.repaired[reason] += uint64(owners)
}

func (s *writerCounters) snapshot() WriterStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return WriterStats{Syncs: s.syncs.Load(), Inserts: s.inserts.Load(), Updates: s.updates.Load(),
		Mutates: s.mutates.Load(), Deletes: s.deletes.Load(), Repairs: maps.Clone(s.repairs),
		RepairedOwners: maps.Clone(s.repaired), Comparing: s.comparing.Load()}
}

// Postpone notes that the caller marked dirty owners (nil: every owner)
// but writes nothing now (the NB or the Southbound could not be reached):
// the next Write takes them with its own (compares every owner).
func (w *Writer) Postpone(dirty map[Owner]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if dirty == nil {
		w.rec.synced = nil
	}
	w.takeDirty(dirty)
}
