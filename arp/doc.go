// Package arp answers ARP requests and IPv6 neighbour solicitations for the
// VIPs and egress IPs a node owns, announces them with gratuitous ARP and
// unsolicited neighbour advertisements on takeover, and elects the one node
// that answers for an address (several replies to one request break
// conntrack-tracked flows). Responder and announcer are kept apart, as in
// MetalLB's layer2 package.
//
// Status: being built under issue 4; nothing is exported yet.
package arp
