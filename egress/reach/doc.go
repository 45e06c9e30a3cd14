// Package reach tells the EgressIP leader which egress nodes are reachable
// (seed 002, reference §2.6), the way OVN-Kubernetes does, so its node
// and leader sides interoperate with ours:
//
//   - [ProbeDiscard] connects to TCP port 9 (DISCARD) of a node's
//     management IP: a connection or a refusal (RST) means a host
//     answered, so the node is up; a timeout or any other error
//     (EHOSTUNREACH, ENETUNREACH, EINVAL from a blackhole route) means
//     down.
//   - [NewServer] is the node side of the gRPC variant: the standard
//     grpc.health.v1 service reporting [ServiceName] SERVING, with TLS
//     when certificate files are configured ([TLSFiles]).
//   - [Client] checks that service; when a check fails on an established
//     session it reconnects and checks once more within the same timeout,
//     so a session that merely bounced never marks the node down.
//   - [Checker] probes every target each interval, all at once, each
//     within the total timeout (0 = every node is reachable, no probe), and
//     reports changes through a callback: a node that stops answering is
//     reported down within one interval plus the timeout.
//   - [NodeServer] ([Serve]) is what every node instance runs: the health
//     service on <management IP>:<egressip-node-healthcheck-port>, with the
//     node's TLS files, and the heartbeat [Responder]; its sockets are
//     bound with IP_FREEBIND, so they outlive ovn-k8s-mp0 disappearing
//     with ovs-vswitchd. Its [StatusFunc] turns both NOT_SERVING while the
//     node cannot carry egress traffic (the daemon's: its uplink is down).
//   - [Heartbeat] is ovnedge's opt-in fast detector: a UDP heartbeat to
//     every target each interval (100 ms), a target down after a number
//     of missed answers (3), so a dead node is known in 300-400 ms; it
//     runs beside the Checker, never instead of it: a node the heartbeat
//     hears again is checked at once ([Checker.Heard]), and a check that
//     began before and fails after is stale, not a loss (it was sent
//     while the node was down). With a shared key
//     ([HeartbeatConfig].Key, [ServerConfig].HeartbeatKey,
//     [ReadHeartbeatKey]) every datagram carries an HMAC-SHA256 covering
//     the responder's address, requests are refused when replayed (per
//     monitor session, increasing seq) or outside [HeartbeatWindow] of
//     the node's clock, and replies count only for the monitor's own
//     session and last requests: a forged or replayed request renews no
//     host lease, a forged or replayed reply keeps no dead node up.
//     [HeartbeatConfig].Renew lets the leader stop renewing the lease of
//     a node it no longer counts on while it keeps probing it.
//   - [NewConfig] makes a Checker's Config from the settings as
//     OVN-Kubernetes names them: egressip-reachability-total-timeout
//     (seconds, default 1, 0 = no probe), egressip-node-healthcheck-port
//     (0 = DISCARD) and the check interval (default 5 s); [DefaultConfig]
//     is the default.
//
// Everything here opens real sockets; the tests run against real
// listeners on loopback and in network namespaces.
package reach
