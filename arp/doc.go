// Package arp answers ARP requests and IPv6 neighbour solicitations for the
// addresses a node owns (VIPs, underlay VIPs) and announces addresses with
// gratuitous ARP and unsolicited neighbour advertisements. Responder and
// announcer are kept apart, as in MetalLB's layer 2 code (metallb/metallb
// v0.16, internal/layer2). Which node owns a VIP is decided elsewhere
// (lbsvc.Elect).
//
// A [Responder] answers on one interface (br-ex, or any Ethernet link, with
// or without an IPv4 address of its own) for the addresses given to
// [Responder.SetAddresses]; the set changes at run time without reopening a
// socket, a released address is not answered from the next request on, and
// a taken-over address is announced at once and then every
// [Config.Interval] for [Config.Duration] (default 1.1 s for 5 s).
// [Responder.Run] survives the interface vanishing and reattaches when it
// comes back; [Responder.Stats] returns per-address counters.
//
//	r, err := arp.New(arp.Config{Interface: "br-ex"})
//	go r.Run(ctx)
//	err = r.SetAddresses([]netip.Addr{vip})
//
// An [Announcer] announces addresses the host's own kernel answers for (an
// egress IP on a host interface) without answering anything itself. The
// package imports no Kubernetes types; host I/O is Linux-only (elsewhere it
// returns errors.ErrUnsupported).
package arp
