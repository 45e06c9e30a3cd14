package ovsdbnb

import (
	"fmt"
	"slices"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// SupportsKey reports whether the server's NB schema lets the map column
// of table hold key. A column whose keys are an enum accepts only those:
// QoS action accepts "dscp" in every OVN, "mark" only from the schema of
// OVN 24.03 (7.3.0) on (not in 23.03's 7.0.0 nor 23.06's 7.0.4). Another
// map column accepts any key; an unknown table or column none.
func (c *Client) SupportsKey(table, column, key string) bool {
	return keyAllowed(c.nb.Schema(), table, column, key) == nil
}

// Schema returns the server's NB schema (as the client connected to it).
func (c *Client) Schema() ovsdb.DatabaseSchema { return c.nb.Schema() }

// SupportsTemplates reports whether an NB schema supports load balancer
// templates: it has the Chassis_Template_Var table (OVN 22.12 and newer;
// 23.03's schema has it). It is OVN-Kubernetes' check
// (controllermanager/controller_manager.go configureSvcTemplateSupport:
// "ovn-nbctl list Chassis_Template_Var" must succeed) on the schema the
// client holds instead of a command.
func SupportsTemplates(schema ovsdb.DatabaseSchema) bool {
	return schema.Table(nbdb.ChassisTemplateVarTable) != nil
}

// keyAllowed checks key against the enum of the keys of schema's column,
// if it has one.
func keyAllowed(schema ovsdb.DatabaseSchema, table, column, key string) error {
	ts := schema.Table(table)
	if ts == nil {
		return fmt.Errorf("the server's %s schema %s has no table %s", schema.Name, schema.Version, table)
	}
	col := ts.Column(column)
	if col == nil {
		return fmt.Errorf("the server's %s schema %s has no column %s.%s", schema.Name, schema.Version, table, column)
	}
	if col.TypeObj == nil || col.TypeObj.Key == nil || col.TypeObj.Key.Enum == nil {
		return nil
	}
	var allowed []string
	for _, v := range col.TypeObj.Key.Enum {
		if s, ok := v.(string); ok {
			allowed = append(allowed, s)
		}
	}
	if slices.Contains(allowed, key) {
		return nil
	}
	return fmt.Errorf("the server's %s schema %s does not accept %q in %s.%s (it accepts %q)",
		schema.Name, schema.Version, key, table, column, allowed)
}

// checkSchema refuses an owner whose rows use map keys the server's
// schema does not accept (e.g. a QoS "mark" action on OVN 23.03), with an
// error naming the row, before anything of the owner is sent.
func (c *Client) checkSchema(o Owner, st State) error {
	schema := c.nb.Schema()
	for _, q := range st.QoSRules {
		for _, col := range []struct {
			name string
			m    map[string]int
		}{{"action", q.Action}, {"bandwidth", q.Bandwidth}} {
			for _, k := range sortedKeys(col.m) {
				if err := keyAllowed(schema, nbdb.QoSTable, col.name, k); err != nil {
					return &OwnerError{Owner: o, Row: qosID(q.Direction, q.Priority, q.Match), Err: err}
				}
			}
		}
	}
	return nil
}
