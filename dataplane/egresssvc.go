package dataplane

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/ovnedge/ovnedge/desired"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/egresssvc"
	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/event"
	corev1 "k8s.io/api/core/v1"
)

// EgressServiceHost programs what the node does for the EgressServices it
// hosts (ns.EgressService, nil: none): the SNAT maps and ip rules of
// hostnet.EgressServices, in the network namespace at Netns ("" the
// process's own), opened on first use.
type EgressServiceHost struct {
	Node, Netns string

	mu sync.Mutex
	es *hostnet.EgressServices
}

// Write implements Writer.
func (w *EgressServiceHost) Write(_ context.Context, s desired.Snapshot, ns *desired.NodeState) ([]event.Event, error) {
	var h egresssvc.Host
	if ns.EgressService != nil {
		h = *ns.EgressService
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
	return w.requirements(s, w.es.Sync(h))
}

// requirements turns what the node or an EgressService lacks (among err's
// errors) into events, and returns them with the other errors.
func (w *EgressServiceHost) requirements(s desired.Snapshot, err error) ([]event.Event, error) {
	var events []event.Event
	var rest []error
	for _, e := range flatten(err) {
		var te *hostnet.TableError
		switch {
		case errors.Is(e, hostnet.ErrNoForwarding):
			for _, n := range s.Nodes {
				if n.Name == w.Node {
					events = append(events, event.Warningf(event.Ref("v1", "Node", n), ReasonEgressServiceHost, "%v", e))
				}
			}
		case errors.As(e, &te):
			ns, name, _ := strings.Cut(te.Service, "/")
			ref := corev1.ObjectReference{APIVersion: egressv1.SchemeGroupVersion.String(), Kind: egressv1.ServiceKind, Namespace: ns, Name: name}
			events = append(events, event.Warningf(ref, ReasonEgressServiceHost, "node %s: %v", w.Node, te.Err))
		default:
			rest = append(rest, e)
		}
	}
	return events, errors.Join(rest...)
}

// ReasonEgressServiceHost is the Warning event of a node that cannot
// serve the EgressServices it hosts (on the Node), or of an EgressService
// whose spec.network names no routing table there (on the
// EgressService).
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
