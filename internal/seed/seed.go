// Package seed holds the seed documents' example node as typed ovsflow
// inputs: node ovn-worker2 of seed 002 (bridge breth0, node subnet
// 10.244.2.0/24 in cluster subnet 10.244.0.0/16, node IP 172.18.0.3) and
// the two services of the golden files. The golden tests, the
// real-OVS tests, the benchmarks and `make demo` all build from it.
package seed

import (
	"net"
	"net/netip"

	"github.com/ovnedge/ovnedge/ovsflow"
)

// Bridge, node and port names of the seed node.
const (
	Bridge       = "breth0"
	Node         = "ovn-worker2"
	Uplink       = "eth0"
	Patch        = "patch-breth0_ovn-worker2-to-br-int"
	UplinkOFPort = 1
	PatchOFPort  = 2
)

// Ports are the seed node's ofports.
var Ports = ovsflow.PortMap{Uplink: UplinkOFPort, Patch: PatchOFPort}

// BridgeMAC is the MAC address of the seed node's breth0.
var BridgeMAC = net.HardwareAddr{0x02, 0x42, 0xac, 0x12, 0x00, 0x03}

// Egress is the seed node's egress configuration.
func Egress() ovsflow.Egress {
	return ovsflow.Egress{
		Uplink:         Uplink,
		Patch:          Patch,
		NodeSubnets:    []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")},
		ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		NodeIPs:        []netip.Addr{netip.MustParseAddr("172.18.0.3")},
	}
}

// Base is the seed node's base configuration.
func Base() ovsflow.Base {
	return ovsflow.Base{Uplink: Uplink, Patch: Patch, BridgeMAC: BridgeMAC, IPv4: true}
}

// Services are the two services of the ARP bypass goldens: one with two
// external IPs on port 80, one LoadBalancer with ingress 172.18.0.60 on
// ports 80 and 443.
func Services() []ovsflow.Service {
	return []ovsflow.Service{
		{Namespace: "default", Name: "web-external", Ports: []int32{80},
			VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.50"), netip.MustParseAddr("2001:db8::50")}},
		{Namespace: "default", Name: "web-lb", Ports: []int32{80, 443},
			VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.60")}},
	}
}

// Gateway is the seed node's shared gateway configuration for its
// Service flows.
func Gateway() ovsflow.Gateway {
	return ovsflow.Gateway{Base: Base(), NodeIPs: []netip.Addr{netip.MustParseAddr("172.18.0.3")}}
}

// GatewayServices are the services of the shared gateway goldens: the two
// of Services with protocols (web-lb also with NodePorts), a NodePort
// Service, and an externalTrafficPolicy=Local LoadBalancer with a
// host-network endpoint on the node listening on 8443.
func GatewayServices() []ovsflow.GatewayService {
	return []ovsflow.GatewayService{
		{Namespace: "default", Name: "web-external",
			VIPs:  []netip.Addr{netip.MustParseAddr("172.18.0.50"), netip.MustParseAddr("2001:db8::50")},
			Ports: []ovsflow.ServicePort{{Protocol: ovsflow.ProtoTCP, Port: 80}}},
		{Namespace: "default", Name: "web-lb", VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.60")},
			Ports: []ovsflow.ServicePort{
				{Protocol: ovsflow.ProtoTCP, Port: 80, NodePort: 30080},
				{Protocol: ovsflow.ProtoTCP, Port: 443, NodePort: 30443},
			}},
		{Namespace: "default", Name: "dns-nodeport",
			Ports: []ovsflow.ServicePort{{Protocol: ovsflow.ProtoUDP, Port: 53, NodePort: 30053}}},
		{Namespace: "kube-system", Name: "ingress-local", VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.70")},
			Ports: []ovsflow.ServicePort{{Protocol: ovsflow.ProtoTCP, Port: 443, NodePort: 31443, HostPort4: 8443}}},
	}
}

// Parts select what Program includes.
type Parts struct {
	Base, Egress, Services bool
	// Gateway gives the services the shared gateway's flows
	// (GatewayServices through ovsflow.ServiceFlows) instead of the ARP
	// bypass of Services alone.
	Gateway bool
	// VLAN is the gateway VLAN of the services' ARP bypass (0: none).
	VLAN uint16
	// DualStack adds IPv6 to the base and gateway flows, with node IP
	// 2001:db8::3.
	DualStack bool
}

// Program builds the seed node's program from the selected parts, one owner
// per part and service.
func Program(parts Parts) (*ovsflow.Program, error) {
	p := &ovsflow.Program{}
	base := Base()
	base.IPv6 = parts.DualStack
	if parts.Base {
		flows, err := ovsflow.BaseFlows(base)
		if err != nil {
			return nil, err
		}
		if err := p.Set("base", flows); err != nil {
			return nil, err
		}
	}
	if parts.Egress {
		flows, err := ovsflow.EgressFlows(Egress())
		if err != nil {
			return nil, err
		}
		if err := p.Set("egress", flows); err != nil {
			return nil, err
		}
	}
	if parts.Gateway {
		g := Gateway()
		g.Base, g.VLAN = base, parts.VLAN
		if parts.DualStack {
			g.NodeIPs = append(g.NodeIPs, netip.MustParseAddr("2001:db8::3"))
		}
		for _, svc := range GatewayServices() {
			flows, err := ovsflow.ServiceFlows(g, svc)
			if err != nil {
				return nil, err
			}
			if err := p.Set(svc.Owner(), flows); err != nil {
				return nil, err
			}
		}
	} else if parts.Services {
		for _, svc := range Services() {
			flows, err := ovsflow.ARPBypass(ovsflow.Bypass{Uplink: Uplink, VLAN: parts.VLAN}, svc)
			if err != nil {
				return nil, err
			}
			if err := p.Set(svc.Owner(), flows); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}
