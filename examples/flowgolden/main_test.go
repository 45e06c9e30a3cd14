package main

import (
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest/bridge"
)

// TestGolden pins the custom flows' rendering and checks them on a real
// bridge: installed, they dump as the golden file says, and a pod's
// packet to the metadata address is dropped.
func TestGolden(t *testing.T) {
	b := bridge.New(t, bridge.Options{})
	p, err := Program(b.Patch)
	if err != nil {
		t.Fatal(err)
	}
	text, err := p.Render(b.Ports())
	if err != nil {
		t.Fatal(err)
	}
	flowtest.Golden(t, "testdata/metadata-block.flows", text)
	b.Install(p)
	if got := b.Dump(); string(got) != string(text) {
		t.Errorf("the bridge holds other flows than rendered:\n%s", flowtest.Diff(string(text), string(got)))
	}
	if tr := b.Trace("in_port=2,tcp,nw_src=10.244.1.3,nw_dst=169.254.169.254,tp_dst=80"); tr.Datapath != "drop" {
		t.Errorf("a pod's packet to the metadata address: %q, want drop\n%s", tr.Datapath, tr.Output)
	}
}
