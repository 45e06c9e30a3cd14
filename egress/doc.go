// Package egress computes the dataplane of k8s.ovn.org/v1 EgressIPs as
// OVN-Kubernetes programs it: the assignment of egress IPs to nodes and its
// failover, the Northbound router policies, address sets, SNATs and QoS
// rules, each node's br-ex EgressIP flows, and, for egress IPs on a non-OVN
// host interface, what each node hosts. Everything here is a pure,
// deterministic function of its inputs; it opens no socket. ovsdbnb,
// ovsflow and egress/hostnet apply the result.
//
// The pipeline, run by the leader on every change:
//
//   - [SelectPods], [NewSelector] and the incremental [Selection] apply an
//     EgressIP's namespace and pod selectors to running, non-host-network
//     pods with IPs; [Serve] pairs each EgressIP with its pods and status.
//     Pods come as [PodInfo] ([NewPodInfo], [PodInfos]): what egress reads
//     of a Pod, about 200 bytes with its label set shared with the pods
//     labelled alike, since a leader keeps one for every pod.
//   - [Assign] places each requested IP on an eligible node (nodes parsed
//     by package ovnknode) and returns the new status items and an event
//     per refusal (InvalidEgressIP, EgressIPConflict, UnsupportedRequest,
//     NoMatchingNodeFound). Failover is the same call: the items of nodes
//     that lost their label, went NotReady, disappeared or became
//     unreachable (egress/reach) move in the same pass. [HostHold] keeps a
//     host-interface egress IP from moving until its old node let it go,
//     and its Assign gives it back to that node as soon as the node is a
//     candidate again (a datapath that restarted in a second).
//   - [Compute] (or [EgressIPState] per EgressIP and [ClusterState] for the
//     shared rows) returns the NB rows per owner for ovsdbnb, and the
//     [HostAssignment]s of egress IPs on host networks ([HostState] turns a
//     node's into the hostspec.State egress/hostnet converges to).
//   - [SilenceFirst] and [MakeBeforeBreak] order a move: the lost node's
//     SNATs first, then the new node's SNAT, then the reroute, then the rest.
//   - [NodeFlows] is a node's input to brex.EgressFlows; [Fence] tracks the
//     egress IPs a node lost, which it fences on its bridge (brex.EgressFence)
//     while its ovn-controller may still answer ARP for them.
//
// The rows are those of OVN-Kubernetes' default network controller
// (ovn-kubernetes/ovn-kubernetes at 8871cd9, go-controller/pkg/ovn/egressip.go),
// checked against the vectors of its egressip_test.go. The deliberate
// differences (one NB for every node, no external_port_range on SNATs, the
// reply-traffic fallback on an NB without the QoS mark action, ...) are in
// docs/deviations.md; the failover and partition behaviour in
// docs/manual.md.
//
// Subpackages: egress/api/v1 (the API types, EgressService's too),
// egress/egresssvc (EgressServices), egress/reach (egress node
// reachability), egress/hostnet and egress/hostspec (egress IPs on a
// node's host interface, and the EgressServices' host rules).
package egress
