package ovsflow

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow/openflow"
)

// FuzzDecodeFlow feeds the decoder from OpenFlow into the model arbitrary
// flow-mods (the match and instructions a flow-stats entry carries too):
// it must never panic, and a flow it accepts must encode and decode back
// to the same flow.
func FuzzDecodeFlow(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "flows", "*.flows"))
	if err != nil || len(files) == 0 {
		f.Fatalf("golden flows: %v", err)
	}
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		flows, err := ParseFlows(text)
		if err != nil {
			f.Fatal(err)
		}
		for i := range flows {
			fm, err := encodeFlowMod(ModAdd, &flows[i], openflow.Version14)
			if err != nil {
				f.Fatalf("%s: %v", flows[i], err)
			}
			f.Add(fm.Append(nil, openflow.Version14, 1))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, _, err := openflow.DecodeMessage(b)
		if err != nil {
			return
		}
		fm, err := openflow.DecodeFlowMod(m)
		if err != nil {
			return
		}
		flow, err := decodeFlow(&openflow.FlowStats{Table: fm.Table, Priority: fm.Priority, Cookie: fm.Cookie,
			Match: fm.Match, Actions: fm.Actions})
		if err != nil {
			return
		}
		again, err := encodeFlowMod(ModAdd, &flow, openflow.Version14)
		if err != nil {
			t.Fatalf("decoded flow %s does not encode: %v", flow, err)
		}
		back, err := decodeFlow(&openflow.FlowStats{Table: again.Table, Priority: again.Priority, Cookie: again.Cookie,
			Match: again.Match, Actions: again.Actions})
		if err != nil || back.String() != flow.String() {
			t.Fatalf("flow %s encodes and decodes to %s, %v", flow, back, err)
		}
		if parsed, err := ParseFlow(flow.String()); err != nil || parsed.String() != flow.String() {
			t.Fatalf("decoded flow %s does not parse back: %s, %v", flow, parsed, err)
		}
	})
}
