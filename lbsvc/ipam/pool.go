package ipam

import (
	"fmt"
	"net/netip"
	"slices"
)

// Pool is a named block of LoadBalancer addresses: a CIDR minus its
// excluded ranges. For IPv4 the network and broadcast addresses of a
// prefix shorter than /31 are never handed out; for IPv6 the first address
// (the subnet-router anycast) is not either.
type Pool struct {
	Name    string
	CIDR    netip.Prefix
	Exclude []Range
}

// NewPool parses a pool: cidr and Kube-OVN excludeIps entries (see
// ParseExclude).
func NewPool(name, cidr string, excludeIPs []string) (*Pool, error) {
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

// Usable reports why a is not an address the pool hands out, or nil: it
// must be inside the CIDR, not excluded, and not the network or broadcast
// address.
func (p *Pool) Usable(a netip.Addr) error {
	if !p.CIDR.Contains(a) {
		return fmt.Errorf("%s is outside pool %q (%s)", a, p.Name, p.CIDR)
	}
	if p.reserved(a) {
		return fmt.Errorf("%s is the network or broadcast address of pool %q (%s)", a, p.Name, p.CIDR)
	}
	if r, ok := p.excludedBy(a); ok {
		return fmt.Errorf("%s is excluded from pool %q by %s", a, p.Name, r)
	}
	return nil
}

func (p *Pool) reserved(a netip.Addr) bool {
	all := prefixRange(p.CIDR)
	if a.Is4() {
		return p.CIDR.Bits() < 31 && (a == all.First || a == all.Last)
	}
	return p.CIDR.Bits() < 127 && a == all.First
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

// next returns the lowest usable address of the pool at or after from
// that taken does not hold, or false when the pool is exhausted. It skips
// excluded ranges whole, so it visits at most len(taken) usable addresses.
func (p *Pool) next(from netip.Addr, taken func(netip.Addr) bool) (netip.Addr, bool) {
	for a := from; a.IsValid() && p.CIDR.Contains(a); a = a.Next() {
		if r, ok := p.excludedBy(a); ok {
			a = r.Last
			continue
		}
		if !p.reserved(a) && !taken(a) {
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
