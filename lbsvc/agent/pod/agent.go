//go:build linux

package pod

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/ovnedge/ovnedge/lbsvc/agent"
	"github.com/vishvananda/netlink"
)

func apply(ctx context.Context, cfg agent.Config) (Status, error) {
	st := Status{Address: cfg.LBIP}
	ext, err := netlink.LinkByName(cfg.External)
	if err != nil {
		return st, fmt.Errorf("agent: external interface %s: %w", cfg.External, err)
	}
	pod, err := netlink.LinkByName(cfg.Pod)
	if err != nil {
		return st, fmt.Errorf("agent: pod interface %s: %w", cfg.Pod, err)
	}
	if st.AddressAdded, err = ensureAddress(ext, cfg.LBIP); err != nil {
		return st, err
	}
	if err := enableForwarding(cfg.LBIP.Addr().Is6()); err != nil {
		return st, err
	}
	if st.PodGateway, err = podGateway(pod, cfg); err != nil {
		return st, err
	}
	added, err := ensureRules(cfg)
	st.RulesAdded += added
	if err != nil {
		return st, err
	}
	if err := ensureRoutes(ext, pod, st.PodGateway, cfg); err != nil {
		return st, err
	}
	added, removed, err := ensureNAT(cfg)
	st.RulesAdded += added
	st.RulesRemoved += removed
	if err != nil {
		return st, err
	}
	st.Gateway = checkGateway(ctx, cfg)
	if st.AddressAdded {
		go announce(ctx, cfg)
	}
	if st.Gateway.Checked && !st.Gateway.Reachable {
		return st, fmt.Errorf("agent: %w: %s", ErrGatewayUnreachable, st)
	}
	return st, nil
}

// forget removes what an earlier pass programmed for the address old
// that the current cfg no longer has: old on the external interface and
// its subnet's table route (when the subnet changed too). The NAT rules
// and the other routes were already replaced by the pass of cfg.
func forget(cfg agent.Config, old netip.Prefix) error {
	ext, err := netlink.LinkByName(cfg.External)
	if err != nil {
		return fmt.Errorf("agent: external interface %s: %w", cfg.External, err)
	}
	if err := netlink.AddrDel(ext, &netlink.Addr{IPNet: ipNet(old)}); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
		return fmt.Errorf("agent: remove %s from %s: %w", old, cfg.External, err)
	}
	if old.Masked() == cfg.LBIP.Masked() {
		return nil
	}
	r := &netlink.Route{LinkIndex: ext.Attrs().Index, Dst: ipNet(old.Masked()), Table: cfg.Table, Scope: netlink.SCOPE_LINK}
	if err := netlink.RouteDel(r); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("agent: route %s dev %s table %d: %w", old.Masked(), cfg.External, cfg.Table, err)
	}
	return nil
}

// ensureAddress brings link up with addr on it.
func ensureAddress(link netlink.Link, addr netip.Prefix) (bool, error) {
	name := link.Attrs().Name
	if err := netlink.LinkSetUp(link); err != nil {
		return false, fmt.Errorf("agent: set %s up: %w", name, err)
	}
	addrs, err := netlink.AddrList(link, family(addr.Addr()))
	if err != nil {
		return false, fmt.Errorf("agent: addresses of %s: %w", name, err)
	}
	want := ipNet(addr)
	for _, a := range addrs {
		if a.IPNet.String() == want.String() {
			return false, nil
		}
	}
	if err := netlink.AddrReplace(link, &netlink.Addr{IPNet: want}); err != nil {
		return false, fmt.Errorf("agent: add %s to %s: %w", addr, name, err)
	}
	return true, nil
}

// enableForwarding turns on IP forwarding of the namespace.
func enableForwarding(v6 bool) error {
	path := "/proc/sys/net/ipv4/ip_forward"
	if v6 {
		path = "/proc/sys/net/ipv6/conf/all/forwarding"
	}
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 && b[0] == '1' {
		return nil
	}
	if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("agent: enable forwarding: %w", err)
	}
	return nil
}

// podGateway returns cfg.PodGateway, or the gateway of the main table's
// default route via the pod interface.
func podGateway(pod netlink.Link, cfg agent.Config) (netip.Addr, error) {
	if cfg.PodGateway.IsValid() {
		return cfg.PodGateway.Unmap(), nil
	}
	routes, err := netlink.RouteListFiltered(family(cfg.ClusterIP),
		&netlink.Route{Table: 254, LinkIndex: pod.Attrs().Index}, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("agent: routes of %s: %w", cfg.Pod, err)
	}
	for _, r := range routes {
		if ones, _ := maskOf(r.Dst); ones == 0 && r.Gw != nil {
			if gw, ok := netip.AddrFromSlice(r.Gw); ok {
				return gw.Unmap(), nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("agent: no default route via %s in the main table: give the pod gateway", cfg.Pod)
}

func maskOf(n *net.IPNet) (int, int) {
	if n == nil {
		return 0, 0
	}
	return n.Mask.Size()
}

// ensureRules adds `ip rule iif <if> lookup <table>` for both interfaces.
func ensureRules(cfg agent.Config) (int, error) {
	fam := family(cfg.LBIP.Addr())
	rules, err := netlink.RuleList(fam)
	if err != nil {
		return 0, fmt.Errorf("agent: list rules: %w", err)
	}
	added := 0
	for _, iif := range []string{cfg.External, cfg.Pod} {
		exists := false
		for _, r := range rules {
			if r.IifName == iif && r.Table == cfg.Table && r.Src == nil && r.Dst == nil && r.Mark == 0 && !r.Invert {
				exists = true
			}
		}
		if exists {
			continue
		}
		r := netlink.NewRule()
		r.Family, r.IifName, r.Table = fam, iif, cfg.Table
		if err := netlink.RuleAdd(r); err != nil {
			return added, fmt.Errorf("agent: ip rule iif %s lookup %d: %w", iif, cfg.Table, err)
		}
		added++
	}
	return added, nil
}

// ensureRoutes sets table cfg.Table: default via the gateway on the
// external interface, the ClusterIP via the pod gateway.
func ensureRoutes(ext, pod netlink.Link, podGW netip.Addr, cfg agent.Config) error {
	def := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if cfg.LBIP.Addr().Is6() {
		def = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	for _, r := range []struct {
		link netlink.Link
		dst  netip.Prefix
		gw   netip.Addr
	}{
		// lb-svc.sh's "ip route replace <subnet> dev net1 table 100":
		// replies to clients on the attachment subnet go straight out
		// of net1, not through the gateway.
		{ext, cfg.LBIP.Masked(), netip.Addr{}},
		{ext, def, cfg.Gateway},
		{pod, netip.PrefixFrom(cfg.ClusterIP, cfg.ClusterIP.BitLen()), podGW},
	} {
		route := &netlink.Route{LinkIndex: r.link.Attrs().Index, Dst: ipNet(r.dst), Gw: r.gw.AsSlice(), Table: cfg.Table}
		if !r.gw.IsValid() {
			route.Scope = netlink.SCOPE_LINK
		}
		if err := netlink.RouteReplace(route); err != nil {
			return fmt.Errorf("agent: route %s via %s dev %s table %d: %w", r.dst, r.gw, r.link.Attrs().Name, cfg.Table, err)
		}
	}
	return nil
}

func family(a netip.Addr) int {
	if a.Is6() {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
