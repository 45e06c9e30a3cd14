// Package hostnet puts egress IPs on a node's non-OVN host interface, as
// OVN-Kubernetes' node does for an egress IP in a secondary host network
// (ovn-kubernetes/ovn-kubernetes at 8871cd9,
// go-controller/pkg/node/controllers/egressip/egressip.go): the pods'
// traffic is steered to that interface by source-based policy routing and
// leaves it SNATed to the egress IP.
//
// A [State] lists [Assignment]s: a link, an egress IP and the pod IPs that
// use it. [Manager.Converge] makes the node match a State, idempotently:
//
//   - the egress IP on the link, with the prefix length of the link's
//     network that contains it (a secondary address: the node's own
//     traffic keeps its primary source), announced by an [Announcer]
//     (package arp) once added;
//   - `ip rule` priority [RulePriority] (6000) `from <pod IP> lookup
//     <table>`, table [TableBase] (1000) + the link's ifindex, holding
//     `default dev <link>`, the link's on-link routes and a throw route per
//     egress IP that marks it as the Manager's ([RouteProtocol]);
//   - one SNAT per pod through an [SNAT] backend: [NFTables] (table
//     [NFTablesTable], programmed through nftables' netlink API, so no
//     binary is needed) or [IPTables] (chain [ChainName] in table nat,
//     `-s <pod>/32 -o <link> -j SNAT --to-source <egress IP>`, which runs
//     the iptables commands).
//
// What the Manager owns is found on the host by those markers, never from
// memory, so a restarted process converges and cleans up as well.
// Additions go SNAT first and ip rules last, removals the other way;
// then the connection tracking entries of the pods whose SNAT rule was
// added are deleted (vishvananda/netlink's conntrack API): a packet that
// came before the rule (the leader's reroute to this node is written
// apart from this node's rules) made an entry without NAT that every
// later packet of its flow would follow.
// A [Guard] keeps a node's leak guard ([GuardSpec]): a packet from the
// cluster's pod subnets leaving a link of its secondary host networks
// unSNATed is dropped (table [GuardTable]), so the pods a leader reroutes
// to the node before its SNAT rule is added never reach the network with
// their own addresses. OVN-Kubernetes has no such guard (a deviation
// beyond the peer).
// Before use each assignment is checked (the link exists and is up, has a
// global address in a network containing the egress IP, forwarding is on);
// a failing one is a [RequirementError] with a [Reason] and nothing of it
// is installed, while the valid ones still converge. [Manager.LinkOf] finds
// the link of a host network.
//
// Everything works on the network namespace named by [Config].Netns (""
// for the caller's own): netlink calls use a handle opened there, and the
// iptables commands and /proc/sys reads run on a locked OS thread that has
// entered it, so no `ip netns exec` is needed.
//
// Dependencies: vishvananda/netlink and netns, google/nftables,
// coreos/go-iptables; no Kubernetes types and no other ovnedge package but
// egress/hostspec.
package hostnet
