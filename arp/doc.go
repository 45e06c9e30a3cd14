// Package arp answers ARP requests and IPv6 neighbour solicitations for the
// VIPs and egress IPs a node owns, announces them with gratuitous ARP and
// unsolicited neighbour advertisements on takeover, and elects the one node
// that answers for an address (several replies to one request break
// conntrack-tracked flows). Responder and announcer are kept apart, as in
// MetalLB's layer2 package.
//
// A [Responder] answers on one interface (br-ex, or any Ethernet link,
// with or without an IPv4 address of its own) for the set of addresses
// given to [Responder.SetAddresses]; the set changes at run time without
// reopening a socket, a released address is not answered from the next
// request on, and a taken-over address is announced at once and then
// every [Config.Interval] for [Config.Duration] (default 1.1 s for 5 s):
// a gratuitous ARP request and reply (sender = target = the address,
// broadcast) for IPv4, an unsolicited advertisement with Override to all
// nodes for IPv6. [Responder.Run] survives the interface vanishing and
// reattaches when it comes back. [Responder.Stats] returns the counters of
// every address (requests seen, replies sent, gratuitous sent) for export.
//
// [Elect] picks the owner of an address among healthy candidates, the
// first by sha256(node + "#" + address), so every node agrees from the same
// inputs. [Owned] applies it to a node's VIPs (with the nodes eligible for
// externalTrafficPolicy=Local), and a [Controller] keeps a node's
// responders answering for exactly what it owns, following a [Liveness]
// source: node readiness, leases or a reachability probe, behind two
// methods. The package imports no Kubernetes types.
package arp
