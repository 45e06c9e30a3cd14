package handoff

import (
	"testing"
	"time"
)

// TestBackoff: hand-overs that do not take are spaced 30 s, 60 s, 120 s
// ... up to 10 minutes; one that takes (another holder seen) resets it.
func TestBackoff(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var b Backoff
	if !b.Allow(t0) {
		t.Fatal("a first hand-over not allowed")
	}
	at := t0
	for i, wait := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		10 * time.Minute, 10 * time.Minute} {
		b.HandedOver(at)
		if b.Allow(at.Add(wait - time.Millisecond)) {
			t.Errorf("miss %d: allowed before %v", i+1, wait)
		}
		if !b.Allow(at.Add(wait)) {
			t.Errorf("miss %d: not allowed after %v", i+1, wait)
		}
		at = at.Add(wait)
	}
	b.HandedOver(at)
	b.Taken()
	if !b.Allow(at) {
		t.Error("not allowed at once after another candidate held the Lease")
	}
}
