//go:build linux

package hostnet

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Check reports whether a could be hosted now: its requirements (see
// Converge), checked without installing anything. The daemon asks it
// again for an assignment it refused, so it stops refusing once the link
// is back.
func (m *Manager) Check(a Assignment) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, _, rerr := m.check(a, map[netip.Addr]bool{a.EgressIP.Unmap(): true}); rerr != nil {
		return rerr
	}
	return nil
}

// WatchLinks calls changed on every change of a link of the Manager's
// namespace (up, down, carrier, added, removed) until ctx ends: a link
// that goes down must be noticed (its egress IPs refused, so they move),
// and one that comes back too.
func (m *Manager) WatchLinks(ctx context.Context, changed func()) error {
	ch := make(chan netlink.LinkUpdate, 64)
	errc := make(chan error, 1)
	opts := netlink.LinkSubscribeOptions{ErrorCallback: func(err error) {
		select {
		case errc <- err:
		default:
		}
	}}
	if m.ns.handle.IsOpen() {
		h := m.ns.handle
		opts.Namespace = &h
	}
	if err := netlink.LinkSubscribeWithOptions(ch, ctx.Done(), opts); err != nil {
		return fmt.Errorf("hostnet: watch links: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return fmt.Errorf("hostnet: watch links: %w", err)
		case _, ok := <-ch:
			if !ok {
				return nil
			}
			changed()
		}
	}
}
