// Package metallb reads MetalLB's BGP peer objects (metallb.io/v1beta2
// BGPPeer and metallb.io/v1beta1 BFDProfile) as the peers of ovnedge's
// per-node BGP speaker (package bgp), so clusters that already describe
// their routers to MetalLB keep those objects when ovnedge announces the
// VIPs instead.
//
// [Peers] is a pure function: from a node, the BGPPeers and the
// BFDProfiles it returns the bgp.Peer values that node should run (a peer
// whose nodeSelectors match none of the node's labels is left out; no
// selectors selects every node, as in MetalLB) and an event for each
// object that cannot be used. A bad object refuses only itself: the other
// peers are kept.
//
// Validation follows MetalLB's (metallb/metallb v0.16,
// internal/config/config.go: peerFromCR, parseTimers, bfdProfileFromCR): a
// missing local or peer ASN, an invalid address, hold time under 3 s (0 is
// allowed), a keepalive above the hold time, ebgpMultiHop with an iBGP
// peer, duplicate node selectors, BFD values out of MetalLB's ranges. Deliberate differences, because the embedded
// GoBGP speaker has no equivalent or because ovnedge keeps one setting per
// node:
//   - dynamicASN, vrf, passwordSecret (the node agent is not given access
//     to Secrets) and a per-peer routerID other than the node's are refused
//     with an event;
//   - BFDProfile's echoMode, echoInterval, passiveMode and minimumTtl are
//     ignored (GoBGP's BFD is single-hop, asynchronous, active);
//   - disableMP is ignored: ovnedge runs one address family per session
//     (IPv4 routes to IPv4 peers, IPv6 routes to IPv6 peers);
//   - two objects for the same peer address on one node: the first by
//     namespace/name is used, the others get an event.
package metallb
