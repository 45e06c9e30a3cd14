package ovsflow_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest/bridge"
)

// waitDump waits up to 10s for br to hold exactly want and returns how
// long it took.
func waitDump(t testing.TB, br *bridge.Bridge, want []byte, what string) time.Duration {
	t.Helper()
	start := time.Now()
	var got []byte
	for time.Since(start) < 10*time.Second {
		if got = br.Dump(); bytes.Equal(got, want) {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: bridge still differs after 10s:\n%s", what, flowtest.Diff(string(want), string(got)))
	return 0
}

// Flows deleted or changed by hand on a real bridge come back, through
// the native transport's flow monitor and, with ovs-ofctl (no monitor),
// through the periodic verification; another controller's flows are left
// alone and trigger nothing.
func TestApplierRepairsDrift(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		native bool
		verify time.Duration
	}{
		{"native flow monitor", true, -1},
		{"ovs-ofctl and periodic verification", false, 200 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			br := brextest.NewBridge(t)
			ctx := ctxFor(t)
			opts := testLog(t)
			opts.KeepForeign, opts.Owns, opts.VerifyInterval = true, brex.Owns(true), c.verify
			var tr ovsflow.Transport = br.Transport
			if c.native {
				tr = nativeFor(t, br, 0)
			}
			a := ovsflow.NewApplier(br.Bridge, tr, ovsflow.StaticPorts(br.Ports()), opts)
			br.Ofctl("add-flow", br.Mgmt(), "cookie=0x99,priority=300,udp,actions=drop")
			p := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true, Gateway: true})
			if _, err := a.Apply(ctx, p); err != nil {
				t.Fatal(err)
			}
			want := br.Dump()
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = a.Run(runCtx) }()
			t.Cleanup(func() { stop(); <-done })
			time.Sleep(100 * time.Millisecond) // Run's first resync (switch connected)
			base := a.Repairs()

			br.Ofctl("del-flows", br.Mgmt(), "cookie=0xdeff105/-1")
			t.Logf("base flows deleted by hand: restored in %v", waitDump(t, br, want, "base flows deleted"))
			br.Ofctl("mod-flows", br.Mgmt(), "arp,arp_tpa=172.18.0.60,actions=drop") // the flow monitor may repair it before a dump sees it
			t.Logf("service flows changed by hand: restored in %v", waitDump(t, br, want, "service flows modified"))
			for start := time.Now(); a.Repairs() < base+2 && time.Since(start) < 5*time.Second; {
				time.Sleep(10 * time.Millisecond)
			}
			if a.Repairs() < base+2 {
				t.Errorf("%d repairs counted, want 2", a.Repairs()-base)
			}

			before := a.Repairs()
			br.Ofctl("add-flow", br.Mgmt(), "cookie=0x98,priority=301,udp,actions=drop")
			br.Ofctl("del-flows", br.Mgmt(), "cookie=0x98/-1")
			time.Sleep(500 * time.Millisecond)
			if a.Repairs() != before {
				t.Errorf("another controller's flows caused %d repairs", a.Repairs()-before)
			}
			wantDump(t, br, want, "another controller's flow")
		})
	}
}

// A new Applier (a restarted process) applying the same program to a
// bridge that holds it changes nothing; one whose program lacks a Service
// deletes that Service's flows (the gateway program's shape, brex.Owns), and
// keeps another controller's.
func TestApplierRestartKeepsFlowsRemovesOrphans(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	ctx := ctxFor(t)
	br.Ofctl("add-flow", br.Mgmt(), "cookie=0x99,priority=300,udp,actions=drop")
	restart := func() *ovsflow.Applier {
		opts := testLog(t)
		opts.KeepForeign, opts.Owns = true, brex.Owns(true)
		return ovsflow.NewApplier(br.Bridge, nativeFor(t, br, 0), ovsflow.StaticPorts(br.Ports()), opts)
	}
	all := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true, Gateway: true})
	if _, err := restart().Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	want := br.Dump()
	if res, err := restart().Apply(ctx, all); err != nil || res.Changed() {
		t.Fatalf("restart with the same program: %+v, %v; want nothing sent", res, err)
	}
	wantDump(t, br, want, "restart with the same program")

	gone := "service/default/web-lb"
	less := all.Clone()
	less.Delete(gone)
	if res, err := restart().Apply(ctx, less); err != nil || res != (ovsflow.Result{Deleted: len(all.Flows(gone))}) {
		t.Fatalf("restart without %s: %+v, %v; want its %d flows deleted and nothing else", gone, res, err, len(all.Flows(gone)))
	}
	rendered, err := less.Render(br.Ports())
	if err != nil {
		t.Fatal(err)
	}
	foreign := "cookie=0x99, priority=300,udp actions=drop\n"
	sorted, err := ovsflow.SortDump(append([]byte(foreign), rendered...))
	if err != nil {
		t.Fatal(err)
	}
	wantDump(t, br, sorted, "orphans after restart")
}
