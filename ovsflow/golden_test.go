package ovsflow_test

import (
	"path/filepath"
	"testing"

	"github.com/ovnedge/ovnedge/internal/seed"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

// goldens are the seed programs and their golden files.
var goldens = []struct {
	file  string
	parts seed.Parts
}{
	{"egress-seed.flows", seed.Parts{Egress: true}},
	{"arp-bypass.flows", seed.Parts{Services: true}},
	{"arp-bypass-vlan.flows", seed.Parts{Services: true, VLAN: 100}},
	{"base.flows", seed.Parts{Base: true}},
	{"seed-node.flows", seed.Parts{Base: true, Egress: true, Services: true}},
	{"sgw-services.flows", seed.Parts{Gateway: true}},
	{"sgw-node.flows", seed.Parts{Base: true, Egress: true, Gateway: true}},
	{"sgw-node-dualstack.flows", seed.Parts{Base: true, Gateway: true, DualStack: true}},
	{"sgw-node-vlan.flows", seed.Parts{Base: true, Gateway: true, VLAN: 100}},
}

func goldenPath(file string) string { return filepath.Join("..", "testdata", "flows", file) }

func TestGoldenPrograms(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.file, func(t *testing.T) {
			p, err := seed.Program(g.parts)
			if err != nil {
				t.Fatal(err)
			}
			text, err := p.Render(seed.Ports)
			if err != nil {
				t.Fatal(err)
			}
			flowtest.Golden(t, goldenPath(g.file), text)

			// Every rendered line parses back to a flow that renders the same.
			flows, err := ovsflow.ParseFlows(text)
			if err != nil {
				t.Fatal(err)
			}
			var again []byte
			for _, f := range flows {
				again = append(f.AppendText(again), '\n')
			}
			if string(again) != string(text) {
				t.Errorf("parse+render changed the program:\n%s", flowtest.Diff(string(text), string(again)))
			}
		})
	}
}
