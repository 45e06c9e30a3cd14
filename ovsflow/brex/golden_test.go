package brex_test

import (
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

func TestGoldenPrograms(t *testing.T) {
	for _, g := range brextest.Goldens {
		t.Run(g.File, func(t *testing.T) {
			p, err := brextest.Program(g.Parts)
			if err != nil {
				t.Fatal(err)
			}
			text, err := p.Render(brextest.Ports)
			if err != nil {
				t.Fatal(err)
			}
			flowtest.Golden(t, brextest.GoldenPath(g.File), text)

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
