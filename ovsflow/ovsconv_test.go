package ovsflow_test

import (
	"errors"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/digitalocean/go-openvswitch/ovs"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
)

// ovsLoss counts, per golden program, the flows go-openvswitch cannot
// hold and the field the conversion names. "built" is a flow as the
// builders return it, with port names: an ovs.Flow names ports by number
// (in_port is checked before the actions). "resolved" is the same flow
// resolved against the example node's ports, as it goes to a bridge: every
// golden flow converts and comes back equal (its ports as numbers, as the
// bridge holds them), so no row has that stage.
var ovsLoss = []struct {
	golden, stage, field string
	flows                int
}{
	{"arp-bypass-vlan.flows", "built", "in_port", 3},
	{"arp-bypass.flows", "built", "in_port", 3},
	{"base.flows", "built", "in_port", 3},
	{"base.flows", "built", "output", 4},
	{"egress-seed.flows", "built", "in_port", 4},
	{"seed-node.flows", "built", "in_port", 10},
	{"seed-node.flows", "built", "output", 4},
	{"sgw-node-dualstack.flows", "built", "in_port", 35},
	{"sgw-node-dualstack.flows", "built", "output", 8},
	{"sgw-node-vlan.flows", "built", "in_port", 26},
	{"sgw-node-vlan.flows", "built", "output", 5},
	{"sgw-node.flows", "built", "in_port", 30},
	{"sgw-node.flows", "built", "output", 5},
	{"sgw-services.flows", "built", "in_port", 23},
	{"sgw-services.flows", "built", "output", 1},
}

type lossKey struct{ golden, stage, field string }

// Every flow of every golden program converts to an ovs.Flow and back to
// an equal flow, and ovs.Flow's text parses back to it too, or the
// conversion names the field go-openvswitch cannot hold, as ovsLoss lists.
func TestOVSGoldenRoundTrip(t *testing.T) {
	got := map[lossKey]int{}
	for _, g := range brextest.Goldens {
		p := brextest.MustProgram(t, g.Parts)
		for _, owner := range p.Owners() {
			for _, f := range p.Flows(owner) {
				r, err := f.Resolve(brextest.Ports)
				if err != nil {
					t.Fatalf("%s: %s: %v", g.File, f, err)
				}
				if field := ovsRoundTrip(t, f, f); field != "" {
					got[lossKey{g.File, "built", field}]++
				}
				if field := ovsRoundTrip(t, r, numbered(t, r)); field != "" {
					got[lossKey{g.File, "resolved", field}]++
				}
			}
		}
	}
	want := map[lossKey]int{}
	for _, l := range ovsLoss {
		want[lossKey{l.golden, l.stage, l.field}] = l.flows
	}
	for _, k := range sortedKeys(got, want) {
		t.Logf("%-26s %-8s %-8s %3d flows", k.golden, k.stage, k.field, got[k])
		if got[k] != want[k] {
			t.Errorf("%s, %s, field %s: %d flows go-openvswitch cannot hold, ovsLoss says %d", k.golden, k.stage, k.field, got[k], want[k])
		}
	}
}

func sortedKeys(maps ...map[lossKey]int) []lossKey {
	var keys []lossKey
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b lossKey) int {
		return strings.Compare(a.golden+" "+a.stage+" "+a.field, b.golden+" "+b.stage+" "+b.field)
	})
	return keys
}

// numbered is f as a bridge holds it: its resolved ports by number only,
// without the names they were resolved from.
func numbered(t *testing.T, f ovsflow.Flow) ovsflow.Flow {
	t.Helper()
	n, err := ovsflow.ParseFlow(f.String())
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return n
}

// ovsRoundTrip converts f to an ovs.Flow and back and checks that the flow
// and the ovs.Flow's text (read by ParseFlow) are want. It returns the
// field a conversion error names, "" when f converts.
func ovsRoundTrip(t *testing.T, f, want ovsflow.Flow) string {
	t.Helper()
	of, err := ovsflow.ToOVS(f)
	if field := errField(err); field != "" {
		return field
	} else if err != nil {
		t.Fatalf("ToOVS(%s): %v", f, err)
	}
	back, err := ovsflow.FromOVS(of)
	if err != nil || !ovsflow.FlowsEqual([]ovsflow.Flow{want}, []ovsflow.Flow{back}) {
		t.Errorf("FromOVS(ToOVS(%s)) = %s, %v", f, back, err)
	}
	text, err := of.MarshalText()
	if err != nil {
		t.Fatalf("%s: ovs.Flow.MarshalText: %v", f, err)
	}
	parsed, err := ovsflow.ParseFlow(string(text))
	if err != nil || !ovsflow.FlowsEqual([]ovsflow.Flow{want}, []ovsflow.Flow{parsed}) {
		t.Errorf("%s: ovs.Flow renders %s, which parses to %s, %v", f, text, parsed, err)
	}
	return ""
}

