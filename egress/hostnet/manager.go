//go:build linux

package hostnet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Config configures a Manager.
type Config struct {
	// Netns is the path of the network namespace to manage (e.g.
	// /var/run/netns/node1); empty means the caller's own.
	Netns string
	// SNAT is the source NAT backend (NewIPTables or NewNFTables), opened
	// on the same namespace. Required. The Manager does not close it.
	SNAT SNAT
	// Announcer, if set, is called after an egress IP is added to a link.
	Announcer Announcer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Manager converges a node's host networking to a State: egress IP
// addresses on links, ip rules, per-link routing tables and SNAT rules.
// Its methods are safe for concurrent use; converges are serialized.
type Manager struct {
	mu   sync.Mutex
	ns   *namespace
	nl   *netlink.Handle
	snat SNAT
	ann  Announcer
	log  *slog.Logger
}

// New opens a Manager on cfg.Netns.
func New(cfg Config) (*Manager, error) {
	if cfg.SNAT == nil {
		return nil, errors.New("hostnet: Config.SNAT is required")
	}
	ns, err := openNamespace(cfg.Netns)
	if err != nil {
		return nil, fmt.Errorf("hostnet: %w", err)
	}
	h, err := ns.netlink()
	if err != nil {
		return nil, errors.Join(err, ns.close())
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Manager{ns: ns, nl: h, snat: cfg.SNAT, ann: cfg.Announcer, log: log.With("component", "hostnet")}, nil
}

// Leftover returns the egress IPs a Manager installed in the namespace at
// netns ("" the caller's own) and still holds there, found by their
// markers (RouteProtocol throw routes), without opening a SNAT backend:
// what a node instance that starts again finds from its previous run.
func Leftover(netns string) ([]netip.Addr, error) {
	ns, err := openNamespace(netns)
	if err != nil {
		return nil, fmt.Errorf("hostnet: %w", err)
	}
	defer ns.close()
	h, err := ns.netlink()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	owned, err := (&Manager{nl: h}).ownedRoutes()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, r := range owned {
		if r.Type == unix.RTN_THROW {
			out = append(out, prefixOf(r.Dst, r.Family).Addr())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), nil
}

// Close releases the Manager's netlink sockets and namespace handle. It
// leaves the host's configuration as it is.
func (m *Manager) Close() error {
	m.nl.Close()
	return m.ns.close()
}

// plan is the desired kernel state for the valid assignments of a State.
type plan struct {
	addrs  map[addrKey]int // egress IP on a link -> prefix length
	routes map[routeKey]netlink.Route
	rules  map[ruleKey]struct{}
	snat   map[SNATRule]struct{}
	names  map[int]string // ifindex -> link name, for the Announcer
}

type addrKey struct {
	ifindex int
	ip      netip.Addr
}

type routeKey struct {
	table, typ, ifindex int
	dst                 netip.Prefix
}

type ruleKey struct {
	src   netip.Addr
	table int
}

// Converge makes the namespace's host networking match s: it adds what is
// missing and removes what the Manager owns and s does not want, finding
// what it owns by its markers (RulePriority, tables at TableBase+ifindex
// with RouteProtocol routes, the SNAT backend's own chain or table).
// Assignments that fail a requirement are rejected (Result.Rejected) and
// the valid ones still converge; the returned error joins the rejections
// and any failure to apply. Converging twice to the same State changes
// nothing the second time.
//
// Order: SNAT rules, table routes, addresses (then announcement) and ip
// rules are added first, in that order, so that traffic is steered to a
// link only once it is SNATed there; ip rules, SNAT rules, addresses and
// routes are removed afterwards, in that order.
func (m *Manager) Converge(ctx context.Context, s State) (Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var res Result
	owned, err := m.ownedRoutes()
	if err != nil {
		return res, err
	}
	p, rejected := m.plan(s, owned)
	res.Rejected = rejected
	errs := make([]error, 0, len(rejected))
	for _, r := range rejected {
		m.log.Warn("egress IP assignment rejected", "link", r.Link, "egressIP", r.EgressIP, "reason", r.Reason, "err", r)
		errs = append(errs, r)
	}
	if err := m.apply(ctx, p, owned, &res); err != nil {
		errs = append(errs, err)
	}
	if c := res.Changes(); c > 0 {
		m.log.Info("converged host egress IPs", "changes", c, "rejected", len(rejected))
	}
	return res, errors.Join(errs...)
}

// ownedRoutes lists every route carrying RouteProtocol in the tables of
// the Manager's range.
func (m *Manager) ownedRoutes() ([]netlink.Route, error) {
	var owned []netlink.Route
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := m.nl.RouteListFiltered(family,
			&netlink.Route{Table: unix.RT_TABLE_UNSPEC, Protocol: RouteProtocol},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return nil, fmt.Errorf("hostnet: list routes: %w", err)
		}
		for _, r := range routes {
			if r.Table > TableBase {
				r.Family = family
				owned = append(owned, r)
			}
		}
	}
	return owned, nil
}

// keyOf identifies a route in the Manager's tables. Throw routes have no
// link (the kernel shows IPv6 ones on lo).
func keyOf(r netlink.Route) routeKey {
	k := routeKey{table: r.Table, typ: r.Type, ifindex: r.LinkIndex, dst: prefixOf(r.Dst, r.Family)}
	if r.Type == unix.RTN_THROW {
		k.ifindex = 0
	}
	return k
}

// plan validates s and computes the desired kernel state of its valid
// assignments, sorted by link and egress IP so that conflicts are decided
// the same way every time. owned are the Manager's routes now, whose egress
// IP markers tell the Manager's addresses apart from the link's own.
func (m *Manager) plan(s State, owned []netlink.Route) (plan, []*RequirementError) {
	p := plan{
		addrs:  map[addrKey]int{},
		routes: map[routeKey]netlink.Route{},
		rules:  map[ruleKey]struct{}{},
		snat:   map[SNATRule]struct{}{},
		names:  map[int]string{},
	}
	egressIPs := map[netip.Addr]bool{}
	for _, a := range s {
		egressIPs[a.EgressIP.Unmap()] = true
	}
	for _, r := range owned {
		if r.Type == unix.RTN_THROW {
			egressIPs[prefixOf(r.Dst, r.Family).Addr()] = true
		}
	}
	sorted := slices.Clone(s)
	slices.SortFunc(sorted, func(a, b Assignment) int {
		return cmp.Or(cmp.Compare(a.Link, b.Link), a.EgressIP.Compare(b.EgressIP))
	})
	usedEIP := map[netip.Addr]string{}
	usedPod := map[netip.Addr]netip.Addr{}
	var rejected []*RequirementError
	for _, a := range sorted {
		link, prefixLen, rerr := m.check(a, egressIPs)
		if rerr == nil {
			rerr = conflicts(a, usedEIP, usedPod)
		}
		if rerr != nil {
			rejected = append(rejected, rerr)
			continue
		}
		eip := a.EgressIP.Unmap()
		usedEIP[eip] = a.Link
		idx := link.Attrs().Index
		table := TableBase + idx
		p.names[idx] = a.Link
		p.addrs[addrKey{idx, eip}] = prefixLen
		m.addTableRoutes(p.routes, idx, table, eip)
		for _, pod := range a.PodIPs {
			pod = pod.Unmap()
			usedPod[pod] = eip
			p.rules[ruleKey{pod, table}] = struct{}{}
			p.snat[SNATRule{PodIP: pod, Link: a.Link, EgressIP: eip}] = struct{}{}
		}
	}
	return p, rejected
}

// conflicts rejects an assignment whose egress IP or pod IPs an earlier
// assignment already uses: a pod has one ip rule, so one egress link.
func conflicts(a Assignment, usedEIP map[netip.Addr]string, usedPod map[netip.Addr]netip.Addr) *RequirementError {
	eip := a.EgressIP.Unmap()
	if other, ok := usedEIP[eip]; ok {
		return &RequirementError{Link: a.Link, EgressIP: eip, Reason: ReasonConflict,
			Detail: fmt.Sprintf("egress IP already assigned on link %q", other)}
	}
	for _, pod := range a.PodIPs {
		if other, ok := usedPod[pod.Unmap()]; ok {
			return &RequirementError{Link: a.Link, EgressIP: eip, Reason: ReasonConflict,
				Detail: fmt.Sprintf("pod IP %s already uses egress IP %s", pod, other)}
		}
	}
	return nil
}

// addTableRoutes adds to routes the content of link idx's table for an
// egress IP: `default dev <link>`, the link's on-link routes copied from
// the main table (in the egress IP's family), and a throw route to the
// egress IP itself, the marker that records the address as the Manager's.
// The throw route is never used for forwarding: the local table, looked up
// first, delivers traffic to the egress IP.
func (m *Manager) addTableRoutes(routes map[routeKey]netlink.Route, idx, table int, eip netip.Addr) {
	family := familyOf(eip)
	def := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if family == netlink.FAMILY_V6 {
		def = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	put := func(r netlink.Route) {
		routes[keyOf(r)] = r
	}
	put(netlink.Route{Family: family, Table: table, LinkIndex: idx, Dst: ipNet(def), Type: unix.RTN_UNICAST,
		Scope: netlink.SCOPE_UNIVERSE, Protocol: RouteProtocol})
	put(netlink.Route{Family: family, Table: table, Dst: ipNet(netip.PrefixFrom(eip, eip.BitLen())),
		Type: unix.RTN_THROW, Scope: netlink.SCOPE_UNIVERSE, Protocol: RouteProtocol})
	main, err := m.nl.RouteListFiltered(family, &netlink.Route{LinkIndex: idx}, netlink.RT_FILTER_OIF)
	if err != nil {
		m.log.Warn("cannot copy the link's routes from the main table", "ifindex", idx, "err", err)
		return
	}
	for _, r := range main {
		if r.Gw != nil || r.Dst == nil || r.Type != unix.RTN_UNICAST || r.Dst.IP.IsMulticast() || r.Dst.IP.IsLinkLocalUnicast() {
			continue
		}
		put(netlink.Route{Family: family, Table: table, LinkIndex: idx, Dst: r.Dst, Type: unix.RTN_UNICAST,
			Scope: r.Scope, Protocol: RouteProtocol})
	}
}

// apply makes the kernel and the SNAT backend match p. owned are the
// Manager's routes now. It goes on after a failure so that one broken
// object does not stall the others, and returns all failures joined.
func (m *Manager) apply(ctx context.Context, p plan, owned []netlink.Route, res *Result) error {
	a := &applying{m: m, p: p, res: res, curRoutes: map[routeKey]netlink.Route{}}
	curSNAT, present, err := m.snat.List(ctx)
	if err != nil {
		return fmt.Errorf("hostnet: list SNAT rules: %w", err)
	}
	if a.curRules, err = m.rules(); err != nil {
		return err
	}
	for _, r := range owned {
		k := keyOf(r)
		a.curRoutes[k] = r
		if r.Type == unix.RTN_THROW {
			a.markers = append(a.markers, addrKey{r.Table - TableBase, k.dst.Addr()})
		}
	}
	addSNAT, delSNAT := snatChanges(curSNAT, p.snat)
	// A pod switching egress IP on the same link is replaced at once;
	// other stale rules go after the ip rules.
	replaced, stale := splitReplaced(addSNAT, delSNAT)
	// Additions, in the order that keeps traffic from leaving unSNATed,
	// then removals.
	a.add(ctx, addSNAT, replaced)
	a.forget(addSNAT)
	a.remove(ctx, stale, present)
	return errors.Join(a.errs...)
}

// forget deletes the connection tracking entries of the pods whose SNAT
// rule was just added. A packet of theirs can arrive before the rule (the
// reroute to this node is the leader's, written apart from this node's
// rules): its entry, made without NAT and refreshed by every later packet
// of the flow, would keep the flow leaving with the pod's own address.
func (a *applying) forget(added []SNATRule) {
	for _, r := range added {
		f := &netlink.ConntrackFilter{}
		family := netlink.InetFamily(unix.AF_INET)
		if r.PodIP.Is6() {
			family = unix.AF_INET6
		}
		err := f.AddIP(netlink.ConntrackOrigSrcIP, r.PodIP.AsSlice())
		var n uint
		if err == nil {
			n, err = a.m.nl.ConntrackDeleteFilters(netlink.ConntrackTable, family, f)
		}
		if err != nil {
			a.fail("delete the connection tracking entries of %s: %w", r.PodIP, err)
			continue
		}
		a.res.ConntrackDeleted += int(n)
	}
}

// applying is one apply of a plan: the current state and the errors so
// far.
type applying struct {
	m         *Manager
	p         plan
	res       *Result
	curRules  map[ruleKey]*netlink.Rule
	curRoutes map[routeKey]netlink.Route
	markers   []addrKey
	errs      []error
}

func (a *applying) fail(format string, args ...any) {
	err := fmt.Errorf("hostnet: "+format, args...)
	a.m.log.Error("host egress IP change failed", "err", err)
	a.errs = append(a.errs, err)
}

// snatChanges are the SNAT rules to add and to delete to go from cur to
// want.
func snatChanges(cur []SNATRule, want map[SNATRule]struct{}) (add, del []SNATRule) {
	have := map[SNATRule]bool{}
	for _, r := range cur {
		have[r] = true
		if _, ok := want[r]; !ok {
			del = append(del, r)
		}
	}
	for r := range want {
		if !have[r] {
			add = append(add, r)
		}
	}
	return add, del
}

// add adds the SNAT rules (replacing those of replaced), the routes, the
// addresses and the ip rules the plan lacks.
func (a *applying) add(ctx context.Context, addSNAT, replaced []SNATRule) {
	m, p, res := a.m, a.p, a.res
	if len(addSNAT) > 0 {
		if err := m.snat.Apply(ctx, addSNAT, replaced); err != nil {
			a.fail("add SNAT rules: %w", err)
		} else {
			res.SNATAdded += len(addSNAT)
			res.SNATRemoved += len(replaced)
		}
	}
	for k, r := range p.routes {
		if _, ok := a.curRoutes[k]; ok {
			continue
		}
		if err := m.nl.RouteReplace(&r); err != nil {
			a.fail("add route %s to table %d: %w", k.dst, k.table, err)
			continue
		}
		res.RoutesAdded++
	}
	for k, plen := range p.addrs {
		if err := m.addAddr(k, plen, p.names[k.ifindex], res); err != nil {
			a.fail("%w", err)
		}
	}
	for k := range p.rules {
		if _, ok := a.curRules[k]; ok {
			continue
		}
		if err := m.nl.RuleAdd(newRule(k)); err != nil {
			a.fail("add rule from %s lookup %d: %w", k.src, k.table, err)
			continue
		}
		res.RulesAdded++
	}
}

// remove removes the ip rules, the stale SNAT rules (the chain when no
// rule is left and it is present), the addresses and the routes the plan
// no longer has.
func (a *applying) remove(ctx context.Context, stale []SNATRule, present bool) {
	m, p, res := a.m, a.p, a.res
	for k, r := range a.curRules {
		if _, ok := p.rules[k]; ok {
			continue
		}
		if err := m.nl.RuleDel(r); err != nil {
			a.fail("delete rule from %s lookup %d: %w", k.src, k.table, err)
			continue
		}
		res.RulesRemoved++
	}
	switch {
	case len(p.snat) == 0 && present:
		if err := m.snat.Reset(ctx); err != nil {
			a.fail("remove SNAT chain: %w", err)
		} else {
			res.SNATRemoved += len(stale)
		}
	case len(stale) > 0:
		if err := m.snat.Apply(ctx, nil, stale); err != nil {
			a.fail("remove SNAT rules: %w", err)
		} else {
			res.SNATRemoved += len(stale)
		}
	}
	for _, k := range a.markers {
		if _, ok := p.addrs[k]; ok {
			continue
		}
		if err := m.delAddr(k, res); err != nil {
			a.fail("%w", err)
		}
	}
	for k, r := range a.curRoutes {
		if _, ok := p.routes[k]; ok {
			continue
		}
		if err := m.nl.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			a.fail("delete route %s from table %d: %w", k.dst, k.table, err)
			continue
		}
		res.RoutesRemoved++
	}
}

// splitReplaced splits the SNAT rules to delete into those that a rule to
// add replaces (same pod and link) and the others.
func splitReplaced(add, del []SNATRule) (replaced, stale []SNATRule) {
	type podLink struct {
		pod  netip.Addr
		link string
	}
	adding := map[podLink]bool{}
	for _, r := range add {
		adding[podLink{r.PodIP, r.Link}] = true
	}
	for _, r := range del {
		if adding[podLink{r.PodIP, r.Link}] {
			replaced = append(replaced, r)
		} else {
			stale = append(stale, r)
		}
	}
	return replaced, stale
}

// rules lists the ip rules at RulePriority, keyed by source and table.
func (m *Manager) rules() (map[ruleKey]*netlink.Rule, error) {
	out := map[ruleKey]*netlink.Rule{}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := m.nl.RuleList(family)
		if err != nil {
			return nil, fmt.Errorf("hostnet: list ip rules: %w", err)
		}
		for i := range rules {
			r := &rules[i]
			if r.Priority != RulePriority || r.Src == nil {
				continue
			}
			out[ruleKey{prefixOf(r.Src, family).Addr(), r.Table}] = r
		}
	}
	return out, nil
}

func newRule(k ruleKey) *netlink.Rule {
	r := netlink.NewRule()
	r.Priority = RulePriority
	r.Family = familyOf(k.src)
	r.Src = ipNet(netip.PrefixFrom(k.src, k.src.BitLen()))
	r.Table = k.table
	r.Protocol = RouteProtocol
	return r
}

// addAddr adds an egress IP to its link unless it is there, and announces it.
func (m *Manager) addAddr(k addrKey, plen int, name string, res *Result) error {
	link, err := m.nl.LinkByIndex(k.ifindex)
	if err != nil {
		return fmt.Errorf("add address %s: link %d: %w", k.ip, k.ifindex, err)
	}
	if ok, err := m.hasAddr(link, k.ip); err != nil || ok {
		return err
	}
	addr := &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(k.ip, plen))}
	if k.ip.Is6() {
		addr.Flags = unix.IFA_F_NODAD
	}
	if err := m.nl.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("add address %s/%d to %s: %w", k.ip, plen, name, err)
	}
	res.AddrsAdded++
	m.log.Info("egress IP added", "link", name, "egressIP", k.ip)
	if m.ann != nil {
		// In the namespace: the announcer opens its socket on the link
		// there.
		if err := m.ns.do(func() error { return m.ann.Announce(name, k.ip) }); err != nil {
			return fmt.Errorf("announce %s on %s: %w", k.ip, name, err)
		}
	}
	return nil
}

