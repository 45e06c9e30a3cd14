package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Range is an inclusive range of addresses of one family.
type Range struct {
	First, Last netip.Addr
}

// Contains reports whether a lies in r.
func (r Range) Contains(a netip.Addr) bool {
	return r.First.BitLen() == a.BitLen() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + ".." + r.Last.String()
}

// ParseExclude parses Kube-OVN excludeIps entries (a single IP or an
// inclusive range "A..B", in lower case, as Kube-OVN's validator demands)
// and clips them to the addresses cidr hands out (Pool.Range), as
// util.ExpandExcludeIPs does. The result is sorted and merged (no two
// ranges overlap or touch); entries wholly outside that range, and
// entries of the other family (a dual-stack Subnet lists both), vanish. A
// malformed entry, an upper-case one, a CIDR (Kube-OVN refuses them), a
// range whose ends differ in family or run backwards is an error naming
// the entry.
func ParseExclude(cidr netip.Prefix, entries []string) ([]Range, error) {
	if !cidr.IsValid() {
		return nil, fmt.Errorf("exclude ips: invalid CIDR")
	}
	cidr = cidr.Masked()
	pool, ok := usableRange(cidr)
	var out []Range
	for _, e := range entries {
		r, err := parseEntry(strings.TrimSpace(e))
		if err != nil {
			return nil, fmt.Errorf("exclude ips entry %q: %w", e, err)
		}
		if !ok || r.First.Is4() != cidr.Addr().Is4() {
			continue
		}
		if r.Last.Less(pool.First) || pool.Last.Less(r.First) {
			continue
		}
		r.First = maxAddr(r.First, pool.First)
		r.Last = minAddr(r.Last, pool.Last)
		out = append(out, r)
	}
	return merge(out), nil
}

func parseEntry(e string) (Range, error) {
	switch {
	case e == "":
		return Range{}, fmt.Errorf("empty")
	case strings.ToLower(e) != e:
		return Range{}, fmt.Errorf("can not contain upper case")
	case strings.Contains(e, "/"):
		return Range{}, fmt.Errorf("a CIDR: excludeIps take an IP or a range A..B")
	case strings.Contains(e, ".."):
		a, b, _ := strings.Cut(e, "..")
		first, err := parseAddr(a)
		if err != nil {
			return Range{}, err
		}
		last, err := parseAddr(b)
		if err != nil {
			return Range{}, err
		}
		if first.Is4() != last.Is4() {
			return Range{}, fmt.Errorf("range ends of different families")
		}
		if last.Less(first) {
			return Range{}, fmt.Errorf("range runs backwards")
		}
		return Range{first, last}, nil
	default:
		a, err := parseAddr(e)
		if err != nil {
			return Range{}, err
		}
		return Range{a, a}, nil
	}
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return a, err
	}
	if a.Zone() != "" || a.Is4In6() {
		return a, fmt.Errorf("%s: zoned or IPv4-mapped", s)
	}
	return a, nil
}

// prefixRange is the range of every address of a masked prefix.
func prefixRange(p netip.Prefix) Range {
	first := p.Addr()
	b := first.AsSlice()
	bits := p.Bits()
	for i := range b {
		host := 8*(i+1) - bits // host bits within this byte
		switch {
		case host >= 8:
			b[i] = 0xff
		case host > 0:
			b[i] |= byte(1<<host - 1)
		}
	}
	last, _ := netip.AddrFromSlice(b)
	return Range{first, last}
}

// merge sorts ranges and joins overlapping or adjacent ones.
func merge(rs []Range) []Range {
	slices.SortFunc(rs, func(a, b Range) int { return a.First.Compare(b.First) })
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if next := last.Last.Next(); !next.IsValid() || r.First.Compare(next) <= 0 {
				last.Last = maxAddr(last.Last, r.Last)
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

func maxAddr(a, b netip.Addr) netip.Addr {
	if a.Less(b) {
		return b
	}
	return a
}

func minAddr(a, b netip.Addr) netip.Addr {
	if a.Less(b) {
		return a
	}
	return b
}
