package ovsdbnb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// RenderedRow is one desired Northbound row as Render prints it (and
// `ovnedge render --what nb`).
type RenderedRow struct {
	Owner string `json:"owner"`
	Table string `json:"table"`
	Row   any    `json:"row"`
}

// Render prints desired NB rows (of Sync's states, or of the pure
// packages' computations) one JSON object (a RenderedRow) per line, sorted
// by owner, then table, then row: a stable text to diff or pin in a
// golden file.
func Render(states map[Owner]State) ([]byte, error) {
	var lines [][]byte
	for o, st := range states {
		for table, rows := range map[string][]any{
			"Load_Balancer":         anys(st.LoadBalancers),
			"Load_Balancer_Group":   anys(st.Groups),
			"Logical_Router_Policy": anys(st.Policies),
			"NAT":                   anys(st.NATs),
			"Address_Set":           anys(st.AddressSets),
			"QoS":                   anys(st.QoSRules),
			"ACL":                   anys(st.ACLs),
			"Chassis_Template_Var":  anys(st.TemplateVars),
		} {
			for _, r := range rows {
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false) // keep && and < readable
				if err := enc.Encode(RenderedRow{Owner: o.String(), Table: table, Row: r}); err != nil {
					return nil, fmt.Errorf("render %s row of %s: %w", table, o, err)
				}
				lines = append(lines, b.Bytes())
			}
		}
	}
	slices.SortFunc(lines, bytes.Compare)
	return bytes.Join(lines, nil), nil
}

func anys[T any](s []T) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}
