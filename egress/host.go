package egress

import (
	"cmp"
	"net/netip"
	"slices"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/hostspec"
	"github.com/ovnedge/ovnedge/event"
	corev1 "k8s.io/api/core/v1"
)

// ReasonHostRequirement is the event reason of an egress IP a node cannot
// host on its non-OVN interface (hostnet's requirements: link up, global
// address, forwarding, ...); the message names the requirement.
const ReasonHostRequirement = "EgressIPHostRequirement"

// HostState is what node must host on its non-OVN links: its
// HostAssignments with the link of each network found by linkOf (the
// daemon passes hostnet.Manager.LinkOf), sorted by link and egress IP. An
// assignment whose link cannot be found is left out with a Warning event
// on its EgressIP.
func HostState(node string, host []HostAssignment, linkOf func(netip.Prefix) (string, error)) (hostspec.State, []event.Event) {
	var s hostspec.State
	var events []event.Event
	for _, h := range host {
		if h.Node != node {
			continue
		}
		link, err := linkOf(h.Network)
		if err != nil {
			events = append(events, hostWarning(h.EgressIPName, "node %s cannot host egress IP %s: %v", node, h.EgressIP, err))
			continue
		}
		s = append(s, hostspec.Assignment{Link: link, EgressIP: h.EgressIP, PodIPs: h.PodIPs})
	}
	slices.SortFunc(s, func(a, b hostspec.Assignment) int {
		return cmp.Or(cmp.Compare(a.Link, b.Link), a.EgressIP.Compare(b.EgressIP))
	})
	return s, events
}

// HostEvents turns the assignments hostnet.Manager.Converge rejected on
// node into Warning events on the EgressIPs that asked for them.
func HostEvents(node string, host []HostAssignment, rejected []*hostspec.RequirementError) []event.Event {
	var events []event.Event
	for _, r := range rejected {
		name := ""
		for _, h := range host {
			if h.Node == node && h.EgressIP == r.EgressIP {
				name = h.EgressIPName
				break
			}
		}
		if name == "" {
			continue
		}
		events = append(events, hostWarning(name, "node %s: %v", node, r))
	}
	return events
}

func hostWarning(eipName, format string, args ...any) event.Event {
	ref := corev1.ObjectReference{APIVersion: egressv1.SchemeGroupVersion.String(), Kind: egressv1.Kind, Name: eipName}
	return event.Warningf(ref, ReasonHostRequirement, format, args...)
}
