package ovsdbnb

import "sync"

// members caches, per cached router, switch or group row, the set of
// UUIDs its reference columns hold. libovsdb replaces a cached row on
// update and never modifies it, so a row pointer seen before has the same
// references: a Sync rebuilds the sets of changed rows only, not of every
// router holding tens of thousands of policies and NATs.
type members struct {
	mu   sync.Mutex
	sets map[any]map[string]bool
}

// of returns the set of uuids of row, built from cols on first use.
// keep collects the rows in use, for prune.
func (m *members) of(row any, keep map[any]map[string]bool, cols ...[]string) map[string]bool {
	set, ok := m.sets[row]
	if !ok {
		n := 0
		for _, c := range cols {
			n += len(c)
		}
		set = make(map[string]bool, n)
		for _, c := range cols {
			for _, u := range c {
				set[u] = true
			}
		}
	}
	keep[row] = set
	return set
}

// holder is a row that holds references and the set of UUIDs it holds.
type holder struct {
	ref
	set map[string]bool
}

// holdersOf returns the rows of hs whose set holds u.
func holdersOf(hs []holder, u string) []ref {
	var out []ref
	for _, h := range hs {
		if h.set[u] {
			out = append(out, h.ref)
		}
	}
	return out
}
