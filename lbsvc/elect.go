package lbsvc

import (
	"bytes"
	"crypto/sha256"
	"net/netip"
	"slices"
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
	suffix := "#" + addr.String()
	var buf []byte
	var best string
	var bestSum [sha256.Size]byte
	for i, n := range candidates { // one buffer: it runs for every VIP and node
		buf = append(append(buf[:0], n...), suffix...)
		sum := sha256.Sum256(buf)
		if c := bytes.Compare(sum[:], bestSum[:]); i == 0 || c < 0 || (c == 0 && n < best) {
			best, bestSum = n, sum
		}
	}
	return best, true
}

// Elections remembers the owner Elect chose for each VIP, and among
// which candidates, so that electing again elects only the VIPs whose
// candidates changed: with every healthy node a candidate of every VIP,
// 500 VIPs among 2,000 nodes are a million hashes, on every pass of every
// node in L2 mode. The zero Elections is ready to use, a nil *Elections
// remembers nothing, and an Elections is not safe for concurrent use.
type Elections struct {
	healthy []string // the candidates of the VIPs any healthy node may answer
	// l2 are VIPOwners' elections, underlay UnderlayOwners'.
	l2, underlay elections
}

// elections are owners by VIP.
type elections map[netip.Addr]election

// election is a VIP's owner and its candidates (nil: every healthy node).
type election struct {
	candidates []string
	node       string
}

// use returns the elections of kind (l2 or underlay), all forgotten
// unless the healthy nodes (sorted, distinct) are those of the last call,
// or after they outnumber twice the VIPs plus some (VIPs come and go);
// nil for a nil Elections.
func (e *Elections) use(kind *elections, healthy []string, vips int) elections {
	if e == nil {
		return nil
	}
	if !slices.Equal(e.healthy, healthy) {
		e.healthy, e.l2, e.underlay = healthy, nil, nil
	}
	if *kind == nil || len(*kind) > 2*vips+1024 {
		*kind = elections{}
	}
	return *kind
}

// elect is Elect of addr among eligible, or among healthy when eligible
// is nil, remembered in won (when not nil).
func (won elections) elect(addr netip.Addr, healthy, eligible []string) (string, bool) {
	candidates := healthy
	if eligible != nil {
		candidates = eligible
	}
	if won == nil {
		return Elect(addr, candidates)
	}
	if w, ok := won[addr]; ok && (w.candidates == nil) == (eligible == nil) && slices.Equal(w.candidates, eligible) {
		return w.node, true
	}
	node, ok := Elect(addr, candidates)
	if ok {
		won[addr] = election{candidates: eligible, node: node}
	} else {
		delete(won, addr)
	}
	return node, ok
}
