package dataplane

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/bgp"
	"github.com/ovnedge/ovnedge/bgp/metallb"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/event"
)

// Event reasons of the BGP sessions, on the node's object.
const (
	ReasonBGPSessionUp   = "BGPSessionEstablished"
	ReasonBGPSessionDown = "BGPSessionDown"
)

// BGP announces the node's routes (desired.NodeState.Routes) to its BGP
// peers from an embedded bgp.Speaker, started on first use; a change of
// peers leaves the sessions of unchanged ones alone.
type BGP struct {
	opts BGPOptions

	mu      sync.Mutex
	speaker *bgp.Speaker
	peers   []bgp.Peer  // the speaker's
	leaving atomic.Bool // the node is cordoned, being deleted or out of service
}

// BGPOptions configure a BGP writer.
type BGPOptions struct {
	// Node is the node's name.
	Node string
	// Config is the speaker's configuration given the node's router ID
	// (ovnedge's flags).
	Config func(routerID netip.Addr) (bgp.Config, error)
	// PeerCRDs also peers with the routers of MetalLB's BGPPeers (with
	// their BFDProfiles) that select the node; a peer address Config
	// gives keeps Config's settings.
	PeerCRDs bool
	// Shutdown is how Close leaves the peers: "restart" (graceful
	// restart: the peers keep the routes), "withdraw" (routes withdrawn,
	// sessions closed with a Cease) or "auto" (withdraw while the node is
	// leaving: cordoned, being deleted or out of service).
	Shutdown string
	// Record, when not nil, is given the sessions' events (up, down).
	Record func(event.Event)
	// Started, when not nil, is given the speaker once it runs.
	Started func(*bgp.Speaker)
	Logger  *slog.Logger
}

// NewBGP returns a BGP writer.
func NewBGP(opts BGPOptions) *BGP {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &BGP{opts: opts}
}

// Write configures the speaker from s (the node, MetalLB's peers) and
// makes it announce exactly ns.Routes. A configuration that cannot be
// made is an error and announces nothing new; bad peer objects are
// events.
func (b *BGP) Write(ctx context.Context, s desired.Snapshot, ns *desired.NodeState) ([]event.Event, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.IndexFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == b.opts.Node })
	if i < 0 {
		return nil, nil
	}
	self := s.Nodes[i]
	if l := leaving(self); b.leaving.Swap(l) != l {
		b.opts.Logger.Info("node service state changed: a stopping ovnedge withdraws its BGP routes while the node is leaving",
			"leaving", l, "shutdown", b.opts.Shutdown)
	}
	cfg, events, err := b.config(s, self, ns)
	if err != nil {
		return events, err
	}
	if cfg.ASN == 0 {
		return events, nil
	}
	return events, b.advertise(ctx, cfg, ns)
}

// config is the node's speaker configuration: Config's peers and, with
// PeerCRDs, MetalLB's BGPPeers that select the node.
func (b *BGP) config(s desired.Snapshot, self *corev1.Node, ns *desired.NodeState) (bgp.Config, []event.Event, error) {
	cfg, err := b.opts.Config(ns.RouterID)
	if err != nil {
		return bgp.Config{}, nil, fmt.Errorf("bgp: %w", err)
	}
	if !b.opts.PeerCRDs {
		return cfg, nil, nil
	}
	peers, profiles, evs := metallb.FromUnstructured(s.BGPPeers, s.BFDProfiles)
	crd, more := metallb.Peers(self, cfg.RouterID, peers, profiles)
	evs = append(evs, more...)
	for _, p := range crd {
		if !slices.ContainsFunc(cfg.Peers, func(q bgp.Peer) bool { return q.Address == p.Address }) {
			cfg.Peers = append(cfg.Peers, p)
		}
	}
	return cfg, evs, nil
}

