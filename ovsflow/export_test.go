package ovsflow

// SetFullDiff makes a resolve and diff the whole program on every apply,
// as it did before per-owner tracking: the baseline of the benchmarks.
func SetFullDiff(a *Applier, full bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.full = full
}

// FlowsEqual is flowsEqual, for the tests of package ovsflow_test.
var FlowsEqual = flowsEqual
