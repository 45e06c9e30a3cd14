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
//   - [BaseFlows]: the shared gateway's common flows: traffic leaving from
//     LOCAL and the patch port committed to conntrack zone 64000 with
//     ct_mark 2 and 1, the way back through table 1 by that mark, non-IP
//     to and from the shared bridge MAC, and NORMAL.
//   - [ServiceFlows]: OVN-Kubernetes' shared gateway Service flows at
//     priority 110: NodePorts and ExternalIP/LoadBalancer VIPs (with the
//     VIPs' ARP/NDP bypass and ICMP "fragmentation needed") from the uplink
//     to the patch port and their replies back, or, for
//     externalTrafficPolicy=Local with a host-network endpoint on the node,
//     DNATed to the host through conntrack zone 64003 and tables 6 and 7.
//
// # Shared gateway: what is in, what differs, what is left out
//
// [BaseFlows] and [ServiceFlows] reproduce OVN-Kubernetes' shared gateway
// mode (bridgeflows.go commonFlows and flowsForDefaultBridge,
// gateway_shared_intf.go updateServiceFlowCache) for the default network;
// the tests compare them with the expected flows of its
// gateway_localnet_linux_test.go. Deliberate differences:
//   - The priority-100 flow from the patch port has no dl_src=<MAC>
//     match: it is seed 002's flow, which [EgressFlows] emits too. Base and
//     egress share that one bridge flow; the base owns it, so it stays
//     when EgressIP is off. The pkt_mark 1008 flow (105) and the drop of
//     other nodes' pods (104; upstream 103) stay with [EgressFlows].
//   - A VIP's ARP/NDP bypass and ICMP "fragmentation needed" flows, one
//     per VIP whatever its ports, carry the cookie of the Service's lowest
//     port (upstream emits one per port with the same match, and which
//     cookie the bridge keeps depends on map order).
//   - externalTrafficPolicy=Local with host-network endpoints on several
//     target ports would need an OpenFlow select group (upstream's
//     hostNetworkServiceGroupID); this model has no groups, so a port gets
//     one host target port (package lbsvc picks the lowest and says so in
//     an event). Host targets are per family: a family without a
//     host-network endpoint goes to OVN (upstream programs no flow for it).
//   - Service cookies are OVN-Kubernetes' svcToCookie hash with the top
//     16 bits replaced by [CookieMark] (0x0ede): a restarted process (or
//     a new leader) tells its own flows from another controller's and
//     deletes those of Services that went away meanwhile
//     ([ApplierOptions].Owns with [OwnedCookie]). [BaseCookie] and
//     [ETPLocalCookie] keep upstream's values and are recognised by value:
//     a bridge ovnedge programs is not shared with ovnkube-node's gateway.
//     [MarkedCookie] maps upstream's cookie to ovnedge's.
//   - The gateway VLAN applies to the ARP/NDP bypass only ([Gateway].VLAN);
//     the base flows' VLAN handling (dl_vlan matches, mod_vlan_vid from
//     LOCAL, strip_vlan to LOCAL) is not modelled.
//
// Left out (not needed by the Service and egress paths, or belonging to
// other modes): user-defined networks and their patch ports, tables 2-5
// and the 169.254.x masquerade flows for host -> Service and hairpin
// traffic, the priority-115 drop of replies to the service CIDR, IP
// fragment reassembly (110, nw_frag, zone 64004: the userspace datapath
// does not reassemble anyway), the Geneve bypass (205/200), GARP drop
// (498/499), multiple external gateways and advertised networks (300/104),
// localnet host-subnet flows (102), BFD (13), local gateway mode (175,
// 650, table 11) and the PMTUD drop flows.
//
// An [Applier] applies a program to a bridge through a [Transport]: a full
// atomic replace, or an incremental diff sent as one atomic bundle. It
// keeps the program it last applied resolved and indexed by flow key, and
// a [Program] records the owners set or deleted since it was applied, so
// applying a change that touches k owners resolves, diffs and sends those
// k owners only, whatever the size of the program ([Program.Set] of flows
// equal to an owner's current ones is no change at all); the whole
// program is diffed only when the bridge's flows are unknown (the first
// apply, a resync, a failed bundle) or an ofport changed. Its
// [Applier.Run] loop replays the program when ovs-vswitchd restarts,
// rewrites it when an ofport changes, and repairs drift: flows of its own
// deleted or changed by someone else (`ovs-ofctl del-flows`) are reported
// by OpenFlow 1.4 flow monitoring ([FlowMonitor], the native transport)
// and restored within milliseconds, and a dump every
// [ApplierOptions].VerifyInterval catches what no monitor reports (the
// ovs-ofctl transport). A repair sends only the flows that differ, so
// only the affected owners are rewritten, and is logged with their names
// and the changes seen. By default it speaks OpenFlow to the
// bridge itself ([NativeTransport], package openflow: bundles, flow-stats
// dumps decoded into the model, reconnects); [OfctlTransport] forks
// ovs-ofctl instead, as OVN-Kubernetes does.
//
// # go-openvswitch
//
// github.com/digitalocean/go-openvswitch serves two things. [ToOVS] and
// [FromOVS] convert a [Flow] to and from its ovs.Flow, for CNIs built on
// it; what the other side cannot hold is a [FieldError] naming the field:
// port names (an ovs.Flow has port numbers), group, resubmit to table 0,
// ct() without arguments, and ovs.Flow's idle_timeout and the matches and
// actions this model lacks. pkt_mark travels as an ovs.FieldMatch, which
// go-openvswitch's own parser (DumpFlows) drops. [OfctlTransport] sends
// bundles of adds through go-openvswitch's AddFlowBundle; strict
// modifies and deletes, replace-flows and dump-flows it runs itself,
// since go-openvswitch has no strict bundle operations and no
// replace-flows, and its DumpFlows drops pkt_mark and rejects pop_vlan:
// dumps are read by [ParseFlow].
package ovsflow
