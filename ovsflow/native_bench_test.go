package ovsflow_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
)

// keyOf is what a delete_strict names of a flow: table, priority, match.
func keyOf(f ovsflow.Flow) string {
	line := f.String()
	line = line[:strings.LastIndex(line, " actions=")]
	if strings.HasPrefix(line, "cookie=") {
		_, line, _ = strings.Cut(line, ", ")
	}
	return line
}

// serviceMods are the flow-mods moving benchService(i) from generation
// from to generation to: deletes of the old flows, adds of the new.
func serviceMods(b *testing.B, ports ovsflow.PortMap, i, from, to int) []ovsflow.FlowMod {
	var mods []ovsflow.FlowMod
	for gen, op := range map[int]ovsflow.ModOp{from: ovsflow.ModDeleteStrict, to: ovsflow.ModAdd} {
		flows, err := brex.ARPBypass(brex.Bypass{Uplink: brextest.Uplink}, benchService(i, gen))
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range flows {
			if f, err = f.Resolve(ports); err != nil {
				b.Fatal(err)
			}
			m := ovsflow.FlowMod{Op: op, Flow: f.String()}
			if op == ovsflow.ModDeleteStrict {
				m.Flow = keyOf(f)
			}
			mods = append(mods, m)
		}
	}
	return mods
}

// perOp reports d per iteration in milliseconds under unit.
func perOp(b *testing.B, d time.Duration, unit string) float64 {
	ms := float64(d.Microseconds()) / float64(b.N) / 1000
	b.ReportMetric(ms, unit)
	return ms
}

