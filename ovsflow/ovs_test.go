package ovsflow_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest/bridge"
	"github.com/ovnedge/ovnedge/testbed"
)

// testLog sends an Applier's logs to the test's output.
func testLog(t testing.TB) ovsflow.ApplierOptions {
	return ovsflow.ApplierOptions{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Every golden program loads into a real bridge and dumps back equal.
func TestGoldensOnRealBridge(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	for _, g := range brextest.Goldens {
		want, err := os.ReadFile(brextest.GoldenPath(g.File))
		if err != nil {
			t.Fatal(err)
		}
		br.Install(brextest.MustProgram(t, g.Parts))
		if got := br.Dump(); string(got) != string(want) {
			t.Errorf("%s: bridge dump differs from the golden file:\n%s", g.File, flowtest.Diff(string(want), string(got)))
		}
	}
}

func TestTraceSeedNode(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	br.Install(brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true}))
	cases := []struct {
		name, flow, rule, datapath string
	}{
		{"ARP for a VIP goes to LOCAL", "in_port=1,arp,arp_op=1,arp_tpa=172.18.0.50", "priority 110", ""},
		{"NS for a v6 VIP goes to LOCAL", "in_port=1,icmp6,icmpv6_type=135,icmpv6_code=0,nd_target=2001:db8::50", "priority 110", ""},
		{"ARP for another address is switched", "in_port=1,arp,arp_op=1,arp_tpa=172.18.0.77", "priority 0,", ""},
		{"local pod leaves unSNATed", "in_port=2,tcp,nw_src=10.244.2.5,nw_dst=8.8.8.8", "priority 109", "ct(commit,zone=64000,mark=0x1/0xffffffff),"},
		{"remote pod is dropped", "in_port=2,tcp,nw_src=10.244.1.5,nw_dst=8.8.8.8", "priority 104", "drop"},
		{"pkt_mark 1008 is SNATed to the node IP", "in_port=2,pkt_mark=0x3f0,tcp,nw_src=10.244.1.5,nw_dst=172.18.0.1", "priority 105", "ct(commit,zone=64000,mark=0x1/0xffffffff,nat(src=172.18.0.3)),"},
		{"anything else from the patch port", "in_port=2,tcp,nw_src=192.168.7.7,nw_dst=8.8.8.8", "priority 100", "ct(commit,zone=64000,mark=0x1/0xffffffff),"},
	}
	for _, c := range cases {
		tr := br.Trace(c.flow)
		if len(tr.Rules) == 0 || !strings.Contains(tr.Rules[0], c.rule) {
			t.Errorf("%s: first rule %q, want %q\n%s", c.name, tr.Rules, c.rule, tr.Output)
		}
		if strings.Contains(c.rule, "110") && !strings.Contains(tr.Output, "\n    LOCAL\n") {
			t.Errorf("%s: not sent to LOCAL\n%s", c.name, tr.Output)
		}
		// Datapath port numbers are not ofports: check the OpenFlow output.
		if c.datapath != "" && (!strings.HasPrefix(tr.Datapath, c.datapath) || (c.datapath != "drop" && !strings.Contains(tr.Output, "\n    output:1\n"))) {
			t.Errorf("%s: datapath actions %q, want %q and OpenFlow output:1\n%s", c.name, tr.Datapath, c.datapath, tr.Output)
		}
	}
}

// The VIP on the host side of the bridge: arping from the external host
// gets exactly one reply.
func TestARPBypassRealTraffic(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	br.Install(brextest.MustProgram(t, brextest.Parts{Base: true, Services: true}))
	br.Exec(br.NS, "ip", "addr", "add", "172.18.0.50/32", "dev", br.Bridge)
	out, err := br.ExecErr(br.ExtNS, "arping", "-c", "1", "-w", "2", "-I", "eth0", "172.18.0.50")
	if err != nil || !strings.Contains(out, "Received 1 response(s)") {
		t.Fatalf("arping: %v\n%s", err, out)
	}
	if tr := br.Trace("in_port=1,arp,arp_op=1,arp_tpa=172.18.0.50"); !strings.Contains(tr.Rules[0], "priority 110") {
		t.Errorf("ARP request did not take the bypass: %s", tr.Output)
	}
}

// dialPorts reads the bridge's ofports from its real OVSDB.
func dialPorts(t testing.TB, br *bridge.Bridge) *ovsflow.OVSDBPorts {
	ports, err := ovsflow.DialOVSDBPorts(ctxFor(t), br.DB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ports.Close)
	return ports
}

