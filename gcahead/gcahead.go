package gcahead

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// gcAheadAt is how far from the live heap to the heap goal the heap may
// grow, after a pass, before Collector starts a collection (see Collector).
// The runtime's pacer puts its trigger between 70% and 95% of that way; a
// leader that idles between events gets the late ones.
const gcAheadAt = 0.85

// Collector starts a garbage collection after a pass when the runtime would
// start its next one late (see lateTrigger): in the scale benchmark's runs
// at 150,000 pods, a cycle the pacer had triggered at 98-99% of its heap
// goal began with the next NotReady pass, whose allocations then paid
// 109-253 ms of mark assists (the pass took 165-261 ms instead of ~27
// ms). Started after a pass, the cycle marks while the leader is idle,
// with the heap still ~15% from its goal: a pass that meets it pays a
// fraction of that. The heap is the last cycle's live bytes plus what
// was allocated since that cycle ended, read there by a cleanup on a
// sentinel object (watch) that each cycle frees: what a pass allocates
// counts, and so does what is allocated between passes (the NB repair's
// comparison, the informers). A cycle the runtime started itself during
// the pass shows in no runtime/metrics until it ends, and runtime.GC
// called during its mark finishes it, then runs a whole second one: at
// 150,000 pods on a slower machine, whose pacer triggered at ~88% of the
// way, the scale benchmark's leader ran such a second cycle (0.5-0.6 s
// of marking, ~1 s of CPU) twice in 15 minutes of events, each 0.6 s
// after the first. So the collection is started by collectAhead, which
// first waits out a mark under way and starts none if a cycle ended
// meanwhile.
type Collector struct {
	log  *slog.Logger
	read func() heapStats // runtime/metrics, or a test's
	// collect collects, unless a cycle ends after seen (the completed
	// cycles when the pass ended) before it starts, and reports whether it
	// did (collectAhead, or a test's).
	collect func(seen uint64) bool
	running atomic.Bool
	stopped atomic.Bool // watch no longer re-arms

	mu     sync.Mutex
	cycles uint64 // the completed cycles when base was read
	base   uint64 // the bytes allocated in all when cycles last changed
}

// heapStats is what Collector reads of the runtime (runtime/metrics).
type heapStats struct {
	cycles    uint64 // completed cycles
	allocated uint64 // bytes allocated in all
	live      uint64 // bytes marked live by the last cycle
	goal      uint64 // the heap goal
}

// New returns a Collector reading runtime/metrics and collecting
// with runtime.GC.
func New(log *slog.Logger) *Collector {
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	var mu sync.Mutex
	read := func() heapStats {
		mu.Lock()
		defer mu.Unlock()
		metrics.Read(samples)
		return heapStats{samples[0].Value.Uint64(), samples[1].Value.Uint64(), samples[2].Value.Uint64(), samples[3].Value.Uint64()}
	}
	cycles := func() uint64 { return read().cycles }
	g := &Collector{log: log, read: read, collect: func(seen uint64) bool { return collectAhead(seen, cycles, waitMark, runtime.GC) }}
	g.watch()
	return g
}

// lateTrigger reports whether a heap of live bytes marked by the last
// cycle, allocated bytes since, and a goal of goal bytes, has come within
// 1-at of the way to the goal, where the runtime, had it placed its
// trigger early, would have started a cycle already.
func lateTrigger(live, allocated, goal uint64, at float64) bool {
	return goal > live && float64(allocated) >= float64(goal-live)*at
}

// sentinel is what watch's cleanup hangs on: it holds a pointer, so it is
// not packed with other small objects (the tiny allocator) and each cycle
// frees it.
type sentinel struct{ _ *int }

// watch reads the heap once the next cycle has ended (a cleanup of an
// object nothing references), and again after each cycle until stop.
func (g *Collector) watch() {
	if g.stopped.Load() {
		return
	}
	runtime.AddCleanup(&sentinel{}, func(g *Collector) {
		g.observe(g.read())
		g.watch()
	}, g)
}

// Stop ends watch's cleanups (at the next cycle).
func (g *Collector) Stop() {
	if g != nil {
		g.stopped.Store(true)
	}
}

// observe takes h's allocation count as the base of the heap grown since
// the last cycle when h is the first reading since that cycle ended (by
// watch's cleanup, soon after it; failing that, by the pass after it,
// which then counts what was allocated before as marked: the heap is
// underestimated, and a collection started late rather than early). It
// returns the bytes allocated since the base.
func (g *Collector) observe(h heapStats) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h.cycles != g.cycles {
		g.cycles, g.base = h.cycles, h.allocated
	}
	return h.allocated - min(g.base, h.allocated)
}

// After is called when a pass is done: it starts a collection in the
// background when lateTrigger says so (one at a time).
func (g *Collector) After() {
	if g == nil || g.running.Load() {
		return
	}
	h := g.read()
	since := g.observe(h)
	if !lateTrigger(h.live, since, h.goal, gcAheadAt) || !g.running.CompareAndSwap(false, true) {
		return
	}
	g.log.Debug("garbage collection started while idle, ahead of the runtime's trigger",
		"live", h.live, "allocated", since, "goal", h.goal)
	go func() {
		defer g.running.Store(false)
		if !g.collect(h.cycles) {
			g.log.Debug("garbage collection not started: a cycle the runtime started itself was under way")
		}
	}()
}

// collectAhead runs gc (runtime.GC) unless a cycle the runtime started
// itself was under way: waitMark returns once no mark runs, and a cycle
// that ended since the pass (cycles, the completed ones, past seen) is
// the collection Collector wanted. runtime.GC alone would finish that
// cycle, then run a second one.
func collectAhead(seen uint64, cycles func() uint64, waitMark, gc func()) bool {
	waitMark()
	if cycles() != seen {
		return false
	}
	gc()
	return true
}

// waitMark returns once no garbage collection mark runs:
// debug.SetGCPercent(-1) waits for a mark under way before it returns
// (runtime/debug documents that a negative percentage disables the
// collector; the runtime's setGCPercent waits on the mark so that it
// returns with none running); the percentage is put back at once. While
// it waits the collector is off, so the mark under way runs on without
// mark assists and the heap may pass that cycle's goal by what is
// allocated until the mark ends (the scale benchmark's audit, the one
// time it happened: 1,199 MB for a ~1,090 MB goal); a memory limit
// (GOMEMLIMIT, as the daemon sets from the chart's limit) still holds, and the
// goal of the next cycle is set again when the percentage is put back.
func waitMark() {
	debug.SetGCPercent(debug.SetGCPercent(-1))
}
