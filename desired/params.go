package desired

import (
	"errors"
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// Event reasons of objects the desired state cannot use.
const (
	ReasonInvalidNode   = "InvalidNodeAnnotations"
	ReasonInvalidObject = "InvalidObject"
)

// The values of Params.Underlay (ovnedge's --underlay-lb-mode).
const (
	UnderlayOff        = "off"
	UnderlayMetalLB    = "metallb"
	UnderlayStandalone = "standalone"
)

// ErrUnknownNode is returned by ComputeNode for a node the snapshot does
// not hold.
var ErrUnknownNode = errors.New("node not found")

// Params are the settings the desired state depends on besides the
// Kubernetes objects.
type Params struct {
	Egress egress.Cluster
	LB     lbsvc.Options
	// Pools are the LoadBalancer IP pools; none leaves every Service's
	// ingress as it is.
	Pools []*ipam.Pool
	// LBClass is the spec.loadBalancerClass whose Services the pools
	// serve; empty: Services without a class (see lbsvc.ClassAssigned).
	LBClass string
	// Bridge, Uplink and Patch name the external bridge and its NIC and
	// patch ports; Zone is its conntrack zone.
	Bridge, Uplink, Patch string
	Zone                  uint16
	EnableEgressIP        bool
	// EnableEgressService runs EgressServices (--enable-egress-service):
	// hosts, labels and rows by package egress/egresssvc; the
	// cluster-wide 102 policies are written with them, as with EgressIPs.
	EnableEgressService bool
	// GatewayFlows programs the shared gateway's base and Service flows
	// (else only the Services' ARP/NDP bypass); BridgeMAC is the bridge's
	// MAC for them, nil to take it from the node's
	// k8s.ovn.org/l3-gateway-config annotation.
	GatewayFlows bool
	BridgeMAC    net.HardwareAddr
	// LBSvc runs Kube-OVN's LoadBalancer Services (--enable-lb-svc):
	// Services kubeovn.Selected get their address from their provider's
	// Subnet (not from Pools) and an lb-svc Deployment; LBSvcImage is the
	// Deployments' image ("" takes the ovn-vpc-nat-config ConfigMap's).
	LBSvc      bool
	LBSvcImage string
	// LBCache, when not nil, keeps each Service's load balancers between
	// ComputeCluster calls over an informer's objects, so only the
	// Services that changed are computed again (see lbsvc.Cache).
	LBCache *lbsvc.Cache
	// GatewayCache, when not nil, keeps each Service's shared gateway
	// flows between ComputeNode calls over an informer's objects (see
	// lbsvc.GatewayCache).
	GatewayCache *lbsvc.GatewayCache
	// Elections, when not nil, keeps the L2 owners of the VIPs between
	// ComputeNode calls, elected again only when their candidates change
	// (see lbsvc.Elections).
	Elections *lbsvc.Elections
	// Alive, when not nil, says whether a node is alive beside its Ready
	// condition (the fast failover heartbeat): the L2 VIP election only
	// counts nodes that are both.
	Alive func(node string) bool
	// L2Announce elects the VIPs the node answers ARP/NDP for
	// (NodeState.Announce; --enable-l2-announce). Left out when nothing
	// announces: electing every VIP's owner among every healthy node is
	// the costliest part of a node's pass at scale (500 VIPs among 2,000
	// nodes is a million hashes).
	L2Announce bool
	// BGP computes the routes the node announces (NodeState.Routes);
	// BGPEgressIPs adds the egress IPs assigned to it.
	BGP, BGPEgressIPs bool
	// HostGuard puts the leak guard on the node's secondary host
	// networks (NodeState.HostGuard; --egressip-host-guard).
	HostGuard bool
	// Hold, when not nil, holds back the moves of egress IPs on host
	// interfaces until their old node has let them go (the leader's,
	// with the nodes' --egressip-host-lease).
	Hold *egress.HostHold
	// Underlay is --underlay-lb-mode (Kube-OVN underlay subnets with enableExternalLBAddress): with UnderlayMetalLB or
	// UnderlayStandalone the snapshot's Subnets with
	// enableExternalLBAddress are underlay subnets (LB.Underlay), whose
	// VIPs are served on their switches and steered into OVN on the
	// provider bridge; UnderlayStandalone also allocates them from the
	// Subnets' excludeIps and announces them (NodeState.UnderlayAnnounce).
	Underlay string
	// ProviderNIC and ProviderVLAN are the provider bridge's NIC port and
	// VLAN (0: any) of the steering flows; no NIC, no flows.
	// ProviderPorts, when not nil, says whether the provider bridge has a
	// port: steering flows through a missing patch port are left out.
	ProviderNIC   string
	ProviderVLAN  uint16
	ProviderPorts func(name string) bool
	// LastGood is the node's own last good parse of its k8s.ovn.org
	// annotations (NodeState.Self of the previous ComputeNode): when they
	// break, ComputeNode keeps computing the node's egress and gateway
	// flows from it, as ComputeCluster does with its prev.
	LastGood *ovnknode.Node
}

// UnderlayOn reports whether the underlay mode is on.
func (p Params) UnderlayOn() bool { return p.Underlay != "" && p.Underlay != UnderlayOff }

// ReasonInvalidSubnet is the Warning event of a Subnet that cannot serve
// as an underlay subnet.
const ReasonInvalidSubnet = "InvalidSubnet"

// withUnderlay returns p with LB.Underlay (and LB.UnderlayNodes) from the
// snapshot's Subnets when the underlay mode is on; a Subnet that does not
// parse is a Warning event and is left out.
func withUnderlay(p Params, s Snapshot) (Params, []event.Event) {
	if !p.UnderlayOn() {
		return p, nil
	}
	var events []event.Event
	p.LB.Underlay = nil
	for _, sub := range s.Subnets {
		u, err := sub.Underlay()
		if err != nil {
			events = append(events, event.Warningf(subnetRef(sub), ReasonInvalidSubnet, "not an underlay subnet: %v", err))
			continue
		}
		p.LB.Underlay = append(p.LB.Underlay, u...)
	}
	p.LB.UnderlayNodes = make([]lbsvc.Node, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		p.LB.UnderlayNodes = append(p.LB.UnderlayNodes, lbNode(n))
	}
	return p, events
}

func subnetRef(sub *kubeovn.Subnet) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "kubeovn.io/v1", Kind: "Subnet", Name: sub.Name, UID: sub.UID}
}

// underlayPools are the pools of standalone mode: each underlay Subnet's
// external LB addresses (its excludeIps), named after it, after pools. A
// Subnet whose pools overlap another pool is a Warning event and left
// out.
func underlayPools(pools []*ipam.Pool, subnets []*kubeovn.Subnet) ([]*ipam.Pool, []event.Event) {
	out := slices.Clone(pools)
	var events []event.Event
	for _, sub := range subnets {
		ext, err := sub.ExternalLBPools()
		if err == nil && len(ext) > 0 {
			_, err = ipam.NewAllocator(append(slices.Clone(out), ext...)...)
		}
		if err != nil {
			events = append(events, event.Warningf(subnetRef(sub), ReasonInvalidSubnet, "no LoadBalancer addresses from this subnet: %v", err))
			continue
		}
		out = append(out, ext...)
	}
	return out, events
}

// underlayPoolOf restricts a Service annotated
// ovn.kubernetes.io/service_external_ip_from_subnet to that Subnet's
// pools.
func underlayPoolOf(svc *corev1.Service) []string {
	if name := svc.Annotations[lbsvc.AnnotationExternalIPFromSubnet]; name != "" {
		return []string{name}
	}
	return nil
}
