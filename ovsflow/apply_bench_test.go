package ovsflow_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest/bridge"
)

// bigProgram is the example node's base and egress flows plus n dual-stack
// services' ARP/NDP bypass (2n flows).
func bigProgram(b testing.TB, n int) *ovsflow.Program {
	p := brextest.MustProgram(b, brextest.Parts{Base: true, Egress: true})
	for i := range n {
		svc := benchService(i, 0)
		flows, err := brex.ARPBypass(brex.Bypass{Uplink: brextest.Uplink}, svc)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Set(svc.Owner(), flows); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// benchService is service i; gen changes its VIPs.
func benchService(i, gen int) brex.Service {
	return brex.Service{
		Namespace: "ns", Name: fmt.Sprint("svc", i), Ports: []int32{80},
		VIPs: []netip.Addr{
			netip.AddrFrom4([4]byte{10, byte(96 + gen), byte(i >> 8), byte(i)}),
			netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 12: byte(gen), 14: byte(i >> 8), 15: byte(i)}),
		},
	}
}

// BenchmarkApplyOneChangedService applies one changed service (its VIPs
// move: 2 flows deleted, 2 added) to a real bridge holding the seed
// node's program plus 10,000 dual-stack services (20,016 flows), end to
// end (resolve, diff, send, commit), every way in the same run:
//
//   - incremental-ms: an Applier on the native transport, which resolves
//     and diffs the changed owner only;
//   - daemon-ms: the same as the daemon does it (NodeState.Update): the
//     applied program's 10,000 owners all Set again, in place, to fresh
//     slices of equal flows but for the changed one, then the Apply;
//   - fulldiff-ms: an Applier on the native transport resolving and
//     diffing the whole program (the Applier before per-owner tracking);
//   - ofctl-diff-ms: that full diff sent through ovs-ofctl (`--bundle
//     add-flows` of the diff): the ovs-ofctl diff the native incremental
//     path replaces;
//   - replace-ms: a full `ovs-ofctl --bundle replace-flows`, as
//     OVN-Kubernetes syncs.
//
// Between timed applies each Applier resyncs (untimed, and its garbage
// collected), since the others changed the bridge behind its back; the
// ways take turns going first. Means and medians are reported (one stall
// of a loaded machine weighs on a mean). Aims: incremental-ms < 2, and
// ofctl-diff/incremental >= 10.
func BenchmarkApplyOneChangedService(b *testing.B) {
	br := bridge.New(b, bridge.Options{Bridge: brextest.Bridge, Node: brextest.Node, Uplink: brextest.Uplink,
		UplinkOFPort: brextest.UplinkOFPort, PatchOFPort: brextest.PatchOFPort})
	ctx := ctxFor(b)
	quiet := ovsflow.ApplierOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	native := nativeFor(b, br, 0)
	ports := ovsflow.StaticPorts(br.Ports())
	p := bigProgram(b, 10000)
	sets := map[string][]ovsflow.Flow{}
	for _, o := range p.Owners() {
		sets[o] = p.Flows(o)
	}
	type way struct {
		name string
		a    *ovsflow.Applier
		full bool
		p    *ovsflow.Program
		d    time.Duration
		all  []time.Duration
	}
	ways := []*way{
		{name: "incremental-ms", a: ovsflow.NewApplier(br.Bridge, native, ports, quiet)},
		{name: "daemon-ms", a: ovsflow.NewApplier(br.Bridge, native, ports, quiet)},
		{name: "fulldiff-ms", a: ovsflow.NewApplier(br.Bridge, native, ports, quiet), full: true},
		{name: "ofctl-diff-ms", a: ovsflow.NewApplier(br.Bridge, br.Transport, ports, quiet), full: true},
	}
	for _, w := range ways {
		ovsflow.SetFullDiff(w.a, w.full)
		w.p = p.Clone()
		if _, err := w.a.Apply(ctx, w.p); err != nil {
			b.Fatal(err)
		}
	}
	owner := benchService(42, 0).Owner()
	gen, turn := 0, 0
	var replace time.Duration
	for b.Loop() {
		gen = 1 - gen
		flows, err := brex.ARPBypass(brex.Bypass{Uplink: brextest.Uplink}, benchService(42, gen))
		if err != nil {
			b.Fatal(err)
		}
		// Fresh slices of equal flows, as ComputeNode builds them (untimed).
		fresh := make(map[string][]ovsflow.Flow, len(sets))
		for o, fl := range sets {
			fresh[o] = slices.Clone(fl)
		}
		fresh[owner] = flows
		turn++
		for i := range ways {
			// Each way goes first in turn: whatever the switch still does
			// after the previous step weighs on all alike.
			w := ways[(i+turn)%len(ways)]
			if _, err := w.a.Resync(ctx); err != nil { // untimed: the bridge back to w's program
				b.Fatal(err)
			}
			runtime.GC() // the resync's garbage is not the apply's
			start := time.Now()
			if w.name == "daemon-ms" {
				w.p.DeleteFunc(func(o string) bool { _, ok := fresh[o]; return !ok })
				for o, fl := range fresh {
					if err := w.p.Set(o, fl); err != nil {
						b.Fatal(err)
					}
				}
			} else if err := w.p.Set(owner, flows); err != nil {
				b.Fatal(err)
			}
			res, err := w.a.Apply(ctx, w.p)
			if err != nil || res != (ovsflow.Result{Added: 2, Deleted: 2}) {
				b.Fatalf("%s: %+v, %v", w.name, res, err)
			}
			w.d += time.Since(start)
			w.all = append(w.all, time.Since(start))
		}
		text, err := ways[0].p.Render(br.Ports())
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := br.Transport.Replace(ctx, br.Bridge, text); err != nil {
			b.Fatal(err)
		}
		replace += time.Since(start)
	}
	inc := perOp(b, ways[0].d, ways[0].name)
	for _, w := range ways[1:] {
		perOp(b, w.d, w.name)
	}
	for _, w := range ways {
		slices.Sort(w.all)
		b.ReportMetric(float64(w.all[len(w.all)/2].Microseconds())/1000, strings.Replace(w.name, "-ms", "-p50-ms", 1))
	}
	b.ReportMetric(perOp(b, ways[2].d, ways[2].name)/inc, "fulldiff/incremental")
	b.ReportMetric(perOp(b, ways[3].d, ways[3].name)/inc, "ofctl-diff/incremental")
	b.ReportMetric(perOp(b, replace, "replace-ms")/inc, "replace/incremental")
	b.ReportMetric(float64(p.Len()), "flows")
}
