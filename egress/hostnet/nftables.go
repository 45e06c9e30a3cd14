//go:build linux

package hostnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// NFTables is the nftables SNAT backend: table NFTablesTable (family inet)
// of its own with maps `<pod IP> . <ifname> : <egress IP>` (snat-v4,
// snat-v6) and a nat postrouting chain that SNATs through them:
//
//	table inet ovnedge-egressip {
//		map snat-v4 { type ipv4_addr . ifname : ipv4_addr; }
//		map snat-v6 { type ipv6_addr . ifname : ipv6_addr; }
//		chain postrouting {
//			type nat hook postrouting priority srcnat; policy accept;
//			snat ip to ip saddr . oifname map @snat-v4
//			snat ip6 to ip6 saddr . oifname map @snat-v6
//		}
//	}
//
// One map element per pod, so a change is one element, whatever the size.
// It talks to the kernel through nftables' netlink API
// (github.com/google/nftables): no nft binary is needed. It touches only
// its table.
type NFTables struct {
	ns *namespace
}

const (
	nftChain = "postrouting"
	nftMap4  = "snat-v4"
	nftMap6  = "snat-v6"
	// nftElemsPerMsg bounds the elements of one netlink message; a change
	// of many is still one transaction (batch).
	nftElemsPerMsg = 256
)

// NewNFTables opens the nftables backend on the network namespace at
// netnsPath ("" = the caller's own). It checks that the kernel's nftables
// netlink API answers there (nf_tables loaded, CAP_NET_ADMIN).
func NewNFTables(netnsPath string) (*NFTables, error) {
	ns, err := openNamespace(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("hostnet nftables: %w", err)
	}
	b := &NFTables{ns: ns}
	if _, err := b.tablePresent(); err != nil {
		return nil, errors.Join(err, ns.close())
	}
	return b, nil
}

// Close releases the namespace handle.
func (b *NFTables) Close() error { return b.ns.close() }

// conn returns a connection whose netlink sockets (one per operation) are
// opened in the backend's namespace; nothing is shared between calls, so
// the backend is safe for concurrent use.
func (b *NFTables) conn() (*nftables.Conn, error) {
	c, err := b.ns.nftables()
	if err != nil {
		return nil, fmt.Errorf("hostnet nftables: %w", err)
	}
	return c, nil
}

// nftFamily describes one of the backend's two maps and its rule.
type nftFamily struct {
	name     string
	addr     nftables.SetDatatype
	addrLen  int
	nfproto  byte
	saddrOff uint32 // offset of the source address in the network header
	ifReg    uint32 // register of oifname, right after the address
}

var nftFamilies = [2]nftFamily{
	{name: nftMap4, addr: nftables.TypeIPAddr, addrLen: 4, nfproto: unix.NFPROTO_IPV4, saddrOff: 12, ifReg: 9},  // NFT_REG32_01
	{name: nftMap6, addr: nftables.TypeIP6Addr, addrLen: 16, nfproto: unix.NFPROTO_IPV6, saddrOff: 8, ifReg: 2}, // NFT_REG_2
}

func nftTable() *nftables.Table {
	return &nftables.Table{Name: NFTablesTable, Family: nftables.TableFamilyINet}
}

// set returns the map, as `nft add map` declares it (a concatenated key
// without the NFT_SET_CONCAT flag, which nft sets for intervals only): a
// declaration that differs would be refused on a table nft created.
func (f nftFamily) newSet(t *nftables.Table) *nftables.Set {
	return &nftables.Set{Table: t, Name: f.name, IsMap: true,
		KeyType: nftables.MustConcatSetType(f.addr, nftables.TypeIFName), DataType: f.addr}
}

// exprs is `snat <ip|ip6> to <ip|ip6> saddr . oifname map @<set>` as nft
// compiles it in an inet table (`nft --debug=netlink`).
func (f nftFamily) exprs(s *nftables.Set) []expr.Any {
	return append(f.saddr(),
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: f.ifReg},
		&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, DestRegister: 1, IsDestRegSet: true},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: uint32(f.nfproto), RegAddrMin: 1, RegAddrMax: 1},
	)
}

// saddr loads the source address of a packet of the family into
// register 1 (`ip saddr`, `ip6 saddr` in an inet table), and stops the
// rule on a packet of the other family.
func (f nftFamily) saddr() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{f.nfproto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddrOff, Len: uint32(f.addrLen)},
	}
}

// inetTablePresent tells whether c's namespace has the inet table name.
func inetTablePresent(c *nftables.Conn, name string) (bool, error) {
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("list tables: %w", err)
	}
	return slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == name }), nil
}

// deleteTable deletes table t, if present.
func deleteTable(c *nftables.Conn, t *nftables.Table) error {
	c.DelTable(t)
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete table %s: %w", t.Name, err)
	}
	return nil
}

// element is r's map element: the key is the pod IP then the link name
// padded with NULs to IFNAMSIZ, the value the egress IP.
func element(r SNATRule) (nftables.SetElement, error) {
	if r.PodIP.Is4() != r.EgressIP.Is4() || !r.PodIP.IsValid() {
		return nftables.SetElement{}, fmt.Errorf("SNAT rule %s: addresses of different families", r)
	}
	if r.Link == "" || len(r.Link) >= unix.IFNAMSIZ {
		return nftables.SetElement{}, fmt.Errorf("SNAT rule %s: invalid link name", r)
	}
	key := append(r.PodIP.AsSlice(), make([]byte, unix.IFNAMSIZ)...)
	copy(key[r.PodIP.BitLen()/8:], r.Link)
	return nftables.SetElement{Key: key, Val: r.EgressIP.AsSlice()}, nil
}

