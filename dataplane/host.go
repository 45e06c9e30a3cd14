package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ovnedge/ovnedge/arp"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/egress/hostspec"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// HostEgress keeps a node's egress IPs on secondary host networks
// (addresses, ip rules, SNAT: egress/hostnet) those the leader assigned to
// it, and reports what it hosts and what it refuses (Report), so the
// leader moves what it cannot host.
type HostEgress struct {
	opts HostOptions

	mu  sync.Mutex
	m   *hostnet.Manager
	ann *arp.Announcer // the Manager's
	// guard is the leak guard (hostnet.Guard), open while the node has
	// secondary host networks to guard.
	guard *hostnet.Guard
	// refused are the egress IPs this node refused, kept while their
	// requirements fail; hosted those on its links after the last
	// converge.
	refused map[netip.Addr]egress.HostAssignment
	hosted  []netip.Addr
	// hosting is whether the node was last asked to host egress IPs on
	// host interfaces (or, before that, holds some a previous process
	// left: leftover).
	hosting  atomic.Bool
	leftover bool // a previous process left egress IPs (Leftover)
	written  bool // Write has run
	bg       background
}

// HostOptions configure a HostEgress writer.
type HostOptions struct {
	// Node is the node's name; Netns the network namespace (a path)
	// holding its host links ("" is the process's own); Backend the SNAT
	// backend: iptables, nftables or auto.
	Node, Netns, Backend string
	// Confirm, when not nil, says whether the EgressIP of a new
	// assignment still names this node, read from the API server now
	// (not from an informer's cache).
	Confirm func(ctx context.Context, a egress.HostAssignment) (bool, error)
	// Fenced, when not nil, says whether the node lost its host lease:
	// it then hosts none.
	Fenced func() bool
	// Report, when not nil, is given the node's report after every Write
	// (the daemon writes it to the node's Node object).
	Report func(ctx context.Context, r ovnknode.HostReport) error
	// LinksChanged, when not nil, is called on every change of a host
	// link.
	LinksChanged func()
	Logger       *slog.Logger
}

// NewHostEgress returns a HostEgress writer; nothing is opened until the
// node has an egress IP on a host interface.
func NewHostEgress(opts HostOptions) *HostEgress {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &HostEgress{opts: opts}
}

// Write converges the node's host links to its assignments of ns.Host and
// reports the result.
func (h *HostEgress) Write(ctx context.Context, _ desired.Snapshot, ns *desired.NodeState) ([]event.Event, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	guardErr := h.convergeGuard(ctx, ns.HostGuard, !h.written)
	h.written = true
	events, report, err := h.Converge(ctx, ns.Host)
	if h.opts.Report != nil {
		err = errors.Join(err, h.opts.Report(ctx, report))
	}
	return events, errors.Join(guardErr, err)
}

// convergeGuard keeps the leak guard of the node's secondary host
// networks to g, before the SNAT rules change. The first Write also
// removes a guard a previous process left.
func (h *HostEgress) convergeGuard(ctx context.Context, g hostspec.Guard, first bool) error {
	if h.guard == nil && g.Empty() && !first {
		return nil
	}
	if h.guard == nil {
		guard, err := hostnet.NewGuard(h.opts.Netns)
		if err != nil {
			return h.guardFailed(g, first, err)
		}
		h.guard = guard
	}
	links, changed, err := h.guard.Converge(ctx, g)
	if err != nil {
		return h.guardFailed(g, first, err)
	}
	if changed {
		h.opts.Logger.Info("host egress guard converged", "links", links, "podSubnets", g.PodSubnets, "networks", g.Networks)
	}
	if g.Empty() {
		h.closeGuard()
	}
	return nil
}

// guardFailed is the result of a guard that failed with err: only
// logged when the first Write, with nothing to guard, looked for a
// previous process's table (the node may lack nftables), an error
// (retried) otherwise.
func (h *HostEgress) guardFailed(g hostspec.Guard, first bool, err error) error {
	if g.Empty() && first {
		h.closeGuard()
		h.opts.Logger.Debug("host egress guard: no table of a previous process looked for", "err", err)
		return nil
	}
	return fmt.Errorf("host egress guard: %w", err)
}

func (h *HostEgress) closeGuard() {
	if h.guard != nil {
		_ = h.guard.Close()
		h.guard = nil
	}
}

// Hosting reports whether the node was last asked to host egress IPs on
// host interfaces (whether or not it is fenced), or holds some a previous
// process left and has not been asked anything yet (Leftover).
func (h *HostEgress) Hosting() bool { return h.hosting.Load() }

