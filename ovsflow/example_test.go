package ovsflow_test

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
	// cookie=0xedec5a64e815b0a, priority=110,arp,in_port=1,arp_tpa=172.18.0.50,arp_op=1 actions=LOCAL
	// cookie=0xedece2a3f66f35c, priority=110,icmp6,in_port=1,icmp_type=135,icmp_code=0,nd_target=2001:db8::50 actions=LOCAL
}

// A flow is written the way the pipeline reads: match pod traffic from the
// patch port, commit it to conntrack with a mark, send it out the uplink.
func ExampleFlow() {
	f := ovsflow.Flow{
		Priority: 109,
		Cookie:   brex.BaseCookie,
		Match: ovsflow.Match{
			Proto:  ovsflow.ProtoIP,
			InPort: ovsflow.PortName("patch-br-ex_node1-to-br-int"),
			NwSrc:  netip.MustParsePrefix("10.244.1.0/24"),
		},
		Actions: []ovsflow.Action{
			ovsflow.CT{Commit: true, Zone: brex.DefaultZone, Exec: []ovsflow.Action{ovsflow.SetField(ovsflow.FieldCtMark, 1)}},
			ovsflow.Output(ovsflow.PortName("eth0")),
		},
	}
	fmt.Println(f)
	// Output:
	// cookie=0xdeff105, priority=109,ip,in_port=patch-br-ex_node1-to-br-int,nw_src=10.244.1.0/24 actions=ct(commit,zone=64000,exec(set_field:0x1->ct_mark)),output:eth0
}
