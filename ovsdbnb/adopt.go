package ovsdbnb

import (
	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// Adoption. OVN-Kubernetes (and ovnedge before it stamped rows) writes
// rows without KeyOwnedBy. When an owner wants a row whose identity (a
// load balancer's or address set's name; a policy's router, priority and
// match; a NAT's router, type and addresses; a QoS row's direction,
// priority and match) equals such an unstamped row, Sync takes that row
// over in place instead of inserting a second one: it is stamped, and
// every key of its map columns counts as written by the owner, so keys the
// owner does not want (a legacy {name: <EgressIP>} external id, a stale
// vip) are removed. Its UUID is kept, so nothing is inserted or deleted.

// adopt marks u as taken over by an owner of this plan; false when
// another owner of the same plan took it already.
func (sn *snap) adopt(u string) bool {
	if sn.adopted == nil {
		sn.adopted = map[string]bool{}
	}
	if sn.adopted[u] {
		return false
	}
	sn.adopted[u] = true
	return true
}

// adopted returns r as if every key of its map columns had been written
// by the reconciler (recorded in KeyManaged).
func adopted(r row) row {
	ext := make(map[string]string, len(r.maps["external_ids"])+1)
	for k, v := range r.maps["external_ids"] {
		ext[k] = v
	}
	m := make(map[string]map[string]string, len(r.maps))
	for c, v := range r.maps {
		m[c] = v
	}
	m["external_ids"] = ext
	ext[KeyManaged] = encodeManaged(m)
	return row{scalars: r.scalars, maps: m, sets: r.sets}
}

// foreignRow returns the unstamped row of table (policies, NATs, QoS)
// whose identity is id, not yet adopted in this plan.
func (s *syncer) foreignRow(sn *snap, table, id string) (string, row, bool) {
	if sn.foreign == nil {
		sn.foreign = map[string]map[string]string{}
	}
	idx, ok := sn.foreign[table]
	if !ok {
		idx = map[string]string{}
		if tc := s.c.nb.Cache().Table(table); tc != nil {
			// The unstamped rows are those the client index on
			// KeyOwnedBy files under "" (a missing key reads as ""): a
			// table of ovnedge's own rows costs nothing to look in.
			found, err := tc.RowsByModels([]model.Model{ownerProbe(table, map[string]string{KeyOwnedBy: ""})})
			if err != nil {
				found = tc.RowsShallow()
			}
			for _, m := range found {
				switch r := m.(type) {
				case *nbdb.LogicalRouterPolicy:
					if r.ExternalIDs[KeyOwnedBy] == "" {
						idx[policyID(parentName(sn, r.UUID), r.Priority, r.Match)] = r.UUID
					}
				case *nbdb.NAT:
					if r.ExternalIDs[KeyOwnedBy] == "" {
						idx[natID(parentName(sn, r.UUID), r.Type, r.ExternalIP, r.LogicalIP)] = r.UUID
					}
				case *nbdb.QoS:
					if r.ExternalIDs[KeyOwnedBy] == "" {
						idx[qosID(r.Direction, r.Priority, r.Match)] = r.UUID
					}
				}
			}
		}
		sn.foreign[table] = idx
	}
	u, ok := idx[id]
	if !ok {
		return "", row{}, false
	}
	m := s.c.nb.Cache().Table(table).Row(u)
	if m == nil {
		return "", row{}, false
	}
	var r row
	switch m := m.(type) {
	case *nbdb.LogicalRouterPolicy:
		if m.ExternalIDs[KeyOwnedBy] != "" {
			return "", row{}, false
		}
		r = policyRowOf(m)
	case *nbdb.NAT:
		if m.ExternalIDs[KeyOwnedBy] != "" {
			return "", row{}, false
		}
		r = natRowOf(m)
	case *nbdb.QoS:
		if m.ExternalIDs[KeyOwnedBy] != "" {
			return "", row{}, false
		}
		r = qosRowOf(m)
	default:
		return "", row{}, false
	}
	if !sn.adopt(u) {
		return "", row{}, false
	}
	return u, r, true
}

// addressSetByName returns the cached address set named name, or nil.
func (s *syncer) addressSetByName(name string) *nbdb.AddressSet {
	rows, err := s.c.nb.Cache().Table(nbdb.AddressSetTable).RowsByModels([]model.Model{&nbdb.AddressSet{Name: name}})
	if err != nil {
		return nil
	}
	for _, m := range rows {
		if a := m.(*nbdb.AddressSet); a.Name == name {
			return a
		}
	}
	return nil
}
