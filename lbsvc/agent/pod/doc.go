// Package pod is the in-pod agent of Kube-OVN's LoadBalancer Service
// mode, `ovnedge lbsvc-agent`, in Go instead of Kube-OVN's exec'd
// lb-svc.sh (kubeovn/kube-ovn at 1533681,
// dist/images/vpcnatgateway/lb-svc.sh). Running in the
// lb-svc-<service> pod, whose
// second interface net1 sits on the external (macvlan) network, [Apply]
// makes the pod forward LBIP:port to ClusterIP:port:
//
//   - net1 up with the LoadBalancer address (LBIP/subnet length);
//   - `ip rule iif net1 lookup 100` and `ip rule iif eth0 lookup 100`;
//   - table 100: the attachment subnet on net1 (scope link, so clients on
//     it are answered directly), default via the subnet gateway on net1,
//     and the ClusterIP via eth0's gateway (the main table's default route
//     unless given);
//   - nftables nat, through netlink (github.com/google/nftables; no nft
//     or iptables binary, so the agent runs from an image holding only
//     ovnedge): table [Table] (family ip, ip6 for an IPv6 address), chain
//     [ChainDNAT] (hook prerouting, priority dstnat) with per service port
//     `ip daddr LBIP <proto> dport <port> dnat to ClusterIP:port`, chain
//     [ChainSNAT] (hook postrouting, priority srcnat) with `ip daddr
//     ClusterIP masquerade`, each rule named by its comment; rules of
//     ports no longer configured are removed (Kube-OVN's lb-svc.sh uses
//     the same matches as iptables rules);
//   - IP forwarding on;
//   - an ARP check of the gateway on net1: a bounded number of attempts,
//     each with a timeout, and a [Status] that says what answered (or
//     not). A silent gateway never makes Apply loop: the rules stay
//     programmed and the status says so;
//   - gratuitous ARPs for a newly added LB IP (three, 1.1 s apart), so
//     that the link's hosts follow a pod created again, with a new MAC,
//     at once (Kube-OVN's vpc-nat-gateway image does the same on start).
//
// Every step is idempotent: a second Apply with the same [Config] changes
// nothing and reports no added or removed rule. [Run] applies, then
// re-applies every Resync until its context ends, so rules removed behind
// its back come back; when the pod's address changes (its annotations
// file is read again on each pass) the old address and its subnet route
// are removed. A re-created pod (the Deployment's Recreate strategy, a
// node failure) is initialised from scratch by the agent that is its
// command: nothing is exec'd into it and nothing waits for a controller.
// Its configuration is package agent's Config.
//
// The agent acts on the network namespace of the calling thread and
// needs CAP_NET_ADMIN (and root, for /proc/sys/net).
package pod
