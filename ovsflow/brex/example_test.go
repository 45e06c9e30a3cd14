package brex_test

import (
	"fmt"
	"net/netip"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// A Service's VIPs get an ARP/NDP bypass to the host; the program renders
// as ovs-ofctl prints it once the port names are resolved.
func ExampleARPBypass() {
	svc := brex.Service{
		Namespace: "default", Name: "web", Ports: []int32{80},
		VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.50"), netip.MustParseAddr("2001:db8::50")},
	}
	flows, err := brex.ARPBypass(brex.Bypass{Uplink: "eth0"}, svc)
	if err != nil {
		panic(err)
	}
	var p ovsflow.Program
	if err := p.Set(svc.Owner(), flows); err != nil {
		panic(err)
	}
	text, err := p.Render(ovsflow.PortMap{"eth0": 1})
	if err != nil {
		panic(err)
	}
	fmt.Print(string(text))
	// Output:
	// cookie=0x7172c5a64e815b0a, priority=110,arp,in_port=1,arp_tpa=172.18.0.50,arp_op=1 actions=LOCAL
	// cookie=0x2530ce2a3f66f35c, priority=110,icmp6,in_port=1,icmp_type=135,icmp_code=0,nd_target=2001:db8::50 actions=LOCAL
}
