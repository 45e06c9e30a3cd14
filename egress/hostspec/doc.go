// Package hostspec is the I/O-free desired state of egress IPs hosted on a
// node's non-OVN interfaces: the [State] that egress computes
// (egress.HostState) and egress/hostnet converges a node to, and the
// [RequirementError]s hostnet rejects assignments with (egress turns them
// into events, egress.HostEvents).
//
// It exists so that the pure computation in egress (and lbsvc, which
// imports egress) never links hostnet's netlink, nftables and iptables
// code: `go list -deps ./egress ./lbsvc` lists none of them on Linux
// (checked by `make embed`). hostnet names these types through aliases.
//
// Dependencies: the standard library only.
package hostspec
