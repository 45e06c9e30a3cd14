package ovsdbnb

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// Owners lists the owners that have rows in the NB, read from the client
// cache through KeyOwnedBy, sorted; with types given, only owners of those
// types. A controller that restarts uses it to find the owners deleted
// while it was down: syncing them with an empty State removes their rows.
func (c *Client) Owners(types ...string) ([]Owner, error) {
	want := map[string]bool{}
	for _, t := range types {
		want[t] = true
	}
	seen := map[Owner]bool{}
	add := func(ids map[string]string) {
		typ, name, ok := strings.Cut(ids[KeyOwnedBy], "/")
		if ok && (len(want) == 0 || want[typ]) {
			seen[Owner{Type: typ, Name: name}] = true
		}
	}
	tables := []struct {
		name string
		rows func(model.Model)
	}{
		{nbdb.LoadBalancerTable, func(m model.Model) { add(m.(*nbdb.LoadBalancer).ExternalIDs) }},
		{nbdb.LogicalRouterPolicyTable, func(m model.Model) { add(m.(*nbdb.LogicalRouterPolicy).ExternalIDs) }},
		{nbdb.NATTable, func(m model.Model) { add(m.(*nbdb.NAT).ExternalIDs) }},
		{nbdb.AddressSetTable, func(m model.Model) { add(m.(*nbdb.AddressSet).ExternalIDs) }},
		{nbdb.QoSTable, func(m model.Model) { add(m.(*nbdb.QoS).ExternalIDs) }},
		{nbdb.ACLTable, func(m model.Model) { add(m.(*nbdb.ACL).ExternalIDs) }},
		{nbdb.ChassisTemplateVarTable, func(m model.Model) {
			for k := range m.(*nbdb.ChassisTemplateVar).ExternalIDs {
				if o, ok := strings.CutPrefix(k, KeyTemplateVars); ok {
					add(map[string]string{KeyOwnedBy: o})
				}
			}
		}},
	}
	for _, t := range tables {
		tc := c.nb.Cache().Table(t.name)
		if tc == nil {
			return nil, fmt.Errorf("ovsdbnb: owners: table %s is not monitored", t.name)
		}
		for _, m := range tc.RowsShallow() { // read only
			t.rows(m)
		}
	}
	out := make([]Owner, 0, len(seen))
	for o := range seen {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}
