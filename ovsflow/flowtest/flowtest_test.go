package flowtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

func TestDiff(t *testing.T) {
	cases := []struct{ want, got, diff string }{
		{"a\nb\n", "b\na\n", "(same lines, different order or whitespace)\n"},
		{"a\nb\n", "a\nc\n", "- b\n+ c\n"},
		{"a\na\n", "a\n", "- a\n"},
	}
	for _, c := range cases {
		if d := flowtest.Diff(c.want, c.got); d != c.diff {
			t.Errorf("Diff(%q, %q) = %q, want %q", c.want, c.got, d, c.diff)
		}
	}
}

func TestGoldenMatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.flows")
	if err := os.WriteFile(path, []byte("priority=0 actions=NORMAL\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flowtest.Golden(t, path, []byte("priority=0 actions=NORMAL\n"))
}

// A CNI's own program, tested the way ovnedge tests its programs: install
// it on a real bridge, read it back, trace a packet through it.
func TestBridge(t *testing.T) {
	t.Parallel()
	br := flowtest.NewBridge(t, flowtest.BridgeOptions{})
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
