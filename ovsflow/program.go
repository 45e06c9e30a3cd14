package ovsflow

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
)

// Program is a bridge's flow program made of named flow sets, one per owner.
// Replacing one owner's set leaves every other owner's flows alone. The zero
// Program is empty and ready to use. A Program is not safe for concurrent
// use; [Applier] keeps its own snapshot.
type Program struct {
	sets map[string]*flowSet
	// keys maps a flow's key (table, priority, match) to an owner that
	// emits it, for conflict detection; more lists the other owners of a
	// shared key.
	keys map[string]string
	more map[string][]string
	// scratch is a reusable buffer for keys.
	scratch []byte
	// base is the epoch of the Applier that last applied the program (0:
	// none) and dirty the owners set or deleted since: the next Apply by
	// that Applier looks at those owners only.
	base  uint64
	dirty map[string]struct{}
}

// flowSet is one owner's flows. It is never modified once stored: Set
// replaces it whole, so clones share it. It caches its flows resolved
// against the last port map, so resolving a program after one owner
// changed costs that owner only.
type flowSet struct {
	flows    []Flow
	keys     []string // the flows' keys before ports are resolved
	resolved atomic.Pointer[resolvedSet]
}

type resolvedSet struct {
	ports   uint64 // portsHash of the map resolved against
	entries []*entry
	err     error
}

// ConflictError reports two owners emitting the same table, priority and
// match with different actions.
type ConflictError struct {
	Key            string
	Owner, Other   string
	Flow, OtherFlw string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("owner %q and owner %q both program %q with different actions: %q vs %q",
		e.Owner, e.Other, e.Key, e.Flow, e.OtherFlw)
}

// Set replaces owner's flows and keeps the flows slice: do not modify it
// afterwards. Every flow is validated first; on any error
// (an invalid flow, two flows of owner with the same key and different
// actions, or a conflict with another owner) the program is left unchanged.
// Duplicate flows of one owner (same key and actions) are merged, keeping
// the first. An empty set removes the owner. Setting the flows an owner
// already has changes nothing: its flows stay resolved and an [Applier]
// does not look at it again.
func (p *Program) Set(owner string, flows []Flow) error {
	if owner == "" {
		return fmt.Errorf("ovsflow: empty owner name")
	}
	if old, ok := p.sets[owner]; ok && flowsEqual(old.flows, flows) {
		return nil
	}
	// Sets are small: a scan for duplicates beats a map. flows itself is
	// kept unless a duplicate has to be dropped.
	kept, copied := flows, false
	keys := make([]string, 0, len(flows))
	buf := p.scratch
next:
	for j := range flows {
		f := &flows[j]
		if err := f.Validate(); err != nil {
			return &FlowError{Owner: owner, Flow: f.String(), Err: err}
		}
		buf = f.appendKey(buf[:0])
		for i, k := range keys {
			if k == string(buf) {
				if !sameActions(&kept[i], f) {
					return &ConflictError{Key: k, Owner: owner, Other: owner, Flow: f.String(), OtherFlw: kept[i].String()}
				}
				if !copied {
					kept, copied = slices.Clone(flows[:j]), true
				}
				continue next
			}
		}
		keys = append(keys, string(buf))
		if copied {
			kept = append(kept, *f)
		}
	}
	p.scratch = buf
	kept = slices.Clip(kept)
	for i, key := range keys {
		if other := p.otherOwner(key, owner); other != "" {
			// Owners of one key share its actions: checking one is enough.
			of := p.find(other, key)
			if !sameActions(&kept[i], of) {
				return &ConflictError{Key: key, Owner: owner, Other: other, Flow: kept[i].String(), OtherFlw: of.String()}
			}
		}
	}
	p.Delete(owner)
	if len(kept) == 0 {
		return nil
	}
	if p.sets == nil {
		p.sets = make(map[string]*flowSet)
		p.keys = make(map[string]string)
		p.more = make(map[string][]string)
	}
	p.sets[owner] = &flowSet{flows: kept, keys: keys}
	p.touch(owner)
	for _, key := range keys {
		if _, taken := p.keys[key]; taken {
			p.more[key] = append(p.more[key], owner)
		} else {
			p.keys[key] = owner
		}
	}
	return nil
}

// otherOwner returns an owner of key other than owner, "" if none.
func (p *Program) otherOwner(key, owner string) string {
	if o, ok := p.keys[key]; ok && o != owner {
		return o
	}
	for _, o := range p.more[key] {
		if o != owner {
			return o
		}
	}
	return ""
}

func (p *Program) find(owner, key string) *Flow {
	set := p.sets[owner]
	if i := slices.Index(set.keys, key); i >= 0 {
		return &set.flows[i]
	}
	return nil
}