// BenchmarkNativeVsOfctl compares the native OpenFlow transport with
// ovs-ofctl on one real bridge, in one run, on the example node's program
// plus 10,000 dual-stack services (20,000 flows):
//
//   - OneChangedService: one service changes its VIPs (2 deletes, 2 adds):
//     a native bundle of the diff, `ovs-ofctl --bundle add-flows` of the
//     same diff, and a full `ovs-ofctl --bundle replace-flows` of the
//     changed program. Aim: ofctl-diff/native >= 10. native-apply-ms is
//     a whole Applier.Apply on the native transport, diff included.
//   - Install: every flow from an empty bridge, a native bundle vs
//     `ovs-ofctl --bundle add-flows`. Aim: ofctl/native >= 2.
//   - Dump: every flow dumped and decoded into the model, natively vs
//     `ovs-ofctl dump-flows` and ParseFlows.
func BenchmarkNativeVsOfctl(b *testing.B) {
	br := brextest.NewBridge(b)
	ctx := ctxFor(b)
	native := nativeFor(b, br, 0)
	ports := br.Ports()
	p := bigProgram(b, 10000)
	text, err := p.Render(ports)
	if err != nil {
		b.Fatal(err)
	}
	flows, err := ovsflow.ParseFlows(text)
	if err != nil {
		b.Fatal(err)
	}
	adds := make([]ovsflow.FlowMod, len(flows))
	for i, f := range flows {
		adds[i] = ovsflow.FlowMod{Op: ovsflow.ModAdd, Flow: f.String()}
	}
	// install puts the whole program on the bridge (untimed).
	install := func() {
		if err := native.Replace(ctx, br.Bridge, text); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("OneChangedService", func(b *testing.B) {
		install()
		// Each step moves service 42 from generation cur to 1-cur; the
		// full replace gets the whole changed program.
		var mods [2][]ovsflow.FlowMod
		var full [2][]byte
		for gen := range 2 {
			mods[gen] = serviceMods(b, ports, 42, 1-gen, gen)
			q := p.Clone()
			svc := benchService(42, gen)
			fl, err := brex.ARPBypass(brex.Bypass{Uplink: brextest.Uplink}, svc)
			if err != nil {
				b.Fatal(err)
			}
			if err := q.Set(benchService(42, 0).Owner(), fl); err != nil {
				b.Fatal(err)
			}
			if full[gen], err = q.Render(ports); err != nil {
				b.Fatal(err)
			}
		}
		// An Applier on the native transport moves service 43 back and
		// forth in a program of its own: the diff included.
		applier := ovsflow.NewApplier(br.Bridge, native, ovsflow.StaticPorts(ports), testLog(b))
		own := p.Clone()
		if _, err := applier.Apply(ctx, own); err != nil {
			b.Fatal(err)
		}
		gen43 := 0
		cur := 0
		var nat, ofctl, replace, apply time.Duration
		step := func(d *time.Duration, f func(next int) error) {
			next := 1 - cur
			start := time.Now()
			if err := f(next); err != nil {
				b.Fatal(err)
			}
			*d += time.Since(start)
			cur = next
		}
		for b.Loop() {
			step(&nat, func(next int) error { return native.Bundle(ctx, br.Bridge, mods[next]) })
			step(&ofctl, func(next int) error { return br.Transport.Bundle(ctx, br.Bridge, mods[next]) })
			step(&replace, func(next int) error { return br.Transport.Replace(ctx, br.Bridge, full[next]) })

			gen43 = 1 - gen43
			fl, err := brex.ARPBypass(brex.Bypass{Uplink: brextest.Uplink}, benchService(43, gen43))
			if err != nil {
				b.Fatal(err)
			}
			if err := own.Set(benchService(43, 0).Owner(), fl); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if res, err := applier.Apply(ctx, own); err != nil || res != (ovsflow.Result{Added: 2, Deleted: 2}) {
				b.Fatalf("native apply: %+v, %v", res, err)
			}
			apply += time.Since(start)
		}
		n := perOp(b, nat, "native-ms")
		b.ReportMetric(perOp(b, ofctl, "ofctl-diff-ms")/n, "ofctl-diff/native")
		b.ReportMetric(perOp(b, replace, "replace-ms")/n, "replace/native")
		perOp(b, apply, "native-apply-ms")
		if got, err := br.Transport.Dump(ctx, br.Bridge); err != nil || bytes.Count(got, []byte("\n")) != len(flows) {
			b.Fatalf("bridge holds %d flows after the changes, want %d: %v", bytes.Count(got, []byte("\n")), len(flows), err)
		}
	})
	b.Run("Install", func(b *testing.B) {
		var nat, ofctl time.Duration
		for b.Loop() {
			for _, tr := range []struct {
				d  *time.Duration
				tr ovsflow.Transport
			}{{&nat, native}, {&ofctl, br.Transport}} {
				br.Ofctl("del-flows", br.Mgmt())
				start := time.Now()
				if err := tr.tr.Bundle(ctx, br.Bridge, adds); err != nil {
					b.Fatal(err)
				}
				*tr.d += time.Since(start)
			}
		}
		b.ReportMetric(perOp(b, ofctl, "ofctl-ms")/perOp(b, nat, "native-ms"), "ofctl/native")
		b.ReportMetric(float64(len(adds)), "flows")
	})
	b.Run("Dump", func(b *testing.B) {
		install()
		var nat, ofctl time.Duration
		for b.Loop() {
			start := time.Now()
			got, err := native.DumpFlows(ctx, br.Bridge)
			if err != nil || len(got) != len(flows) {
				b.Fatalf("native dump: %d flows, %v", len(got), err)
			}
			nat += time.Since(start)
			start = time.Now()
			dump, err := br.Transport.Dump(ctx, br.Bridge)
			if err != nil {
				b.Fatal(err)
			}
			if got, err = ovsflow.ParseFlows(dump); err != nil || len(got) != len(flows) {
				b.Fatalf("ovs-ofctl dump: %d flows, %v", len(got), err)
			}
			ofctl += time.Since(start)
		}
		b.ReportMetric(perOp(b, ofctl, "ofctl-ms")/perOp(b, nat, "native-ms"), "ofctl/native")
	})
}
