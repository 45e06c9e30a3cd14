package egress

import (
	"maps"
	"net/netip"
	"slices"
	"time"
)

// FenceHold is how long a node keeps silencing an OVN-hosted egress IP
// it no longer holds ([Fence]). It bounds how far behind the node's
// ovn-controller may be in removing the IP's NAT (and the ARP answers of
// its gateway router) without two nodes answering for the IP.
const FenceHold = 30 * time.Second

// Fence tracks the OVN-hosted egress IPs a node held and lost. The
// leader silences the old owner through the Northbound database, but the
// old chassis applies that only when its ovn-controller gets to it: one
// that is busy recomputing, or cut off from the Southbound database,
// keeps answering ARP for the IP with its last flows, beside the new
// owner, as soon as its uplink carries them (ovn-kubernetes #6238). The
// node's own ovnedge fences such an IP on its bridge
// (brex.EgressFence) from the moment its status names another node
// for Hold, or until the IP is assigned back to it.
//
// A Fence computes; it does no I/O. The zero value is ready (Hold 0 is
// [FenceHold]); it is not safe for concurrent use. A new process starts
// with no history: [Fence.Resume] gives it the fences a previous one left
// on the bridge (brex.Fenced reads them), which then last a whole Hold
// from the resume.
type Fence struct {
	Hold  time.Duration
	held  map[netip.Addr]bool
	until map[netip.Addr]time.Time
}

// Update records that at now the node holds exactly held (its OVN-hosted
// egress IPs by their EgressIPs' status) and returns the IPs to fence,
// sorted, and when the first of those fences ends (zero when none).
func (f *Fence) Update(now time.Time, held []netip.Addr) (fenced []netip.Addr, next time.Time) {
	hold := f.init()
	cur := make(map[netip.Addr]bool, len(held))
	for _, ip := range held {
		cur[ip] = true
		delete(f.until, ip) // held again: its own answers are wanted
	}
	for ip := range f.held {
		if !cur[ip] {
			f.until[ip] = now.Add(hold)
		}
	}
	f.held = cur
	for ip, end := range f.until {
		if !end.After(now) {
			delete(f.until, ip)
			continue
		}
		if next.IsZero() || end.Before(next) {
			next = end
		}
	}
	fenced = slices.SortedFunc(maps.Keys(f.until), netip.Addr.Compare)
	return fenced, next
}

// Resume fences ips from now for Hold, unless they are fenced already:
// the fences a previous process left, read back from the bridge before
// the first [Fence.Update]. An IP the node holds again at that Update is
// not fenced any more, as for any fence.
func (f *Fence) Resume(now time.Time, ips []netip.Addr) {
	hold := f.init()
	for _, ip := range ips {
		if _, ok := f.until[ip]; !ok {
			f.until[ip] = now.Add(hold)
		}
	}
}

// init makes the zero Fence ready and returns its hold.
func (f *Fence) init() time.Duration {
	if f.until == nil {
		f.until = map[netip.Addr]time.Time{}
	}
	if f.Hold <= 0 {
		return FenceHold
	}
	return f.Hold
}
