package openflow_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"

	"github.com/ovnedge/ovnedge/ovsflow/openflow"
)

// A flow-mod encodes to the bytes a switch receives and decodes back from
// them (as it does from the data of a switch's error).
func ExampleFlowMod() {
	vip := netip.MustParseAddr("172.18.0.50")
	fm := openflow.FlowMod{
		Command: openflow.FlowAdd, Priority: 110, Cookie: 0x5,
		Match: []openflow.OXM{
			{Class: openflow.ClassOpenFlow, Field: openflow.OXMInPort, Value: []byte{0, 0, 0, 1}},
			{Class: openflow.ClassOpenFlow, Field: openflow.OXMEthType, Value: []byte{0x08, 0x06}},
			{Class: openflow.ClassOpenFlow, Field: openflow.OXMARPTpa, Value: vip.AsSlice()},
		},
		Actions: []openflow.Action{openflow.Output{Port: openflow.PortLocal}},
	}
	wire := fm.Append(nil, openflow.Version15, 1)
	m, _, err := openflow.DecodeMessage(wire)
	if err != nil {
		log.Fatal(err)
	}
	back, err := openflow.DecodeFlowMod(m)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, %d bytes: priority=%d cookie=%#x\n", openflow.VersionName(m.Version), len(wire), back.Priority, back.Cookie)
	for _, o := range back.Match {
		fmt.Println(o)
	}
	fmt.Printf("%#v\n", back.Actions)
	// Output:
	// OpenFlow15, 104 bytes: priority=110 cookie=0x5
	// oxm(0x8000:0=00000001)
	// oxm(0x8000:5=0806)
	// oxm(0x8000:23=ac120032)
	// []openflow.Action{openflow.Output{Port:0xfffffffe}}
}

// A controller replaces a bridge's flows atomically and reads them back.
func ExampleClient() {
	ctx := context.Background()
	c := openflow.NewClient("unix", "/var/run/openvswitch/br-ex.mgmt", openflow.Options{})
	defer c.Close()
	err := c.Bundle(ctx, []openflow.FlowMod{
		{Command: openflow.FlowDelete, Table: openflow.TableAll},
		{Command: openflow.FlowAdd, Actions: []openflow.Action{openflow.Output{Port: openflow.PortNormal}}},
	})
	if err != nil {
		log.Fatal(err) // a refused flow-mod is an *openflow.ModError naming its index
	}
	flows, err := c.DumpFlows(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(flows), "flows")
}
