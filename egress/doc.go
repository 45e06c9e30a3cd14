// Package egress turns k8s.ovn.org/v1 EgressIP objects, pods, namespaces and
// nodes into the desired dataplane of seed 002: the assignment of egress IPs
// to nodes, the Northbound router policies, address sets and SNATs, the br-ex
// flows at priorities 109/105/104/100 and, for egress IPs on a non-OVN host
// interface, the host addresses, ip rules and SNAT rules. Everything here is
// a pure function of its inputs; the daemon applies the result.
//
// Status: being built under issue 5; nothing is exported yet.
package egress
