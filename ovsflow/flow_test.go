package ovsflow

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseRoundTrip(t *testing.T) {
	lines := []string{
		"priority=0 actions=NORMAL",
		"cookie=0x1, table=3, priority=7,pkt_mark=0x3f0/0xfff,ct_state=-new+trk,ct_zone=5,ct_mark=0x2,tcp6,in_port=3,dl_vlan=10,dl_src=02:00:00:00:00:01,ipv6_src=fd00::/64,ipv6_dst=fd00::9,tp_src=1,tp_dst=80 actions=ct(commit,table=1,zone=64000,nat(dst=[fd00::9]:80),exec(set_field:0x1->ct_mark)),output:4",
		"priority=10,ip actions=ct(commit,zone=1,nat(src=10.0.0.1-10.0.0.5:1000-2000),exec(load:0x1->NXM_NX_CT_MARK[]))",
		"priority=10,ipv6 actions=ct(commit,nat(src=fd00::1-fd00::5))",
		"priority=10,icmp,icmp_type=8,icmp_code=0 actions=resubmit(,5),resubmit(2,1),group:7,IN_PORT",
		"priority=10,arp,arp_spa=10.0.0.0/8,arp_tpa=10.1.2.3,arp_op=2 actions=set_field:02:00:00:00:00:09->eth_dst,set_field:10.0.0.1->ip_src,set_field:0x5->pkt_mark,pop_vlan,output:1",
		"table=1, priority=1 actions=drop",
	}
	for _, l := range lines {
		f, err := ParseFlow(" " + l)
		if err != nil {
			t.Errorf("ParseFlow(%q): %v", l, err)
			continue
		}
		if err := f.Validate(); err != nil {
			t.Errorf("Validate(%q): %v", l, err)
		}
		if got := f.String(); got != l {
			t.Errorf("round trip:\n got %s\nwant %s", got, l)
		}
	}
}

