package dataplane

import (
	"context"
	"errors"
	"sync"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/event"
)

// EgressServiceHost programs what the node does for the EgressServices it
// hosts (ns.EgressService): the SNAT maps and ip rules of
// hostnet.EgressServices, in the network namespace at Netns ("" the
// process's own), opened on first use.
type EgressServiceHost struct {
	Node, Netns string

	mu sync.Mutex
	es *hostnet.EgressServices
}

// Write implements Writer.
func (w *EgressServiceHost) Write(_ context.Context, s desired.Snapshot, ns *desired.NodeState) ([]event.Event, error) {
	if ns.EgressService == nil {
		return nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.es == nil {
		es, err := hostnet.NewEgressServices(w.Netns)
		if err != nil {
			return nil, err
		}
		w.es = es
	}
	err := w.es.Sync(*ns.EgressService)
	if errors.Is(err, hostnet.ErrNoForwarding) {
		for _, n := range s.Nodes {
			if n.Name == w.Node {
				return []event.Event{event.Warningf(event.Ref("v1", "Node", n), ReasonEgressServiceHost, "%v", err)}, nil
			}
		}
	}
	return nil, err
}

// ReasonEgressServiceHost is the Warning event of a node that cannot
// serve the EgressServices it hosts.
const ReasonEgressServiceHost = "EgressServiceHostRequirement"

// Close implements Writer: what was written stays.
func (w *EgressServiceHost) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.es != nil {
		_ = w.es.Close()
		w.es = nil
	}
}
