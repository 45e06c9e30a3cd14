// Package dataplane applies a node's desired state (desired.NodeState) to
// the node's dataplanes, one Writer each: the external bridge's flows and
// a provider bridge's (Flows, over an ovsflow.Applier), the egress IPs on
// host interfaces and the leak guard of the node's secondary host
// networks (HostEgress, over egress/hostnet), the VIPs answered on
// the link (L2, over arp.Responder) and the routes announced to BGP peers
// (BGP, over bgp.Speaker). Each writer owns what it last wrote and its
// diff (in the package it wraps), opens its connections on first use and
// keeps running what it started (a flow monitor, a responder) until
// Close; Close leaves the dataplane as written.
//
// A node agent computes a NodeState per change and hands it to every
// writer in turn:
//
//	ns, err := desired.ComputeNode(snapshot, params, "node1")
//	for _, w := range writers {
//		events, err := w.Write(ctx, snapshot, &ns)
//		...
//	}
//
// ovnedge's daemon does exactly that; a CNI embedding ovnedge can pick the
// writers it wants.
package dataplane
