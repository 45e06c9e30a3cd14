package reach

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestLease: a node that heard the API server or the leader within the
// lease holds it; past the lease it is fenced; a lease of 0 never fences.
func TestLease(t *testing.T) {
	l := &Lease{Duration: 200 * time.Millisecond}
	l.lastAPI.Store(time.Now().UnixNano())
	if l.Fenced() {
		t.Error("fenced right after the API server answered")
	}
	l.lastAPI.Store(time.Now().Add(-time.Second).UnixNano())
	if !l.Fenced() {
		t.Error("not fenced a second after the last answer, lease 200ms")
	}
	l.Renew()
	if l.Fenced() {
		t.Error("fenced right after a leader heartbeat")
	}
	l.Duration = 0
	l.lastLeader.Store(0)
	if l.Fenced() {
		t.Error("lease 0 fenced")
	}
}

// TestLeaseRun: while the node holds egress IPs and the API server does
// not answer, the lease runs out and changed is told at once; answers
// bring it back; a node holding none is never fenced.
func TestLeaseRun(t *testing.T) {
	var down, active atomic.Bool
	active.Store(true)
	l := &Lease{Duration: 200 * time.Millisecond, Active: active.Load, Check: func(context.Context) error {
		if down.Load() {
			return errors.New("down")
		}
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := make(chan bool, 10)
	go l.Run(ctx, func(f bool) { changes <- f })
	expect := func(want bool, within time.Duration) {
		t.Helper()
		select {
		case f := <-changes:
			if f != want {
				t.Fatalf("fenced %v, want %v", f, want)
			}
		case <-time.After(within):
			t.Fatalf("no change to fenced=%v within %v", want, within)
		}
	}
	down.Store(true)
	expect(true, time.Second)
	down.Store(false)
	expect(false, time.Second)
	active.Store(false)
	down.Store(true)
	select {
	case f := <-changes:
		t.Fatalf("fenced=%v while holding nothing", f)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestLeaseExpired: a lease that starts run out (a node holding egress
// IPs a previous process left) is fenced at once when the first check
// fails, and never when it answers.
func TestLeaseExpired(t *testing.T) {
	for _, answers := range []bool{false, true} {
		l := &Lease{Duration: 200 * time.Millisecond, Expired: true, Check: func(context.Context) error {
			if !answers {
				return errors.New("down")
			}
			return nil
		}}
		ctx, cancel := context.WithCancel(context.Background())
		changes := make(chan bool, 10)
		start := time.Now()
		go l.Run(ctx, func(f bool) { changes <- f })
		select {
		case f := <-changes:
			if answers || !f {
				t.Errorf("API server answering %v: fenced=%v", answers, f)
			} else if d := time.Since(start); d > 150*time.Millisecond {
				t.Errorf("fenced %v after the start, want within the first check (50 ms)", d)
			}
		case <-time.After(400 * time.Millisecond):
			if !answers {
				t.Error("not fenced with the first check failed")
			}
		}
		cancel()
	}
}
