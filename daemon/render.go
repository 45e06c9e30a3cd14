package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
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
// prints it (ovsdbnb.RenderedRow).
type NBRow = ovsdbnb.RenderedRow

// RenderedNB is cs's NB rows (what `ovnedge render --what nb` prints) as
// the daemon writes them to the NB at c, in the form of c.Current: the
// reply-traffic QoS rule replaced as on an NB without the QoS mark
// action, each State sorted, without the shared load balancer groups,
// owners with rows only. Tests compare it with c.Current.
func RenderedNB(cs ClusterState, c *ovsdbnb.Client) map[ovsdbnb.Owner]ovsdbnb.State {
	if _, ok := cs.Egress[egress.ReplyQoSOwner]; ok && !c.SupportsKey(nbdb.QoSTable, "action", "mark") {
		cs.Egress = maps.Clone(cs.Egress)
		cs.Egress[egress.ReplyQoSOwner] = cs.ReplyFallback
	}
	out := map[ovsdbnb.Owner]ovsdbnb.State{}
	for o, st := range cs.NB() {
		st = st.Sorted()
		st.Groups = nil
		if !isEmpty(st) || len(st.TemplateVars) > 0 {
			out[o] = st
		}
	}
	return out
}

// DiffNB says how the owners' rows cur (ovsdbnb.Client.Current) differ
// from want (RenderedNB), one sorted line per owner; none when equal.
func DiffNB(cur, want map[ovsdbnb.Owner]ovsdbnb.State) []string {
	var diffs []string
	for o, st := range want {
		if !cur[o].Equal(st) {
			diffs = append(diffs, fmt.Sprintf("%s:\n  have %+v\n  want %+v", o, cur[o], st))
		}
	}
	for o := range cur {
		if _, ok := want[o]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: not wanted, still there", o))
		}
	}
	slices.Sort(diffs)
	return diffs
}

// RenderNB renders desired NB rows one JSON object per line
// (ovsdbnb.Render).
func RenderNB(states map[ovsdbnb.Owner]ovsdbnb.State) ([]byte, error) { return ovsdbnb.Render(states) }
