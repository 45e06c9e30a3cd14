// Package egress turns k8s.ovn.org/v1 EgressIP objects, pods, namespaces and
// nodes into the desired dataplane of seed 002 (reference §2): the
// assignment of egress IPs to nodes, the Northbound router policies,
// address sets and SNATs, the br-ex flows at priorities 109/105/104/100
// and, for egress IPs on a non-OVN host interface, what each node hosts.
// Everything here is a pure, deterministic function of its inputs; it
// opens no socket. The daemon applies the result with ovsdbnb, ovsflow
// and egress/hostnet.
//
// The pipeline, run by the leader on every change:
//
//   - [ParseNodes] reads the nodes' OVN-Kubernetes annotations, label and
//     Ready condition; a node it cannot parse is returned apart and never
//     stops the others ([KeepLastGood] keeps its last good parse).
//   - [SelectPods] applies an EgressIP's namespace and pod selectors
//     (full metav1.LabelSelector) to running, non-host-network pods with
//     IPs; [NewSelector] compiles them once for incremental updates.
//   - [Assign] places each requested IP on a node (reference §2.5) and
//     returns the new status items and an event for every refusal
//     (InvalidEgressIP, EgressIPConflict, UnsupportedRequest,
//     NoMatchingNodeFound). Failover is the same call: items on nodes that
//     lost their label, went NotReady, disappeared or became unreachable
//     (egress/reach) move in the same pass.
//   - [Compute] returns the NB rows per owner ([ClusterState] and one
//     [EgressIPState] per EgressIP) for ovsdbnb.Client.Sync, and the
//     [HostAssignment]s of egress IPs on secondary host networks.
//     [MakeBeforeBreak] orders a change so that a new egress node's SNAT
//     exists before traffic is rerouted to it.
//   - [NodeFlows] is a node's br-ex configuration for ovsflow.EgressFlows.
//
// Subpackages: egress/api/v1 (the API types and their conversion from
// unstructured objects), egress/reach (egress node reachability: the
// DISCARD probe and grpc.health.v1) and egress/hostnet (egress IPs on a
// node's non-OVN host interface: address, ip rules, routing table, SNAT).
package egress
