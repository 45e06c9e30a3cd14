package reach_test

import (
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress/reach"
)

// TestJoined: a node counts itself alive only once it has been up for
// the delay, after a start or after each time it went down, and is woken
// when the delay runs out.
func TestJoined(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	woken := make(chan struct{}, 1)
	j := &reach.Joined{Delay: 250 * time.Millisecond, Now: func() time.Time { return now }, Wake: func() { woken <- struct{}{} }}
	for i, s := range []struct {
		at   time.Duration
		up   bool
		want bool
	}{
		{0, true, false},                       // just started
		{100 * time.Millisecond, true, false},  // not yet
		{250 * time.Millisecond, true, true},   // joined
		{400 * time.Millisecond, false, false}, // uplink down
		{500 * time.Millisecond, true, false},  // back: joins anew
		{700 * time.Millisecond, true, false},
		{750 * time.Millisecond, true, true},
	} {
		now = t0.Add(s.at)
		if got := j.Alive(s.up); got != s.want {
			t.Errorf("step %d (+%v, up %v): alive %v, want %v", i, s.at, s.up, got, s.want)
		}
	}
	select {
	case <-woken:
	case <-time.After(2 * time.Second):
		t.Error("not woken when the delay ran out")
	}
	if !(&reach.Joined{}).Alive(true) {
		t.Error("no delay: not alive at once")
	}
}
