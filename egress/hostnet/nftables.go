//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"sigs.k8s.io/knftables"
)

// NFTables is the nftables SNAT backend: table NFTablesTable (family inet)
// of its own with maps `<pod IP> . <ifname> : <egress IP>` (snat-v4,
// snat-v6) and a nat postrouting chain that SNATs through them. One map
// element per pod, so a change is one element, whatever the size. It
// touches only its table.
type NFTables struct {
	ns  *namespace
	nft knftables.Interface
}

const (
	nftChain = "postrouting"
	nftMap4  = "snat-v4"
	nftMap6  = "snat-v6"
)

// NewNFTables opens the nftables backend on the network namespace at
// netnsPath ("" = the caller's own). The nft command must be installed.
func NewNFTables(netnsPath string) (*NFTables, error) {
	ns, err := openNamespace(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("hostnet nftables: %w", err)
	}
	b := &NFTables{ns: ns}
	err = ns.do(func() error {
		var err error
		b.nft, err = knftables.New(knftables.InetFamily, NFTablesTable)
		return err
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("hostnet nftables: %w", err), ns.close())
	}
	return b, nil
}

// Close releases the namespace handle.
func (b *NFTables) Close() error { return b.ns.close() }

func nftMapFor(ip netip.Addr) string {
	if ip.Is4() {
		return nftMap4
	}
	return nftMap6
}

// List implements SNAT.
func (b *NFTables) List(ctx context.Context) ([]SNATRule, bool, error) {
	var rules []SNATRule
	present := true
	err := b.ns.do(func() error {
		for _, m := range []string{nftMap4, nftMap6} {
			elems, err := b.nft.ListElements(ctx, "map", m)
			if knftables.IsNotFound(err) {
				present = false
				return nil
			}
			if err != nil {
				return fmt.Errorf("list map %s: %w", m, err)
			}
			for _, e := range elems {
				r, err := parseElement(e)
				if err != nil {
					return fmt.Errorf("map %s: %w", m, err)
				}
				rules = append(rules, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("hostnet nftables: %w", err)
	}
	return rules, present, nil
}

func parseElement(e *knftables.Element) (SNATRule, error) {
	var r SNATRule
	if len(e.Key) != 2 || len(e.Value) != 1 {
		return r, fmt.Errorf("unexpected element %v : %v", e.Key, e.Value)
	}
	pod, err1 := netip.ParseAddr(e.Key[0])
	eip, err2 := netip.ParseAddr(e.Value[0])
	if err := errors.Join(err1, err2); err != nil {
		return r, fmt.Errorf("element %v : %v: %w", e.Key, e.Value, err)
	}
	return SNATRule{PodIP: pod, Link: strings.Trim(e.Key[1], `"`), EgressIP: eip}, nil
}

func element(r SNATRule) *knftables.Element {
	return &knftables.Element{
		Map:   nftMapFor(r.PodIP),
		Key:   []string{r.PodIP.String(), `"` + r.Link + `"`},
		Value: []string{r.EgressIP.String()},
	}
}

// Apply implements SNAT, in one nft transaction (atomic). It
// (re)declares the table, maps and chain whenever it adds, so a missing or
// damaged table is repaired.
func (b *NFTables) Apply(ctx context.Context, add, remove []SNATRule) error {
	tx := b.nft.NewTransaction()
	if len(add) > 0 {
		tx.Add(&knftables.Table{Comment: knftables.PtrTo("ovnedge egress IP SNAT on host links")})
		tx.Add(&knftables.Map{Name: nftMap4, Type: "ipv4_addr . ifname : ipv4_addr"})
		tx.Add(&knftables.Map{Name: nftMap6, Type: "ipv6_addr . ifname : ipv6_addr"})
		tx.Add(&knftables.Chain{Name: nftChain, Type: knftables.PtrTo(knftables.NATType),
			Hook: knftables.PtrTo(knftables.PostroutingHook), Priority: knftables.PtrTo(knftables.SNATPriority)})
		tx.Flush(&knftables.Chain{Name: nftChain})
		tx.Add(&knftables.Rule{Chain: nftChain, Rule: "snat ip to ip saddr . oifname map @" + nftMap4})
		tx.Add(&knftables.Rule{Chain: nftChain, Rule: "snat ip6 to ip6 saddr . oifname map @" + nftMap6})
	}
	for _, r := range remove {
		tx.Delete(element(r))
	}
	for _, r := range add {
		tx.Add(element(r))
	}
	return b.run(ctx, tx)
}

// Reset implements SNAT.
func (b *NFTables) Reset(ctx context.Context) error {
	tx := b.nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	err := b.run(ctx, tx)
	if knftables.IsNotFound(err) {
		return nil
	}
	return err
}

func (b *NFTables) run(ctx context.Context, tx *knftables.Transaction) error {
	if tx.NumOperations() == 0 {
		return nil
	}
	if err := b.ns.do(func() error { return b.nft.Run(ctx, tx) }); err != nil {
		return fmt.Errorf("hostnet nftables: %w", err)
	}
	return nil
}