// Leftover reports whether a previous process left egress IPs on the
// node's host links (hostnet.Leftover; logged, and an error reading them
// logged and counted as none). With some, the node counts as hosting (its
// host lease runs) and its first Write converges them away even when it
// is asked for none; WithdrawLeftover removes them before that.
func (h *HostEgress) Leftover() bool {
	ips, err := hostnet.Leftover(h.opts.Netns)
	if err != nil {
		h.opts.Logger.Error("egress IPs left on the host links by a previous process not read", "err", err)
		return false
	}
	if len(ips) == 0 {
		return false
	}
	h.opts.Logger.Info("egress IPs left on the host links by a previous process; the host lease starts run out", "ips", ips)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leftover = true
	h.hosting.Store(true)
	return true
}

// WithdrawLeftover removes every egress IP from the node's host links, as
// a Write of no assignment would, when no Write has run yet: for a node
// that lost its host lease before its first reconcile (which waits for
// the API server). Nothing else would, and the leader gives them to other
// nodes once the lease has run out.
func (h *HostEgress) WithdrawLeftover(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.written || !h.leftover {
		return
	}
	if _, _, err := h.Converge(ctx, nil); err != nil {
		h.opts.Logger.Error("egress IPs left on the host links not withdrawn", "err", err)
		return
	}
	h.opts.Logger.Warn("host egress lease lost before the first reconcile: the egress IPs a previous process left are withdrawn")
}

// Close stops the link watch and closes the Manager; the addresses, rules
// and SNAT stay.
func (h *HostEgress) Close() {
	h.bg.stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m != nil {
		_ = h.m.Close()
	}
	if h.ann != nil {
		h.ann.Close()
	}
	h.closeGuard()
}

// Converge makes the node's host links hold its egress IPs on
// secondary host networks, its assignments among host (addresses, ip
// rules, SNAT). Nothing is opened until the node has one. An assignment the node cannot host (no link
// for its network, a requirement of hostnet not met) is a Warning event
// on its EgressIP, is left out (the others converge) and is refused in
// the node's report, so the leader moves it; it stays refused while the
// requirement still fails. While the node is fenced (its host lease lost)
// it hosts none. The error is a failure to apply only. It returns the
// node's report; Write is Converge and the report given to Report.
func (h *HostEgress) Converge(ctx context.Context, host []egress.HostAssignment) ([]event.Event, ovnknode.HostReport, error) {
	var report ovnknode.HostReport
	var mine []egress.HostAssignment
	for _, a := range host {
		if a.Node == h.opts.Node {
			mine = append(mine, a)
		}
	}
	h.hosting.Store(len(mine) > 0)
	if len(mine) > 0 && h.opts.Fenced != nil && h.opts.Fenced() {
		mine = nil
	}
	if h.m == nil && len(mine) == 0 && !h.leftover {
		return nil, report, nil
	}
	if h.m == nil {
		if err := h.open(ctx); err != nil {
			return nil, report, err
		}
	}
	mine, confirmErr := h.confirm(ctx, mine)
	state, events := egress.HostState(h.opts.Node, mine, h.m.LinkOf)
	res, err := h.m.Converge(ctx, state)
	events = append(events, egress.HostEvents(h.opts.Node, mine, res.Rejected)...)
	if res.Changes() > 0 {
		h.opts.Logger.Info("host egress converged", "addresses+", res.AddrsAdded, "addresses-", res.AddrsRemoved,
			"rules+", res.RulesAdded, "rules-", res.RulesRemoved, "snat+", res.SNATAdded, "snat-", res.SNATRemoved,
			"rejected", len(res.Rejected))
	}
	report = h.report(mine, state, res.Rejected)
	h.hosted = report.Hosted
	if err = errors.Join(applyErrors(err), confirmErr); err != nil {
		return events, report, fmt.Errorf("host egress: %w", err)
	}
	return events, report, nil
}

// confirm returns the assignments of mine the node may host: those
// it hosts already, and new ones whose EgressIP, read from the API server
// now (not from the informer's cache), still names this node (Confirm). A node
// back from a partition (its lease regained) may see a stale status
// until its watch catches up; adding the address then would make two
// nodes answer ARP for it. One not confirmed waits for the next pass
// (the error, when the API server could not be asked, retries it).
func (h *HostEgress) confirm(ctx context.Context, mine []egress.HostAssignment) ([]egress.HostAssignment, error) {
	if h.opts.Confirm == nil {
		return mine, nil
	}
	var out []egress.HostAssignment
	var errs []error
	for _, a := range mine {
		if slices.Contains(h.hosted, a.EgressIP) {
			out = append(out, a)
			continue
		}
		ok, err := h.opts.Confirm(ctx, a)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("confirm egress IP %s of EgressIP %s: %w", a.EgressIP, a.EgressIPName, err))
		case ok:
			out = append(out, a)
		default:
			h.opts.Logger.Info("host egress IP not added: the API server's status no longer names this node", "egressIP", a.EgressIP, "egressip", a.EgressIPName)
		}
	}
	return out, errors.Join(errs...)
}

