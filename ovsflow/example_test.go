package ovsflow_test

import (
	"fmt"
	"net/netip"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

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
