package brextest

import (
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest/bridge"
)

// Bridge, node and port names of the example node.
const (
	Bridge       = "breth0"
	Node         = "ovn-worker2"
	Uplink       = "eth0"
	Patch        = "patch-breth0_ovn-worker2-to-br-int"
	UplinkOFPort = 1
	PatchOFPort  = 2
)

// Ports are the example node's ofports.
var Ports = ovsflow.PortMap{Uplink: UplinkOFPort, Patch: PatchOFPort}

// BridgeMAC is the MAC address of the example node's breth0.
var BridgeMAC = net.HardwareAddr{0x02, 0x42, 0xac, 0x12, 0x00, 0x03}

// Egress is the example node's egress configuration.
func Egress() brex.Egress {
	return brex.Egress{
		Uplink:         Uplink,
		Patch:          Patch,
		NodeSubnets:    []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")},
		ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		NodeIPs:        []netip.Addr{netip.MustParseAddr("172.18.0.3")},
	}
}

// Base is the example node's base configuration.
func Base() brex.Base {
	return brex.Base{Uplink: Uplink, Patch: Patch, BridgeMAC: BridgeMAC, IPv4: true}
}

// Services are the two services of the ARP bypass goldens: one with two
// external IPs on port 80, one LoadBalancer with ingress 172.18.0.60 on
// ports 80 and 443.
func Services() []brex.Service {
	return []brex.Service{
		{Namespace: "default", Name: "web-external", Ports: []int32{80},
			VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.50"), netip.MustParseAddr("2001:db8::50")}},
		{Namespace: "default", Name: "web-lb", Ports: []int32{80, 443},
			VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.60")}},
	}
}

// Gateway is the example node's shared gateway configuration for its
// Service flows.
func Gateway() brex.Gateway {
	return brex.Gateway{Base: Base(), NodeIPs: []netip.Addr{netip.MustParseAddr("172.18.0.3")}}
}

// GatewayServices are the services of the shared gateway goldens: the two
// of Services with protocols (web-lb also with NodePorts), a NodePort
// Service, and an externalTrafficPolicy=Local LoadBalancer with a
// host-network endpoint on the node listening on 8443.
func GatewayServices() []brex.GatewayService {
	return []brex.GatewayService{
		{Namespace: "default", Name: "web-external",
			VIPs:  []netip.Addr{netip.MustParseAddr("172.18.0.50"), netip.MustParseAddr("2001:db8::50")},
			Ports: []brex.ServicePort{{Protocol: ovsflow.ProtoTCP, Port: 80}}},
		{Namespace: "default", Name: "web-lb", VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.60")},
			Ports: []brex.ServicePort{
				{Protocol: ovsflow.ProtoTCP, Port: 80, NodePort: 30080},
				{Protocol: ovsflow.ProtoTCP, Port: 443, NodePort: 30443},
			}},
		{Namespace: "default", Name: "dns-nodeport",
			Ports: []brex.ServicePort{{Protocol: ovsflow.ProtoUDP, Port: 53, NodePort: 30053}}},
		{Namespace: "kube-system", Name: "ingress-local", VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.70")},
			Ports: []brex.ServicePort{{Protocol: ovsflow.ProtoTCP, Port: 443, NodePort: 31443, HostPort4: 8443}}},
	}
}

// Parts select what Program includes.
type Parts struct {
	Base, Egress, Services bool
	// Gateway gives the services the shared gateway's flows
	// (GatewayServices through brex.ServiceFlows) instead of the ARP
	// bypass of Services alone.
	Gateway bool
	// VLAN is the gateway VLAN of the services' ARP bypass (0: none).
	VLAN uint16
	// DualStack adds IPv6 to the base and gateway flows, with node IP
	// 2001:db8::3.
	DualStack bool
}

// Program builds the example node's program from the selected parts, one owner
// per part and service.
func Program(parts Parts) (*ovsflow.Program, error) {
	p := &ovsflow.Program{}
	base := Base()
	base.IPv6 = parts.DualStack
	if parts.Base {
		flows, err := brex.BaseFlows(base)
		if err != nil {
			return nil, err
		}
		if err := p.Set("base", flows); err != nil {
			return nil, err
		}
	}
	if parts.Egress {
		flows, err := brex.EgressFlows(Egress())
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
			flows, err := brex.ServiceFlows(g, svc)
			if err != nil {
				return nil, err
			}
			if err := p.Set(svc.Owner(), flows); err != nil {
				return nil, err
			}
		}
	} else if parts.Services {
		for _, svc := range Services() {
			flows, err := brex.ARPBypass(brex.Bypass{Uplink: Uplink, VLAN: parts.VLAN}, svc)
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

// NewBridge is a real, throwaway bridge (ovsflow/flowtest/bridge) laid
// out as the example node's: Bridge, with Uplink and Patch at their
// ofports.
func NewBridge(t testing.TB) *bridge.Bridge {
	t.Helper()
	return bridge.New(t, bridge.Options{Bridge: Bridge, Node: Node, Uplink: Uplink,
		UplinkOFPort: UplinkOFPort, PatchOFPort: PatchOFPort})
}

// Goldens are the example node's programs of the project's golden files
// (testdata/flows), by file.
var Goldens = []struct {
	File  string
	Parts Parts
}{
	{"egress-seed.flows", Parts{Egress: true}},
	{"arp-bypass.flows", Parts{Services: true}},
	{"arp-bypass-vlan.flows", Parts{Services: true, VLAN: 100}},
	{"base.flows", Parts{Base: true}},
	{"seed-node.flows", Parts{Base: true, Egress: true, Services: true}},
	{"sgw-services.flows", Parts{Gateway: true}},
	{"sgw-node.flows", Parts{Base: true, Egress: true, Gateway: true}},
	{"sgw-node-dualstack.flows", Parts{Base: true, Gateway: true, DualStack: true}},
	{"sgw-node-vlan.flows", Parts{Base: true, Gateway: true, VLAN: 100}},
}

// GoldenPath is the path of golden file file, testdata/flows/<file> of
// this module, from this package's source.
func GoldenPath(file string) string {
	_, src, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(src), "..", "..", "..", "testdata", "flows", file)
}

// MustProgram is Program of parts, failing t on error.
func MustProgram(t testing.TB, parts Parts) *ovsflow.Program {
	t.Helper()
	p, err := Program(parts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// OVNKGateway is the bridge of OVN-Kubernetes' gateway_localnet_linux_test.go
// (go-controller/pkg/node, initFakeNodePortWatcher): ofportPhys "eth0", the
// default network's patch port "patch-breth0_ov", gwMAC 0a:0b:0c:0d:0e:0f,
// gateway IP 10.244.0.1, IPv4 only; tests porting its cases build on it.
func OVNKGateway() brex.Gateway {
	mac, _ := net.ParseMAC("0a:0b:0c:0d:0e:0f")
	return brex.Gateway{
		Base:    brex.Base{Uplink: "eth0", Patch: "patch-breth0_ov", BridgeMAC: mac, IPv4: true},
		NodeIPs: []netip.Addr{netip.MustParseAddr("10.244.0.1")},
	}
}

// Canonical renders flows written as OVN-Kubernetes writes them (ovs-ofctl
// add-flow syntax: ", " separators, "actions=" as the last field,
// "ct(zone=Z nat,...)" with a space, which ovs-ofctl reads as a comma) as
// ovsflow's canonical text, cookies as they are, sorted and without
// repeats: a port of their test compares it with the rendered flows.
func Canonical(t testing.TB, ovnk []string) []string {
	t.Helper()
	var out []string
	for _, s := range ovnk {
		f, err := ovsflow.ParseFlow(strings.ReplaceAll(s, " nat,", ",nat,"))
		if err != nil {
			t.Fatalf("OVN-Kubernetes flow %q: %v", s, err)
		}
		out = append(out, f.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}