// errField is the field a conversion error names, "" for nil.
func errField(err error) string {
	var fe *ovsflow.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

// ovsParserLoss lists the golden flows that go-openvswitch's own parser
// (ovs.Flow.UnmarshalText, which its DumpFlows uses) does not read as
// ovs-ofctl prints them, and the golden programs holding each: it drops
// match fields it does not know and rejects actions it does not know.
// That is why OfctlTransport.Dump reads dumps with this package's parser.
var ovsParserLoss = []struct {
	flow, loss string
	goldens    []string
}{
	{"cookie=0xdeff105, priority=105,pkt_mark=0x3f0,ip,in_port=2 actions=ct(commit,zone=64000,nat(src=172.18.0.3),exec(load:0x1->NXM_NX_CT_MARK[])),output:1",
		"dropped pkt_mark=0x3f0", []string{"egress-seed.flows", "seed-node.flows", "sgw-node.flows"}},
	{"cookie=0xef7cfc72b9c72966, priority=110,arp,in_port=1,dl_vlan=100,arp_tpa=172.18.0.50,arp_op=1 actions=pop_vlan,LOCAL",
		rejectsPopVLAN, []string{"arp-bypass-vlan.flows", "sgw-node-vlan.flows"}},
	{"cookie=0x6818c73de80ac226, priority=110,arp,in_port=1,dl_vlan=100,arp_tpa=172.18.0.60,arp_op=1 actions=pop_vlan,LOCAL",
		rejectsPopVLAN, []string{"arp-bypass-vlan.flows", "sgw-node-vlan.flows"}},
	{"cookie=0x91dfde3f37e637f2, priority=110,arp,in_port=1,dl_vlan=100,arp_tpa=172.18.0.70,arp_op=1 actions=pop_vlan,LOCAL",
		rejectsPopVLAN, []string{"sgw-node-vlan.flows"}},
	{"cookie=0xd2a657d5ed7bf9a8, priority=110,icmp6,in_port=1,dl_vlan=100,icmp_type=135,icmp_code=0,nd_target=2001:db8::50 actions=pop_vlan,LOCAL",
		rejectsPopVLAN, []string{"arp-bypass-vlan.flows", "sgw-node-vlan.flows"}},
}

const rejectsPopVLAN = `rejected: flow error due to string "pop_vlan,LOCAL": invalid actions for Flow`

func TestOVSParserLossOnGoldens(t *testing.T) {
	got := map[string][]string{} // "flow | loss" -> goldens
	for _, g := range brextest.Goldens {
		text, err := os.ReadFile(brextest.GoldenPath(g.File))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(text)) {
			line = strings.TrimSpace(line)
			if loss := ovsParserLossOf(t, line); loss != "" {
				got[line+" | "+loss] = append(got[line+" | "+loss], g.File)
			}
		}
	}
	want := map[string][]string{}
	for _, l := range ovsParserLoss {
		want[l.flow+" | "+l.loss] = l.goldens
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		t.Logf("%s | %s", k, strings.Join(got[k], " "))
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("go-openvswitch's parser loses other flows than ovsParserLoss lists:\n got %q\nwant %q", got, want)
	}
}

// ovsParserLossOf reads line with go-openvswitch's parser and FromOVS and
// says what differs from ParseFlow's reading: "" when nothing does.
func ovsParserLossOf(t *testing.T, line string) string {
	t.Helper()
	want, err := ovsflow.ParseFlow(line)
	if err != nil {
		t.Fatal(err)
	}
	var of ovs.Flow
	if err := of.UnmarshalText([]byte(line)); err != nil {
		return "rejected: " + err.Error()
	}
	got, err := ovsflow.FromOVS(&of)
	if err != nil {
		return "FromOVS: " + err.Error()
	}
	if ovsflow.FlowsEqual([]ovsflow.Flow{want}, []ovsflow.Flow{got}) {
		return ""
	}
	var lost []string
	kept := strings.Split(got.String(), ",")
	for _, tok := range strings.Split(want.String(), ",") {
		if !slices.Contains(kept, tok) {
			lost = append(lost, tok)
		}
	}
	return "dropped " + strings.Join(lost, ",")
}

