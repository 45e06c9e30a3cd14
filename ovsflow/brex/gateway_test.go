package brex_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

func rendered(flows []ovsflow.Flow) []string {
	var out []string
	for _, f := range flows {
		out = append(out, f.String())
	}
	slices.Sort(out)
	return out
}

// OVNKubernetesSGW are the shared-gateway expectations of OVN-Kubernetes'
// gateway_localnet_linux_test.go, verbatim, by test case, with the inputs
// of service1 in namespace1 those cases build. Each case's expected flows
// are the union of the flow cache keys it checks (NodePort_..., Ingress_...,
// External_...), which ovnedge keeps under one owner per Service.
var ovnkSGWCases = []struct {
	name string // the It(...) of gateway_localnet_linux_test.go
	svc  brex.GatewayService
	want []string
}{
	{
		name: "inits nftables rules and openflows with LoadBalancer where ETP=local, SGW mode",
		// Endpoints empty: no host-network endpoint, so "case 2" (to OVN).
		svc: brex.GatewayService{Namespace: "namespace1", Name: "service1",
			VIPs:  []netip.Addr{netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("5.5.5.5")},
			Ports: []brex.ServicePort{{Protocol: ovsflow.ProtoTCP, Port: 8080, NodePort: 31111}}},
		want: []string{
			"cookie=0x453ae29bcbbc08bd, priority=110, in_port=eth0, tcp, tp_dst=31111, actions=output:patch-breth0_ov",
			"cookie=0x453ae29bcbbc08bd, priority=110, in_port=patch-breth0_ov, dl_src=0a:0b:0c:0d:0e:0f, tcp, tp_src=31111, actions=output:eth0",
			"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, arp, arp_op=1, arp_tpa=5.5.5.5, actions=output:LOCAL",
			"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, icmp, nw_dst=5.5.5.5, icmp_type=3, icmp_code=4, actions=output:patch-breth0_ov",
			"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, tcp, nw_dst=5.5.5.5, tp_dst=8080, actions=output:patch-breth0_ov",
			"cookie=0x10c6b89e483ea111, priority=110, in_port=patch-breth0_ov, dl_src=0a:0b:0c:0d:0e:0f, tcp, nw_src=5.5.5.5, tp_src=8080, actions=output:eth0",
			"cookie=0x71765945a31dc2f1, priority=110, in_port=eth0, arp, arp_op=1, arp_tpa=1.1.1.1, actions=output:LOCAL",
			"cookie=0x71765945a31dc2f1, priority=110, in_port=eth0, icmp, nw_dst=1.1.1.1, icmp_type=3, icmp_code=4, actions=output:patch-breth0_ov",
			"cookie=0x71765945a31dc2f1, priority=110, in_port=eth0, tcp, nw_dst=1.1.1.1, tp_dst=8080, actions=output:patch-breth0_ov",
			"cookie=0x71765945a31dc2f1, priority=110, in_port=patch-breth0_ov, dl_src=0a:0b:0c:0d:0e:0f, tcp, nw_src=1.1.1.1, tp_src=8080, actions=output:eth0",
		},
	},
	{
		name: "inits nftables rules and openflows with LoadBalancer where ETP=local, SGW mode, with named ports, with host networked pods and with external IP",
		// Port https-port targets the named port https-target, which the
		// host-network endpoint 192.168.18.15 (a node IP) serves on 8888.
		svc: brex.GatewayService{Namespace: "namespace1", Name: "service1",
			VIPs: []netip.Addr{netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("5.5.5.5")},
			Ports: []brex.ServicePort{{Protocol: ovsflow.ProtoTCP, Port: 8080, NodePort: 31111,
				HostPort4: 8888}}},
		want: []string{
			"cookie=0x453ae29bcbbc08bd, priority=110, in_port=eth0, tcp, tp_dst=31111, actions=ct(commit,zone=64003,nat(dst=10.244.0.1:8888),table=6)",
			"cookie=0xe745ecf105, priority=110, table=6, actions=output:LOCAL",
			"cookie=0xe352697d7a317b80, priority=110, in_port=LOCAL, tcp, tp_src=8888, actions=ct(zone=64003 nat,table=7)",
			"cookie=0xe745ecf105, priority=110, table=7, actions=output:eth0",
			"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, arp, arp_op=1, arp_tpa=5.5.5.5, actions=output:LOCAL",
			"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, tcp, nw_dst=5.5.5.5, tp_dst=8080, actions=ct(commit,zone=64003,nat(dst=10.244.0.1:8888),table=6)",
			"cookie=0x71765945a31dc2f1, priority=110, in_port=eth0, arp, arp_op=1, arp_tpa=1.1.1.1, actions=output:LOCAL",
			"cookie=0x71765945a31dc2f1, priority=110, in_port=eth0, tcp, nw_dst=1.1.1.1, tp_dst=8080, actions=ct(commit,zone=64003,nat(dst=10.244.0.1:8888),table=6)",
		},
	},
	{
		name: "manages nftables rules and openflows for NodePort backed by ovn-k pods where ETP=local, SGW",
		svc: brex.GatewayService{Namespace: "namespace1", Name: "service1",
			Ports: []brex.ServicePort{{Protocol: ovsflow.ProtoTCP, Port: 8080, NodePort: 31111}}},
		want: []string{
			"cookie=0x453ae29bcbbc08bd, priority=110, in_port=eth0, tcp, tp_dst=31111, actions=output:patch-breth0_ov",
			"cookie=0x453ae29bcbbc08bd, priority=110, in_port=patch-breth0_ov, dl_src=0a:0b:0c:0d:0e:0f, tcp, tp_src=31111, actions=output:eth0",
		},
	},
	{
		// An LGW test case, but "case 1" flows are the same in both modes
		// (updateServiceFlowCache programs them before looking at the mode).
		name: "manages nftables rules and openflows for NodePort backed by local-host-networked pods where ETP=local, LGW",
		svc: brex.GatewayService{Namespace: "namespace1", Name: "service1",
			Ports: []brex.ServicePort{{Protocol: ovsflow.ProtoTCP, Port: 8080, NodePort: 31111, HostPort4: 443}}},
		want: []string{
			"cookie=0x453ae29bcbbc08bd, priority=110, in_port=eth0, tcp, tp_dst=31111, actions=ct(commit,zone=64003,nat(dst=10.244.0.1:443),table=6)",
			"cookie=0xe745ecf105, priority=110, table=6, actions=output:LOCAL",
			"cookie=0x8ba455e19afe30d1, priority=110, in_port=LOCAL, tcp, tp_src=443, actions=ct(zone=64003 nat,table=7)",
			"cookie=0xe745ecf105, priority=110, table=7, actions=output:eth0",
		},
	},
}