// touch records that owner changed since the program was last applied.
func (p *Program) touch(owner string) {
	if p.base == 0 {
		return // never applied: an Applier compares every owner anyway
	}
	if p.dirty == nil {
		p.dirty = make(map[string]struct{})
	}
	p.dirty[owner] = struct{}{}
}

func sameActions(a, b *Flow) bool {
	return bytes.Equal(a.appendActions(nil), b.appendActions(nil))
}

// Delete removes owner's flows.
func (p *Program) Delete(owner string) {
	set, ok := p.sets[owner]
	if !ok {
		return
	}
	for _, key := range set.keys {
		more := p.more[key]
		if p.keys[key] == owner {
			if len(more) == 0 {
				delete(p.keys, key)
				continue
			}
			p.keys[key], more = more[0], more[1:]
		} else {
			more = slices.DeleteFunc(slices.Clone(more), func(o string) bool { return o == owner })
		}
		if len(more) == 0 {
			delete(p.more, key)
		} else {
			p.more[key] = more
		}
	}
	delete(p.sets, owner)
	p.touch(owner)
}

// DeleteFunc removes the flows of every owner for which del returns true.
func (p *Program) DeleteFunc(del func(owner string) bool) {
	for owner := range p.sets {
		if del(owner) {
			p.Delete(owner)
		}
	}
}