func TestApplyIncremental(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	ctx := ctxFor(t)
	// A flow of another controller, which KeepForeign leaves alone.
	foreign := "cookie=0x77, priority=200,udp actions=NORMAL"
	br.Ofctl("add-flow", br.Mgmt(), foreign)

	a := ovsflow.NewApplier(br.Bridge, br.Transport, dialPorts(t, br), ovsflow.ApplierOptions{KeepForeign: true, Logger: testLog(t).Logger})
	p := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true})
	res, err := a.Apply(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	// A new bridge holds one flow, priority=0 actions=NORMAL, that the base
	// program replaces with its own cookie.
	if res.Added+res.Modified != p.Len() || res.Modified != 1 || res.Deleted != 0 {
		t.Errorf("first apply: %+v, want %d adds or modifies", res, p.Len())
	}
	// One service changes its VIP: one delete, one add.
	svc := brextest.Services()[1]
	svc.VIPs = []netip.Addr{netip.MustParseAddr("172.18.0.61")}
	flows, err := brex.ARPBypass(brex.Bypass{Uplink: brextest.Uplink}, svc)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Set(svc.Owner(), flows); err != nil {
		t.Fatal(err)
	}
	if res, err = a.Apply(ctx, p); err != nil || res != (ovsflow.Result{Added: 1, Deleted: 1}) {
		t.Fatalf("apply one changed service: %+v, %v", res, err)
	}
	if res, err = a.Apply(ctx, p); err != nil || res.Changed() {
		t.Fatalf("second identical apply changed %+v, %v", res, err)
	}
	want, err := p.Render(br.Ports())
	if err != nil {
		t.Fatal(err)
	}
	wantAll, err := ovsflow.SortDump(append([]byte(foreign+"\n"), want...))
	if err != nil {
		t.Fatal(err)
	}
	if got := br.Dump(); string(got) != string(wantAll) {
		t.Errorf("bridge differs from program + foreign flow:\n%s", flowtest.Diff(string(wantAll), string(got)))
	}
	// Without KeepForeign the bridge ends with exactly the program.
	b := ovsflow.NewApplier(br.Bridge, br.Transport, ovsflow.StaticPorts(br.Ports()), testLog(t))
	if res, err = b.Apply(ctx, p); err != nil || res != (ovsflow.Result{Deleted: 1}) {
		t.Fatalf("apply without KeepForeign: %+v, %v", res, err)
	}
	if got := br.Dump(); string(got) != string(want) {
		t.Errorf("bridge differs from program:\n%s", flowtest.Diff(string(want), string(got)))
	}
}

// waitFor polls cond every 20 ms until it holds or d passes, and returns
// how long it took.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// runApplier applies p through tr (nil: the default, native transport)
// and keeps the Applier's Run loop going for the test.
func runApplier(t testing.TB, br *bridge.Bridge, tr ovsflow.Transport, p *ovsflow.Program) []byte {
	ctx, cancel := context.WithCancel(context.Background())
	opts := testLog(t)
	opts.RunDir = br.RunDir
	a := ovsflow.NewApplier(br.Bridge, tr, dialPorts(t, br), opts)
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; a.Close() })
	if _, err := a.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	want, err := p.Render(br.Ports())
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// BenchmarkReplayAfterVswitchdRestart reports how long after ovs-vswitchd
// is back (SIGKILL, restart) the Applier has replayed the seed program,
// with the native transport and with ovs-ofctl: replay-ms.
func BenchmarkReplayAfterVswitchdRestart(b *testing.B) {
	for _, tc := range []struct {
		name string
		tr   func(*bridge.Bridge) ovsflow.Transport
	}{
		{"native", func(*bridge.Bridge) ovsflow.Transport { return nil }},
		{"ovs-ofctl", func(br *bridge.Bridge) ovsflow.Transport { return br.Transport }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			br := brextest.NewBridge(b)
			want := runApplier(b, br, tc.tr(br), brextest.MustProgram(b, brextest.Parts{Base: true, Egress: true, Services: true}))
			var replay time.Duration
			for b.Loop() {
				br.KillVswitchd()
				br.StartVswitchd()
				replay += waitFor(b, 30*time.Second, "program replayed", func() bool {
					dump, err := br.Transport.Dump(context.Background(), br.Bridge)
					if err != nil {
						return false
					}
					got, err := ovsflow.SortDump(dump)
					return err == nil && string(got) == string(want)
				})
			}
			b.ReportMetric(float64(replay.Microseconds())/1000/float64(b.N), "replay-ms")
		})
	}
}

// The program comes back after ovs-vswitchd restarts, with the default
// native transport and with the ovs-ofctl fallback. How fast is
// BenchmarkReplayAfterVswitchdRestart's to report; the 30 s here is only
// a give-up timeout.
func TestReplayAfterVswitchdRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tr   func(*bridge.Bridge) ovsflow.Transport
	}{
		{"native", func(*bridge.Bridge) ovsflow.Transport { return nil }},
		{"ovs-ofctl", func(br *bridge.Bridge) ovsflow.Transport { return br.Transport }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			br := brextest.NewBridge(t)
			want := runApplier(t, br, tc.tr(br), brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true}))
			for _, kill := range []struct {
				name string
				stop func()
			}{{"SIGKILL", br.KillVswitchd}, {"graceful exit", br.StopVswitchd}} {
				kill.stop()
				br.StartVswitchd()
				took := waitFor(t, 30*time.Second, "program replayed after "+kill.name, func() bool {
					dump, err := br.Transport.Dump(context.Background(), br.Bridge)
					if err != nil {
						return false
					}
					got, err := ovsflow.SortDump(dump)
					return err == nil && string(got) == string(want)
				})
				t.Logf("after %s and restart of ovs-vswitchd: program back in %v", kill.name, took)
			}
		})
	}
}

