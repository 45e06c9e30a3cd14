package reach

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Lease is a node's hold on its egress IPs on host interfaces: renewed by
// the leader's heartbeats (Renew, a NodeServer's OnLeader) and by the API
// server's answers (Check, asked every Duration/4, each within that
// time, while Active says the node holds some: a cluster of nodes asking
// it for nothing would load it). The node is fenced once neither came for
// Duration: it can no longer prove it still owns them, and withdraws
// them. The leader counts on that (egress.HostHold waits the lease plus
// egress.HostReleaseMargin before it gives such an IP to another node).
type Lease struct {
	// Duration is the lease; 0 never fences.
	Duration time.Duration
	// Check asks the API server whether it answers (nil: nothing to ask,
	// as with a manifests directory: never fenced for want of it).
	Check func(ctx context.Context) error
	// Active, when not nil, says whether the node holds egress IPs on
	// host interfaces; while it does not, the lease is kept renewed.
	Active func() bool
	// Expired makes the lease start run out: a node that starts holding
	// egress IPs a previous process left cannot know when that process
	// last heard the leader or the API server, so it is fenced unless
	// Run's first check (asked at once, within Duration/4) or a leader's
	// heartbeat renews it.
	Expired bool
	Logger  *slog.Logger

	// lastLeader and lastAPI are UnixNano times.
	lastLeader, lastAPI atomic.Int64
}

// Renew records a heartbeat of the leader.
func (l *Lease) Renew() { l.lastLeader.Store(time.Now().UnixNano()) }

// Fenced reports whether the node has heard neither the leader nor the
// API server for longer than the lease.
func (l *Lease) Fenced() bool {
	if l.Duration <= 0 {
		return false
	}
	return time.Since(l.last()) > l.Duration
}

func (l *Lease) last() time.Time { return time.Unix(0, max(l.lastLeader.Load(), l.lastAPI.Load())) }

// Run asks the API server, records its answers and calls changed on
// every change of Fenced until ctx ends. It also wakes when the lease
// would run out, so the node withdraws right then.
func (l *Lease) Run(ctx context.Context, changed func(fenced bool)) {
	if !l.Expired {
		l.lastAPI.Store(time.Now().UnixNano())
	}
	if l.Duration <= 0 {
		return
	}
	every := max(l.Duration/4, 50*time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	fenced := false
	var asked time.Time
	for {
		asked = l.ask(ctx, asked, every)
		if f := l.Fenced(); f != fenced {
			fenced = f
			l.log(f)
			changed(f)
		}
		next := every - time.Since(asked)
		if !fenced {
			next = min(next, time.Until(l.last().Add(l.Duration))+time.Millisecond)
		}
		t.Reset(max(next, time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ask renews the lease with the API server's answer when one is due (every
// since asked), or at once when there is nothing to fence; it returns when
// it last asked.
func (l *Lease) ask(ctx context.Context, asked time.Time, every time.Duration) time.Time {
	switch {
	case l.Check == nil || (l.Active != nil && !l.Active()):
		now := time.Now()
		l.lastAPI.Store(now.UnixNano()) // nothing to fence
		return now
	case time.Since(asked) < every:
		return asked // woken for the lease's end: no new question yet
	}
	now := time.Now()
	rctx, cancel := context.WithTimeout(ctx, every)
	defer cancel()
	if l.Check(rctx) == nil {
		l.lastAPI.Store(time.Now().UnixNano())
	}
	return now
}

func (l *Lease) log(fenced bool) {
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	if fenced {
		log.Warn("host egress lease lost: neither the leader nor the API server heard; egress IPs on host interfaces are withdrawn", "lease", l.Duration)
	} else {
		log.Info("host egress lease back")
	}
}