// open opens the host egress Manager, its announcer and the watch
// of its links.
func (h *HostEgress) open(ctx context.Context) error {
	snat, err := newHostSNAT(h.opts.Backend, h.opts.Netns, h.opts.Logger)
	if err != nil {
		return fmt.Errorf("host egress: %w", err)
	}
	// The new owner of an egress IP tells the link's hosts at once
	// (gratuitous ARP, unsolicited NA) rather than when their cache of
	// the old owner's MAC runs out.
	ann, err := arp.NewAnnouncer(arp.AnnouncerConfig{Logger: h.opts.Logger})
	if err != nil {
		return fmt.Errorf("host egress: %w", err)
	}
	m, err := hostnet.New(hostnet.Config{Netns: h.opts.Netns, SNAT: snat, Announcer: ann, Logger: h.opts.Logger})
	if err != nil {
		ann.Close()
		return fmt.Errorf("host egress: %w", err)
	}
	h.m, h.ann = m, ann
	if h.opts.LinksChanged != nil {
		h.bg.run(ctx, func(ctx context.Context) {
			if err := m.WatchLinks(ctx, h.opts.LinksChanged); err != nil && ctx.Err() == nil {
				h.opts.Logger.Error("host egress: link watch stopped; link changes are seen at the next reconcile", "err", err)
			}
		})
	}
	return nil
}

// report is the node's report after a converge of mine to state:
// what it hosts, and what it refuses (rejected now, no link for the
// network, or refused before and still failing its requirements).
func (h *HostEgress) report(mine []egress.HostAssignment, state hostnet.State, rejected []*hostnet.RequirementError) ovnknode.HostReport {
	refused := map[netip.Addr]string{}
	asked := map[netip.Addr]bool{}
	for _, a := range mine {
		asked[a.EgressIP] = true
		if !slices.ContainsFunc(state, func(s hostnet.Assignment) bool { return s.EgressIP == a.EgressIP }) {
			refused[a.EgressIP] = fmt.Sprintf("%s: no link in network %s", hostnet.ReasonLinkNotFound, a.Network)
		}
	}
	for _, r := range rejected {
		refused[r.EgressIP] = r.Error()
	}
	// Refused before and not asked now (the leader moved it): still
	// refused while its requirements fail, so the leader does not give
	// it back.
	for ip, a := range h.refused {
		if asked[ip] {
			continue
		}
		link, err := h.m.LinkOf(a.Network)
		if err == nil {
			err = h.m.Check(hostnet.Assignment{Link: link, EgressIP: a.EgressIP, PodIPs: a.PodIPs})
		}
		if err != nil {
			refused[ip] = err.Error()
		}
	}
	next := map[netip.Addr]egress.HostAssignment{}
	for _, a := range mine {
		if _, ok := refused[a.EgressIP]; ok {
			next[a.EgressIP] = a
		}
	}
	for ip, a := range h.refused {
		if _, ok := refused[ip]; ok && !asked[ip] {
			next[ip] = a
		}
	}
	h.refused = next
	var r ovnknode.HostReport
	for _, a := range state {
		if _, ok := refused[a.EgressIP]; !ok {
			r.Hosted = append(r.Hosted, a.EgressIP)
		}
	}
	if len(refused) > 0 {
		r.Refused = refused
	}
	return r
}

// applyErrors is err without the hostnet.RequirementErrors it joins
// (those are events, not failures).
func applyErrors(err error) error {
	if _, joined := err.(interface{ Unwrap() []error }); !joined {
		if requirement(err) {
			return nil
		}
		return err
	}
	return errors.Join(slices.DeleteFunc(flatten(err), requirement)...)
}

// requirement reports whether err is a hostnet.RequirementError.
func requirement(err error) bool {
	var re *hostnet.RequirementError
	return errors.As(err, &re)
}

// newHostSNAT opens the SNAT backend of egress IPs on host interfaces
// named by --egressip-host-backend. auto is nftables, programmed through
// netlink (no binary, so it works from the ovnedge image), unless the
// kernel's nftables API does not answer: then iptables, if its commands
// are installed.
func newHostSNAT(backend, netns string, log *slog.Logger) (hostnet.SNAT, error) {
	switch backend {
	case "iptables":
		return hostnet.NewIPTables(netns)
	case "nftables":
		return hostnet.NewNFTables(netns)
	case "auto":
		nft, err := hostnet.NewNFTables(netns)
		if err == nil {
			return nft, nil
		}
		ipt, err2 := hostnet.NewIPTables(netns)
		if err2 != nil {
			return nil, fmt.Errorf("egressip-host-backend auto: %w", errors.Join(err, err2))
		}
		log.Warn("nftables unavailable: egress IPs on host interfaces use iptables", "err", err)
		return ipt, nil
	}
	return nil, fmt.Errorf("egressip-host-backend %q: want iptables, nftables or auto", backend)
}
