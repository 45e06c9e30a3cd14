package reach

import (
	"net/netip"
	"time"
)

// Heard: a node whose heartbeats reach the others but whose answers do
// not (or the other way round) hears every peer while none of them hears
// it; by its own count it is alive and keeps answering for its L2 VIPs
// while the others, which count it down, take them over. A node monitor
// with HeartbeatConfig.AskHeard therefore asks each target, with every
// request, how long ago the target's own monitor last heard this node;
// the target's answer bounds when it may count the node down, and the
// node counts itself heard by the target (Heartbeat.Hearing) only until
// one Interval before that bound. It stops answering for what it owns
// before any peer that stopped hearing it takes over (Raft's leader
// lease, bounded by the followers' own clocks: only durations cross the
// wire).
//
// A node cut off from the others in both directions hears none of them:
// it counts itself out once every peer has been silent for two
// intervals. With AskHeard a target is counted down two intervals later
// than without (Misses+2): one for the margin by which a node stops
// before a peer that stopped hearing it starts, one so that a peer that
// dies is silent before its last grant runs out (the node would stop for
// a moment otherwise). The nodes' monitors must share Interval and Misses
// (the chart and the daemon's flags set them alike).
//
// Deviation from MetalLB (metallb/metallb at 7938d3f89, speaker's
// internal/speakerlist/speakerlist.go): its layer2 mode elects among the
// speakers its memberlist sees, so a speaker cut off in one direction,
// or during the memberlist's own detection, answers beside the one that
// took over; here the node cut off stops first.
//
// On the wire a request that asks sets bit 1 of its role byte; the
// responder answers it with a status byte that says, besides serving,
// whether and how long ago it heard the requester (see heardStatus).
// Responders that do not know the bit answer 0 or 1 ("no opinion"),
// monitors that do not ask never get anything else: versions mix.
const (
	hbRoleLeader   = 1
	hbRoleAskHeard = 2

	hbNotServing = 0
	hbServing    = 1 // serving; no opinion on whether it hears the requester
	hbNotHeard   = 2 // serving; it does not hear the requester
	hbHeardBase  = 3 // serving; heard the requester (status-3)*hbAgeUnit ago
	hbAgeUnit    = 4 * time.Millisecond
	// hbMaxAge is the oldest age a status can say; an older one is sent
	// as not heard (the requester then stops early, never late).
	hbMaxAge = (255 - hbHeardBase) * hbAgeUnit
)

// heardStatus is a serving responder's answer to a request that asks:
// the age of its last serving answer from the requester, rounded up, or
// hbNotHeard when it is down (or older than hbMaxAge); hbServing when
// the responder monitors no such node.
func heardStatus(age time.Duration, known bool) byte {
	switch {
	case !known:
		return hbServing
	case age < 0 || age > hbMaxAge:
		return hbNotHeard
	}
	return byte(hbHeardBase + (age+hbAgeUnit-1)/hbAgeUnit)
}

// grantUntil is the time, by this monitor's clock, before which the
// target that answered status to the request sent at sent cannot count
// this node down (zero: it may already).
func grantUntil(status byte, sent time.Time, downAfter time.Duration) time.Time {
	switch {
	case status == hbNotServing || status == hbNotHeard:
		return time.Time{}
	case status == hbServing:
		return sent.Add(downAfter)
	}
	return sent.Add(downAfter - time.Duration(status-hbHeardBase)*hbAgeUnit)
}

// downAfter is how long a target may stay silent before it is down.
func (h *Heartbeat) downAfter() time.Duration {
	d := time.Duration(h.cfg.Misses) * h.cfg.Interval
	if h.cfg.AskHeard {
		d += 2 * h.cfg.Interval
	}
	return d
}

// Age reports how long ago the target at addr last answered as serving
// (ok false when no target has that address): what this node's
// Responder tells a requester that asks whether it is heard
// (ServerConfig.Hears). A target that is down has an age beyond
// downAfter.
func (h *Heartbeat) Age(addr netip.Addr) (age time.Duration, ok bool) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.byAddr[addr.Unmap()]
	switch {
	case !ok:
		return 0, false
	case !t.up || t.lastOK.IsZero():
		return hbMaxAge + time.Second, true
	}
	return now.Sub(t.lastOK), true
}

// hearing is this node's view of one target (AskHeard): whether it
// answers, and whether it hears this node.
type hearing uint8

const (
	// silent: no serving answer for two intervals (dead, cut off, or
	// not serving): it takes nothing over, or this node is the one cut
	// off.
	silent hearing = iota + 1
	// heard: it answers and hears this node.
	heard
	// deaf: it answers but does not hear this node (its grant ran out):
	// it may take this node's VIPs over.
	deaf
)

func (hg hearing) String() string {
	return [...]string{"", "silent", "heard", "deaf"}[hg]
}

// Hearing reports how many targets there are, how many of them answer
// and hear this node (heard), and how many answer but do not hear it
// (deaf), by their last answers (AskHeard). A node is alive for its L2
// VIPs while no target is deaf and at least half are heard: one cut off
// in one direction sees a deaf target one interval before that target
// counts it down; one cut off in both sees every target silent two
// intervals after the cut, Misses intervals before any counts it down.
// Without AskHeard every target that is up is heard.
func (h *Heartbeat) Hearing() (total, heardBy, deafTo int) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.targets {
		switch h.hearingOf(t, now) {
		case heard:
			heardBy++
		case deaf:
			deafTo++
		}
	}
	return len(h.targets), heardBy, deafTo
}

// hearingOf is one target's hearing at now (h.mu held).
func (h *Heartbeat) hearingOf(t *hbTarget, now time.Time) hearing {
	if !h.cfg.AskHeard {
		if t.up {
			return heard
		}
		return silent
	}
	switch {
	case t.lastOK.IsZero() || now.Sub(t.lastOK) >= 2*h.cfg.Interval:
		return silent
	case now.Before(t.grant.Add(-h.cfg.Interval)):
		return heard
	}
	return deaf
}
