package handoff

import (
	"sync"
	"time"
)

// Backoff spaces a leader's hand-overs that did not take: when the Lease
// comes back to the leader that released it without another candidate
// having held it (the successor lost the race for it, does not campaign,
// or died), the next hand-over waits FirstRetry, then twice as long each
// time, up to MaxRetry, so the Lease cannot flap between holder and free.
// Seeing another candidate hold the Lease (Taken) resets it. The zero
// value is ready; it is safe for concurrent use.
type Backoff struct {
	mu     sync.Mutex
	last   time.Time // the last hand-over
	misses int       // hand-overs since another candidate was seen holding the Lease
}

// FirstRetry and MaxRetry bound the wait after a hand-over that did not
// take.
const (
	FirstRetry = 30 * time.Second
	MaxRetry   = 10 * time.Minute
)

// Allow says whether a hand-over may be tried at now.
func (b *Backoff) Allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.misses == 0 || !now.Before(b.last.Add(b.wait()))
}

// HandedOver records a hand-over tried at now.
func (b *Backoff) HandedOver(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = now
	b.misses++
}

// Taken records that another candidate was seen holding the Lease.
func (b *Backoff) Taken() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.misses = 0
}

// wait is the wait after the last hand-over (b.mu held, misses > 0).
func (b *Backoff) wait() time.Duration {
	d := FirstRetry
	for i := 1; i < b.misses && d < MaxRetry; i++ {
		d *= 2
	}
	return min(d, MaxRetry)
}