func TestRewriteOnOfportChange(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	runApplier(t, br, nil, brextest.MustProgram(t, brextest.Parts{Egress: true, Services: true}))
	br.Vsctl("set", "Interface", brextest.Uplink, "ofport_request=7")
	took := waitFor(t, 5*time.Second, "flows rewritten for ofport 7", func() bool {
		d := string(br.Dump())
		return strings.Contains(d, "in_port=7,arp_tpa=172.18.0.50") && strings.Contains(d, "output:7") && !strings.Contains(d, "output:1\n")
	})
	t.Logf("flows follow the new ofport after %v", took)
}

func TestBadInputKeepsFlows(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	ctx := ctxFor(t)
	a := ovsflow.NewApplier(br.Bridge, br.Transport, ovsflow.StaticPorts(br.Ports()), testLog(t))
	p := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Services: true})
	if _, err := a.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	before := br.Dump()

	// Invalid IP: the builder refuses it, naming the service.
	_, err := brex.ARPBypass(brex.Bypass{Uplink: brextest.Uplink},
		brex.Service{Namespace: "default", Name: "bad", Ports: []int32{80}, VIPs: []netip.Addr{{}}})
	if err == nil || !strings.Contains(err.Error(), "default/bad") {
		t.Errorf("invalid VIP: %v", err)
	}
	// Unknown port name.
	bad := p.Clone()
	flows, err := brex.ARPBypass(brex.Bypass{Uplink: "eth9"}, brex.Service{Namespace: "ns", Name: "x", Ports: []int32{80},
		VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.70")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Set("service/ns/x", flows); err != nil {
		t.Fatal(err)
	}
	var ue *ovsflow.UnknownPortError
	if _, err := a.Apply(ctx, bad); !errors.As(err, &ue) || ue.Port != "eth9" || !strings.Contains(err.Error(), "service/ns/x") {
		t.Errorf("unknown port: %v", err)
	}
	// Conflicting owners.
	clash := []ovsflow.Flow{{Priority: 110, Cookie: 1, Match: ovsflow.Match{Proto: ovsflow.ProtoARP, InPort: ovsflow.PortName(brextest.Uplink),
		ARPTpa: netip.MustParsePrefix("172.18.0.50/32"), ARPOp: 1}, Actions: []ovsflow.Action{ovsflow.Output(ovsflow.NORMAL)}}}
	var ce *ovsflow.ConflictError
	if err := bad.Set("service/other/clash", clash); !errors.As(err, &ce) || ce.Other != "service/default/web-external" {
		t.Errorf("conflict: %v", err)
	}
	// A flow OVS refuses (a group that does not exist): the bundle is
	// rejected whole and the error names the flow.
	refused := p.Clone()
	if err := refused.Set("groupie", []ovsflow.Flow{{Priority: 300, Match: ovsflow.Match{Proto: ovsflow.ProtoUDP},
		Actions: []ovsflow.Action{ovsflow.Group(99)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(ctx, refused); err == nil || !strings.Contains(err.Error(), "group") {
		t.Errorf("refused flow: %v", err)
	}
	// A missing bridge.
	missing := ovsflow.NewApplier("br-nope", br.Transport, ovsflow.StaticPorts(br.Ports()), testLog(t))
	if _, err := missing.Apply(ctx, p); err == nil || !strings.Contains(err.Error(), "br-nope") {
		t.Errorf("missing bridge: %v", err)
	}
	if after := br.Dump(); string(after) != string(before) {
		t.Errorf("bad input changed the bridge:\n%s", flowtest.Diff(string(before), string(after)))
	}
	// The Applier still works and sends nothing: it re-read the bridge.
	if res, err := a.Apply(ctx, p); err != nil || res.Changed() {
		t.Errorf("apply after errors: %+v, %v", res, err)
	}
}

// The bridge MAC comes from the bridge interface's mac_in_use.
func TestOVSDBPortsMAC(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	ports := dialPorts(t, br)
	want := strings.Trim(br.Vsctl("get", "Interface", br.Bridge, "mac_in_use"), `"`)
	var mac net.HardwareAddr
	testbed.Eventually(t, 5*time.Second, func() (err error) {
		mac, err = ports.MAC(ctxFor(t), br.Bridge)
		return err
	})
	if mac.String() != want {
		t.Errorf("MAC %s, want %s", mac, want)
	}
	if _, err := ports.MAC(ctxFor(t), "nope"); err == nil {
		t.Error("an unknown interface must be an error")
	}
}
