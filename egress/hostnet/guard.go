//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ovnedge/ovnedge/egress/hostspec"
)

// GuardSpec is hostspec.Guard.
type GuardSpec = hostspec.Guard

// GuardTable is the inet table of the leak guard (Guard).
const GuardTable = "ovnedge-egressip-guard"

// Guard keeps a node's leak guard (GuardSpec) in table GuardTable, a
// filter chain right after source NAT with one rule per pod subnet and
// link of the guarded networks:
//
//	table inet ovnedge-egressip-guard {
//		chain postrouting {
//			type filter hook postrouting priority srcnat + 1; policy accept;
//			ip saddr 10.244.0.0/16 oifname "eth2" ct direction original counter drop comment "..."
//		}
//	}
//
// A dropped packet's connection tracking entry is never confirmed, so the
// pod's next packet after its SNAT rule is added is NATed. The links of a
// network are those with an address of global scope in it, read at every
// Converge. Programmed through nftables' netlink API, whatever the SNAT
// backend.
type Guard struct {
	ns *namespace
	nl *netlink.Handle
}

// NewGuard opens the guard of the network namespace at netnsPath (""
// the caller's own).
func NewGuard(netnsPath string) (*Guard, error) {
	ns, err := openNamespace(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("hostnet guard: %w", err)
	}
	nl, err := ns.netlink()
	if err != nil {
		return nil, errors.Join(err, ns.close())
	}
	return &Guard{ns: ns, nl: nl}, nil
}

// Close releases the namespace and netlink handles; the table stays.
func (g *Guard) Close() error {
	g.nl.Close()
	return g.ns.close()
}

// guardRule is one rule of the guard: packets from subnet leaving link.
type guardRule struct {
	subnet netip.Prefix
	link   string
}

func (r guardRule) comment() string {
	return fmt.Sprintf("pods %s leaving %s unSNATed", r.subnet, r.link)
}

// Converge makes the guard match spec: the table holds exactly its rules
// (none, and no table, when spec is empty or no link is in its
// networks). It returns the links guarded and whether anything changed.
func (g *Guard) Converge(ctx context.Context, spec GuardSpec) ([]string, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("hostnet guard: %w", err)
	}
	links, err := g.links(spec.Networks)
	if err != nil {
		return nil, false, err
	}
	var want []guardRule
	for _, s := range spec.PodSubnets {
		for _, l := range links {
			want = append(want, guardRule{subnet: s.Masked(), link: l})
		}
	}
	c, err := g.ns.nftables()
	if err != nil {
		return nil, false, fmt.Errorf("hostnet guard: %w", err)
	}
	have, present, err := installedComments(c)
	if err != nil {
		return nil, false, err
	}
	if len(want) == 0 {
		if !present {
			return nil, false, nil
		}
		if err := deleteTable(c, guardTable()); err != nil {
			return nil, false, fmt.Errorf("hostnet guard: %w", err)
		}
		return nil, true, nil
	}
	comments := make([]string, len(want))
	for i, r := range want {
		comments[i] = r.comment()
	}
	if slices.Equal(have, comments) {
		return links, false, nil
	}
	t := c.AddTable(guardTable())
	ch := c.AddChain(guardChain(t))
	c.FlushChain(ch)
	for _, r := range want {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r.exprs(),
			UserData: userdata.AppendString(nil, userdata.TypeComment, r.comment())})
	}
	if err := c.Flush(); err != nil {
		return nil, false, fmt.Errorf("hostnet guard: program %d rules: %w", len(want), err)
	}
	return links, true, nil
}

func guardTable() *nftables.Table {
	return &nftables.Table{Name: GuardTable, Family: nftables.TableFamilyINet}
}

func guardChain(t *nftables.Table) *nftables.Chain {
	return &nftables.Chain{Name: nftChain, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityNATSource + 1)}
}

// installedComments returns the comments of the guard chain's rules, in
// order, and whether the table exists.
func installedComments(c *nftables.Conn) ([]string, bool, error) {
	present, err := inetTablePresent(c, GuardTable)
	if err != nil {
		return nil, false, fmt.Errorf("hostnet guard: %w", err)
	}
	if !present {
		return nil, false, nil
	}
	t := guardTable()
	rules, err := c.GetRules(t, guardChain(t))
	if errors.Is(err, unix.ENOENT) {
		return nil, true, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("hostnet guard: list rules: %w", err)
	}
	comments := make([]string, len(rules))
	for i, r := range rules {
		comments[i], _ = userdata.GetString(r.UserData, userdata.TypeComment)
	}
	return comments, true, nil
}

// links returns the names of the links with an address of global scope
// in one of networks, sorted.
func (g *Guard) links(networks []netip.Prefix) ([]string, error) {
	if len(networks) == 0 {
		return nil, nil
	}
	names, err := linksWith(g.nl, netlink.FAMILY_ALL, func(ad netlink.Addr) bool {
		a, ok := netip.AddrFromSlice(ad.IP)
		return ok && slices.ContainsFunc(networks, func(n netip.Prefix) bool { return n.Contains(a.Unmap()) })
	})
	if err != nil {
		return nil, fmt.Errorf("hostnet guard: %w", err)
	}
	slices.Sort(names)
	return names, nil
}

// exprs is `ip saddr <subnet> oifname "<link>" ct direction original
// counter drop` (ip6 for an IPv6 subnet) as nft compiles it in an inet
// table.
func (r guardRule) exprs() []expr.Any {
	f := nftFamilies[0]
	if r.subnet.Addr().Is6() {
		f = nftFamilies[1]
	}
	ex := f.saddr()
	if bits := r.subnet.Bits(); bits < f.addrLen*8 {
		ex = append(ex, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(f.addrLen),
			Mask: net.CIDRMask(bits, f.addrLen*8), Xor: make([]byte, f.addrLen)})
	}
	name := make([]byte, unix.IFNAMSIZ)
	copy(name, r.link)
	return append(ex,
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: r.subnet.Masked().Addr().AsSlice()},
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: name},
		&expr.Ct{Key: expr.CtKeyDIRECTION, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0}}, // IP_CT_DIR_ORIGINAL
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	)
}
