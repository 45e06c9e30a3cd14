// Package ipam allocates LoadBalancer addresses (status.loadBalancer.ingress)
// from pools, as Kube-OVN's subnet IPAM does for its LB Services (seed 004)
// and MetalLB's address pools do for seed 003.
//
// A [Pool] is one family's CIDR minus Kube-OVN excludeIps entries (a
// single IP or an inclusive range "A..B", [ParseExclude]) and minus the
// subnet's gateway; [NewSubnetPools] makes the one or two pools of a
// kubeovn.io/v1 Subnet. An [Allocator] gives each LoadBalancer Service one
// address per IP family, or validates its spec.loadBalancerIP; a conflict
// yields an [Event], never the address. Its bookkeeping is in memory and
// is rebuilt from the Services' statuses after a restart
// ([Allocator.Rebuild]), so no address is ever handed out twice. Nothing
// here does I/O: the caller writes the returned ingress into the Service
// status and records the events.
//
// The semantics are Kube-OVN's (pkg/ipam, pkg/util; their unit tests are
// ported in kubeovn_test.go):
//   - only FirstIP..LastIP is handed out: not the first address nor the
//     last one, in IPv6 too; both addresses of a /31 or /127, none of a
//     /32 or /128;
//   - excludeIps entries are refused as ValidateSubnet refuses them (upper
//     case, a CIDR, a backwards range, anything but an IP or A..B; the
//     reference's §4 lists CIDR entries, Kube-OVN refuses them);
//     entries of the other family are ignored, as a dual-stack Subnet
//     lists both;
//   - a random address is the lowest free one; a static one may be
//     excluded (excludeIps keep addresses from random allocation only) but
//     not the gateway;
//   - a Service keeps an address that became excluded while it held it,
//     and loses one outside a new CIDR ([Allocator.SetPools]);
//   - dual-stack is all or nothing: when one family has no free address
//     the Service gets an event and keeps exactly what it held.
//
// Deliberate deviations: Kube-OVN remembers released addresses and hands
// them out again only when no never-used one is left; ovnedge's daemon
// rebuilds the allocator from the statuses on every pass, so it has no
// such history and always hands out the lowest free address, as Kube-OVN
// does after a restart. A Service gets the families of its
// spec.ipFamilies that its pools have (Kube-OVN's lb-svc pod gets every
// family of its Subnet, although the pod can only forward to a ClusterIP
// of the Service's families). ExpandExcludeIPs silently drops an entry
// ValidateSubnet refuses; here such a Subnet is refused as a whole.
package ipam
