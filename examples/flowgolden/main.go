// Command flowgolden prints a custom flow set built with ovsflow: a CNI's
// own br-ex rule next to ovnedge's, here "pods may not reach the cloud
// metadata address through the uplink". Its test pins the rendering in a
// golden file with ovsflow/flowtest (`FLOWTEST_UPDATE=1 go test
// ./examples/flowgolden` rewrites it) and checks the flows on a real bridge
// (ovsflow/flowtest/bridge).
//
//	go run ./examples/flowgolden
package main

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/ovnedge/ovnedge/ovsflow"
)

// Metadata is the address pods must not reach.
var Metadata = netip.MustParseAddr("169.254.169.254")

// Program returns the custom flow set under owner "metadata-block": from
// the patch port (pods), IPv4 to Metadata is dropped above the egress
// flows (priority 120).
func Program(patch string) (*ovsflow.Program, error) {
	flows := []ovsflow.Flow{{
		Priority: 120,
		Cookie:   0x6d657461,
		Match:    ovsflow.Match{Proto: ovsflow.ProtoIP, InPort: ovsflow.PortName(patch), NwDst: ovsflow.Host(Metadata)},
	}}
	var p ovsflow.Program
	if err := p.Set("metadata-block", flows); err != nil {
		return nil, err
	}
	return &p, nil
}

func main() {
	p, err := Program("patch-br-ex_node1-to-br-int")
	if err == nil {
		var text []byte
		text, err = p.Render(ovsflow.PortMap{"patch-br-ex_node1-to-br-int": 2})
		os.Stdout.Write(text)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flowgolden:", err)
		os.Exit(1)
	}
}
