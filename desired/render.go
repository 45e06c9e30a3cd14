package desired

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/ovsflow"
)

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

// WithoutQoSMark makes cs fit an NB whose schema has no QoS mark action
// (OVN before 24.03): the reply-traffic QoS rules of
// egress.ReplyQoSOwner are replaced by ReplyFallback, the per-port
// policies (egress.ReplyPortPolicies), and the owner marked dirty. It
// reports whether cs had that owner. cs.Egress may be an Index's map,
// which then keeps the fallback until the Index computes the owner
// again (and this replaces it again).
func (cs *ClusterState) WithoutQoSMark() bool {
	if _, ok := cs.Egress[egress.ReplyQoSOwner]; !ok {
		return false
	}
	cs.Egress[egress.ReplyQoSOwner] = cs.ReplyFallback
	if cs.Dirty != nil {
		cs.Dirty[egress.ReplyQoSOwner] = true // the fallback is not tracked apart
	}
	return true
}
