package testbed

import "testing"

// TestProgramUnwinds checks Program: Fatalf stops the work
// and the cleanups run, last first.
func TestProgramUnwinds(t *testing.T) {
	r := &Program{}
	var order []int
	err := r.Run(func() {
		r.Cleanup(func() { order = append(order, 1) })
		r.Cleanup(func() { order = append(order, 2) })
		r.Fatalf("broken %d", 42)
		order = append(order, 99)
	})
	if err == nil || err.Error() != "broken 42" || !r.Failed() {
		t.Fatalf("err %v, failed %v", err, r.Failed())
	}
	if len(order) != 2 || order[0] != 2 || order[1] != 1 {
		t.Errorf("cleanups ran %v, want [2 1]", order)
	}
}
