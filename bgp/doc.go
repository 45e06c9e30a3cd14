// Package bgp announces a node's host routes (/32 and /128: Service VIPs,
// egress IPs) to its BGP peers from an embedded GoBGP speaker
// (github.com/osrg/gobgp/v4), so an upstream router spreads traffic over
// every node that can serve an address (ECMP) and stops sending it to a
// node as soon as the route is withdrawn.
//
// A [Speaker] is configured once ([Config]: local AS, router ID, peers,
// graceful restart, address pools) and then told the complete set of
// prefixes it should announce with [Speaker.Announce]. The speaker diffs
// the set against what it announced before and sends only the changes:
// announcing or withdrawing a prefix never touches a session, so a Service
// change never resets a peer. Routes carry next-hop self (the address the
// session runs from) and, per [Pool], communities and a local preference
// (which only iBGP peers see). IPv4 prefixes go to IPv4 peers and IPv6
// prefixes to IPv6 peers.
//
// Each [Peer] may run BFD (single-hop, asynchronous, GoBGP's own: a dead
// peer is detected in TxInterval x Multiplier) and negotiate graceful
// restart: [Speaker.Close] with graceful=true drops the sessions without a
// notification, so peers keep the routes, marked stale, for the restart
// time; a speaker started with [Config.Restarting] tells its peers it has
// come back with forwarding preserved, and they replace the stale routes
// with the ones it sends before its End-of-RIB.
//
// A [Peer] may also set its own local AS, keepalive, BFD receive
// interval and opt out of graceful restart: package bgp/metallb builds
// such peers from MetalLB's BGPPeer and BFDProfile objects.
//
// Startup: GoBGP v4.8.0 makes its first active connection attempt
// 1.5-2 s after a peer is added (osrg/gobgp, pkg/server/fsm.go,
// minConnectRetryInterval; not configurable). A first start reaches a
// router sooner only when the router dials ([Config].ListenPort); with
// graceful restart a restart does not depend on it.
//
// [Speaker.Peers] and [Speaker.Stats] report sessions, announced prefixes
// and updates for export; [Config.OnPeerState] is called on every session
// state change. The package imports no Kubernetes types.
package bgp
