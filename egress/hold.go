package egress

import (
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// HostReleaseMargin is added to the nodes' host lease before a held
// egress IP moves: the old node's time to see its lease run out and take
// the address off its link.
const HostReleaseMargin = 500 * time.Millisecond

// HostHold keeps an egress IP that a node hosts on a host interface from
// moving to another node until the old node has let it go: the kernel of
// a node cut off from the leader and the API server keeps answering ARP
// for the address until its host lease runs out (the daemon's
// --egressip-host-lease), so a move at once would make two nodes answer
// for it. When Assign takes such an IP off node A, the IP is released:
// it is assigned to no node until A is known to be silent:
//
//   - A reports it no longer hosts the IP (its HostReport, in a Node
//     object written after the release: A saw the new status and took
//     the address off), or that it cannot host it (refused: nothing of it
//     was installed, or it was removed);
//   - or Lease plus HostReleaseMargin have passed since the release: the
//     leader stops renewing A's lease at the release (Holding), so A, if
//     it hears neither the leader nor the API server, has withdrawn it by
//     then; if it still hears the API server it has seen the release.
//
// A Lease of 0 (nodes never fence) holds nothing. A hold does not live in
// the leader's memory only: a new leader (or this one restarted) holds
// every released IP (on no node in the status) that a node still reports
// hosting, from its first pass, until that node lets it go as above or a
// whole lease has passed since that pass.
//
// Its methods are safe for concurrent use.
type HostHold struct {
	// Lease is the nodes' host lease.
	Lease time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu   sync.Mutex
	held map[netip.Addr]Release
}

// Release is an egress IP taken off a node's host interface and not yet
// let go.
type Release struct {
	// Node had the IP; At is when the leader released it; Version is
	// the Node object's resourceVersion then.
	Node    string
	At      time.Time
	Version string
}

// Apply takes the released IPs out of status (Assign's new status of
// eips, whose Status is the old one) and returns it, with how long until
// the first hold runs out (0: none held): the leader computes again then.
// nodes are Assign's.
func (h *HostHold) Apply(eips []*egressv1.EgressIP, status map[string][]egressv1.EgressIPStatusItem, nodes []ovnknode.Node) (map[string][]egressv1.EgressIPStatusItem, time.Duration) {
	if h.Lease <= 0 {
		return status, 0
	}
	now := time.Now()
	if h.Now != nil {
		now = h.Now()
	}
	byName := make(map[string]*ovnknode.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	has := func(items []egressv1.EgressIPStatusItem, node string, ip netip.Addr) bool {
		return slices.ContainsFunc(items, func(it egressv1.EgressIPStatusItem) bool {
			a, err := netip.ParseAddr(it.EgressIP)
			return err == nil && a.Unmap() == ip && it.Node == node
		})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[netip.Addr]Release{}
	}
	for _, e := range eips {
		for _, it := range e.Status.Items {
			ip, err := netip.ParseAddr(it.EgressIP)
			if err != nil {
				continue
			}
			ip = ip.Unmap()
			n := byName[it.Node]
			if n == nil || has(status[e.Name], it.Node, ip) {
				continue
			}
			if _, primary, ok := n.Network(ip); !ok || primary {
				continue // OVN-hosted: SilenceFirst's business
			}
			if _, ok := h.held[ip]; !ok {
				h.held[ip] = Release{Node: it.Node, At: now, Version: n.Version}
			}
		}
	}
	h.holdReported(eips, status, nodes, now)
	var wake time.Duration
	out := make(map[string][]egressv1.EgressIPStatusItem, len(status))
	maps.Copy(out, status)
	for _, ip := range slices.SortedFunc(maps.Keys(h.held), netip.Addr.Compare) {
		r := h.held[ip]
		left := r.At.Add(h.Lease + HostReleaseMargin).Sub(now)
		if h.silent(r, ip, byName[r.Node], left) || backOn(out, r.Node, ip) {
			delete(h.held, ip)
			continue
		}
		for name, items := range out {
			out[name] = slices.DeleteFunc(slices.Clone(items), func(it egressv1.EgressIPStatusItem) bool {
				a, err := netip.ParseAddr(it.EgressIP)
				return err == nil && a.Unmap() == ip
			})
		}
		if wake == 0 || left < wake {
			wake = left
		}
	}
	return out, wake
}

// Assign is Assign with h's holds (a nil h: Assign alone): every held IP
// is offered back to the node it was released from, as though the status
// still put it there, so that once that node is a candidate again
// (reachable, Ready, with room) the IP returns to it at once, the one
// node that may still have it on its link, instead of waiting out the
// hold to go to another. Otherwise Assign moves it and Apply holds it.
// The result's Status is Apply's; wake is its wake.
func (h *HostHold) Assign(eips []*egressv1.EgressIP, nodes []ovnknode.Node, reachable func(string) bool, broken map[string]error) (res Result, wake time.Duration) {
	if h == nil {
		return Assign(eips, nodes, reachable, broken), 0
	}
	res = Assign(h.offered(eips), nodes, reachable, broken)
	res.Status, wake = h.Apply(eips, res.Status, nodes)
	return res, wake
}

// offered is eips with every held IP they request and their status
// lacks back in their status, on the node it was released from (copies
// of the EgressIPs it changes).
func (h *HostHold) offered(eips []*egressv1.EgressIP) []*egressv1.EgressIP {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.held) == 0 {
		return eips
	}
	out := slices.Clone(eips)
	for i, e := range out {
		var back []egressv1.EgressIPStatusItem
		for _, s := range e.Spec.EgressIPs {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			if r, ok := h.held[ip.Unmap()]; ok && !inStatus(e.Status.Items, ip.Unmap()) {
				back = append(back, egressv1.EgressIPStatusItem{Node: r.Node, EgressIP: s})
			}
		}
		if len(back) > 0 {
			c := *e
			c.Status.Items = append(slices.Clip(e.Status.Items), back...)
			out[i] = &c
		}
	}
	return out
}

// inStatus reports whether items give ip to a node.
func inStatus(items []egressv1.EgressIPStatusItem, ip netip.Addr) bool {
	return slices.ContainsFunc(items, func(it egressv1.EgressIPStatusItem) bool {
		a, err := netip.ParseAddr(it.EgressIP)
		return err == nil && a.Unmap() == ip
	})
}

// holdReported holds, from now, every released egress IP (requested, on
// no node in the status written so far) that a node still reports
// hosting while the new status puts it elsewhere or nowhere: the holds of
// a previous leader (or of this one before a restart), which released the
// IP and so left no trace of the release in the status, are read back
// from the nodes' reports in the API server. Such a hold may last up to a
// whole lease longer than the original, never shorter. An IP the status
// already gives a node is not taken back on a stale report: it went there
// after its hold.
func (h *HostHold) holdReported(eips []*egressv1.EgressIP, status map[string][]egressv1.EgressIPStatusItem, nodes []ovnknode.Node, now time.Time) {
	requested, assigned := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for _, e := range eips {
		for _, s := range e.Spec.EgressIPs {
			if ip, err := netip.ParseAddr(s); err == nil {
				requested[ip.Unmap()] = true
			}
		}
		for _, it := range e.Status.Items {
			if ip, err := netip.ParseAddr(it.EgressIP); err == nil && it.Node != "" {
				assigned[ip.Unmap()] = true
			}
		}
	}
	for i := range nodes {
		n := &nodes[i]
		if !n.Reported {
			continue
		}
		for _, ip := range n.Host.Hosted {
			released := requested[ip] && !assigned[ip]
			if _, ok := h.held[ip]; ok || !released || backOn(status, n.Name, ip) {
				continue
			}
			h.held[ip] = Release{Node: n.Name, At: now, Version: n.Version}
		}
	}
}

// silent reports whether r's node has let ip go (see HostHold), left
// being what remains of its lease.
func (h *HostHold) silent(r Release, ip netip.Addr, n *ovnknode.Node, left time.Duration) bool {
	switch {
	case left <= 0:
		return true
	case n == nil:
		return false // no word from it: the lease decides
	case n.Refuses(ip):
		return true
	case n.Reported && n.Version != r.Version && !slices.Contains(n.Host.Hosted, ip):
		return true
	}
	return false
}

// backOn reports whether status puts ip on node again: nothing to hold.
func backOn(status map[string][]egressv1.EgressIPStatusItem, node string, ip netip.Addr) bool {
	for _, items := range status {
		for _, it := range items {
			if a, err := netip.ParseAddr(it.EgressIP); err == nil && a.Unmap() == ip {
				return it.Node == node
			}
		}
	}
	return false
}

// Holding reports whether an egress IP released from node is held: the
// leader then stops renewing node's host lease (its heartbeats no longer
// count as the leader's word).
func (h *HostHold) Holding(node string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.held {
		if r.Node == node {
			return true
		}
	}
	return false
}

// Held returns the held IPs and their releases, sorted by IP.
func (h *HostHold) Held() []HeldIP {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]HeldIP, 0, len(h.held))
	for ip, r := range h.held {
		out = append(out, HeldIP{IP: ip, Release: r})
	}
	slices.SortFunc(out, func(a, b HeldIP) int { return a.IP.Compare(b.IP) })
	return out
}

// Clone returns a HostHold with h's lease, clock and held IPs, whose holds
// then start and end apart from h's: a computation that must not change
// h's (a check of the leader's state against a full recompute) applies
// the clone. A nil h clones to nil.
func (h *HostHold) Clone() *HostHold {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return &HostHold{Lease: h.Lease, Now: h.Now, held: maps.Clone(h.held)}
}

// HeldIP is a held egress IP.
type HeldIP struct {
	IP netip.Addr
	Release
}