// ToOVS names the field an ovs.Flow cannot hold.
func TestToOVSErrors(t *testing.T) {
	v4 := netip.MustParseAddr("10.0.0.1")
	cases := []struct {
		name  string
		flow  ovsflow.Flow
		field string
	}{
		{"in_port by name", ovsflow.Flow{Match: ovsflow.Match{InPort: ovsflow.PortName("eth0")}}, "in_port"},
		{"in_port NORMAL", ovsflow.Flow{Match: ovsflow.Match{InPort: ovsflow.NORMAL}}, "in_port"},
		{"output by name", ovsflow.Flow{Actions: []ovsflow.Action{ovsflow.Output(ovsflow.PortName("eth0"))}}, "output"},
		{"resubmit to table 0", ovsflow.Flow{Actions: []ovsflow.Action{ovsflow.Resubmit(ovsflow.PortNumber(1), 0)}}, "resubmit"},
		{"resubmit by name", ovsflow.Flow{Actions: []ovsflow.Action{ovsflow.Resubmit(ovsflow.PortName("eth0"), 1)}}, "resubmit"},
		{"resubmit from LOCAL", ovsflow.Flow{Actions: []ovsflow.Action{ovsflow.Resubmit(ovsflow.LOCAL, 1)}}, "resubmit"},
		{"group", ovsflow.Flow{Actions: []ovsflow.Action{ovsflow.Group(7)}}, "group"},
		{"ct()", ovsflow.Flow{Actions: []ovsflow.Action{ovsflow.CT{}}}, "ct"},
		{"invalid flow", ovsflow.Flow{Match: ovsflow.Match{Proto: ovsflow.ProtoARP, NwSrc: ovsflow.Host(v4)}}, "nw_src/nw_dst"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			of, err := ovsflow.ToOVS(c.flow)
			if got := errField(err); got != c.field {
				t.Errorf("ToOVS(%s) = %v, %v; want an error naming %s", c.flow, of, err, c.field)
			}
		})
	}
}

// FromOVS names the field a Flow cannot hold.
func TestFromOVSErrors(t *testing.T) {
	drop := []ovs.Action{ovs.Drop()}
	cases := []struct {
		name  string
		flow  *ovs.Flow
		field string
	}{
		{"nil", nil, "flow"},
		{"idle_timeout", &ovs.Flow{IdleTimeout: 10, Actions: drop}, "idle_timeout"},
		{"table", &ovs.Flow{Table: 300, Actions: drop}, "table"},
		{"priority", &ovs.Flow{Priority: 70000, Actions: drop}, "priority"},
		{"protocol", &ovs.Flow{Protocol: "rarp", Actions: drop}, "protocol"},
		{"in_port", &ovs.Flow{InPort: -7, Actions: drop}, "in_port"},
		{"in_port twice", &ovs.Flow{InPort: 1, Matches: []ovs.Match{ovs.InPortMatch(2)}, Actions: drop}, "in_port"},
		{"in_port by name", &ovs.Flow{Matches: []ovs.Match{ovs.FieldMatch("in_port", "eth0")}, Actions: drop}, "in_port"},
		{"tun_id", &ovs.Flow{Matches: []ovs.Match{ovs.TunnelID(5)}, Actions: drop}, "tun_id"},
		{"metadata", &ovs.Flow{Matches: []ovs.Match{ovs.Metadata(5)}, Actions: drop}, "metadata"},
		{"reg0", &ovs.Flow{Matches: []ovs.Match{ovs.FieldMatch("reg0", "0x1")}, Actions: drop}, "reg0"},
		{"udp_dst", &ovs.Flow{Protocol: ovs.ProtocolUDPv4, Matches: []ovs.Match{ovs.UDPDestinationPort(53)}, Actions: drop}, "udp_dst"},
		{"masked tp_dst", &ovs.Flow{Protocol: ovs.ProtocolTCPv4, Matches: []ovs.Match{ovs.TransportDestinationMaskedPort(0x50, 0xfff0)}, Actions: drop}, "tp_dst"},
		{"priority as a match", &ovs.Flow{Matches: []ovs.Match{ovs.FieldMatch("priority", "5")}, Actions: drop}, "priority"},
		{"stats as a match", &ovs.Flow{Matches: []ovs.Match{ovs.FieldMatch("n_packets", "5")}, Actions: drop}, "n_packets"},
		{"mod_vlan_vid", &ovs.Flow{Actions: []ovs.Action{ovs.ModVLANVID(10)}}, "mod_vlan_vid"},
		{"all", &ovs.Flow{Actions: []ovs.Action{ovs.All()}}, "all"},
		{"resubmit to the current table", &ovs.Flow{Actions: []ovs.Action{ovs.Resubmit(1, 0)}}, "resubmit"},
		{"output to a field", &ovs.Flow{Actions: []ovs.Action{ovs.OutputField("NXM_NX_REG0[]")}}, "output"},
		{"drop and output", &ovs.Flow{Actions: []ovs.Action{ovs.Drop(), ovs.Output(1)}}, "drop"},
		{"invalid flow", &ovs.Flow{Protocol: ovs.ProtocolARP, Matches: []ovs.Match{ovs.NetworkSource("10.0.0.1")}, Actions: drop}, "nw_src/nw_dst"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ovsflow.FromOVS(c.flow)
			if got := errField(err); got != c.field {
				t.Errorf("FromOVS = %s, %v; want an error naming %s", f, err, c.field)
			}
		})
	}
}

