// Command seed prints the br-ex flow program of the example node of
// OVN-Kubernetes' EgressIP feature page (ovn-worker2: base flows, the EgressIP flows 109/105/104/100 and the ARP/NDP
// bypass of two services' VIPs), exactly as `ovs-ofctl -O OpenFlow13
// --no-stats dump-flows` shows it once installed. `make demo` runs it.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
)

func main() {
	vlan := flag.Uint("vlan", 0, "gateway VLAN of the VIP ARP/NDP bypass (0: none)")
	flag.Parse()
	if err := run(uint16(*vlan)); err != nil {
		slog.Error("seed program", "err", err)
		os.Exit(1)
	}
}

func run(vlan uint16) error {
	p, err := brextest.Program(brextest.Parts{Base: true, Egress: true, Services: true, VLAN: vlan})
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	text, err := p.Render(brextest.Ports)
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	fmt.Printf("# br-ex program of node %s (bridge %s, %s=ofport %d, %s=ofport %d): %d flows, owners %v\n",
		brextest.Node, brextest.Bridge, brextest.Uplink, brextest.UplinkOFPort, brextest.Patch, brextest.PatchOFPort, p.Len(), p.Owners())
	_, err = os.Stdout.Write(text)
	return err
}
