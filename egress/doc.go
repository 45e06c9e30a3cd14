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
// # The rows, as OVN-Kubernetes writes them
//
// The rows are those of OVN-Kubernetes' default network controller at
// commit 8871cd9cec9c (go-controller/pkg/ovn/egressip.go), checked against
// its unit-test vectors (ovnk_test.go): the 102 no-reroute policies
// (pod-to-pod, pod-to-join, pod-to-node with pkt_mark=1008, and the
// reply-traffic "pkt.mark == 42" one, ip-family "ip"), the 100 reroutes,
// the SNATs, the served-pods, egress-service-pods and node-IPs address
// sets, and per family the QoS rule of every node switch (priority 103,
// from-lport, "ip4.src == $<served pods> && ct.trk && ct.rpl", action
// mark=42) that marks the replies of the served pods' connections so the
// 102 policy keeps them off the egress nodes. Their external_ids, and
// k8s.ovn.org/id = <controller>:<owner type>:<values in the key order of
// the object's ObjectIDsType>, are OVN-Kubernetes': a policy's id is
// "...:EgressIP:<priority>:<name>:<ip-family>:<network>", a NAT's
// "...:EgressIP:<name>:<ip-family>" (no network), the QoS rule's that of
// a policy (OVN-Kubernetes builds it with the policy type). The 1004
// policies carry no external_ids, as OVN-Kubernetes' default network's.
//
// Deliberate deviations:
//
//   - One zone. ovnedge programs one NB holding every node, as
//     OVN-Kubernetes without interconnect did; its current code and tests
//     run a zone per node. So every egress node's nexthop is its gateway
//     router's join IP (interconnect reaches a remote-zone node at its
//     transit switch IP), every egress node's SNAT is in the one NB (each
//     zone writes its own), and every node switch holds the QoS rule
//     (each zone's switches there).
//   - The IP families of the cluster-wide rows are those of
//     Cluster.ClusterSubnets; OVN-Kubernetes follows its IPv4/IPv6 mode
//     flags, which a real cluster sets from the same subnets.
//   - The SNATs have no external_port_range. OVN-Kubernetes sets its
//     gateway's ephemeral port range there (the kernel's, unless
//     configured); its unit-test vectors leave it unset.
//   - The QoS rules need a NB schema with the QoS "mark" action (OVN
//     24.03's has it, 23.03's and 23.06's do not). They have an owner of
//     their own, ReplyQoSOwner; a node switch that does not exist yet
//     fails that owner alone. On a NB without the mark action the daemon
//     gives that owner ReplyPortPolicies instead (with one warning): a
//     102 allow policy per source port on which a served pod backs an
//     externalTrafficPolicy=Local Service, so those replies are not
//     rerouted to the egress node. It matches the source port, not the
//     conntrack reply state: a connection the pod opens from such a port
//     is not rerouted either (clients' ephemeral ports are not served
//     ports, so in practice this is the Service's replies only).
//
// Subpackages: egress/api/v1 (the API types and their conversion from
// unstructured objects), egress/reach (egress node reachability: the
// DISCARD probe and grpc.health.v1) and egress/hostnet (egress IPs on a
// node's non-OVN host interface: address, ip rules, routing table, SNAT).
package egress
