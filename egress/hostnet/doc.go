// Package hostnet puts egress IPs on a node's non-OVN host interface, the
// second half of seed 002 (reference §2.7): the pods' traffic is steered
// to that interface by source-based policy routing and leaves it SNATed to
// the egress IP.
//
// A [State] lists [Assignment]s: a link, an egress IP and the pod IPs that
// use it. [Manager.Converge] makes the node match a State, idempotently
// (converging twice changes nothing the second time, [Result.Changes]
// counts):
//
//   - the egress IP is added to the link with the prefix length of the
//     link's network that contains it (as upstream does): the kernel then
//     keeps it as a secondary address, so the node's own traffic keeps the
//     primary address as source and no extra prefix route appears; the
//     [Announcer] (the arp package, wired by the daemon) is called after
//     the address is added;
//   - `ip rule` priority [RulePriority] (6000) `from <pod IP> lookup
//     <table>`, table = [TableBase] (1000) + the link's ifindex;
//   - the table holds `default dev <link>`, the link's on-link routes
//     copied from main, and a throw route to each egress IP hosted on the
//     link, which records the address as the Manager's (never used for
//     forwarding: the local table, looked up first, delivers traffic to
//     the egress IP); all these routes carry [RouteProtocol];
//   - one SNAT rule per pod through an [SNAT] backend: [NFTables] (table
//     [NFTablesTable] with maps `<pod IP> . <ifname> : <egress IP>` and a
//     nat postrouting chain, IPv4 and IPv6), programmed through nftables'
//     netlink API, so it needs no binary and works from the ovnedge image
//     (which holds nothing but the ovnedge binary); or [IPTables] (chain
//     [ChainName] in table nat, jumped to from POSTROUTING, `-s <pod>/32 -o
//     <link> -j SNAT --to-source <egress IP>`, ip6tables for IPv6, as seed
//     002 shows it), which runs the iptables, ip6tables and
//     iptables-restore commands and so needs an image that adds them.
//
// What the Manager owns is found on the host by those markers (rule
// priority, route protocol in tables above TableBase, the backend's chain
// or table), never from memory, so a restarted process converges and
// cleans up as well. Additions are made SNAT first and ip rules last, so a
// pod is steered to a link only once its SNAT exists there; removals go
// the other way (ip rules first, the address before its marker route).
//
// [Manager.LinkOf] finds the link of a host network (egress computes the
// network of each egress IP, egress.HostAssignment; the daemon turns it
// into an Assignment's link with it).
//
// Before use, each assignment is checked against the requirements of seed
// 002: the link exists, is up (administratively and operationally), has
// an address of global scope in a network that contains the egress IP,
// and forwarding is on for it (net.ipv4.conf.<link>.forwarding or its
// IPv6 twin). A failing assignment becomes a [RequirementError] with a
// [Reason] the daemon turns into a status event; nothing of it is
// installed (what an earlier converge installed for it is removed), and
// the valid assignments still converge: Converge returns the rejections
// in [Result.Rejected] and joined in its error. An egress IP or a pod IP
// used by two assignments is a conflict ([ReasonConflict]); the first in
// (link, egress IP) order wins. The link must stay while assigned; if it
// goes, the next converge rejects the assignment and removes its rules.
//
// # Network namespaces
//
// Everything works on the network namespace named by a path
// ([Config.Netns], the backends' constructors), so tests point it at a
// namespace of their own from the test process. Netlink calls go through a
// netlink.Handle opened in that namespace, and the nftables backend's
// netlink sockets are opened there (google/nftables' WithNetNSFd). The
// iptables commands that go-iptables runs, and the reads of
// /proc/sys/net/.../forwarding, happen on an OS thread locked for the
// call that has entered the namespace (netns.Set) and returns to the
// original one afterwards: a child process inherits its parent thread's
// namespace, and /proc/sys/net resolves to the reader's. No `ip netns exec`
// wrapper is needed, in production or in tests, and the daemon passes ""
// for its own namespace, where no thread switching happens at all.
//
// The nftables backend programs the ruleset the nft command made for it
// before (the test compares `nft list table`, its netlink bytecode and its
// JSON with what nft makes from the same script), and takes over a table
// nft made. One deliberate difference: the table has no comment
// (google/nftables v0.3.0 cannot set a table's user data; nothing reads
// it).
//
// Dependencies: vishvananda/netlink and netns, google/nftables,
// coreos/go-iptables; no Kubernetes types and no other ovnedge package.
package hostnet