// Owners lists the program's owners in order.
func (p *Program) Owners() []string {
	owners := make([]string, 0, len(p.sets))
	for o := range p.sets {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	return owners
}

// Flows returns owner's flows.
func (p *Program) Flows(owner string) []Flow {
	if s, ok := p.sets[owner]; ok {
		return slices.Clone(s.flows)
	}
	return nil
}

// Len is the number of distinct flows in the program.
func (p *Program) Len() int { return len(p.keys) }

// Clone returns a copy of p that later changes to p do not affect.
func (p *Program) Clone() *Program {
	c := &Program{sets: maps.Clone(p.sets), keys: maps.Clone(p.keys), more: make(map[string][]string, len(p.more)),
		base: p.base, dirty: maps.Clone(p.dirty)}
	for k, o := range p.more {
		c.more[k] = slices.Clone(o)
	}
	return c
}

// entry is one resolved flow as the bridge shows it: key, cookie, actions.
type entry struct {
	owner    string // "" for a flow read from the bridge
	table    uint8
	priority uint16
	key      string
	cookie   uint64
	actions  string
}

func (e *entry) id() FlowID { return FlowID{Table: e.table, Priority: e.priority, Cookie: e.cookie} }

func (e *entry) appendLine(b []byte) []byte {
	b = appendCookie(b, e.cookie)
	b = append(b, e.key...)
	b = append(b, " actions="...)
	return append(b, e.actions...)
}

func (e *entry) line() string { return string(e.appendLine(nil)) }

func compareEntries(a, b *entry) int {
	if a.table != b.table {
		return cmp.Compare(a.table, b.table)
	}
	if a.priority != b.priority {
		return cmp.Compare(b.priority, a.priority)
	}
	return strings.Compare(a.key, b.key)
}

// entries resolves the program's ports and returns its flows keyed as the
// bridge shows them. A flow two owners share carries the cookie of the
// owner whose name sorts first.
func (p *Program) entries(ports PortMap) (map[string]*entry, error) {
	want, _, err := resolveSets(p.sets, ports, portsHash(ports))
	return want, err
}

// resolveSets resolves every set against ports (hash h) and indexes the
// entries by key: want holds the entry the bridge gets for each key (the
// owner sorting first), shared every owner's entry for the keys several
// owners emit, in owner order.
func resolveSets(sets map[string]*flowSet, ports PortMap, h uint64) (want map[string]*entry, shared map[string][]*entry, err error) {
	n := 0
	for _, set := range sets {
		n += len(set.flows)
	}
	want = make(map[string]*entry, n)
	for owner, set := range sets {
		r := set.resolvedFor(owner, ports, h)
		if r.err != nil {
			return nil, nil, r.err
		}
		for _, e := range r.entries {
			old, dup := want[e.key]
			if !dup {
				want[e.key] = e
				continue
			}
			if shared == nil {
				shared = make(map[string][]*entry)
			}
			list, ok := shared[e.key]
			if !ok {
				list = []*entry{old}
			}
			list = insertByOwner(list, e)
			shared[e.key], want[e.key] = list, list[0]
		}
	}
	return want, shared, nil
}

// insertByOwner inserts e in list, which is sorted by owner.
func insertByOwner(list []*entry, e *entry) []*entry {
	i, _ := slices.BinarySearchFunc(list, e.owner, func(x *entry, o string) int { return strings.Compare(x.owner, o) })
	return slices.Insert(list, i, e)
}

// resolvedFor returns the set's entries resolved against ports (hash h),
// from its cache when it was resolved against the same map last.
func (s *flowSet) resolvedFor(owner string, ports PortMap, h uint64) *resolvedSet {
	r := s.resolved.Load()
	if r == nil || r.ports != h {
		r = s.resolve(owner, ports, h)
		s.resolved.Store(r)
	}
	return r
}

func (s *flowSet) resolve(owner string, ports PortMap, h uint64) *resolvedSet {
	r := &resolvedSet{ports: h, entries: make([]*entry, len(s.flows))}
	block := make([]entry, len(s.flows)) // one allocation for the set
	var buf []byte
	for i, f := range s.flows {
		named := f.Match.InPort.named()
		f, err := f.Resolve(ports)
		if err != nil {
			r.err = &FlowError{Owner: owner, Flow: s.flows[i].String(), Err: err}
			return r
		}
		key := s.keys[i] // the key changes only with a named in_port
		if named {
			buf = spliceInPort(buf[:0], key, s.flows[i].Match.InPort.name, &f)
			key = string(buf)
		}
		e := &block[i]
		*e = entry{owner: owner, table: f.Table, priority: f.Priority, key: key, cookie: f.Cookie}
		buf = f.appendActions(buf[:0])
		e.actions = string(buf)
		r.entries[i] = e
	}
	return r
}

// spliceInPort appends key, the key of a flow whose in_port is the named
// port name, with the port's number from f, the resolved flow, in its
// place: the key f renders to, without rendering it again.
func spliceInPort(b []byte, key, name string, f *Flow) []byte {
	const field = "in_port=" // no field printed before in_port contains it
	i := strings.Index(key, field)
	if i < 0 || !strings.HasPrefix(key[i+len(field):], name) {
		return f.appendKey(b)
	}
	i += len(field)
	b = append(b, key[:i]...)
	b = append(b, f.Match.InPort.String()...)
	return append(b, key[i+len(name):]...)
}

// portsHash fingerprints a port map (FNV-1a over its sorted entries).
func portsHash(ports PortMap) uint64 {
	names := slices.Sorted(maps.Keys(ports))
	h := uint64(14695981039346656037)
	mix := func(b byte) { h = (h ^ uint64(b)) * 1099511628211 }
	for _, n := range names {
		for i := 0; i < len(n); i++ {
			mix(n[i])
		}
		v := ports[n]
		mix(0)
		mix(byte(v >> 24))
		mix(byte(v >> 16))
		mix(byte(v >> 8))
		mix(byte(v))
	}
	return h
}

func sortedEntries(m map[string]*entry) []*entry {
	es := make([]*entry, 0, len(m))
	for _, e := range m {
		es = append(es, e)
	}
	slices.SortFunc(es, compareEntries)
	return es
}

// Render resolves the program's ports and renders it as ovs-ofctl text,
// one flow per line, ordered by table, descending priority, then match:
// the same text `ovs-ofctl -O OpenFlow13 --no-stats dump-flows` prints for
// it, once sorted the same way ([SortDump]).
func (p *Program) Render(ports PortMap) ([]byte, error) {
	// A sorted slice, not a map: equal keys end up side by side, the
	// owner sorting first ahead.
	h := portsHash(ports)
	n := 0
	for _, set := range p.sets {
		n += len(set.flows)
	}
	es := make([]*entry, 0, n)
	for owner, set := range p.sets {
		r := set.resolvedFor(owner, ports, h)
		if r.err != nil {
			return nil, r.err
		}
		es = append(es, r.entries...)
	}
	slices.SortFunc(es, func(a, b *entry) int {
		if c := compareEntries(a, b); c != 0 {
			return c
		}
		return strings.Compare(a.owner, b.owner)
	})
	es = slices.CompactFunc(es, func(a, b *entry) bool { return a.key == b.key })
	return renderEntries(es), nil
}

func renderEntries(es []*entry) []byte {
	n := 0
	for _, e := range es {
		n += len(e.key) + len(e.actions) + 40
	}
	b := make([]byte, 0, n)
	for _, e := range es {
		b = e.appendLine(b)
		b = append(b, '\n')
	}
	return b
}

// SortDump puts a dump-flows listing in the order [Program.Render] uses, so
// the two compare as text. Reply headers and statistics are dropped.
func SortDump(dump []byte) ([]byte, error) {
	es, err := parseDump(dump)
	if err != nil {
		return nil, err
	}
	return renderEntries(sortedEntries(es)), nil
}
