package openflow_test

import (
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsflow/openflow"
	"github.com/ovnedge/ovnedge/testbed"
)

// bridge is a real OVS bridge (userspace datapath) for the test.
func bridge(t *testing.T) *testbed.OVS {
	return testbed.StartOVS(t, testbed.OVSOptions{NoPatch: true})
}

// client is a client of ovs's bridge, closed with the test.
func client(t *testing.T, ovs *testbed.OVS, opts openflow.Options) *openflow.Client {
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	c := openflow.NewClient("unix", filepath.Join(ovs.RunDir, ovs.Bridge+".mgmt"), opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// HELLO negotiates the highest version the bridge allows, OpenFlow 1.5
// down to 1.3, and FEATURES gives the bridge's datapath id.
func TestClientNegotiation(t *testing.T) {
	t.Parallel()
	ovs := bridge(t)
	ctx := t.Context()
	dpid, err := strconv.ParseUint(strings.Trim(ovs.Vsctl("get", "Bridge", ovs.Bridge, "datapath_id"), `"`), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		protocols string // the bridge's
		max       uint8  // the client's
		want      uint8  // 0: no common version
	}{
		{"OpenFlow10,OpenFlow13,OpenFlow14,OpenFlow15", 0, openflow.Version15},
		{"OpenFlow10,OpenFlow13,OpenFlow14,OpenFlow15", openflow.Version14, openflow.Version14},
		{"OpenFlow13", 0, openflow.Version13},
		{"OpenFlow10,OpenFlow13", openflow.Version14, openflow.Version13},
		{"OpenFlow13,OpenFlow14", 0, openflow.Version14},
		{"OpenFlow10", 0, 0},
	} {
		ovs.Vsctl("set", "Bridge", ovs.Bridge, "protocols="+c.protocols)
		cl := client(t, ovs, openflow.Options{MaxVersion: c.max})
		got, err := cl.Connect(ctx)
		if c.want == 0 {
			if err == nil {
				t.Errorf("bridge with %s: connected in %s, want no common version", c.protocols, openflow.VersionName(got))
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("bridge with %s, client up to %s: %s, %v; want %s", c.protocols,
				openflow.VersionName(c.max), openflow.VersionName(got), err, openflow.VersionName(c.want))
			continue
		}
		f, err := cl.Features(ctx)
		if err != nil || f.DatapathID != dpid || f.NTables == 0 {
			t.Errorf("features %+v, %v; want datapath id %016x", f, err, dpid)
		}
		if err := cl.Barrier(ctx); err != nil {
			t.Errorf("barrier in %s: %v", openflow.VersionName(got), err)
		}
	}
}

// Flow-mods go in as a bundle and come back from a flow-stats dump as they
// were sent, in every version; a refused flow-mod names its index and
// leaves the table alone.
func TestClientBundleAndDump(t *testing.T) {
	t.Parallel()
	ovs := bridge(t)
	ctx := t.Context()
	ctMark := openflow.OXM{Class: openflow.ClassNXM1, Field: openflow.NXMCtMark, Value: []byte{0, 0, 0, 1}}
	flows := []openflow.FlowStats{
		{Table: 0, Priority: 110, Cookie: 5, Match: []openflow.OXM{
			{Class: openflow.ClassOpenFlow, Field: openflow.OXMInPort, Value: []byte{0, 0, 0, 1}},
			{Class: openflow.ClassOpenFlow, Field: openflow.OXMEthType, Value: []byte{0x08, 0x06}},
			{Class: openflow.ClassOpenFlow, Field: openflow.OXMARPOp, Value: []byte{0, 1}},
			{Class: openflow.ClassOpenFlow, Field: openflow.OXMARPTpa, Value: []byte{172, 18, 0, 50}},
		}, Actions: []openflow.Action{openflow.Output{Port: openflow.PortLocal}}},
		{Table: 0, Priority: 105, Cookie: 6, Match: []openflow.OXM{
			{Class: openflow.ClassOpenFlow, Field: openflow.OXMEthType, Value: []byte{0x08, 0x00}},
			{Class: openflow.ClassNXM1, Field: openflow.NXMPktMark, Value: []byte{0, 0, 3, 0xf0}},
		}, Actions: []openflow.Action{
			openflow.Conntrack{Flags: openflow.CTCommit, Zone: 64000, Table: openflow.CTNoTable, Actions: []openflow.Action{
				openflow.NAT{Flags: openflow.NATSrc, AddrMin: netip.MustParseAddr("172.18.0.3")},
				openflow.SetField{Field: ctMark},
			}},
			openflow.Output{Port: 1},
		}},
		{Table: 1, Priority: 100, Cookie: 7, Actions: []openflow.Action{openflow.Output{Port: openflow.PortNormal}}},
	}
	for _, v := range []uint8{openflow.Version13, openflow.Version14, openflow.Version15} {
		cl := client(t, ovs, openflow.Options{MaxVersion: v})
		mods := []openflow.FlowMod{{Command: openflow.FlowDelete, Table: openflow.TableAll}}
		for _, f := range flows {
			mods = append(mods, openflow.FlowMod{Command: openflow.FlowAdd, Table: f.Table, Priority: f.Priority,
				Cookie: f.Cookie, Match: f.Match, Actions: f.Actions})
		}
		if err := cl.Bundle(ctx, mods); err != nil {
			t.Fatalf("%s: %v", openflow.VersionName(v), err)
		}
		got, err := cl.DumpFlows(ctx)
		if err != nil {
			t.Fatalf("%s: %v", openflow.VersionName(v), err)
		}
		if !reflect.DeepEqual(got, flows) {
			t.Errorf("%s: dump\n%#v\nwant\n%#v", openflow.VersionName(v), got, flows)
		}
		bad := []openflow.FlowMod{
			{Command: openflow.FlowDelete, Table: openflow.TableAll},
			{Command: openflow.FlowAdd, Priority: 1, Actions: []openflow.Action{openflow.Group{ID: 99}}},
		}
		var me *openflow.ModError
		if err := cl.Bundle(ctx, bad); !errors.As(err, &me) || me.Index != 1 || me.Err.Type != 2 {
			t.Errorf("%s: bundle with a missing group: %v, want a bad_action error for flow-mod #1", openflow.VersionName(v), err)
		}
		if got, err := cl.DumpFlows(ctx); err != nil || len(got) != len(flows) {
			t.Errorf("%s: after a refused bundle: %d flows, %v", openflow.VersionName(v), len(got), err)
		}
	}
}

// signal sends sig to the test's own ovs-vswitchd (from its pidfile).
func signal(t *testing.T, ovs *testbed.OVS, sig syscall.Signal) {
	b, err := os.ReadFile(filepath.Join(ovs.Dir, "ovs-vswitchd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("signal %v to ovs-vswitchd %d: %v", sig, pid, err)
	}
}

// next waits for a handshake signal from Watch.
func next(t *testing.T, up <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-up:
	case <-time.After(within):
		t.Fatalf("%s: no handshake within %v", what, within)
	}
}

// Echo requests keep a live connection up and find a switch that went
// silent; Watch reconnects after the switch comes back or restarts.
func TestClientKeepaliveAndReconnect(t *testing.T) {
	t.Parallel()
	ovs := bridge(t)
	ctx := t.Context()
	const interval = 200 * time.Millisecond
	cl := client(t, ovs, openflow.Options{EchoInterval: interval})
	up := cl.Watch(ctx)
	next(t, up, 10*time.Second, "first connection")

	// Five silent intervals: echo requests are answered, nothing drops.
	select {
	case <-up:
		t.Fatal("reconnected although the switch answers echo requests")
	case <-time.After(5 * interval):
	}

	// A stopped switch answers nothing: the echo timeout drops the
	// connection, and Watch reconnects once it runs again.
	signal(t, ovs, syscall.SIGSTOP)
	t.Cleanup(func() { signal(t, ovs, syscall.SIGCONT) })
	time.Sleep(6 * interval)
	signal(t, ovs, syscall.SIGCONT)
	next(t, up, 10*time.Second, "after an echo timeout")

	// A killed and restarted switch: operations fail meanwhile, then work.
	ovs.KillVswitchd()
	if err := cl.Barrier(ctx); err == nil {
		t.Error("barrier to a killed switch succeeded")
	}
	ovs.StartVswitchd()
	next(t, up, 10*time.Second, "after a restart")
	if err := cl.Barrier(ctx); err != nil {
		t.Errorf("barrier after the restart: %v", err)
	}
}

// A flow monitor reports the flows another connection adds, modifies and
// deletes, not the client's own, and is armed again after ovs-vswitchd
// restarts.
func TestClientMonitorFlows(t *testing.T) {
	t.Parallel()
	ovs := bridge(t)
	ctx := t.Context()
	cl := client(t, ovs, openflow.Options{MaxVersion: openflow.Version14})
	updates := cl.MonitorFlows(ctx)
	own := []openflow.FlowMod{{Command: openflow.FlowAdd, Priority: 7, Cookie: 0x77,
		Match:   []openflow.OXM{{Class: openflow.ClassOpenFlow, Field: openflow.OXMEthType, Value: []byte{0x08, 0x06}}},
		Actions: []openflow.Action{openflow.Output{Port: openflow.PortNormal}}}}
	next := func() openflow.FlowUpdate {
		t.Helper()
		for {
			select {
			case u := <-updates:
				if u.Cookie == 0 {
					// After a restart ovs-vswitchd replaces the bridge's
					// default NORMAL flow once the controller connects.
					t.Logf("skipped update %+v", u)
					continue
				}
				return u
			case <-time.After(10 * time.Second):
				t.Fatal("no flow update within 10s")
			}
		}
	}
	expect := func(event uint16, cookie uint64) {
		t.Helper()
		if u := next(); u.Event != event || u.Cookie != cookie {
			t.Errorf("update %s cookie %#x, want %s cookie %#x", openflow.EventName(u.Event), u.Cookie, openflow.EventName(event), cookie)
		}
	}
	for round := range 2 {
		if err := cl.Bundle(ctx, own); err != nil {
			t.Fatal(err)
		}
		if !cl.Monitoring() {
			t.Fatalf("round %d: not monitoring on an OpenFlow 1.4 connection", round)
		}
		ovs.Ofctl("add-flow", ovs.Mgmt(), "cookie=0x5,priority=5,ip,actions=drop")
		expect(openflow.EventAdded, 0x5) // the client's own add was not reported
		ovs.Ofctl("mod-flows", ovs.Mgmt(), "cookie=0x5/-1,ip,actions=NORMAL")
		expect(openflow.EventModified, 0x5)
		ovs.Ofctl("del-flows", ovs.Mgmt(), "cookie=0x77/-1")
		if u := next(); u.Event != openflow.EventRemoved || u.Cookie != 0x77 || u.Priority != 7 || len(u.Match) != 1 {
			t.Errorf("update %+v, want the removal of the client's flow", u)
		}
		ovs.Ofctl("del-flows", ovs.Mgmt(), "cookie=0x5/-1")
		expect(openflow.EventRemoved, 0x5)
		if round == 0 {
			ovs.StopVswitchd()
			ovs.StartVswitchd()
			if _, err := cl.Connect(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case u := <-updates:
		t.Errorf("unexpected update %+v", u)
	default:
	}
}