// leaving reports whether node is being taken out of service: cordoned,
// being deleted, or tainted out-of-service or for deletion by the
// cluster autoscaler. Its BGP routes are then withdrawn when ovnedge
// stops (Shutdown "auto") instead of kept for a graceful restart.
func leaving(node *corev1.Node) bool {
	if node.Spec.Unschedulable || node.DeletionTimestamp != nil {
		return true
	}
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeOutOfService || t.Key == "ToBeDeletedByClusterAutoscaler"
	})
}

// advertise makes the speaker (configured as cfg) announce exactly
// ns.Routes, starting it on first use and following changes of its peers.
func (b *BGP) advertise(ctx context.Context, cfg bgp.Config, ns *desired.NodeState) error {
	if b.speaker == nil {
		if err := b.start(ctx, cfg); err != nil {
			return err
		}
	} else if !slices.Equal(cfg.Peers, b.peers) {
		if err := b.speaker.SetPeers(ctx, cfg.Peers); err != nil {
			return err
		}
		b.opts.Logger.Info("bgp peers changed", "peers", len(cfg.Peers))
		b.peers = cfg.Peers
	}
	before := b.speaker.Stats().Updates
	if err := b.speaker.Announce(ns.Routes); err != nil {
		return err
	}
	if n := b.speaker.Stats().Updates - before; n > 0 {
		b.opts.Logger.Info("bgp routes changed", "updates", n, "announced", len(ns.Routes))
	}
	return nil
}

// start starts the speaker; it outlives the Write: it stops on Close.
func (b *BGP) start(ctx context.Context, cfg bgp.Config) error {
	node := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: b.opts.Node}
	up := map[netip.Addr]bool{}
	var mu sync.Mutex
	cfg.OnPeerState = func(ps bgp.PeerStatus) {
		mu.Lock()
		defer mu.Unlock()
		if b.opts.Record != nil {
			switch {
			case ps.Established && !up[ps.Address]:
				b.opts.Record(event.Normalf(node, ReasonBGPSessionUp, "BGP session with %v (AS %d) established", ps.Address, ps.ASN))
			case !ps.Established && up[ps.Address]:
				b.opts.Record(event.Warningf(node, ReasonBGPSessionDown, "BGP session with %v (AS %d) down: %s", ps.Address, ps.ASN, ps.State))
			}
		}
		up[ps.Address] = ps.Established
	}
	sp, err := bgp.Start(context.WithoutCancel(ctx), cfg, b.opts.Logger)
	if err != nil {
		return err
	}
	b.speaker, b.peers = sp, cfg.Peers
	if b.opts.Started != nil {
		b.opts.Started(sp)
	}
	b.opts.Logger.Info("bgp speaker started", "asn", cfg.ASN, "router-id", cfg.RouterID, "peers", len(cfg.Peers),
		"graceful-restart", cfg.GracefulRestart, "bfd", slices.ContainsFunc(cfg.Peers, func(p bgp.Peer) bool { return p.BFD.Enabled }))
	return nil
}

// Close stops the speaker as Shutdown says. A restart leaves without a
// notification: the peers keep the routes for the graceful restart time
// while ovnedge restarts. A node that is leaving withdraws its routes and
// closes the sessions with a Cease, so the routers stop sending it
// traffic at once instead of after the restart time.
func (b *BGP) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.speaker == nil {
		return
	}
	withdraw := b.opts.Shutdown == "withdraw" || (b.opts.Shutdown != "restart" && b.leaving.Load())
	if withdraw {
		if err := b.speaker.Announce(nil); err != nil {
			b.opts.Logger.Warn("bgp: withdrawing the routes", "err", err)
		}
	}
	b.opts.Logger.Info("bgp speaker stopping", "withdraw", withdraw, "leaving", b.leaving.Load(), "shutdown", b.opts.Shutdown)
	if err := b.speaker.Close(!withdraw); err != nil {
		b.opts.Logger.Warn("bgp speaker", "err", err)
	}
	b.speaker = nil
}