// Statistics are skipped and aliases read as the canonical field; so are
// ovs-ofctl's input form and go-openvswitch's text: ",actions=", an
// explicit idle_timeout=0, reserved ports in lower case, mod_nw_src.
func TestParseStatsAndAliases(t *testing.T) {
	cases := []struct{ in, want string }{
		{" cookie=0x5, duration=2.1s, table=0, n_packets=3, n_bytes=180, idle_age=1, priority=110,arp,in_port=1,arp_tpa=172.18.0.50,arp_op=1 actions=strip_vlan,mod_dl_dst:02:00:00:00:00:01,LOCAL",
			"cookie=0x5, priority=110,arp,in_port=1,arp_tpa=172.18.0.50,arp_op=1 actions=pop_vlan,set_field:02:00:00:00:00:01->eth_dst,LOCAL"},
		{"priority=10,ip,in_port=LOCAL,table=2,idle_timeout=0,cookie=0x000000000deff105,actions=mod_nw_src:10.0.0.1,strip_vlan,normal,local",
			"cookie=0xdeff105, table=2, priority=10,ip,in_port=LOCAL actions=set_field:10.0.0.1->ip_src,pop_vlan,NORMAL,LOCAL"},
	}
	for _, c := range cases {
		f, err := ParseFlow(c.in)
		if err != nil {
			t.Errorf("ParseFlow(%q): %v", c.in, err)
		} else if got := f.String(); got != c.want {
			t.Errorf("got %s\nwant %s", got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, l := range []string{
		"priority=1,idle_timeout=5,actions=NORMAL", // a Flow has no timeouts
		"priority=1,ipactions=NORMAL",
		"priority=1,ip actions=mod_nw_src:fd00::1",
		"priority=1,reg0=1 actions=NORMAL",     // unknown field: never dropped silently
		"priority=1,ip actions=learn(table=1)", // unknown action
		"priority=1,ip,nw_src=10.0.0.1/8 actions=NORMAL",
		"priority=1,ip",
		"priority=1,ct_state=trk actions=NORMAL",
		"priority=1,ip actions=ct(commit,nat(src=bogus))",
	} {
		if _, err := ParseFlow(l); err == nil {
			t.Errorf("ParseFlow(%q): no error", l)
		}
	}
}

func TestValidate(t *testing.T) {
	v4 := netip.MustParseAddr("10.0.0.1")
	v6 := netip.MustParseAddr("fd00::1")
	cases := []struct {
		name  string
		flow  Flow
		field string
	}{
		{"v6 prefix on ip", Flow{Match: Match{Proto: ProtoIP, NwSrc: Host(v6)}}, "nw_src"},
		{"nw_src without ip", Flow{Match: Match{Proto: ProtoARP, NwSrc: Host(v4)}}, "nw_src/nw_dst"},
		{"arp_tpa on ip", Flow{Match: Match{Proto: ProtoIP, ARPTpa: Host(v4)}}, "arp_spa/arp_tpa/arp_op"},
		{"tp_dst on ip", Flow{Match: Match{Proto: ProtoIP, TpDst: 80}}, "tp_src/tp_dst"},
		{"nd_target without NS", Flow{Match: Match{Proto: ProtoICMP6, NDTarget: v6}}, "nd_target"},
		{"v4 nat on v6", Flow{Match: Match{Proto: ProtoIPv6}, Actions: []Action{CT{Commit: true, NAT: &NAT{Kind: NATSrc, Addr: v4}}}}, "ct(nat)"},
		{"nat on arp", Flow{Match: Match{Proto: ProtoARP}, Actions: []Action{CT{Commit: true, NAT: &NAT{Kind: NATSrc, Addr: v4}}}}, "ct(nat)"},
		{"exec without commit", Flow{Actions: []Action{CT{Exec: []Action{SetField(FieldCtMark, 1)}}}}, "ct(exec)"},
		{"exec of pkt_mark", Flow{Actions: []Action{CT{Commit: true, Exec: []Action{SetField(FieldPktMark, 1)}}}}, "ct(exec)"},
		{"output nowhere", Flow{Actions: []Action{Output(Port{})}}, "output"},
		{"ct_state both", Flow{Match: Match{CtState: CtState{On: CtTrk, Off: CtTrk}}}, "ct_state"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var fe *FieldError
			err := c.flow.Validate()
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("Validate() = %v, want a FieldError on %s", err, c.field)
			}
		})
	}
}

func TestResolveUnknownPort(t *testing.T) {
	f := Flow{Match: Match{InPort: PortName("eth9")}, Actions: []Action{Output(LOCAL)}}
	_, err := f.Resolve(PortMap{"eth0": 1})
	var ue *UnknownPortError
	if !errors.As(err, &ue) || ue.Port != "eth9" {
		t.Fatalf("Resolve: %v, want UnknownPortError for eth9", err)
	}
}

func TestProgramOwners(t *testing.T) {
	a := Flow{Priority: 10, Cookie: 1, Match: Match{Proto: ProtoIP}, Actions: []Action{Output(NORMAL)}}
	b := Flow{Priority: 10, Cookie: 2, Match: Match{Proto: ProtoIP}, Actions: []Action{Output(LOCAL)}}
	same := a
	same.Cookie = 3
	var p Program
	if err := p.Set("svc-a", []Flow{a, a}); err != nil {
		t.Fatal(err)
	}
	if p.Len() != 1 {
		t.Errorf("duplicate flow of one owner not merged: Len %d", p.Len())
	}
	err := p.Set("svc-b", []Flow{b})
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Owner != "svc-b" || ce.Other != "svc-a" {
		t.Fatalf("Set(svc-b) = %v, want a ConflictError naming both owners", err)
	}
	if !strings.Contains(err.Error(), `"svc-a"`) || !strings.Contains(err.Error(), `"svc-b"`) {
		t.Errorf("error %q does not name both owners", err)
	}
	if len(p.Flows("svc-b")) != 0 {
		t.Error("rejected set was stored")
	}
	// Same flow, same actions: shared, rendered once with the first owner's cookie.
	if err := p.Set("svc-c", []Flow{same}); err != nil {
		t.Fatal(err)
	}
	text, err := p.Render(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(text), "cookie=0x1, priority=10,ip actions=NORMAL\n"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	p.Delete("svc-a")
	if text, _ = p.Render(nil); string(text) != "cookie=0x3, priority=10,ip actions=NORMAL\n" {
		t.Errorf("after deleting svc-a: %q", text)
	}
	// Once svc-a and svc-c are gone, b no longer conflicts.
	p.Delete("svc-c")
	if err := p.Set("svc-b", []Flow{b}); err != nil {
		t.Fatal(err)
	}
	// An invalid flow is refused with its owner named, and nothing changes.
	bad := Flow{Match: Match{Proto: ProtoARP, NwDst: Host(netip.MustParseAddr("10.0.0.1"))}}
	err = p.Set("svc-b", []Flow{bad})
	var fe *FlowError
	if !errors.As(err, &fe) || fe.Owner != "svc-b" {
		t.Fatalf("Set(invalid) = %v, want a FlowError for svc-b", err)
	}
	if len(p.Flows("svc-b")) != 1 {
		t.Error("invalid set replaced the owner's flows")
	}
}

func TestDiff(t *testing.T) {
	ports := PortMap{"eth0": 1}
	var p Program
	flow := func(cookie uint64, prio uint16, out Port) Flow {
		return Flow{Priority: prio, Cookie: cookie, Match: Match{Proto: ProtoIP, InPort: PortName("eth0")}, Actions: []Action{Output(out)}}
	}
	if err := p.Set("x", []Flow{flow(1, 10, LOCAL), flow(1, 20, LOCAL), flow(2, 30, LOCAL)}); err != nil {
		t.Fatal(err)
	}
	want, err := p.entries(ports)
	if err != nil {
		t.Fatal(err)
	}
	installed, err := parseDump([]byte(strings.Join([]string{
		"NXST_FLOW reply (xid=0x4):",
		" cookie=0x1, priority=10,ip,in_port=1 actions=LOCAL",  // unchanged
		" cookie=0x1, priority=20,ip,in_port=1 actions=NORMAL", // actions changed: modify_strict
		" cookie=0x9, priority=30,ip,in_port=1 actions=LOCAL",  // cookie changed: add
		" cookie=0x1, priority=40,ip,in_port=1 actions=LOCAL",  // ours, gone: delete
		" cookie=0x7, priority=50,ip actions=LOCAL",            // foreign
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	owned := map[uint64]bool{1: true, 2: true}
	mods, res, _ := diff(installed, want, func(e *entry) bool { return owned[e.cookie] })
	wantMods := []FlowMod{
		{ModDeleteStrict, "priority=40,ip,in_port=1"},
		{ModAdd, "cookie=0x2, priority=30,ip,in_port=1 actions=LOCAL"},
		{ModModifyStrict, "cookie=0x1, priority=20,ip,in_port=1 actions=LOCAL"},
	}
	if len(mods) != len(wantMods) {
		t.Fatalf("mods = %v, want %v", mods, wantMods)
	}
	for i := range mods {
		if mods[i] != wantMods[i] {
			t.Errorf("mod %d = %v, want %v", i, mods[i], wantMods[i])
		}
	}
	if res != (Result{Added: 0, Modified: 2, Deleted: 1}) {
		t.Errorf("result = %+v", res)
	}
	mods, _, _ = diff(installed, want, func(*entry) bool { return true })
	if len(mods) != 4 {
		t.Errorf("without KeepForeign the foreign flow must go too: %v", mods)
	}
}
