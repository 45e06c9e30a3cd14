// Package gcahead starts a garbage collection while a process is idle,
// after a burst of work (a pass), when the Go runtime would otherwise
// start its next cycle late, inside the next burst: a process that idles
// between events sees its pacer move the trigger to the end of the heap's
// runway, and the next burst then pays most of the mark in assists.
//
//	gc := gcahead.New(slog.Default())
//	defer gc.Stop()
//	for event := range events {
//		handle(event)
//		gc.After() // a collection now, in the background, if one is due soon
//	}
//
// A Collector reads the heap from runtime/metrics; a cycle the runtime
// started itself is waited out, never doubled (runtime.GC during a mark
// finishes that cycle, then runs a whole second one). ovnedge's leader
// calls After after every cluster pass (--gc-ahead).
package gcahead
