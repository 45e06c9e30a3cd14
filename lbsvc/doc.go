// Package lbsvc turns Services and EndpointSlices into OVN load balancers
// (ClusterIP, ExternalIPs, LoadBalancer ingress, externalTrafficPolicy),
// the br-ex ARP/NDP bypass of every VIP, LoadBalancer IP allocation from
// pools, Kube-OVN's LB Service mode and the MetalLB underlay mode. Like
// package egress it computes desired state only, as pure functions.
//
// Status: being built under issue 6; nothing is exported yet.
package lbsvc
