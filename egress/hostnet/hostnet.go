package hostnet

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/ovnedge/ovnedge/egress/hostspec"
)

// The desired state and the requirement errors are hostspec's (I/O-free,
// so that egress computes them without linking netlink or nftables);
// these aliases keep them nameable here.
type (
	// Assignment is hostspec.Assignment.
	Assignment = hostspec.Assignment
	// State is hostspec.State.
	State = hostspec.State
	// Reason is hostspec.Reason.
	Reason = hostspec.Reason
	// RequirementError is hostspec.RequirementError.
	RequirementError = hostspec.RequirementError
)

// The host-interface requirements (hostspec's).
const (
	ReasonInvalid            = hostspec.ReasonInvalid
	ReasonLinkNotFound       = hostspec.ReasonLinkNotFound
	ReasonLinkDown           = hostspec.ReasonLinkDown
	ReasonNoGlobalAddress    = hostspec.ReasonNoGlobalAddress
	ReasonNotInLinkNetwork   = hostspec.ReasonNotInLinkNetwork
	ReasonForwardingDisabled = hostspec.ReasonForwardingDisabled
	ReasonConflict           = hostspec.ReasonConflict
)

// Markers by which the Manager finds what it owns on a host, so that a
// restarted process converges (and cleans up) from the system's state, never
// from memory alone.
const (
	// RulePriority is the priority of the `ip rule from <pod IP> lookup
	// <table>` rules (upstream's value); every rule at this priority is
	// the Manager's.
	RulePriority = 6000
	// TableBase plus a link's ifindex is that link's routing table
	// (upstream's numbering: ifindex 8 gives table 1008).
	TableBase = 1000
	// RouteProtocol is the rtnetlink protocol number on every route the
	// Manager installs in its tables (shown as "proto 77" by `ip route`).
	RouteProtocol = 77
	// ChainName is the iptables nat chain of the SNAT rules, jumped to
	// from POSTROUTING (upstream's name).
	ChainName = "OVN-KUBE-EGRESS-IP-MULTI-NIC"
	// NFTablesTable is the inet table of the nftables SNAT backend.
	NFTablesTable = "ovnedge-egressip"
)

// SNATRule is one pod's source NAT: traffic from PodIP leaving through Link
// gets EgressIP as its source.
type SNATRule struct {
	PodIP    netip.Addr
	Link     string
	EgressIP netip.Addr
}

func (r SNATRule) String() string {
	return fmt.Sprintf("%s -o %s -> %s", r.PodIP, r.Link, r.EgressIP)
}

// SNAT is a source NAT backend. It owns a chain or table of its own and
// never touches anything else; what it lists comes from the system, so a
// restarted process sees what an earlier one installed.
type SNAT interface {
	// List returns the rules installed now, and whether the backend's
	// chain or table exists at all (it may exist empty).
	List(ctx context.Context) (rules []SNATRule, present bool, err error)
	// Apply installs add and deletes remove (installed rules, as List
	// returned them), creating the chain or table first if needed. A rule
	// in add may replace one in remove for the same pod and link (a pod
	// switching egress IP): the switch never leaves the pod unSNATed.
	Apply(ctx context.Context, add, remove []SNATRule) error
	// Reset removes the backend's chain or table and everything in it.
	Reset(ctx context.Context) error
}

// Announcer announces that this node now answers for ip on link (a
// gratuitous ARP, or an unsolicited neighbor advertisement for IPv6). The
// daemon wires it to the arp package (arp.Announcer). It is called on a
// thread that has entered the Manager's network namespace, right after the
// address is added, so it opens its socket on the link there.
type Announcer interface {
	Announce(link string, ip netip.Addr) error
}

// Withdrawer is an Announcer that repeats its announcements: Withdraw,
// called before the address is removed, stops them (a late gratuitous
// ARP would point the link's hosts back at this node after another took
// the address over). arp.Announcer is one.
type Withdrawer interface {
	Withdraw(link string, ip netip.Addr)
}

// Result counts what one Converge changed, and lists the assignments it
// rejected. A converge that changes nothing has Changes() == 0.
type Result struct {
	AddrsAdded, AddrsRemoved   int
	RoutesAdded, RoutesRemoved int
	RulesAdded, RulesRemoved   int
	SNATAdded, SNATRemoved     int
	// ConntrackDeleted counts the connection tracking entries of pods
	// whose SNAT rule was added (see Manager.Converge); not a change.
	ConntrackDeleted int
	// Rejected are the assignments that fail a requirement.
	Rejected []*RequirementError
}

// Changes is the total number of changes made.
func (r Result) Changes() int {
	return r.AddrsAdded + r.AddrsRemoved + r.RoutesAdded + r.RoutesRemoved +
		r.RulesAdded + r.RulesRemoved + r.SNATAdded + r.SNATRemoved
}
