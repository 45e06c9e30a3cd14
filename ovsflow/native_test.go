package ovsflow_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest/bridge"
	"github.com/ovnedge/ovnedge/ovsflow/openflow"
)

// nativeFor is a native transport to br's switch, closed with the test.
func nativeFor(t testing.TB, br *bridge.Bridge, version uint8) *ovsflow.NativeTransport {
	tr := ovsflow.NewNativeTransport(br.RunDir, ovsflow.NativeOptions{MaxVersion: version, Logger: testLog(t).Logger})
	t.Cleanup(func() { tr.Close() })
	return tr
}

// defaultApplier is an Applier on br with the default, native transport,
// closed with the test.
func defaultApplier(t testing.TB, br *bridge.Bridge, keepForeign bool) *ovsflow.Applier {
	opts := testLog(t)
	opts.RunDir, opts.KeepForeign = br.RunDir, keepForeign
	a := ovsflow.NewApplier(br.Bridge, nil, ovsflow.StaticPorts(br.Ports()), opts)
	t.Cleanup(func() { a.Close() })
	return a
}

// wantDump fails the test unless br holds exactly want.
func wantDump(t testing.TB, br *bridge.Bridge, want []byte, what string) {
	t.Helper()
	if got := br.Dump(); string(got) != string(want) {
		t.Errorf("%s:\n%s", what, flowtest.Diff(string(want), string(got)))
	}
}

func readGolden(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(brextest.GoldenPath(file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every golden program installed natively, in each OpenFlow version, dumps
// back through ovs-ofctl exactly as the same program installed through
// ovs-ofctl, and the native dump decodes to the program.
func TestNativeGoldens(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	for _, v := range []uint8{openflow.Version13, openflow.Version14, openflow.Version15} {
		t.Run(openflow.VersionName(v), func(t *testing.T) { testNativeGoldens(t, br, v) })
	}
}

func testNativeGoldens(t *testing.T, br *bridge.Bridge, version uint8) {
	native := nativeFor(t, br, version)
	ctx := ctxFor(t)
	for _, g := range brextest.Goldens {
		golden, err := os.ReadFile(brextest.GoldenPath(g.File))
		if err != nil {
			t.Fatal(err)
		}
		p := brextest.MustProgram(t, g.Parts)
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
				t.Errorf("%s: a load in OpenFlow 1.5: %v", g.File, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: native replace: %v", g.File, err)
		}
		if got := br.Dump(); string(got) != string(viaOfctl) || string(got) != string(golden) {
			t.Errorf("%s: natively installed program dumps differently through ovs-ofctl:\n%s", g.File, flowtest.Diff(string(viaOfctl), string(got)))
		}
		dump, err := native.Dump(ctx, br.Bridge)
		if err != nil {
			t.Fatalf("%s: native dump: %v", g.File, err)
		}
		decoded, err := ovsflow.SortDump(dump)
		if err != nil {
			t.Fatal(err)
		}
		if string(decoded) != string(golden) {
			t.Errorf("%s: native dump decodes differently from the program:\n%s", g.File, flowtest.Diff(string(golden), string(decoded)))
		}
	}
}

// A bundle with one flow the switch refuses changes nothing, and the error
// names that flow.
func TestNativeBundleBadFlow(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	native := nativeFor(t, br, 0)
	ctx := ctxFor(t)
	a := ovsflow.NewApplier(br.Bridge, native, ovsflow.StaticPorts(br.Ports()), testLog(t))
	p := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true})
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
// client reaches the bridge through a proxy that counts the OpenFlow
// messages it forwards and, once half of the bundle's flow-mods have gone
// through and before any commit, holds the stream while the test kills
// ovs-vswitchd. So the kill provably lands mid-bundle: the apply must
// fail, the Applier's Run must replay the last program it applied (the
// small one, not a part of the big one) after the restart, and applying
// the large program again must leave the bridge holding it whole.
func TestNativeReplayAfterKillMidBundle(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	px := startBundleProxy(t, filepath.Join(br.RunDir, br.Bridge+".mgmt"))
	native := ovsflow.NewNativeTransport(br.RunDir, ovsflow.NativeOptions{Logger: testLog(t).Logger,
		Target: func(string) (string, string) { return "unix", px.addr }})
	t.Cleanup(func() { native.Close() })
	ctx := ctxFor(t)
	a := ovsflow.NewApplier(br.Bridge, native, ovsflow.StaticPorts(br.Ports()), testLog(t))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	small := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true})
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

	holdAt := big.Len() / 2 // of the ~big.Len() flow-mods of the small->big bundle
	px.arm(holdAt)
	applied := make(chan error, 1)
	go func() { _, err := a.Apply(ctx, big); applied <- err }()
	var held bundleCount
	select {
	case held = <-px.reached:
	case err := <-applied:
		t.Fatalf("the apply of %d flows ended (%v) before %d of its flow-mods went through the proxy", big.Len(), err, holdAt)
	}
	if held.adds != holdAt || held.commits != 0 || held.opens != 1 {
		t.Fatalf("proxy held the stream at %+v, want one open bundle, %d adds and no commit", held, holdAt)
	}
	br.KillVswitchd()
	close(px.resume)
	err := <-applied
	t.Logf("apply of %d flows with ovs-vswitchd killed mid-bundle (%+v): %v", big.Len(), held, err)
	if err == nil {
		t.Fatal("the apply whose bundle was never committed reported success")
	}
	br.StartVswitchd()
	waitFor(t, 30*time.Second, "last applied (small) program replayed", func() bool { return dumped() == wantSmall })
	if _, err := a.Apply(ctx, big); err != nil {
		t.Fatalf("apply again after the restart: %v", err)
	}
	if d := dumped(); d != wantBig {
		t.Errorf("bridge does not hold the full program:\n%s", flowtest.Diff(wantBig, d))
	}
	// The native dump of the whole program spans many multipart replies.
	dump, err := native.Dump(ctx, br.Bridge)
	if err != nil {
		t.Fatal(err)
	}
	if sorted, err := ovsflow.SortDump(dump); err != nil || string(sorted) != wantBig {
		t.Errorf("native dump of %d flows differs from the program (%v):\n%s", big.Len(), err, flowtest.Diff(wantBig, string(sorted)))
	}
}

