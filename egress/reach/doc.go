// Package reach tells the EgressIP leader which egress nodes are reachable,
// the way OVN-Kubernetes does (ovn-kubernetes/ovn-kubernetes at 8871cd9,
// go-controller/pkg/ovn/healthcheck/egressip_healthcheck.go), so its node
// and leader sides interoperate with OVN-Kubernetes':
//
//   - [ProbeDiscard] connects to TCP port 9 (DISCARD) of a node's
//     management IP: a connection or a refusal means the node is up; a
//     timeout or any other error means down.
//   - [NewServer] is the node side of the gRPC variant: the standard
//     grpc.health.v1 service reporting [ServiceName], with TLS when
//     certificate files are configured ([TLSFiles]); [Client] checks it,
//     and a check that fails on an established session reconnects and
//     checks once more within the same timeout.
//   - [Checker] probes every target each interval, all at once, each within
//     the total timeout, and reports changes through a callback; [NewConfig]
//     makes its Config from the settings as OVN-Kubernetes names them
//     (egressip-reachability-total-timeout, egressip-node-healthcheck-port).
//   - [NodeServer] ([Serve]) is what every node instance runs: the health
//     service on its management IP and the heartbeat [Responder], on sockets
//     bound with IP_FREEBIND so they outlive ovn-k8s-mp0; its [StatusFunc]
//     turns both NOT_SERVING while the node cannot carry egress traffic.
//   - [Heartbeat] is ovnedge's opt-in fast detector beside the Checker: a
//     UDP heartbeat to every target each interval (100 ms), a target down
//     after a number of misses (3). With a shared key every datagram carries
//     an HMAC-SHA256 and replayed requests are refused, so a forged request
//     renews no host lease and a forged reply keeps no dead node up. Among
//     nodes ([HeartbeatConfig.AskHeard]) each request also asks whether the
//     target hears the requester, so a node knows when a peer may count it
//     down ([Heartbeat.Hearing]) and stops answering for its L2 VIPs first.
//   - [Combined] is the leader's verdict from its checks; while every egress
//     node is unreachable at once it calls every one reachable, so that no
//     egress IP moves to no node (a deviation from OVN-Kubernetes).
//   - [Lease] is a node's host lease: how long it may keep its egress IPs on
//     host interfaces without hearing the leader or the API server.
//
// Everything here opens real sockets; the tests run against real listeners
// on loopback and in network namespaces.
package reach
