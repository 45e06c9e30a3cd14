package dataplane

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	"github.com/ovnedge/ovnedge/arp"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/event"
)

// L2 answers ARP and NDP for the VIPs the node owns (the elected node's:
// desired.NodeState.Announce, or UnderlayAnnounce on an underlay
// interface) from an arp.Responder on one interface, started on first use.
type L2 struct {
	opts L2Options

	mu sync.Mutex
	r  *arp.Responder
	bg background
}

// L2Options configure an L2 writer.
type L2Options struct {
	// Interface is the link the VIPs are answered on.
	Interface string
	// Addrs picks the node state's VIPs for this interface.
	Addrs func(ns *desired.NodeState) []netip.Addr
	// Started, when not nil, is given the responder once it runs (its
	// Stats feed metrics).
	Started func(*arp.Responder)
	Logger  *slog.Logger
}

// NewL2 returns an L2 writer.
func NewL2(opts L2Options) *L2 {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &L2{opts: opts}
}

// Write makes the responder own exactly the node state's VIPs.
func (l *L2) Write(ctx context.Context, _ desired.Snapshot, ns *desired.NodeState) ([]event.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r == nil {
		r, err := arp.New(arp.Config{Interface: l.opts.Interface, Logger: l.opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("arp responder on %s: %w", l.opts.Interface, err)
		}
		l.r = r
		if l.opts.Started != nil {
			l.opts.Started(r)
		}
		l.bg.run(ctx, func(ctx context.Context) {
			if err := r.Run(ctx); err != nil {
				l.opts.Logger.Error("arp responder stopped", "interface", l.opts.Interface, "err", err)
			}
		})
	}
	if err := l.r.SetAddresses(l.opts.Addrs(ns)); err != nil {
		return nil, fmt.Errorf("arp responder on %s: %w", l.opts.Interface, err)
	}
	return nil, nil
}

// Close stops the responder: the node no longer answers for the VIPs.
func (l *L2) Close() { l.bg.stop() }
