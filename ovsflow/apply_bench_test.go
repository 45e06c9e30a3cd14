package ovsflow_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/internal/seed"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest/bridge"
)

// bigProgram is the seed node's base and egress flows plus n dual-stack
// services' ARP/NDP bypass (2n flows).
func bigProgram(b testing.TB, n int) *ovsflow.Program {
	p := seedProgram(b, seed.Parts{Base: true, Egress: true})
	for i := range n {
		svc := benchService(i, 0)
		flows, err := ovsflow.ARPBypass(ovsflow.Bypass{Uplink: seed.Uplink}, svc)
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
func benchService(i, gen int) ovsflow.Service {
	return ovsflow.Service{
		Namespace: "ns", Name: fmt.Sprint("svc", i), Ports: []int32{80},
		VIPs: []netip.Addr{
			netip.AddrFrom4([4]byte{10, byte(96 + gen), byte(i >> 8), byte(i)}),
			netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 12: byte(gen), 14: byte(i >> 8), 15: byte(i)}),
		},
	}
}

// BenchmarkApplyOneChangedService applies one changed service to a real
// bridge holding 20,000 flows: incrementally (one bundle of the diff) and
// as OVN-Kubernetes does it (a full `--bundle replace-flows`), in the same
// run. The "replace/incremental" metric is the speed-up; aim >= 10x.
func BenchmarkApplyOneChangedService(b *testing.B) {
	br := bridge.New(b, bridge.Options{Bridge: seed.Bridge, Node: seed.Node, Uplink: seed.Uplink,
		UplinkOFPort: seed.UplinkOFPort, PatchOFPort: seed.PatchOFPort})
	ctx := ctxFor(b)
	p := bigProgram(b, 10000)
	inc := ovsflow.NewApplier(br.Bridge, br.Transport, ovsflow.StaticPorts(br.Ports()), testLog(b))
	full := ovsflow.NewApplier(br.Bridge, br.Transport, ovsflow.StaticPorts(br.Ports()), testLog(b))
	if _, err := inc.Apply(ctx, p); err != nil {
		b.Fatal(err)
	}
	var incTime, fullTime time.Duration
	gen := 0
	change := func() {
		gen++
		flows, err := ovsflow.ARPBypass(ovsflow.Bypass{Uplink: seed.Uplink}, benchService(42, gen%2))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Set(benchService(42, 0).Owner(), flows); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		change()
		start := time.Now()
		if err := full.Replace(ctx, p); err != nil {
			b.Fatal(err)
		}
		fullTime += time.Since(start)

		// The full replace changed the bridge behind inc's back: let inc
		// put back the program it knows (untimed), then apply the change.
		if _, err := inc.Resync(ctx); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		res, err := inc.Apply(ctx, p)
		if err != nil || res != (ovsflow.Result{Added: 2, Deleted: 2}) {
			b.Fatalf("incremental apply: %+v, %v", res, err)
		}
		incTime += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(incTime.Microseconds())/n/1000, "incremental-ms")
	b.ReportMetric(float64(fullTime.Microseconds())/n/1000, "replace-ms")
	b.ReportMetric(float64(fullTime)/float64(incTime), "replace/incremental")
	b.ReportMetric(float64(p.Len()), "flows")
}
