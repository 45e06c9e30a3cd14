package reach

import (
	"testing"
	"time"
)

// The status a responder sends and the grant the requester takes from
// it: an age rounded up to the 4 ms unit (the grant never outlasts the
// responder's own count), not heard beyond what a byte can say.
func TestHeardStatus(t *testing.T) {
	sent := time.Unix(1000, 0)
	const downAfter = 400 * time.Millisecond
	tests := []struct {
		name   string
		age    time.Duration
		known  bool
		status byte
		grant  time.Duration // after sent
		none   bool
	}{
		{"not monitored: no opinion", 0, false, hbServing, downAfter, false},
		{"heard just now", 0, true, hbHeardBase, downAfter, false},
		{"heard 1 ms ago: rounded up", time.Millisecond, true, hbHeardBase + 1, downAfter - hbAgeUnit, false},
		{"heard 100 ms ago", 100 * time.Millisecond, true, hbHeardBase + 25, 300 * time.Millisecond, false},
		{"the oldest age a byte says", hbMaxAge, true, 255, downAfter - hbMaxAge, false},
		{"older: not heard", hbMaxAge + time.Millisecond, true, hbNotHeard, 0, true},
		{"negative: not heard", -time.Millisecond, true, hbNotHeard, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := heardStatus(tc.age, tc.known)
			if st != tc.status {
				t.Fatalf("status %d, want %d", st, tc.status)
			}
			g := grantUntil(st, sent, downAfter)
			if tc.none {
				if !g.IsZero() {
					t.Errorf("grant %v, want none", g)
				}
				return
			}
			if got := g.Sub(sent); got != tc.grant {
				t.Errorf("grant %v after the request, want %v", got, tc.grant)
			}
		})
	}
	if !grantUntil(hbNotServing, sent, downAfter).IsZero() {
		t.Error("a responder not serving granted time")
	}
}
