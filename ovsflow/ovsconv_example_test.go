package ovsflow_test

import (
	"fmt"
	"net/netip"

	"github.com/digitalocean/go-openvswitch/ovs"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// A CNI built on go-openvswitch takes ovsflow's flows as ovs.Flow values:
// resolve the ports, convert, and hand the flow to its ovs client. The
// conversion back gives the same flow; a port still named is an error
// naming the field.
func ExampleToOVS() {
	flows, err := brex.ARPBypass(brex.Bypass{Uplink: "eth0"}, brex.Service{
		Namespace: "default", Name: "web", Ports: []int32{80},
		VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.50")},
	})
	if err != nil {
		panic(err)
	}
	f, err := flows[0].Resolve(ovsflow.PortMap{"eth0": 1})
	if err != nil {
		panic(err)
	}
	of, err := ovsflow.ToOVS(f)
	if err != nil {
		panic(err)
	}
	text, err := of.MarshalText() // what AddFlow or AddFlowBundle sends
	if err != nil {
		panic(err)
	}
	fmt.Println(string(text))
	back, err := ovsflow.FromOVS(of)
	fmt.Println(back, err)

	_, err = ovsflow.ToOVS(flows[0])
	fmt.Println(err)
	// Output:
	// priority=110,arp,in_port=1,arp_tpa=172.18.0.50,arp_op=1,table=0,idle_timeout=0,cookie=0x7172c5a64e815b0a,actions=local
	// cookie=0x7172c5a64e815b0a, priority=110,arp,in_port=1,arp_tpa=172.18.0.50,arp_op=1 actions=LOCAL <nil>
	// in_port: port "eth0" is not resolved: an ovs.Flow names ports by number
}

// A flow written with go-openvswitch's constructors becomes a Flow; what a
// Flow cannot hold is an error naming the field.
func ExampleFromOVS() {
	f, err := ovsflow.FromOVS(&ovs.Flow{
		Priority: 100, Protocol: ovs.ProtocolIPv4, InPort: 2,
		Matches: []ovs.Match{ovs.NetworkSource("10.244.2.0/24")},
		Actions: []ovs.Action{ovs.ConnectionTracking("commit,zone=64000,exec(set_field:0x1->ct_mark)"), ovs.Output(1)},
	})
	fmt.Println(f, err)

	_, err = ovsflow.FromOVS(&ovs.Flow{Priority: 100, Matches: []ovs.Match{ovs.TunnelID(7)}, Actions: []ovs.Action{ovs.Normal()}})
	fmt.Println(err)
	// Output:
	// priority=100,ip,in_port=2,nw_src=10.244.2.0/24 actions=ct(commit,zone=64000,exec(set_field:0x1->ct_mark)),output:1 <nil>
	// tun_id: unknown match field "tun_id"
}
