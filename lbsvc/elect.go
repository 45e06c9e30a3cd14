package lbsvc

import (
	"bytes"
	"crypto/sha256"
	"net/netip"
	"slices"
	"strings"
)

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

// Elect returns the node that answers for addr among the healthy
// candidates: the first by sha256(node + "#" + addr), as MetalLB's layer2
// mode orders them. Every node computing it from the same inputs gets the
// same owner, so exactly one node answers. It returns false when there is
// no candidate.
func Elect(addr netip.Addr, candidates []string) (string, bool) {
	if len(candidates) == 0 {
		return "", false
	}
	type scored struct {
		node string
		sum  [sha256.Size]byte
	}
	s := make([]scored, len(candidates))
	for i, n := range candidates {
		s[i] = scored{n, sha256.Sum256([]byte(n + "#" + addr.String()))}
	}
	best := slices.MinFunc(s, func(a, b scored) int {
		if c := bytes.Compare(a.sum[:], b.sum[:]); c != 0 {
			return c
		}
		return strings.Compare(a.node, b.node)
	})
	return best.node, true
}
