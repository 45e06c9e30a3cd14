// Package ovsflow builds, renders, diffs and applies typed OpenFlow programs
// for an OVN external bridge (br-ex or breth0).
//
// A [Flow] is a table, a priority, a cookie, a [Match] and a list of
// [Action]s. Ports are named ([PortName]) and resolved to OpenFlow port
// numbers only when a program is applied, so the same program follows an
// uplink whose ofport changes. Flows render to the canonical text that
// `ovs-ofctl -O OpenFlow13 --no-stats dump-flows` prints, and [ParseFlow]
// reads that text back without losing a field this package can emit
// (pkt_mark, ct_state, ct_mark and the ct action included), so a program
// can be compared with what a bridge holds line by line.
//
// Programs are made of named flow sets, one per owner (a Service, the egress
// configuration, the base flows): [Program.Set] replaces one owner's flows
// and leaves every other owner's alone. Two owners that emit the same table,
// priority and match with different actions are reported as a
// [ConflictError] naming both.
//
// The builders are pure functions of typed inputs:
//   - [ARPBypass]: ARP requests and IPv6 neighbour solicitations for
//     ExternalIP and LoadBalancer ingress VIPs go from the uplink to LOCAL,
//     never to OVN (OVN-Kubernetes' reason: several nodes answering one ARP
//     request break conntrack-tracked flows).
//   - [EgressFlows]: the EgressIP flows at priorities 109/105/104/100.
//   - [BaseFlows]: the reply path through conntrack zone 64000 and table 1,
//     host egress from LOCAL, and NORMAL.
//
// An [Applier] applies a program to a bridge through a [Transport]: a full
// atomic replace, or an incremental diff sent as one atomic bundle. Its
// [Applier.Run] loop replays the program when ovs-vswitchd restarts and
// rewrites it when an ofport changes. By default it speaks OpenFlow to the
// bridge itself ([NativeTransport], package openflow: bundles, flow-stats
// dumps decoded into the model, reconnects); [OfctlTransport] forks
// ovs-ofctl instead, as OVN-Kubernetes does.
package ovsflow