// A flow a CNI writes with go-openvswitch's typed constructors converts to
// the flow ovs-ofctl would install for it.
func TestFromOVSTyped(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	cases := []struct {
		name string
		flow *ovs.Flow
		want string
	}{
		{"reserved ports in lower case", &ovs.Flow{Priority: 10, InPort: ovs.PortLOCAL,
			Actions: []ovs.Action{ovs.Normal(), ovs.Flood(), ovs.InPort(), ovs.Local()}},
			"priority=10,in_port=LOCAL actions=NORMAL,FLOOD,IN_PORT,LOCAL"},
		{"rewrites", &ovs.Flow{Priority: 20, Protocol: ovs.ProtocolIPv4, Table: 3, Cookie: 0x5,
			Matches: []ovs.Match{ovs.ConnectionTrackingState(ovs.SetState(ovs.CTStateTracked), ovs.UnsetState(ovs.CTStateNew))},
			Actions: []ovs.Action{ovs.ModDataLinkSource(mac), ovs.ModNetworkDestination(net.IPv4(10, 0, 0, 9)), ovs.StripVLAN(), ovs.Output(2)}},
			"cookie=0x5, table=3, priority=20,ct_state=-new+trk,ip actions=set_field:02:00:00:00:00:01->eth_src,set_field:10.0.0.9->ip_dst,pop_vlan,output:2"},
		{"drop", &ovs.Flow{Priority: 1, Protocol: ovs.ProtocolTCPv6, Matches: []ovs.Match{ovs.TransportDestinationPort(53)}, Actions: []ovs.Action{ovs.Drop()}},
			"priority=1,tcp6,tp_dst=53 actions=drop"},
		{"ct and set_field", &ovs.Flow{Priority: 30, Protocol: ovs.ProtocolTCPv4, InPort: 1,
			Matches: []ovs.Match{ovs.NetworkDestination("172.18.0.0/16"), ovs.TransportDestinationPort(443), ovs.ConnectionTrackingMark(0x1, 0)},
			Actions: []ovs.Action{ovs.ConnectionTracking("commit,zone=5,exec(set_field:0x2->ct_mark)"), ovs.Resubmit(0, 4)}},
			"priority=30,ct_mark=0x1,tcp,in_port=1,nw_dst=172.18.0.0/16,tp_dst=443 actions=ct(commit,zone=5,exec(set_field:0x2->ct_mark)),resubmit(,4)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ovsflow.FromOVS(c.flow)
			if err != nil || f.String() != c.want {
				t.Errorf("FromOVS = %s, %v\nwant %s", f, err, c.want)
			}
		})
	}
}