// delAddr removes an egress IP the Manager added from its link, if the
// link and the address still exist.
func (m *Manager) delAddr(k addrKey, res *Result) error {
	link, err := m.nl.LinkByIndex(k.ifindex)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil // the link and its addresses are gone
		}
		return fmt.Errorf("remove address %s: link %d: %w", k.ip, k.ifindex, err)
	}
	if w, ok := m.ann.(Withdrawer); ok {
		w.Withdraw(link.Attrs().Name, k.ip)
	}
	addrs, err := m.nl.AddrList(link, familyOf(k.ip))
	if err != nil {
		return fmt.Errorf("remove address %s: list addresses of %s: %w", k.ip, link.Attrs().Name, err)
	}
	for _, a := range addrs {
		if ip, _ := netip.AddrFromSlice(a.IP); ip.Unmap() == k.ip {
			if err := m.nl.AddrDel(link, &a); err != nil {
				return fmt.Errorf("remove address %s from %s: %w", k.ip, link.Attrs().Name, err)
			}
			res.AddrsRemoved++
			m.log.Info("egress IP removed", "link", link.Attrs().Name, "egressIP", k.ip)
		}
	}
	return nil
}

func (m *Manager) hasAddr(link netlink.Link, ip netip.Addr) (bool, error) {
	addrs, err := m.nl.AddrList(link, familyOf(ip))
	if err != nil {
		return false, fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
	}
	for _, a := range addrs {
		if got, _ := netip.AddrFromSlice(a.IP); got.Unmap() == ip {
			return true, nil
		}
	}
	return false, nil
}

func familyOf(ip netip.Addr) int {
	if ip.Unmap().Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// prefixOf converts a route or rule prefix; nil is the family's default.
func prefixOf(n *net.IPNet, family int) netip.Prefix {
	if n == nil {
		if family == netlink.FAMILY_V6 {
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	ip, _ := netip.AddrFromSlice(n.IP)
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones)
}
