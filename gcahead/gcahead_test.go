package gcahead

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

const mb = 1 << 20

func TestLateTrigger(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		live, allocated, goal uint64
		want                  bool
	}{
		// Run I's GC 35 was triggered at 1,071 MB of a 1,092 MB goal,
		// 550 MB live: collected after the pass before, it would have
		// marked while the leader was idle.
		{"late trigger ahead", 550 * mb, 500 * mb, 1092 * mb, true},
		{"at the mark", 550 * mb, 461 * mb, 1092 * mb, true},
		// Run G's cycles were triggered at 935-940 MB: the runtime's
		// own trigger comes first.
		{"runtime's trigger first", 550 * mb, 390 * mb, 1092 * mb, false},
		{"fresh cycle", 550 * mb, 0, 1092 * mb, false},
		{"goal under the live heap (a memory limit)", 550 * mb, 10 * mb, 500 * mb, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lateTrigger(tc.live, tc.allocated, tc.goal, gcAheadAt); got != tc.want {
				t.Errorf("lateTrigger(%d, %d, %d MB) = %v, want %v", tc.live/mb, tc.allocated/mb, tc.goal/mb, got, tc.want)
			}
		})
	}
}

// TestGCAheadAfter: after starts a collection once the bytes allocated
// since the last cycle it saw end pass gcAheadAt of the way to the goal,
// one at a time; a cycle ending moves the base; a nil Collector
// (--gc-ahead=false) does nothing.
func TestGCAheadAfter(t *testing.T) {
	var off *Collector
	off.After()

	h := heapStats{cycles: 7, allocated: 5000 * mb, live: 550 * mb, goal: 1092 * mb}
	calls, release := make(chan struct{}, 4), make(chan struct{})
	g := &Collector{log: slog.New(slog.DiscardHandler), read: func() heapStats { return h },
		collect: func(uint64) bool { calls <- struct{}{}; <-release; return true }}
	step := func(allocated uint64, want bool) {
		t.Helper()
		h.allocated += allocated
		was := g.running.Load()
		g.After()
		if got := !was && g.running.Load(); got != want {
			t.Fatalf("after %d MB more: collection started %v, want %v", allocated/mb, got, want)
		}
		if want {
			<-calls
		}
	}
	step(0, false) // the base
	step(400*mb, false)
	step(100*mb, true) // 500 MB since the base
	step(10*mb, false) // one at a time
	release <- struct{}{}
	for g.running.Load() {
		runtime.Gosched()
	}
	if len(calls) != 0 {
		t.Fatal("a second collection started while the first ran")
	}
	h.cycles++         // a cycle ended: the base moves
	step(10*mb, false) // the new base
	step(400*mb, false)
	step(70*mb, true)
	close(release)
}

// TestGCAheadWatch: the cleanup reads the heap once a cycle has ended,
// no pass needed, so what is allocated before the next pass counts.
func TestGCAheadWatch(t *testing.T) {
	g := New(slog.New(slog.DiscardHandler))
	t.Cleanup(g.Stop)
	for range 3 {
		before := g.read()
		runtime.GC()
		deadline := time.Now().Add(5 * time.Second)
		for {
			g.mu.Lock()
			cycles, base := g.cycles, g.base
			g.mu.Unlock()
			if cycles > before.cycles {
				if base < before.allocated {
					t.Fatalf("base %d read before the cycle (%d allocated then)", base, before.allocated)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no reading after cycle %d", before.cycles+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestCollectAhead: no collection is started when a cycle ended since
// the pass, while collectAhead waited out the mark under way or before
// (runtime.GC would have run a second one); one is when none did.
func TestCollectAhead(t *testing.T) {
	for _, tc := range []struct {
		name         string
		before, mark bool // a cycle ends before collectAhead, during waitMark
		collect      bool
	}{
		{"no mark under way", false, false, true},
		{"a mark under way ends", false, true, false},
		{"a cycle ended before", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const seen = 41 // when the pass ended
			cycles, gcs := uint64(seen), 0
			if tc.before {
				cycles++
			}
			waited := false
			got := collectAhead(seen, func() uint64 { return cycles }, func() {
				waited = true
				if tc.mark {
					cycles++
				}
			}, func() {
				if !waited {
					t.Error("collected before waiting out the mark")
				}
				gcs++
				cycles++
			})
			if want := map[bool]int{true: 1}[tc.collect]; got != tc.collect || gcs != want {
				t.Errorf("collectAhead = %v with %d collections, want %v", got, gcs, tc.collect)
			}
		})
	}
}

// TestCollectAheadRuntime: with the runtime's own functions and no mark
// under way, collectAhead runs one cycle and leaves GOGC as it was.
func TestCollectAheadRuntime(t *testing.T) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	cycles := func() uint64 { metrics.Read(s); return s[0].Value.Uint64() }
	gogc := debug.SetGCPercent(150)
	t.Cleanup(func() { debug.SetGCPercent(gogc) })
	runtime.GC() // no mark under way after it
	before := cycles()
	if !collectAhead(before, cycles, waitMark, runtime.GC) {
		t.Fatal("collectAhead started no collection with no mark under way")
	}
	if n := cycles() - before; n < 1 {
		t.Errorf("%d cycles ended, want at least 1", n)
	}
	if got := debug.SetGCPercent(gogc); got != 150 {
		t.Errorf("GOGC after waitMark = %d, want 150", got)
	}
}
