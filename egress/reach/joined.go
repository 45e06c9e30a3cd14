package reach

import (
	"sync"
	"time"
)

// Joined delays a node's own liveness after it (re)joins: a node that
// just started, or whose uplink or peers came back, counts itself alive
// only once it has been so for Delay, long enough for the other nodes'
// heartbeats to have seen it. An L2 VIP's elected owner coming back thus
// starts answering only after the node that stood in for it stopped:
// never two nodes answering at once (MetalLB's layer2 mode lets both
// answer until its memberlist converges).
//
// Its methods are safe for concurrent use.
type Joined struct {
	// Delay is how long the node must have been alive; 0 is no delay.
	Delay time.Duration
	// Wake, when not nil, is called once the delay has run out after
	// Alive said no because of it (the node then computes again).
	Wake func()
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu    sync.Mutex
	since time.Time // zero: not alive
	timer *time.Timer
}

// JoinDelay is the delay a heartbeat of interval needs: one interval for
// the peers' next heartbeat to be answered, a second for its answer and
// their next computation.
func JoinDelay(interval time.Duration) time.Duration { return 2*interval + 50*time.Millisecond }

// Alive reports whether the node, alive now by its own checks (up), has
// been so for Delay.
func (j *Joined) Alive(up bool) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !up {
		j.since = time.Time{}
		return false
	}
	now := time.Now()
	if j.Now != nil {
		now = j.Now()
	}
	if j.since.IsZero() {
		j.since = now
	}
	left := j.Delay - now.Sub(j.since)
	if left <= 0 {
		return true
	}
	if j.Wake != nil {
		if j.timer == nil {
			j.timer = time.AfterFunc(left, j.Wake)
		} else {
			j.timer.Reset(left)
		}
	}
	return false
}