// parseElement is element's inverse.
func parseElement(f nftFamily, e nftables.SetElement) (SNATRule, error) {
	var r SNATRule
	if len(e.Key) != f.addrLen+unix.IFNAMSIZ || len(e.Val) != f.addrLen {
		return r, fmt.Errorf("unexpected element %x : %x", e.Key, e.Val)
	}
	pod, _ := netip.AddrFromSlice(e.Key[:f.addrLen])
	eip, _ := netip.AddrFromSlice(e.Val)
	name, _, _ := bytes.Cut(e.Key[f.addrLen:], []byte{0})
	if len(name) == 0 {
		return r, fmt.Errorf("element %x : %x: empty link name", e.Key, e.Val)
	}
	return SNATRule{PodIP: pod, Link: string(name), EgressIP: eip}, nil
}

// tablePresent tells whether the backend's table exists.
func (b *NFTables) tablePresent() (bool, error) {
	c, err := b.conn()
	if err != nil {
		return false, err
	}
	present, err := inetTablePresent(c, NFTablesTable)
	if err != nil {
		return false, fmt.Errorf("hostnet nftables: %w", err)
	}
	return present, nil
}

// List implements SNAT: the elements of both maps. present is whether the
// table exists.
func (b *NFTables) List(ctx context.Context) ([]SNATRule, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("hostnet nftables: %w", err)
	}
	present, err := b.tablePresent()
	if err != nil || !present {
		return nil, false, err
	}
	c, err := b.conn()
	if err != nil {
		return nil, false, err
	}
	var rules []SNATRule
	for _, f := range nftFamilies {
		s, err := c.GetSetByName(nftTable(), f.name)
		if errors.Is(err, unix.ENOENT) {
			continue // Apply declares it again
		}
		if err != nil {
			return nil, false, fmt.Errorf("hostnet nftables: get map %s: %w", f.name, err)
		}
		elems, err := c.GetSetElements(s)
		if err != nil {
			return nil, false, fmt.Errorf("hostnet nftables: list map %s: %w", f.name, err)
		}
		for _, e := range elems {
			r, err := parseElement(f, e)
			if err != nil {
				return nil, false, fmt.Errorf("hostnet nftables: map %s: %w", f.name, err)
			}
			rules = append(rules, r)
		}
	}
	return rules, true, nil
}

// Apply implements SNAT, in one netlink batch (an nftables transaction:
// all or nothing). It (re)declares the table, maps and chain, and
// replaces the chain's rules, whenever it adds, so a missing or damaged
// table is repaired.
func (b *NFTables) Apply(ctx context.Context, add, remove []SNATRule) error {
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hostnet nftables: %w", err)
	}
	c, err := b.conn()
	if err != nil {
		return err
	}
	t := nftTable()
	var sets [2]*nftables.Set
	for i, f := range nftFamilies {
		sets[i] = f.newSet(t)
	}
	if len(add) > 0 {
		c.AddTable(t)
		for _, s := range sets {
			if err := c.AddSet(s, nil); err != nil {
				return fmt.Errorf("hostnet nftables: map %s: %w", s.Name, err)
			}
		}
		ch := c.AddChain(&nftables.Chain{Name: nftChain, Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
		c.FlushChain(ch)
		for i, f := range nftFamilies {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: f.exprs(sets[i])})
		}
	}
	setOf := func(ip netip.Addr) *nftables.Set {
		if ip.Is4() {
			return sets[0]
		}
		return sets[1]
	}
	if err := queueElements(remove, setOf, c.SetDeleteElements); err != nil {
		return err
	}
	if err := queueElements(add, setOf, c.SetAddElements); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("hostnet nftables: apply %d additions, %d removals: %w", len(add), len(remove), err)
	}
	return nil
}

// queueElements queues op on rules' elements, each family's in messages
// of nftElemsPerMsg elements at most.
func queueElements(rules []SNATRule, setOf func(netip.Addr) *nftables.Set, op func(*nftables.Set, []nftables.SetElement) error) error {
	bySet := map[*nftables.Set][]nftables.SetElement{}
	var order []*nftables.Set
	for _, r := range rules {
		e, err := element(r)
		if err != nil {
			return fmt.Errorf("hostnet nftables: %w", err)
		}
		s := setOf(r.PodIP)
		if _, ok := bySet[s]; !ok {
			order = append(order, s)
		}
		bySet[s] = append(bySet[s], e)
	}
	for _, s := range order {
		elems := bySet[s]
		for len(elems) > 0 {
			n := min(len(elems), nftElemsPerMsg)
			if err := op(s, elems[:n]); err != nil {
				return fmt.Errorf("hostnet nftables: map %s: %w", s.Name, err)
			}
			elems = elems[n:]
		}
	}
	return nil
}

// Reset implements SNAT: it deletes the table, if present.
func (b *NFTables) Reset(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hostnet nftables: %w", err)
	}
	c, err := b.conn()
	if err != nil {
		return err
	}
	if err := deleteTable(c, nftTable()); err != nil {
		return fmt.Errorf("hostnet nftables: %w", err)
	}
	return nil
}
