package daemon

import (
	"log/slog"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// gcAheadAt is how far from the live heap to the heap goal the heap may
// grow, after a pass, before gcAhead starts a collection (see gcAhead).
// The runtime's pacer puts its trigger between 70% and 95% of that way; a
// leader that idles between events gets the late ones.
const gcAheadAt = 0.85

// gcAhead starts a garbage collection after a pass when the runtime would
// start its next one late (see lateTrigger): in the scale benchmark's runs
// at 150,000 pods, a cycle the pacer had triggered at 98-99% of its heap
// goal began with the next NotReady pass, whose allocations then paid
// 109-253 ms of mark assists (the pass took 165-261 ms instead of ~27
// ms). Started after a pass, the cycle marks while the leader is idle,
// with the heap still ~15% from its goal: a pass that meets it pays a
// fraction of that. A cycle the runtime started itself during the pass
// cannot be told from here (runtime/metrics shows none in progress), so
// a forced cycle may follow one; with the runtime's own triggers at 70-80%
// of the way, that takes a pass allocating the last 5-15% during a mark.
type gcAhead struct {
	log     *slog.Logger
	read    func() heapStats // readHeap, or a test's
	collect func()           // runtime.GC, or a test's
	running atomic.Bool

	mu     sync.Mutex
	cycles uint64 // the completed cycles when base was read
	base   uint64 // the bytes allocated in all when cycles last changed
}

// heapStats is what gcAhead reads of the runtime (runtime/metrics).
type heapStats struct {
	cycles    uint64 // completed cycles
	allocated uint64 // bytes allocated in all
	live      uint64 // bytes marked live by the last cycle
	goal      uint64 // the heap goal
}

// newGCAhead returns a gcAhead reading runtime/metrics and collecting
// with runtime.GC.
func newGCAhead(log *slog.Logger) *gcAhead {
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	var mu sync.Mutex
	read := func() heapStats {
		mu.Lock()
		defer mu.Unlock()
		metrics.Read(samples)
		return heapStats{samples[0].Value.Uint64(), samples[1].Value.Uint64(), samples[2].Value.Uint64(), samples[3].Value.Uint64()}
	}
	return &gcAhead{log: log, read: read, collect: runtime.GC}
}

// lateTrigger reports whether a heap of live bytes marked by the last
// cycle, allocated bytes since, and a goal of goal bytes, has come within
// 1-at of the way to the goal, where the runtime, had it placed its
// trigger early, would have started a cycle already.
func lateTrigger(live, allocated, goal uint64, at float64) bool {
	return goal > live && float64(allocated) >= float64(goal-live)*at
}

// after is called when a pass is done: it starts a collection in the
// background when lateTrigger says so (one at a time).
func (g *gcAhead) after() {
	if g == nil || g.running.Load() {
		return
	}
	h := g.read()
	g.mu.Lock()
	if h.cycles != g.cycles || g.base == 0 {
		// A cycle ended since the last pass: what was allocated before
		// now counts as marked (an underestimate of the heap, so a
		// collection is started late rather than early).
		g.cycles, g.base = h.cycles, h.allocated
	}
	since := h.allocated - g.base
	g.mu.Unlock()
	if !lateTrigger(h.live, since, h.goal, gcAheadAt) || !g.running.CompareAndSwap(false, true) {
		return
	}
	g.log.Debug("garbage collection started while idle, ahead of the runtime's trigger",
		"live", h.live, "allocated", since, "goal", h.goal)
	go func() {
		defer g.running.Store(false)
		g.collect()
	}()
}
