package ovsflow_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
)

// BenchmarkDriftRepair measures how long a real bridge misses flows
// deleted by hand (`ovs-ofctl del-flows <bridge> cookie=0xdeff105/-1`,
// the base and egress flows of the example node's program, with 1,000
// services beside them) while an Applier's Run keeps it: from the
// del-flows returning to a dump holding the program again, per deletion.
// The native transport repairs on the flow monitor's report; the baseline
// in the same run is the ovs-ofctl transport, which only the periodic
// verification (every 1s here, 30s in the daemon) repairs. Aim: native
// restore-ms < 5000, and far below the baseline (ratio in the results).
func BenchmarkDriftRepair(b *testing.B) {
	br := brextest.NewBridge(b)
	p := brextest.MustProgram(b, brextest.Parts{Base: true, Egress: true, Services: true, Gateway: true})
	for i := range 1000 {
		flows, err := brex.ARPBypass(brex.Bypass{Uplink: brextest.Uplink}, benchService(i, 0))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Set(fmt.Sprintf("bench/%d", i), flows); err != nil {
			b.Fatal(err)
		}
	}
	probe := ovsflow.NewNativeTransport(br.RunDir, ovsflow.NativeOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	b.Cleanup(func() { probe.Close() })
	count := func(ctx context.Context) int {
		flows, err := probe.DumpFlows(ctx, br.Bridge)
		if err != nil {
			b.Fatal(err)
		}
		return len(flows)
	}
	for _, c := range []struct {
		name   string
		native bool
		verify time.Duration
	}{
		{"native-monitor", true, -1},
		{"ofctl-verify-1s", false, time.Second},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(ctxFor(b))
			defer cancel()
			opts := ovsflow.ApplierOptions{KeepForeign: true, Owns: brex.Owns(true), VerifyInterval: c.verify,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			var tr ovsflow.Transport = br.Transport
			if c.native {
				native := ovsflow.NewNativeTransport(br.RunDir, ovsflow.NativeOptions{Logger: opts.Logger})
				defer native.Close()
				tr = native
			}
			a := ovsflow.NewApplier(br.Bridge, tr, ovsflow.StaticPorts(br.Ports()), opts)
			if _, err := a.Apply(ctx, p); err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() { defer close(done); _ = a.Run(ctx) }()
			defer func() { cancel(); <-done }()
			time.Sleep(200 * time.Millisecond)
			full := count(ctx)
			var missing time.Duration
			b.ResetTimer()
			for range b.N {
				br.Ofctl("del-flows", br.Mgmt(), "cookie=0xdeff105/-1")
				start := time.Now()
				for count(ctx) != full {
					if time.Since(start) > 30*time.Second {
						b.Fatal("flows not restored within 30s")
					}
					time.Sleep(time.Millisecond)
				}
				missing += time.Since(start)
			}
			b.StopTimer()
			perOp(b, missing, "restore-ms")
		})
	}
}
