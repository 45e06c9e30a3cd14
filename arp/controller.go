package arp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
)

// Liveness tells which nodes may own addresses: Kubernetes node readiness
// or leases, or the egress reachability probe. It is the election's only
// input besides the addresses, so it is all a new liveness source has to
// provide.
type Liveness interface {
	// Healthy returns the names of the nodes that are alive now.
	Healthy() []string
	// Changed returns a channel that is closed when Healthy's answer
	// next changes; call it again for the change after that.
	Changed() <-chan struct{}
}

// HealthyNodes is a Liveness its owner feeds, e.g. from node readiness or
// leases: Set whenever the healthy nodes change.
type HealthyNodes struct {
	mu      sync.Mutex
	nodes   []string
	changed chan struct{}
}

// NewHealthyNodes returns a HealthyNodes with nodes healthy.
func NewHealthyNodes(nodes ...string) *HealthyNodes {
	return &HealthyNodes{nodes: slices.Clone(nodes), changed: make(chan struct{})}
}

// Set makes nodes the healthy ones and wakes every waiter of Changed.
func (h *HealthyNodes) Set(nodes ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nodes = slices.Clone(nodes)
	close(h.changed)
	h.changed = make(chan struct{})
}

// Healthy implements Liveness.
func (h *HealthyNodes) Healthy() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.nodes)
}

// Changed implements Liveness.
func (h *HealthyNodes) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// VIP is one address to elect an owner for.
type VIP struct {
	// Addr is the address answered for.
	Addr netip.Addr
	// Interface is the link the owner answers on, e.g. "br-ex".
	Interface string
	// Eligible, when not nil, restricts the owner to these nodes (for
	// externalTrafficPolicy=Local: the nodes with a ready local
	// endpoint); a non-nil empty slice means no node answers.
	Eligible []string
}

// Owned returns, per interface, the addresses among vips that node
// answers for when healthy is the set of live nodes: for each VIP, Elect
// over the healthy nodes that are eligible. Every node computing it from
// the same inputs agrees, so exactly one answers for each address.
// Addresses are sorted; an interface owning nothing is absent. An
// invalid VIP is an error.
func Owned(vips []VIP, node string, healthy []string) (map[string][]netip.Addr, error) {
	live := make(map[string]bool, len(healthy))
	for _, n := range healthy {
		live[n] = true
	}
	out := map[string][]netip.Addr{}
	for i, v := range vips {
		if err := checkAddr(v.Addr); err != nil {
			return nil, fmt.Errorf("arp: VIP %d: %w", i, err)
		}
		if v.Interface == "" {
			return nil, fmt.Errorf("arp: VIP %d (%s): empty interface", i, v.Addr)
		}
		candidates := healthy
		if v.Eligible != nil {
			candidates = nil
			for _, n := range v.Eligible {
				if live[n] {
					candidates = append(candidates, n)
				}
			}
		}
		if owner, ok := Elect(v.Addr, candidates); ok && owner == node {
			if !slices.Contains(out[v.Interface], v.Addr) {
				out[v.Interface] = append(out[v.Interface], v.Addr)
			}
		}
	}
	for _, addrs := range out {
		slices.SortFunc(addrs, netip.Addr.Compare)
	}
	return out, nil
}

// AddressSetter is what a Controller feeds: a Responder.
type AddressSetter interface {
	SetAddresses(addrs []netip.Addr) error
}

// Controller keeps the responders of one node answering for exactly the
// VIPs the election gives it, recomputing on every change of the VIPs or
// of liveness.
type Controller struct {
	node       string
	live       Liveness
	responders map[string]AddressSetter
	log        *slog.Logger

	mu      sync.Mutex
	vips    []VIP
	changed chan struct{}
}

// NewController returns a controller for node, electing with live and
// feeding responders (keyed by interface name). VIPs on an interface
// without a responder are logged and skipped.
func NewController(node string, live Liveness, responders map[string]AddressSetter, logger *slog.Logger) (*Controller, error) {
	if node == "" {
		return nil, fmt.Errorf("arp: controller: empty node name")
	}
	if live == nil {
		return nil, fmt.Errorf("arp: controller for %s: nil liveness", node)
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Controller{
		node:       node,
		live:       live,
		responders: maps.Clone(responders),
		log:        logger.With("node", node),
		changed:    make(chan struct{}, 1),
	}, nil
}

// SetVIPs replaces the VIPs to elect owners for; Run applies them. An
// invalid VIP is an error and leaves the previous VIPs in place.
func (c *Controller) SetVIPs(vips []VIP) error {
	if _, err := Owned(vips, c.node, nil); err != nil {
		return err
	}
	c.mu.Lock()
	c.vips = slices.Clone(vips)
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
	return nil
}

// Sync computes the owned addresses now and sets every responder's.
func (c *Controller) Sync() error {
	c.mu.Lock()
	vips := c.vips
	c.mu.Unlock()
	owned, err := Owned(vips, c.node, c.live.Healthy())
	if err != nil {
		return err
	}
	for iface := range owned {
		if c.responders[iface] == nil {
			c.log.Warn("arp: no responder for interface, not answering", "interface", iface, "addrs", owned[iface])
		}
	}
	for iface, r := range c.responders {
		if err := r.SetAddresses(owned[iface]); err != nil {
			return fmt.Errorf("arp: set addresses on %s: %w", iface, err)
		}
	}
	return nil
}

// Run syncs at once and after every change until ctx is done; it returns
// nil then, or the first error.
func (c *Controller) Run(ctx context.Context) error {
	for {
		liveChanged := c.live.Changed() // before Sync reads Healthy: no change is missed
		if err := c.Sync(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.changed:
		case <-liveChanged:
		}
	}
}
