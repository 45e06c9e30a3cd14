// Package ipam allocates LoadBalancer addresses (status.loadBalancer.ingress)
// from pools, as Kube-OVN's subnet IPAM does for its LoadBalancer Services
// and MetalLB's address pools do for LoadBalancer VIPs on a Kube-OVN
// underlay subnet.
//
// A [Pool] is one family's CIDR minus Kube-OVN excludeIps entries (a single
// IP or an inclusive range "A..B", [ParseExclude]) and minus the subnet's
// gateway; [NewSubnetPools] makes the one or two pools of a kubeovn.io/v1
// Subnet. An [Allocator] gives each LoadBalancer Service one address per IP
// family, or validates its spec.loadBalancerIP; a conflict yields an
// [Event], never the address. Its bookkeeping is in memory and is rebuilt
// from the Services' statuses after a restart ([Allocator.Rebuild]), so no
// address is handed out twice. Nothing here does I/O.
//
// The semantics are Kube-OVN's (kubeovn/kube-ovn at 1533681, pkg/ipam and
// ValidateSubnet in pkg/util/validator.go; their unit tests are ported in
// kubeovn_test.go): only FirstIP..LastIP is handed out (not a subnet's first
// or last address, in IPv6 too; both of a /31 or /127, none of a /32 or
// /128); excludeIps entries are refused as ValidateSubnet refuses them (a
// CIDR among them), and entries of the other family ignored; a random
// address is the lowest free one; a static one may be excluded but not the
// gateway; a Service keeps an address that became excluded, and loses one
// outside a new CIDR ([Allocator.SetPools]); dual-stack is all or nothing.
//
// Deliberate differences from Kube-OVN: no history of released addresses
// (always the lowest free one, as Kube-OVN after a restart), a Service gets
// only the families of its spec.ipFamilies, and a Subnet with an entry
// ValidateSubnet refuses is refused as a whole (Kube-OVN's ExpandExcludeIPs,
// pkg/util/net.go, drops the entry); see docs/deviations.md.
package ipam
