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
//   - [NodeFlows] is a node's br-ex configuration for brex.EgressFlows.
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
// # Failover and partitions
//
// Who owns an egress IP is the leader's word: the EgressIP status it
// writes. It learns that an egress node is lost from egress/reach: the
// polling checks of OVN-Kubernetes (DISCARD or gRPC on the management IP,
// every interval within a timeout; 5 s and 1 s by default), and with the
// daemon's --egressip-fast-failover a UDP heartbeat every 100 ms, down
// after 3 misses, beside them. A node also reports itself down (gRPC
// NOT_SERVING, a not-serving heartbeat) while its uplink is down. On a
// loss the leader applies [SilenceFirst]: the lost node's SNATs go in a
// transaction of their own (its gateway router stops answering ARP for
// the egress IP, if its chassis still runs), then [MakeBeforeBreak] to
// the new node (its SNAT, and OVN's gratuitous ARP with it, then the
// reroute, then the rest). So the old owner is silenced before the new
// one announces, and traffic is rerouted only to a node that SNATs it.
//
// An egress IP on a node's host interface (not OVN's) is answered for by
// that node's kernel, which neither the leader nor OVN can silence. So
// the leader holds its move back ([HostHold]): once taken off node A the
// IP is assigned to no node until A is known to be silent, that is until
// A reports (its Node annotation ovnedge.io/egress-host-ips, [HostReport],
// written after the release) that it no longer hosts the IP or cannot
// host it, or until A's host lease (--egressip-host-lease, 3 s, the same
// on leader and nodes) plus [HostReleaseMargin] have passed since the
// release; the leader's heartbeat stops renewing A's lease at the release.
// A node adds such an IP only after reading the EgressIP from the API
// server (not its cache) and finding it still assigned to itself, and
// sends a gratuitous ARP (unsolicited NA) right after adding it; it stops
// repeating those before it removes the address. A node that cannot host
// an IP (hostnet's requirements: link up, an address in the network,
// forwarding) reports it refused, with the reason, for as long as the
// requirement fails (re-checked on every link change): [Assign] gives
// the IP to another eligible node at once (a refusal is silence), as
// OVN-Kubernetes assigns no IP to a node without a matching network.
//
// What happens in each partition (OVN-hosted IP; host-interface IP):
//
//   - The egress node dies (chassis and ovnedge): nothing of it answers;
//     the leader moves its OVN-hosted IPs after detection (fast: 200-400
//     ms), its host-interface IPs after detection plus the lease and
//     margin (3.5 s), as nothing can confirm a dead node's silence.
//   - Its uplink goes down, or only its ovnedge dies: the node answers
//     the checks no more, or says it cannot serve; the IPs move, and its
//     still running ovn-controller removes the old SNAT (and its ARP
//     answers) in the first step. A host-interface IP whose link goes
//     down is refused by the node and moves at once. If only ovnedge
//     dies, the kernel keeps a host-interface IP's address (nobody is
//     left to withdraw it) while the leader moves it after the lease:
//     both nodes then answer ARP until ovnedge is back and removes it,
//     as with OVN-Kubernetes when ovnkube-node dies.
//   - The egress node is cut off from the leader but not from the API
//     server: the leader moves its OVN-hosted IPs; it releases the
//     host-interface ones, the node sees that through the API server,
//     withdraws them and reports so, and only then (or after the lease)
//     does the leader assign them to another node.
//     An OVN-hosted egress IP is withdrawn by the node's ovn-controller
//     when it gets to it; one that lags (busy recomputing) or is cut off
//     from the Southbound database keeps its last flows, and its gateway
//     router would answer ARP for the IP beside the new owner once its
//     uplink carries them (as with OVN-Kubernetes). The node's ovnedge
//     prevents that: once the status names another node it fences the
//     IP on its bridge ([Fence], brex.EgressFence: ARP replies and
//     neighbour advertisements for it from the patch port are dropped)
//     for [FenceHold], or until the IP comes back to it (e2e
//     TestFastFailover/UplinkDownControllerLagging; without the fence
//     both nodes answer).
//   - The egress node is cut off from both the leader and the API server:
//     it can no longer prove it owns its host-interface egress IPs. After
//     --egressip-host-lease (3 s) without a leader heartbeat or an answer
//     of the API server, it withdraws them (addresses, rules, SNAT), and
//     puts them back when either is heard again and the API server's
//     status still names it. The leader releases them at detection and
//     assigns them to another node only after the lease and margin, by
//     which time the old node has withdrawn them: at no moment do two
//     nodes answer ARP for the IP (e2e TestHostEgressFailover/Partitioned;
//     with the hold off, both answer for the whole lease).
//   - The leader dies (alone or with an egress node): nothing moves until
//     a new leader holds the kube-system/ovnedge Lease (15 s at most);
//     the nodes keep what they have, and a lost egress node's IPs move
//     then. Nodes that hear neither the (dead) leader nor the API server
//     fence as above. The holds are in the leader's memory: a new leader
//     holds nothing, which is safe because it takes over after 15 s, far
//     beyond a host lease, except after a clean handover (the old leader
//     released the Lease) during a hold.
//   - The leader is cut off from a healthy egress node: it moves that
//     node's IPs as if it were dead (it cannot tell); the node, which
//     still sees the API server, follows the status (and, for a released
//     host-interface IP, acknowledges it).
//   - Forged heartbeats: with --egressip-heartbeat-key-file the
//     heartbeats are authenticated and replay-protected (egress/reach),
//     so no one but the leader renews a node's lease and no forged reply
//     keeps a dead node up.
//
// The L2 VIP election (lbsvc.VIPOwners) runs on every node; with fast
// failover each node heartbeats the others, and a node counts only
// those that are Ready and answer (a node that hears fewer than half of
// the others counts itself out rather than taking every VIP).
//
// Subpackages: egress/api/v1 (the API types and their conversion from
// unstructured objects), egress/reach (egress node reachability: the
// DISCARD probe and grpc.health.v1) and egress/hostnet (egress IPs on a
// node's non-OVN host interface: address, ip rules, routing table, SNAT).
package egress
