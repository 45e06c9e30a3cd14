package hostspec

import (
	"fmt"
	"net/netip"
	"strings"
)

// Assignment is one egress IP hosted on a host (non-OVN) link of this node
// and the pods whose traffic leaves through that link with it as source.
// Pod IPs must be of the egress IP's family.
type Assignment struct {
	// Link is the interface name, e.g. "eth1".
	Link string
	// EgressIP is added to Link and is the pods' source after SNAT.
	EgressIP netip.Addr
	// PodIPs are the pods selected by the EgressIP (may be empty: the
	// address is still hosted and announced).
	PodIPs []netip.Addr
}

func (a Assignment) String() string {
	return fmt.Sprintf("%s on %s", a.EgressIP, a.Link)
}

// State is the desired host networking of the node: every egress IP it
// hosts on a non-OVN link. Converging to an empty State removes everything
// the Manager owns.
type State []Assignment

// Reason says which requirement an assignment fails.
type Reason string

// The requirements of OVN-Kubernetes for an egress IP on a non-OVN link
// (go-controller/pkg/node/controllers/egressip/egressip.go), plus malformed input.
const (
	ReasonInvalid            Reason = "Invalid"
	ReasonLinkNotFound       Reason = "LinkNotFound"
	ReasonLinkDown           Reason = "LinkDown"
	ReasonNoGlobalAddress    Reason = "NoGlobalAddress"
	ReasonNotInLinkNetwork   Reason = "NotInLinkNetwork"
	ReasonForwardingDisabled Reason = "ForwardingDisabled"
	ReasonConflict           Reason = "Conflict"
)

// RequirementError says why an assignment was not applied; the daemon turns
// it into a status event. Nothing of a rejected assignment is installed,
// and what an earlier converge installed for it is removed.
type RequirementError struct {
	Link     string
	EgressIP netip.Addr
	Reason   Reason
	// Detail is a human-readable explanation, e.g. the link's networks.
	Detail string
	// Err is the underlying error, if any.
	Err error
}

func (e *RequirementError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "egress IP %s on link %q: %s", e.EgressIP, e.Link, e.Reason)
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *RequirementError) Unwrap() error { return e.Err }

// Guard is the leak guard of a node's secondary host networks: a packet
// from the cluster's pod subnets that leaves a link of one of Networks
// in its connection's original direction without source NAT is dropped.
// Between the leader's reroute of a pod to this node and this node's
// SNAT rule (written apart), the pod's packets would otherwise reach the
// host network with the pod's own address; a packet NATed by anyone
// (ovnedge's SNAT, a masquerade of the peer's) and replies of
// connections made from outside pass.
type Guard struct {
	// PodSubnets are the cluster's pod subnets; Networks the node's
	// secondary host networks (k8s.ovn.org/host-cidrs, its primary
	// network left out).
	PodSubnets, Networks []netip.Prefix
}

// Empty reports whether g guards nothing.
func (g Guard) Empty() bool { return len(g.PodSubnets) == 0 || len(g.Networks) == 0 }