// bundleCount is what a bundleProxy forwarded of the bundle in progress.
type bundleCount struct{ opens, adds, commits int }

// bundleProxy forwards OpenFlow connections to a bridge's management
// socket. Once armed, it counts the bundle messages the client sends and,
// when holdAt flow-mods of a bundle have been forwarded, stops forwarding
// reports the count on reached and waits for resume.
type bundleProxy struct {
	addr    string
	holdAt  atomic.Int64
	armed   atomic.Bool
	once    sync.Once
	reached chan bundleCount
	resume  chan struct{}
}

// arm starts counting; the stream is held after holdAt flow-mods.
func (p *bundleProxy) arm(holdAt int) {
	p.holdAt.Store(int64(holdAt))
	p.armed.Store(true)
}

func startBundleProxy(t *testing.T, target string) *bundleProxy {
	p := &bundleProxy{addr: filepath.Join(t.TempDir(), "proxy.sock"),
		reached: make(chan bundleCount, 1), resume: make(chan struct{})}
	l, err := net.Listen("unix", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		p.once.Do(func() {}) // a hold not reached yet never happens
		select {
		case <-p.resume:
		default:
			close(p.resume)
		}
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(c, s); c.Close() }()
			go func() { defer wg.Done(); p.forward(s, c); s.Close() }()
		}
	}()
	return p
}

// forward copies OpenFlow messages from the client to the switch, counting
// the bundle ones while armed.
func (p *bundleProxy) forward(dst io.Writer, src io.Reader) {
	var n bundleCount
	hdr := make([]byte, 8)
	for {
		if _, err := io.ReadFull(src, hdr); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(hdr[2:4]))
		copy(msg, hdr)
		if len(msg) < 8 {
			return
		}
		if _, err := io.ReadFull(src, msg[8:]); err != nil {
			return
		}
		if p.armed.Load() {
			switch {
			case msg[1] == openflow.TypeBundleControl && len(msg) >= 14:
				switch binary.BigEndian.Uint16(msg[12:14]) {
				case openflow.BundleOpen:
					n.opens++
				case openflow.BundleCommit:
					n.commits++
				}
			case msg[1] == openflow.TypeBundleAdd:
				if int64(n.adds) == p.holdAt.Load() { // holdAt flow-mods forwarded, this one not
					held := false
					p.once.Do(func() { held = true })
					if held {
						p.reached <- n
						<-p.resume
						return // the switch is gone: drop this message and the rest
					}
				}
				n.adds++
			}
		}
		if _, err := dst.Write(msg); err != nil {
			return
		}
	}
}