func TestServiceFlowsMatchOVNKubernetes(t *testing.T) {
	for _, c := range ovnkSGWCases {
		t.Run(c.name, func(t *testing.T) {
			flows, err := brex.ServiceFlows(brextest.OVNKGateway(), c.svc)
			if err != nil {
				t.Fatal(err)
			}
			got, want := rendered(flows), brextest.Canonical(t, c.want)
			if !slices.Equal(got, want) {
				t.Errorf("flows differ from OVN-Kubernetes':\n%s", flowtest.Diff(strings.Join(want, "\n"), strings.Join(got, "\n")))
			}
			var p ovsflow.Program
			if err := p.Set(c.svc.Owner(), flows); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Service cookies are OVN-Kubernetes' own (the values below are its
// svcToCookie results in gateway_localnet_linux_test.go).
func TestServiceCookies(t *testing.T) {
	for _, c := range []struct {
		got, want uint64
	}{
		{brex.PortCookie("namespace1", "service1", ovsflow.ProtoTCP, 31111), 0x453ae29bcbbc08bd},
		{brex.PortCookie("namespace1", "service1", ovsflow.ProtoTCP, 8888), 0xe352697d7a317b80},
		{brex.ServiceCookie("namespace1", "service1", netip.MustParseAddr("5.5.5.5"), 8080), 0x10c6b89e483ea111},
		{brex.ServiceCookie("namespace1", "service1", netip.MustParseAddr("1.1.1.1"), 8080), 0x71765945a31dc2f1},
	} {
		if c.got != c.want {
			t.Errorf("cookie %#x, want OVN-Kubernetes' %#x", c.got, c.want)
		}
	}
}

// Owns: with the gateway flows ovnedge owns the gateway program's flows
// by shape and cookie, leaving other priorities' foreign flows alone;
// without, only its own marked cookies, never one of OVN-Kubernetes'.
func TestOwns(t *testing.T) {
	svc := brex.ServiceCookie("namespace1", "service1", netip.MustParseAddr("5.5.5.5"), 8080)
	for _, c := range []struct {
		name            string
		id              ovsflow.FlowID
		gateway, beside bool
	}{
		{"a Service flow", ovsflow.FlowID{Priority: brex.PriorityService, Cookie: svc}, true, false},
		{"a Service flow with the cookie of another hash", ovsflow.FlowID{Priority: brex.PriorityService, Cookie: 0x77}, true, false},
		{"a base flow", ovsflow.FlowID{Priority: brex.PriorityNormal, Cookie: brex.BaseCookie}, true, false},
		{"a table 1 base flow", ovsflow.FlowID{Table: brex.TableReply, Priority: brex.PriorityReplyTracked, Cookie: brex.BaseCookie}, true, false},
		{"an ETP=Local table 6 flow", ovsflow.FlowID{Table: brex.TableHostDNAT, Priority: brex.PriorityService, Cookie: brex.ETPLocalCookie}, true, false},
		{"a table 7 flow", ovsflow.FlowID{Table: brex.TableHostReply, Priority: 1, Cookie: 0x77}, true, false},
		{"the egress fence", ovsflow.FlowID{Priority: brex.PriorityEgressFence, Cookie: brex.FenceCookie}, true, true},
		{"egress flows beside ovnkube-node", ovsflow.FlowID{Priority: brex.PriorityEgressLocal, Cookie: brex.EgressCookie}, true, true},
		{"another controller's flow", ovsflow.FlowID{Priority: 7, Cookie: 0x77}, false, false},
		{"a flow at 110 in table 2", ovsflow.FlowID{Table: 2, Priority: brex.PriorityService, Cookie: 0x77}, false, false},
		{"a marked cookie ovnedge does not give", ovsflow.FlowID{Priority: 7, Cookie: brex.CookieMark | 0x1234}, false, false},
		{"a new bridge's NORMAL flow", ovsflow.FlowID{Cookie: 0}, false, false},
	} {
		if got := brex.Owns(true)(c.id); got != c.gateway {
			t.Errorf("%s %+v: owned with the gateway flows %v, want %v", c.name, c.id, got, c.gateway)
		}
		if got := brex.Owns(false)(c.id); got != c.beside {
			t.Errorf("%s %+v: owned beside ovnkube-node's gateway %v, want %v", c.name, c.id, got, c.beside)
		}
	}
}

// IPv6: the NodePort gets tcp6 flows with the "tcp6" cookie, a v6 VIP
// ipv6_dst/ipv6_src matches and the ICMPv6 packet-too-big flow, a v6 host
// target the bracketed DNAT address.
func TestServiceFlowsIPv6(t *testing.T) {
	g := brextest.OVNKGateway()
	g.IPv6 = true
	g.NodeIPs = append(g.NodeIPs, netip.MustParseAddr("fd00:96:1::1"))
	flows, err := brex.ServiceFlows(g, brex.GatewayService{Namespace: "ns", Name: "svc",
		VIPs: []netip.Addr{netip.MustParseAddr("fd00::5")},
		Ports: []brex.ServicePort{
			{Protocol: ovsflow.ProtoUDP, Port: 53, NodePort: 30053},
			{Protocol: ovsflow.ProtoSCTP, Port: 9, NodePort: 30009, HostPort6: 9999},
		}})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(rendered(flows), "\n")
	for _, want := range []string{
		"priority=110,udp,in_port=eth0,tp_dst=30053 actions=output:patch-breth0_ov",
		"priority=110,udp6,in_port=eth0,tp_dst=30053 actions=output:patch-breth0_ov",
		"priority=110,icmp6,in_port=eth0,ipv6_dst=fd00::5,icmp_type=2,icmp_code=0 actions=output:patch-breth0_ov",
		"priority=110,udp6,in_port=patch-breth0_ov,dl_src=0a:0b:0c:0d:0e:0f,ipv6_src=fd00::5,tp_src=53 actions=output:eth0",
		"priority=110,sctp6,in_port=eth0,ipv6_dst=fd00::5,tp_dst=9 actions=ct(commit,table=6,zone=64003,nat(dst=[fd00:96:1::1]:9999))",
		"priority=110,sctp6,in_port=eth0,tp_dst=30009 actions=ct(commit,table=6,zone=64003,nat(dst=[fd00:96:1::1]:9999))",
		"priority=110,sctp,in_port=eth0,tp_dst=30009 actions=output:patch-breth0_ov", // no v4 host target: OVN
		"priority=110,sctp6,in_port=LOCAL,tp_src=9999 actions=ct(table=7,zone=64003,nat)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in\n%s", want, text)
		}
	}
	if c := brex.PortCookie("ns", "svc", ovsflow.ProtoUDP6, 30053); !strings.Contains(text, fmt.Sprintf("cookie=%#x, priority=110,udp6,in_port=eth0,tp_dst=30053", c)) {
		t.Errorf("udp6 NodePort flow without the udp6 cookie %#x:\n%s", c, text)
	}
}

func TestServiceFlowsErrors(t *testing.T) {
	ok := brex.GatewayService{Namespace: "ns", Name: "svc",
		Ports: []brex.ServicePort{{Protocol: ovsflow.ProtoTCP, Port: 80, NodePort: 30080}}}
	for _, c := range []struct {
		name string
		g    func(*brex.Gateway)
		svc  func(*brex.GatewayService)
		want string
	}{
		{"no patch", func(g *brex.Gateway) { g.Patch = "" }, nil, "uplink and patch"},
		{"no MAC", func(g *brex.Gateway) { g.BridgeMAC = nil }, nil, "bridge MAC"},
		{"bad protocol", nil, func(s *brex.GatewayService) { s.Ports[0].Protocol = ovsflow.ProtoICMP }, "protocol"},
		{"v6 shorthand", nil, func(s *brex.GatewayService) { s.Ports[0].Protocol = ovsflow.ProtoTCP6 }, "protocol"},
		{"port range", nil, func(s *brex.GatewayService) { s.Ports[0].NodePort = 70000 }, "out of range"},
		{"host port without node IP", func(g *brex.Gateway) { g.NodeIPs = nil },
			func(s *brex.GatewayService) { s.Ports[0].HostPort4 = 8080 }, "no tcp node IP"},
		{"bad VIP", nil, func(s *brex.GatewayService) { s.VIPs = []netip.Addr{netip.MustParseAddr("224.0.0.1")} }, "not a unicast"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, svc := brextest.OVNKGateway(), ok
			svc.Ports = slices.Clone(ok.Ports)
			if c.g != nil {
				c.g(&g)
			}
			if c.svc != nil {
				c.svc(&svc)
			}
			if _, err := brex.ServiceFlows(g, svc); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// The base and the egress flows both emit the priority-100 flow from the
// patch port: the program holds it once, no conflict; the base alone keeps
// it. Service flows of two Services sharing a host target port share the
// table 6/7 and LOCAL reply flows.
func TestBaseEgressAndServicesShareFlows(t *testing.T) {
	p, err := brextest.Program(brextest.Parts{Base: true, Egress: true, Gateway: true})
	if err != nil {
		t.Fatal(err)
	}
	text, err := p.Render(brextest.Ports)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(text), "priority=100,ip,in_port=2 "); n != 1 {
		t.Errorf("priority-100 patch flow %d times, want 1:\n%s", n, text)
	}
	p.Delete("egress")
	if text, _ = p.Render(brextest.Ports); !strings.Contains(string(text), "priority=100,ip,in_port=2 ") {
		t.Errorf("without the egress flows the base lost the priority-100 patch flow:\n%s", text)
	}
	other := brex.GatewayService{Namespace: "other", Name: "local",
		Ports: []brex.ServicePort{{Protocol: ovsflow.ProtoTCP, Port: 443, NodePort: 32443, HostPort4: 8443}}}
	flows, err := brex.ServiceFlows(brextest.Gateway(), other)
	if err != nil {
		t.Fatal(err)
	}
	before := p.Len()
	if err := p.Set(other.Owner(), flows); err != nil {
		t.Fatal(err)
	}
	if p.Len() != before+1 { // only its NodePort DNAT flow is new
		t.Errorf("program grew by %d flows, want 1", p.Len()-before)
	}
}

// The example node's shared gateway program on a real bridge, applied as the
// daemon applies it (native transport, KeepForeign): the new bridge's
// cookie-0 NORMAL flow is taken over, and ofproto/trace follows Service
// traffic from the uplink to OVN and back, and to the host.
func TestGatewayTraceRealBridge(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	opts := ovsflow.ApplierOptions{KeepForeign: true, RunDir: br.RunDir, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	a := ovsflow.NewApplier(br.Bridge, nil, ovsflow.StaticPorts(br.Ports()), opts)
	t.Cleanup(func() { _ = a.Close() })
	p := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Gateway: true})
	if _, err := a.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	want, err := p.Render(br.Ports())
	if err != nil {
		t.Fatal(err)
	}
	if got := br.Dump(); string(got) != string(want) {
		t.Errorf("bridge differs from the program (the cookie-0 NORMAL flow must be replaced):\n%s",
			flowtest.Diff(string(want), string(got)))
	}

	mac := brextest.BridgeMAC.String()
	cases := []struct {
		name, flow string
		rule       string // first rule hit
		out        string // an OpenFlow output the trace must show
	}{
		{"TCP SYN to a LoadBalancer VIP from the uplink goes to OVN",
			"in_port=1,tcp,dl_dst=" + mac + ",nw_src=172.18.0.1,nw_dst=172.18.0.60,tp_src=40000,tp_dst=443,tcp_flags=0x002",
			"priority 110, cookie " + fmt.Sprintf("%#x", brex.ServiceCookie("default", "web-lb", netip.MustParseAddr("172.18.0.60"), 443)),
			"output:2"},
		{"the reply from OVN with the bridge MAC goes out of the uplink",
			"in_port=2,tcp,dl_src=" + mac + ",nw_src=172.18.0.60,nw_dst=172.18.0.1,tp_src=443,tp_dst=40000,tcp_flags=0x012",
			"priority 110", "output:1"},
		{"ARP request for the VIP goes to LOCAL",
			"in_port=1,arp,arp_op=1,arp_tpa=172.18.0.60", "priority 110", "LOCAL"},
		{"ICMP fragmentation needed for the VIP goes to OVN",
			"in_port=1,icmp,nw_src=172.18.0.1,nw_dst=172.18.0.60,icmp_type=3,icmp_code=4", "priority 110", "output:2"},
		{"NodePort traffic goes to OVN",
			"in_port=1,tcp,dl_dst=" + mac + ",nw_src=172.18.0.1,nw_dst=172.18.0.3,tp_dst=30080", "priority 110", "output:2"},
		{"UDP NodePort traffic goes to OVN",
			"in_port=1,udp,dl_dst=" + mac + ",nw_src=172.18.0.1,nw_dst=172.18.0.3,udp_dst=30053", "priority 110", "output:2"},
		{"ETP=Local VIP traffic with a host-network endpoint is DNATed to the host",
			"in_port=1,tcp,dl_dst=" + mac + ",nw_src=172.18.0.1,nw_dst=172.18.0.70,tp_dst=443", "priority 110", "LOCAL"},
		{"the host endpoint's reply is unDNATed and leaves by the uplink",
			"in_port=LOCAL,tcp,dl_src=" + mac + ",nw_src=172.18.0.3,nw_dst=172.18.0.1,tp_src=8443", "priority 110", "output:1"},
		{"other traffic to the bridge MAC goes through conntrack to the host",
			"in_port=1,tcp,dl_dst=" + mac + ",nw_src=172.18.0.1,nw_dst=172.18.0.3,tp_dst=22", "priority 50", "LOCAL"},
		{"ARP reply to the bridge MAC reaches OVN and the host",
			"in_port=1,arp,dl_dst=" + mac + ",arp_op=2,arp_spa=172.18.0.1,arp_tpa=172.18.0.3", "priority 10", "output:2"},
		{"non-IP from OVN with another MAC is dropped",
			"in_port=2,arp,dl_src=02:00:00:00:00:99,arp_op=1,arp_tpa=172.18.0.1", "priority 9", ""},
	}
	for _, c := range cases {
		tr := br.Trace(c.flow)
		if len(tr.Rules) == 0 || !strings.Contains(tr.Rules[0], c.rule) {
			t.Errorf("%s: first rule %q, want %q\n%s", c.name, tr.Rules, c.rule, tr.Output)
			continue
		}
		if c.out != "" && !strings.Contains(tr.Output, "\n    "+c.out+"\n") && !strings.Contains(tr.Output, " "+c.out+"\n") {
			t.Errorf("%s: no %s in the trace\n%s", c.name, c.out, tr.Output)
		}
		if c.out == "" && tr.Datapath != "drop" {
			t.Errorf("%s: datapath actions %q, want drop\n%s", c.name, tr.Datapath, tr.Output)
		}
	}
}

// loadBalancerSourceRanges on the bridge: a restricted VIP's traffic to
// a host-network endpoint is DNATed from the allowed sources only (one
// flow per range of the VIP's family at PrioritySourceRange) and dropped
// otherwise; the unrestricted VIP, the NodePort and traffic to OVN (an
// ACL's job) are OVN-Kubernetes' flows; without Gateway.SourceRanges
// every flow is OVN-Kubernetes'.
func TestServiceFlowsSourceRanges(t *testing.T) {
	c := ovnkSGWCases[1] // host-network endpoint, VIPs 1.1.1.1 and 5.5.5.5
	svc := c.svc
	svc.SourceRanges = map[netip.Addr][]netip.Prefix{netip.MustParseAddr("5.5.5.5"): {
		netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/64")}}
	g := brextest.OVNKGateway()
	flows, err := brex.ServiceFlows(g, svc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rendered(flows), brextest.Canonical(t, c.want); !slices.Equal(got, want) {
		t.Errorf("without Gateway.SourceRanges:\n%s", flowtest.Diff(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	g.SourceRanges = true
	if flows, err = brex.ServiceFlows(g, svc); err != nil {
		t.Fatal(err)
	}
	const dnat = "actions=ct(commit,zone=64003,nat(dst=10.244.0.1:8888),table=6)"
	var want []string
	for _, f := range c.want {
		if f != "cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, tcp, nw_dst=5.5.5.5, tp_dst=8080, "+dnat {
			want = append(want, f)
		}
	}
	want = append(want,
		"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, tcp, nw_dst=5.5.5.5, tp_dst=8080, actions=drop",
		"cookie=0x10c6b89e483ea111, priority=111, in_port=eth0, tcp, nw_src=192.168.1.0/24, nw_dst=5.5.5.5, tp_dst=8080, "+dnat,
		"cookie=0x10c6b89e483ea111, priority=111, in_port=eth0, tcp, nw_src=10.1.0.0/16, nw_dst=5.5.5.5, tp_dst=8080, "+dnat)
	if got, want := rendered(flows), brextest.Canonical(t, want); !slices.Equal(got, want) {
		t.Errorf("with Gateway.SourceRanges:\n%s", flowtest.Diff(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	var p ovsflow.Program
	if err := p.Set(svc.Owner(), flows); err != nil {
		t.Fatal(err)
	}
	for _, f := range flows {
		if !brex.Owns(true)(f.ID()) {
			t.Errorf("flow %s is not owned with gateway flows on", f)
		}
	}
}
