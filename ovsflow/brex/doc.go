// Package brex builds OVN-Kubernetes' shared-gateway program for a node's
// external bridge (br-ex or breth0) as ovsflow flows, each a pure function
// of typed inputs:
//
//   - [BaseFlows]: the common flows: traffic leaving from LOCAL and the
//     patch port committed to conntrack zone 64000 ([DefaultZone]) with
//     ct_mark 2 and 1, the way back through table 1 by that mark, non-IP to
//     and from the bridge MAC, and NORMAL;
//   - [EgressFlows]: the EgressIP flows at priorities 109, 105, 104 and 100;
//   - [ServiceFlows]: a Service's flows at priority 110: NodePorts and
//     ExternalIP/LoadBalancer VIPs from the uplink to the patch port and
//     back, the VIPs' ARP/NDP bypass and ICMP "fragmentation needed", and for
//     externalTrafficPolicy=Local with a host-network endpoint on the node
//     the DNAT to the host through zone 64003 and tables 6 and 7;
//   - [ARPBypass]: the ARP requests and neighbour solicitations for a
//     Service's VIPs sent from the uplink to LOCAL, never to OVN (several
//     nodes answering one request would break conntrack-tracked flows);
//   - [EgressFence]: drops the ARP replies and neighbour advertisements a
//     node's gateway router would still send for egress IPs it lost.
//
// Each owner's flows go into an ovsflow.Program under its owner name:
//
//	flows, err := brex.ARPBypass(brex.Bypass{Uplink: "eth0"}, svc)
//	err = program.Set(svc.Owner(), flows)
//
// Every flow OVN-Kubernetes defines carries its cookie: [BaseCookie]
// (0xdeff105) on the base and egress flows, its svcToCookie hash on a
// Service's ([PortCookie], [ServiceCookie]), [ETPLocalCookie] on tables 6
// and 7. Flows only ovnedge defines carry [CookieMark] in their top 16
// bits ([FenceCookie], and [EgressCookie] on the egress flows beside
// ovnkube-node's gateway); [OwnedCookie] knows them.
//
// [Owns] says which flows an Applier started anew may delete when its
// program lacks them (the flows of Services that went away while it was
// not running). With the gateway flows ovnedge owns the bridge's gateway,
// as ovnkube-node owns a bridge it programs: the flows of its shape
// (table 0 at priority 110, tables 6 and 7) and its cookies. Beside
// ovnkube-node's gateway ovnedge installs no flow ovnkube-node installs
// (no Service flow, no ARP bypass, no flow with one of its cookies) and
// owns only its own marked cookies, so neither controller ever changes
// the other's flows.
//
// The flows reproduce ovn-kubernetes/ovn-kubernetes at 8871cd9
// (go-controller/pkg/node/bridgeconfig/bridgeflows.go, gateway_shared_intf.go)
// and are compared with the expected flows of its
// gateway_localnet_linux_test.go; the EgressIP flows are the layout of its
// docs/features/cluster-egress-controls/egress-ip.md before commit
// 28c67eac6. docs/deviations.md lists the differences and what is left
// out. Package brextest holds an example node's inputs and golden programs.
package brex