// Each kind of flow-mod does on the bridge what ovs-ofctl's bundle of the
// same line does.
func TestNativeFlowMods(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	native := nativeFor(t, br, 0)
	ctx := ctxFor(t)
	base := []ovsflow.FlowMod{
		{Op: ovsflow.ModAdd, Flow: "cookie=0x1, priority=10,ip actions=NORMAL"},
		{Op: ovsflow.ModAdd, Flow: "cookie=0x1, priority=10,ip,nw_dst=10.0.0.0/8 actions=LOCAL"},
		{Op: ovsflow.ModAdd, Flow: "cookie=0x2, table=1, priority=5,tcp,tp_dst=80 actions=output:1"},
	}
	for _, c := range []struct {
		name string
		mods []ovsflow.FlowMod
	}{
		{"modify_strict keeps the cookie, changes only the exact flow", []ovsflow.FlowMod{
			{Op: ovsflow.ModModifyStrict, Flow: "cookie=0x9, priority=10,ip actions=drop"}}},
		{"delete_strict removes only the exact flow", []ovsflow.FlowMod{
			{Op: ovsflow.ModDeleteStrict, Flow: "priority=10,ip"}}},
		{"add with a new cookie replaces the flow", []ovsflow.FlowMod{
			{Op: ovsflow.ModAdd, Flow: "cookie=0x3, table=1, priority=5,tcp,tp_dst=80 actions=output:2"}}},
		{"a bundle of each, in order", []ovsflow.FlowMod{
			{Op: ovsflow.ModDeleteStrict, Flow: "table=1, priority=5,tcp,tp_dst=80"},
			{Op: ovsflow.ModAdd, Flow: "cookie=0x4, table=1, priority=5,tcp,tp_dst=80 actions=resubmit(,2)"},
			{Op: ovsflow.ModModifyStrict, Flow: "priority=10,ip,nw_dst=10.0.0.0/8 actions=ct(commit,zone=64000,nat(src=172.18.0.3)),output:1"}}},
	} {
		var want, got []byte
		for _, tr := range []ovsflow.Transport{br.Transport, native} {
			br.Ofctl("del-flows", br.Mgmt())
			for _, mods := range [][]ovsflow.FlowMod{base, c.mods} {
				if err := tr.Bundle(ctx, br.Bridge, mods); err != nil {
					t.Fatalf("%s: %T: %v", c.name, tr, err)
				}
			}
			want, got = got, br.Dump()
		}
		if string(got) != string(want) {
			t.Errorf("%s: native bridge differs from ovs-ofctl's:\n%s", c.name, flowtest.Diff(string(want), string(got)))
		}
	}
}

// On a bridge that allows only OpenFlow 1.3, the default transport falls
// back to it (bundles as ONF extensions) and installs the seed program
// exactly as ovs-ofctl would.
func TestNativeDefaultOnOpenFlow13Bridge(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	br.Vsctl("set", "Bridge", br.Bridge, "protocols=OpenFlow13")
	a := defaultApplier(t, br, false)
	golden := readGolden(t, "seed-node.flows")
	p := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true})
	if res, err := a.Apply(ctxFor(t), p); err != nil || res.Added+res.Modified != p.Len() {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	wantDump(t, br, golden, "program installed over OpenFlow 1.3 differs")
}

// Flows of another controller that the model cannot hold (a field, an
// action or a timeout of its own) do not stop the native Applier: kept
// with KeepForeign, deleted exactly without it.
func TestNativeForeignFlows(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	ctx := ctxFor(t)
	br.Ofctl("del-flows", br.Mgmt())
	for _, f := range []string{
		"cookie=0x77,priority=200,udp,actions=move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[],NORMAL",
		"cookie=0x78,table=3,priority=201,reg0=0x1,actions=NORMAL",
		"cookie=0x79,idle_timeout=600,priority=202,tcp,actions=NORMAL",
	} {
		br.Ofctl("add-flow", br.Mgmt(), f)
	}
	foreign, err := br.Transport.Dump(ctx, br.Bridge)
	if err != nil {
		t.Fatal(err)
	}
	p := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true})
	program, err := p.Render(br.Ports())
	if err != nil {
		t.Fatal(err)
	}
	both, err := ovsflow.SortDump(append(foreign, program...))
	if err != nil {
		t.Fatal(err)
	}
	keep := defaultApplier(t, br, true)
	if res, err := keep.Apply(ctx, p); err != nil || res != (ovsflow.Result{Added: p.Len()}) {
		t.Fatalf("apply with foreign flows kept: %+v, %v", res, err)
	}
	wantDump(t, br, both, "foreign flows not kept")
	exact := defaultApplier(t, br, false)
	if res, err := exact.Apply(ctx, p); err != nil || res != (ovsflow.Result{Deleted: 3}) {
		t.Fatalf("apply deleting foreign flows: %+v, %v", res, err)
	}
	wantDump(t, br, program, "foreign flows not deleted")
}

// The transport reaches a switch over TCP as over its unix socket (here
// through a TCP relay to the bridge's management socket, as ovs-vswitchd
// runs in a network namespace of its own).
func TestNativeOverTCP(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", strings.TrimPrefix(br.Mgmt(), "unix:"))
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	tr := ovsflow.NewNativeTransport("", ovsflow.NativeOptions{Logger: testLog(t).Logger,
		Target: func(string) (string, string) { return "tcp", ln.Addr().String() }})
	t.Cleanup(func() { tr.Close() })
	p := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true})
	a := ovsflow.NewApplier(br.Bridge, tr, ovsflow.StaticPorts(br.Ports()), testLog(t))
	if _, err := a.Apply(ctxFor(t), p); err != nil {
		t.Fatal(err)
	}
	golden := readGolden(t, "seed-node.flows")
	wantDump(t, br, golden, "program applied over TCP differs")
}
