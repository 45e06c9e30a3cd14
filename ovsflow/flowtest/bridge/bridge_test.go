package bridge_test

import (
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest/bridge"
)

// A CNI's own program, tested the way ovnedge tests its programs: install
// it on a real bridge, read it back, trace a packet through it.
func TestBridge(t *testing.T) {
	t.Parallel()
	br := bridge.New(t, bridge.Options{})
	var p ovsflow.Program
	err := p.Set("mine", []ovsflow.Flow{
		{Priority: 10, Match: ovsflow.Match{Proto: ovsflow.ProtoUDP, InPort: ovsflow.PortName(br.Uplink), TpDst: 4789},
			Actions: []ovsflow.Action{ovsflow.Output(ovsflow.PortName(br.Patch))}},
		{Priority: 0, Actions: []ovsflow.Action{ovsflow.Output(ovsflow.NORMAL)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	br.Install(&p)
	want, err := p.Render(br.Ports())
	if err != nil {
		t.Fatal(err)
	}
	if got := br.Dump(); string(got) != string(want) {
		t.Errorf("dump differs:\n%s", flowtest.Diff(string(want), string(got)))
	}
	tr := br.Trace("in_port=1,udp,nw_src=192.0.2.1,nw_dst=192.0.2.2,udp_dst=4789")
	if len(tr.Rules) == 0 || !strings.Contains(tr.Rules[0], "priority 10") || !strings.Contains(tr.Output, "output:2") {
		t.Errorf("trace: rules %q\n%s", tr.Rules, tr.Output)
	}
}
