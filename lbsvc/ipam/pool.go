package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Pool is a named block of LoadBalancer addresses of one family: a CIDR
// minus its excluded ranges and its gateway. As Kube-OVN's subnet IPAM
// (util.FirstIP, util.LastIP), only the addresses from the CIDR's second
// to its second-to-last are ever handed out, in IPv6 too: the first (IPv4
// network, IPv6 subnet-router anycast) and the last (IPv4 broadcast) are
// not; a /31 or /127 hands out both of its addresses, a /32 or /128 none.
type Pool struct {
	Name    string
	CIDR    netip.Prefix
	Exclude []Range
	// Gateway, when valid, is the subnet's gateway: never handed out and
	// refused as a static address, excluded or not.
	Gateway netip.Addr
}

// NewPool parses a pool: cidr and Kube-OVN excludeIps entries (see
// ParseExclude; entries of the other family are ignored).
func NewPool(name, cidr string, excludeIPs []string) (*Pool, error) {
	if strings.ToLower(cidr) != cidr {
		return nil, fmt.Errorf("pool %q: CIDR %s can not contain upper case", name, cidr)
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", name, err)
	}
	if p.Addr().Zone() != "" || p.Addr().Is4In6() {
		return nil, fmt.Errorf("pool %q: CIDR %s is zoned or IPv4-mapped", name, cidr)
	}
	p = p.Masked()
	ex, err := ParseExclude(p, excludeIPs)
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", name, err)
	}
	return &Pool{Name: name, CIDR: p, Exclude: ex}, nil
}

// NewSubnetPools returns the pools of a Kube-OVN Subnet (kubeovn.io/v1):
// one per block of cidrBlock ("10.0.0.0/24" or dual-stack
// "10.0.0.0/24,fd00::/120"), all named name, each with the gateway of its
// family from gateway (one address per block, comma-separated, may be
// empty) and the excludeIps entries of its family. The gateway is never
// handed out even when excludeIps omits it (kube-ovn-controller adds it to
// them).
func NewSubnetPools(name, cidrBlock, gateway string, excludeIPs []string) ([]*Pool, error) {
	var pools []*Pool
	for _, block := range strings.Split(cidrBlock, ",") {
		p, err := NewPool(name, strings.TrimSpace(block), excludeIPs)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(pools, func(q *Pool) bool { return q.CIDR.Addr().Is4() == p.CIDR.Addr().Is4() }) {
			return nil, fmt.Errorf("pool %q: cidrBlock %q has two blocks of one family", name, cidrBlock)
		}
		pools = append(pools, p)
	}
	for _, g := range strings.Split(gateway, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		gw, err := parseAddr(g)
		if err != nil {
			return nil, fmt.Errorf("pool %q: gateway: %w", name, err)
		}
		i := slices.IndexFunc(pools, func(p *Pool) bool { return p.CIDR.Contains(gw) })
		if i < 0 {
			return nil, fmt.Errorf("pool %q: gateway %s is outside cidrBlock %s", name, gw, cidrBlock)
		}
		pools[i].Gateway = gw
	}
	return pools, nil
}

// Complement returns the pool of the addresses p excludes: the same name,
// CIDR and gateway, handing out exactly the addresses of p's usable
// range that p's excluded ranges hold. In Kube-OVN the excludeIps of an
// enableExternalLBAddress subnet are where its LoadBalancer VIPs come
// from (the MetalLB pool of Kube-OVN's MetalLB underlay guide).
func (p *Pool) Complement() *Pool {
	out := &Pool{Name: p.Name, CIDR: p.CIDR, Gateway: p.Gateway}
	r, ok := p.Range()
	if !ok {
		return out
	}
	next := r.First // the first address not yet decided
	for _, ex := range p.Exclude {
		if ex.Last.Less(next) {
			continue
		}
		if r.Last.Less(ex.First) {
			break
		}
		if next.Less(ex.First) {
			out.Exclude = append(out.Exclude, Range{next, ex.First.Prev()})
		}
		if !ex.Last.Less(r.Last) {
			return out
		}
		next = ex.Last.Next()
	}
	out.Exclude = append(out.Exclude, Range{next, r.Last})
	return out
}

// Range returns the addresses the pool's CIDR can hand out, Kube-OVN's
// FirstIP..LastIP, or false for a /32 or /128, which has none.
func (p *Pool) Range() (Range, bool) {
	return usableRange(p.CIDR)
}

func usableRange(cidr netip.Prefix) (Range, bool) {
	all := prefixRange(cidr.Masked())
	switch host := cidr.Addr().BitLen() - cidr.Bits(); host {
	case 0:
		return Range{}, false
	case 1:
		return all, true
	default:
		return Range{all.First.Next(), all.Last.Prev()}, true
	}
}

// errReserved is wrapped by Usable and Assignable for the CIDR's first and
// last addresses.
var errReserved = errors.New("never handed out")

// inRange reports why a is not in the pool's usable range, or nil.
func (p *Pool) inRange(a netip.Addr) error {
	if !p.CIDR.Contains(a) {
		return fmt.Errorf("%s is outside pool %q (%s)", a, p.Name, p.CIDR)
	}
	if r, ok := p.Range(); !ok || !r.Contains(a) {
		return fmt.Errorf("%s is the network or broadcast (IPv6: first or last) address of pool %q (%s): %w", a, p.Name, p.CIDR, errReserved)
	}
	return nil
}

// Assignable reports why a cannot be a static address (spec.loadBalancerIP)
// of the pool, or nil: it must be in the pool's usable range and not its
// gateway. An excluded address is assignable, as in Kube-OVN, where
// excludeIps keeps addresses out of random allocation only.
func (p *Pool) Assignable(a netip.Addr) error {
	if err := p.inRange(a); err != nil {
		return err
	}
	if a == p.Gateway {
		return fmt.Errorf("%s is the gateway of pool %q (%s)", a, p.Name, p.CIDR)
	}
	return nil
}

// Usable reports why a is not an address the pool hands out by itself, or
// nil: it must be Assignable and not excluded.
func (p *Pool) Usable(a netip.Addr) error {
	if err := p.Assignable(a); err != nil {
		return err
	}
	if r, ok := p.excludedBy(a); ok {
		return fmt.Errorf("%s is excluded from pool %q by %s", a, p.Name, r)
	}
	return nil
}

func (p *Pool) excludedBy(a netip.Addr) (Range, bool) {
	i, found := slices.BinarySearchFunc(p.Exclude, a, func(r Range, a netip.Addr) int { return r.First.Compare(a) })
	if found {
		return p.Exclude[i], true
	}
	if i > 0 && p.Exclude[i-1].Contains(a) {
		return p.Exclude[i-1], true
	}
	return Range{}, false
}

// next returns the lowest address the pool hands out that taken does not
// hold, or false when the pool is exhausted. It skips excluded ranges
// whole, so it visits at most len(taken)+1 usable addresses.
func (p *Pool) next(taken func(netip.Addr) bool) (netip.Addr, bool) {
	r, ok := p.Range()
	if !ok {
		return netip.Addr{}, false
	}
	for a := r.First; a.IsValid() && r.Contains(a); a = a.Next() {
		if x, ok := p.excludedBy(a); ok {
			a = x.Last
			continue
		}
		if a != p.Gateway && !taken(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Excluded reports whether a is in one of the pool's excluded ranges.
func (p *Pool) Excluded(a netip.Addr) bool {
	_, ok := p.excludedBy(a)
	return ok
}
