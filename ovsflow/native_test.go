package ovsflow_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/internal/seed"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	"github.com/ovnedge/ovnedge/ovsflow/openflow"
)

// nativeFor is a native transport to br's switch, closed with the test.
func nativeFor(t testing.TB, br *flowtest.Bridge, version uint8) *ovsflow.NativeTransport {
	tr := ovsflow.NewNativeTransport(br.RunDir, ovsflow.NativeOptions{MaxVersion: version, Logger: testLog(t).Logger})
	t.Cleanup(func() { tr.Close() })
	return tr
}

// Every golden program installed natively, in each OpenFlow version, dumps
// back through ovs-ofctl exactly as the same program installed through
// ovs-ofctl, and the native dump decodes to the program.
func TestNativeGoldens(t *testing.T) {
	t.Parallel()
	br := seedBridge(t)
	for _, v := range []uint8{openflow.Version13, openflow.Version14, openflow.Version15} {
		t.Run(openflow.VersionName(v), func(t *testing.T) { testNativeGoldens(t, br, v) })
	}
}

func testNativeGoldens(t *testing.T, br *flowtest.Bridge, version uint8) {
	native := nativeFor(t, br, version)
	ctx := ctxFor(t)
	for _, g := range goldens {
		golden, err := os.ReadFile(goldenPath(g.file))
		if err != nil {
			t.Fatal(err)
		}
		p := seedProgram(t, g.parts)
		br.Install(p) // through ovs-ofctl
		viaOfctl := br.Dump()
		br.Ofctl("del-flows", br.Mgmt())
		if d := br.Dump(); len(d) != 0 {
			t.Fatalf("del-flows left %q", d)
		}

		a := ovsflow.NewApplier(br.Bridge, native, ovsflow.StaticPorts(br.Ports()), testLog(t))
		err = a.Replace(ctx, p)
		if version == openflow.Version15 && strings.Contains(string(golden), "load:") {
			// OVS has no Nicira load in OpenFlow 1.5: refused, naming the flow.
			var fe *ovsflow.FlowError
			if !errors.As(err, &fe) || !strings.Contains(fe.Flow, "load:") || !strings.Contains(err.Error(), "OpenFlow 1.5") {
				t.Errorf("%s: a load in OpenFlow 1.5: %v", g.file, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: native replace: %v", g.file, err)
		}
		if got := br.Dump(); string(got) != string(viaOfctl) || string(got) != string(golden) {
			t.Errorf("%s: natively installed program dumps differently through ovs-ofctl:\n%s", g.file, flowtest.Diff(string(viaOfctl), string(got)))
		}
		dump, err := native.Dump(ctx, br.Bridge)
		if err != nil {
			t.Fatalf("%s: native dump: %v", g.file, err)
		}
		decoded, err := ovsflow.SortDump(dump)
		if err != nil {
			t.Fatal(err)
		}
		if string(decoded) != string(golden) {
			t.Errorf("%s: native dump decodes differently from the program:\n%s", g.file, flowtest.Diff(string(golden), string(decoded)))
		}
	}
}

// A bundle with one flow the switch refuses changes nothing, and the error
// names that flow.
func TestNativeBundleBadFlow(t *testing.T) {
	t.Parallel()
	br := seedBridge(t)
	native := nativeFor(t, br, 0)
	ctx := ctxFor(t)
	a := ovsflow.NewApplier(br.Bridge, native, ovsflow.StaticPorts(br.Ports()), testLog(t))
	p := seedProgram(t, seed.Parts{Base: true, Egress: true, Services: true})
	if _, err := a.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	before := br.Dump()
	mods := []ovsflow.FlowMod{
		{Op: ovsflow.ModAdd, Flow: "priority=300,udp actions=NORMAL"},
		{Op: ovsflow.ModDeleteStrict, Flow: "priority=0"},
		{Op: ovsflow.ModAdd, Flow: "priority=301,udp actions=group:99"}, // no such group
		{Op: ovsflow.ModAdd, Flow: "priority=302,tcp actions=LOCAL"},
	}
	err := native.Bundle(ctx, br.Bridge, mods)
	var fe *ovsflow.FlowError
	if !errors.As(err, &fe) || fe.Flow != "add "+mods[2].Flow || !strings.Contains(err.Error(), "bad_out_group") {
		t.Errorf("bundle with a bad flow: %v, want a FlowError naming %q", err, mods[2].Flow)
	}
	if after := br.Dump(); string(after) != string(before) {
		t.Errorf("a refused bundle changed the bridge:\n%s", flowtest.Diff(string(before), string(after)))
	}
	// Through the Applier: the same error, and the Applier recovers.
	refused := p.Clone()
	if err := refused.Set("groupie", []ovsflow.Flow{{Priority: 300, Match: ovsflow.Match{Proto: ovsflow.ProtoUDP},
		Actions: []ovsflow.Action{ovsflow.Group(99)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(ctx, refused); !errors.As(err, &fe) || !strings.Contains(fe.Flow, "group:99") {
		t.Errorf("refused flow through the Applier: %v", err)
	}
	if after := br.Dump(); string(after) != string(before) {
		t.Errorf("a refused apply changed the bridge:\n%s", flowtest.Diff(string(before), string(after)))
	}
	if res, err := a.Apply(ctx, p); err != nil || res.Changed() {
		t.Errorf("apply after the refused bundle: %+v, %v", res, err)
	}
}

// Kill ovs-vswitchd in the middle of a large bundle and restart it: the
// client reconnects, the Applier's Run replays the last program it
// applied, and applying the large program again leaves the bridge holding
// it whole.
func TestNativeReplayAfterKillMidBundle(t *testing.T) {
	t.Parallel()
	br := seedBridge(t)
	native := nativeFor(t, br, 0)
	ctx := ctxFor(t)
	a := ovsflow.NewApplier(br.Bridge, native, ovsflow.StaticPorts(br.Ports()), testLog(t))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	small := seedProgram(t, seed.Parts{Base: true, Egress: true, Services: true})
	if _, err := a.Apply(ctx, small); err != nil {
		t.Fatal(err)
	}
	big := bigProgram(t, 5000)
	render := func(p *ovsflow.Program) string {
		b, err := p.Render(br.Ports())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	wantSmall, wantBig := render(small), render(big)
	dumped := func() string {
		dump, err := br.Transport.Dump(context.Background(), br.Bridge)
		if err != nil {
			return ""
		}
		sorted, err := ovsflow.SortDump(dump)
		if err != nil {
			return ""
		}
		return string(sorted)
	}

	// Time one apply of the large program, go back to the small one, then
	// kill ovs-vswitchd three quarters through applying the large one again.
	var full time.Duration
	for range 2 { // the second time, with the program's flows resolved
		start := time.Now()
		if _, err := a.Apply(ctx, big); err != nil {
			t.Fatal(err)
		}
		full = time.Since(start)
		if _, err := a.Apply(ctx, small); err != nil {
			t.Fatal(err)
		}
	}
	applied := make(chan error, 1)
	go func() { _, err := a.Apply(ctx, big); applied <- err }()
	time.Sleep(full * 3 / 4)
	br.KillVswitchd()
	err := <-applied
	t.Logf("apply of %d flows (%v when undisturbed) with ovs-vswitchd killed after %v: %v", big.Len(), full, full*3/4, err)
	br.StartVswitchd()
	took := waitFor(t, 5*time.Second, "last applied program replayed", func() bool {
		d := dumped()
		return (err != nil && d == wantSmall) || (err == nil && d == wantBig)
	})
	t.Logf("program replayed %v after the restart", took)
	if err != nil {
		if _, err := a.Apply(ctx, big); err != nil {
			t.Fatalf("apply again after the restart: %v", err)
		}
	}
	if d := dumped(); d != wantBig {
		t.Errorf("bridge does not hold the full program:\n%s", flowtest.Diff(wantBig, d))
	}
}
