package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow"
)

// LoadSnapshot returns the objects of cfg's source (the manifests
// directory, or the API server) through the daemon's informers, once.
func LoadSnapshot(ctx context.Context, cfg *Config, log *slog.Logger) (Snapshot, *Clients, error) {
	c, err := Connect(cfg, log)
	if err != nil {
		return Snapshot{}, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the informers: the snapshot's objects stay
	w := NewWatcher(c.Typed, c.Dynamic, log, c.watchOptions(cfg)...)
	if err := w.Start(ctx); err != nil {
		return Snapshot{}, nil, err
	}
	s, err := w.Snapshot()
	return s, c, err
}

// RenderFlows renders the node's bridge program as ovs-ofctl flow text,
// one flow per line, in the order Program.Render uses, with ports by name.
func RenderFlows(ns NodeState) ([]byte, error) {
	var p ovsflow.Program
	if err := ns.Update(&p); err != nil {
		return nil, err
	}
	var b []byte
	for _, owner := range p.Owners() {
		for _, f := range p.Flows(owner) {
			b = f.AppendText(b)
			b = append(b, '\n')
		}
	}
	out, err := ovsflow.SortDump(b)
	if err != nil {
		return nil, fmt.Errorf("render flows: %w", err)
	}
	return dedupLines(out), nil
}

// dedupLines drops repeated adjacent lines: owners sharing a flow (two
// Services with one VIP) render it once, as the bridge holds it once.
func dedupLines(b []byte) []byte {
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines = slices.CompactFunc(lines, bytes.Equal)
	return bytes.Join(lines, nil)
}

// NBRow is one desired Northbound row as `ovnedge render --what nb`
// prints it.
type NBRow struct {
	Owner string `json:"owner"`
	Table string `json:"table"`
	Row   any    `json:"row"`
}

// RenderNB renders desired NB rows one JSON object (an NBRow) per line,
// sorted by owner, then table, then row.
func RenderNB(states map[ovsdbnb.Owner]ovsdbnb.State) ([]byte, error) {
	var lines [][]byte
	for o, st := range states {
		for table, rows := range map[string][]any{
			"Load_Balancer":         anys(st.LoadBalancers),
			"Load_Balancer_Group":   anys(st.Groups),
			"Logical_Router_Policy": anys(st.Policies),
			"NAT":                   anys(st.NATs),
			"Address_Set":           anys(st.AddressSets),
			"QoS":                   anys(st.QoSRules),
			"Chassis_Template_Var":  anys(st.TemplateVars),
		} {
			for _, r := range rows {
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false) // keep && and < readable
				if err := enc.Encode(NBRow{Owner: o.String(), Table: table, Row: r}); err != nil {
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
