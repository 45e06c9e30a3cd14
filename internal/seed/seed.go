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

// Parts select what Program includes.
type Parts struct {
	Base, Egress, Services bool
	// VLAN is the gateway VLAN of the services' ARP bypass (0: none).
	VLAN uint16
}

// Program builds the seed node's program from the selected parts, one owner
// per part and service.
func Program(parts Parts) (*ovsflow.Program, error) {
	p := &ovsflow.Program{}
	if parts.Base {
		flows, err := ovsflow.BaseFlows(Base())
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
	if parts.Services {
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
