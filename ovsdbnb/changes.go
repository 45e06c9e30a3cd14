package ovsdbnb

import (
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// Changes is what the client's monitor saw change in the NB since the
// last TakeChanges: the owners whose rows were inserted, changed or
// deleted (by this client's Sync or by anyone else: a monitor does not
// say who wrote), whether the shared topology (routers, switches, load
// balancer groups) gained or lost rows, and whether the client
// reconnected.
//
// A controller repairs drift with it: syncing the changed owners again
// with the State it last wrote sends nothing for its own writes and puts
// back what another writer changed or deleted. After a reconnection
// every owner is synced: the database may have been replaced (wiped and
// created again, restored from a backup) with rows no monitor event
// describes; so after topology is lost (TopologyLost). Once topology an
// owner needs is back (Topology), the owners refused for want of it are
// written again.
type Changes struct {
	// Owners maps each owner whose rows changed to what changed, e.g.
	// "Logical_Router_Policy deleted", "Load_Balancer updated" or
	// "Load_Balancer detached from Logical_Switch" (sorted).
	Owners map[Owner][]string
	// Topology is true when a logical router, logical switch or load
	// balancer group was created or deleted, or a group given to or taken
	// from a router or switch: owners the server refused for want of one
	// may now be written.
	Topology bool
	// TopologyLost is true when one was deleted, or a group taken from a
	// router or switch: the owners naming it may have lost rows (a
	// group's load balancers) that no owner's change describes, so every
	// owner is to be compared with the NB. A creation alone leaves every
	// owner's rows as they were.
	TopologyLost bool
	// Reconnected is true when the connection was lost and made again:
	// the cache was reloaded from the server, whose database may not be
	// the one it was.
	Reconnected bool
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool { return len(c.Owners) == 0 && !c.Topology && !c.Reconnected }

// Changed returns a channel that receives when changes are waiting for
// TakeChanges (one receive for any number of changes).
func (c *Client) Changed() <-chan struct{} { return c.changes.signal }

// TakeChanges returns the changes seen since the last call and forgets
// them.
func (c *Client) TakeChanges() Changes {
	ch := &c.changes
	ch.mu.Lock()
	owners, refs := ch.owners, ch.refs
	out := Changes{Topology: ch.topology, TopologyLost: ch.lost, Reconnected: ch.reconnected}
	ch.owners, ch.refs, ch.topology, ch.lost, ch.reconnected = nil, nil, false, false, false
	ch.mu.Unlock()
	// A reference taken from, or given to, a router or switch is an
	// owner's change when the row it names is one of ours: looked up
	// here, not in the event handler, which must not read the cache.
	for _, r := range refs {
		var ids map[string]string
		switch m := c.cachedRow(r.table, r.uuid).(type) {
		case *nbdb.LoadBalancer:
			ids = m.ExternalIDs
		case *nbdb.QoS:
			ids = m.ExternalIDs
		case *nbdb.ACL:
			ids = m.ExternalIDs
		}
		if o, ok := ownerOf(ids); ok {
			owners = addChange(owners, o, r.what)
		}
	}
	if len(owners) > 0 {
		out.Owners = make(map[Owner][]string, len(owners))
		for o, set := range owners {
			what := make([]string, 0, len(set))
			for w := range set {
				what = append(what, w)
			}
			sort.Strings(what)
			out.Owners[o] = what
		}
	}
	return out
}

// cachedRow returns the cached row uuid of table, nil when there is none.
func (c *Client) cachedRow(table, uuid string) model.Model {
	tc := c.nb.Cache()
	if tc == nil || tc.Table(table) == nil {
		return nil
	}
	return tc.Table(table).Row(uuid)
}

// changes collects the monitor's events for TakeChanges.
type changes struct {
	mu          sync.Mutex
	owners      map[Owner]map[string]bool
	refs        []refChange
	topology    bool
	lost        bool // topology deleted, or a group taken from a router or switch
	reconnected bool
	signal      chan struct{} // one pending receive
}

// refChange is a row uuid of table added to or removed from a reference
// column.
type refChange struct{ table, uuid, what string }

func addChange(owners map[Owner]map[string]bool, o Owner, what string) map[Owner]map[string]bool {
	if owners == nil {
		owners = map[Owner]map[string]bool{}
	}
	if owners[o] == nil {
		owners[o] = map[string]bool{}
	}
	owners[o][what] = true
	return owners
}

// ownerOf returns the owner stamped in a row's external_ids.
func ownerOf(ids map[string]string) (Owner, bool) {
	typ, name, ok := strings.Cut(ids[KeyOwnedBy], "/")
	return Owner{Type: typ, Name: name}, ok
}

func (ch *changes) notify() {
	select {
	case ch.signal <- struct{}{}:
	default:
	}
}

func (ch *changes) reconnect() {
	ch.mu.Lock()
	ch.reconnected = true
	ch.mu.Unlock()
	ch.notify()
}

// handler is the cache event handler. It runs on libovsdb's event
// goroutine and must not read the cache (a full event channel blocks the
// cache's writer, which holds the cache's lock).
func (ch *changes) handler() cache.EventHandler {
	return &cache.EventHandlerFuncs{
		AddFunc:    func(table string, m model.Model) { ch.event(table, "inserted", nil, m) },
		UpdateFunc: func(table string, old, m model.Model) { ch.event(table, "updated", old, m) },
		DeleteFunc: func(table string, old model.Model) { ch.event(table, "deleted", old, nil) },
	}
}

// event records one row event: the owners stamped in the old and new row,
// the references a router, switch or group gained or lost, a topology row
// created or deleted.
func (ch *changes) event(table, op string, old, m model.Model) {
	var owners []Owner
	var refs []refChange
	topology, lost := false, false
	for _, r := range []model.Model{old, m} {
		switch r := r.(type) {
		case nil:
		case *nbdb.LoadBalancer:
			owners = appendOwner(owners, r.ExternalIDs)
		case *nbdb.LogicalRouterPolicy:
			owners = appendOwner(owners, r.ExternalIDs)
		case *nbdb.NAT:
			owners = appendOwner(owners, r.ExternalIDs)
		case *nbdb.AddressSet:
			owners = appendOwner(owners, r.ExternalIDs)
		case *nbdb.QoS:
			owners = appendOwner(owners, r.ExternalIDs)
		case *nbdb.ACL:
			owners = appendOwner(owners, r.ExternalIDs)
		case *nbdb.ChassisTemplateVar:
			for k := range r.ExternalIDs {
				if o, ok := strings.CutPrefix(k, KeyTemplateVars); ok {
					owners = appendOwner(owners, map[string]string{KeyOwnedBy: o})
				}
			}
		case *nbdb.LogicalRouter, *nbdb.LogicalSwitch, *nbdb.LoadBalancerGroup:
			topology = topology || op != "updated"
			lost = lost || op == "deleted"
		}
	}
	if op == "updated" {
		// A group (no owner stamp) taken from, or given to, a router
		// or switch is a topology change: the owners naming it are
		// compared with the NB again.
		switch o := old.(type) {
		case *nbdb.LogicalRouter:
			n := m.(*nbdb.LogicalRouter)
			refs = refDiff(refs, table, nbdb.LoadBalancerTable, o.LoadBalancer, n.LoadBalancer)
			topology = topology || len(o.LoadBalancerGroup) != len(n.LoadBalancerGroup) || !equalSets(o.LoadBalancerGroup, n.LoadBalancerGroup)
			lost = lost || dropped(o.LoadBalancerGroup, n.LoadBalancerGroup)
		case *nbdb.LogicalSwitch:
			n := m.(*nbdb.LogicalSwitch)
			refs = refDiff(refs, table, nbdb.LoadBalancerTable, o.LoadBalancer, n.LoadBalancer)
			topology = topology || len(o.LoadBalancerGroup) != len(n.LoadBalancerGroup) || !equalSets(o.LoadBalancerGroup, n.LoadBalancerGroup)
			lost = lost || dropped(o.LoadBalancerGroup, n.LoadBalancerGroup)
			refs = refDiff(refs, table, nbdb.QoSTable, o.QOSRules, n.QOSRules)
			refs = refDiff(refs, table, nbdb.ACLTable, o.ACLs, n.ACLs)
		case *nbdb.LoadBalancerGroup:
			n := m.(*nbdb.LoadBalancerGroup)
			refs = refDiff(refs, table, nbdb.LoadBalancerTable, o.LoadBalancer, n.LoadBalancer)
		}
	}
	if len(owners) == 0 && len(refs) == 0 && !topology {
		return
	}
	ch.mu.Lock()
	for _, o := range owners {
		ch.owners = addChange(ch.owners, o, table+" "+op)
	}
	ch.refs = append(ch.refs, refs...)
	ch.topology = ch.topology || topology
	ch.lost = ch.lost || lost
	ch.mu.Unlock()
	ch.notify()
}

func appendOwner(owners []Owner, ids map[string]string) []Owner {
	if o, ok := ownerOf(ids); ok {
		return append(owners, o)
	}
	return owners
}

// dropped reports whether before holds a uuid after does not (a few
// groups: no map).
func dropped(before, after []string) bool {
	return slices.ContainsFunc(before, func(u string) bool { return !slices.Contains(after, u) })
}

// refDiff appends the uuids (rows of child) that before and after do not
// share: detached from, or attached to, a row of holder.
func refDiff(refs []refChange, holder, child string, before, after []string) []refChange {
	if len(before) == len(after) && equalSets(before, after) {
		return refs
	}
	in := make(map[string]bool, len(after))
	for _, u := range after {
		in[u] = true
	}
	was := make(map[string]bool, len(before))
	for _, u := range before {
		was[u] = true
		if !in[u] {
			refs = append(refs, refChange{child, u, child + " detached from " + holder})
		}
	}
	for _, u := range after {
		if !was[u] {
			refs = append(refs, refChange{child, u, child + " attached to " + holder})
		}
	}
	return refs
}

// equalSets reports whether a and b, of equal length, hold the same
// elements (in the same order is the common case).
func equalSets(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			in := make(map[string]bool, len(a))
			for _, u := range a {
				in[u] = true
			}
			for _, u := range b {
				if !in[u] {
					return false
				}
			}
			return true
		}
	}
	return true
}
