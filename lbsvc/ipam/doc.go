// Package ipam allocates LoadBalancer addresses (status.loadBalancer.ingress)
// from pools, as Kube-OVN's subnet IPAM does for its LB Services (seed 004)
// and MetalLB's address pools do for seed 003.
//
// A [Pool] is a CIDR minus Kube-OVN excludeIps entries, each a single IP,
// an inclusive range "A..B" or a CIDR, clipped to the pool's CIDR
// ([ParseExclude]); IPv4 network and broadcast addresses are never handed
// out. An [Allocator] gives each LoadBalancer Service one address per IP
// family, or validates its spec.loadBalancerIP (inside a pool, not
// excluded, not another Service's): a conflict yields an [Event], never the
// address. Its bookkeeping is in memory and is rebuilt from the Services'
// statuses after a restart ([Allocator.Rebuild]), so no address is ever
// handed out twice. Nothing here does I/O: the caller writes the returned
// ingress into the Service status and records the events.
package ipam
