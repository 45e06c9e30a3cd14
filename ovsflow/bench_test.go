package ovsflow

import (
	"fmt"
	"net/netip"
	"testing"
)

// benchServices are n services with one IPv4 and one IPv6 VIP each: 2n flows.
func benchServices(n int) []Service {
	svcs := make([]Service, n)
	for i := range svcs {
		svcs[i] = Service{
			Namespace: "ns" + fmt.Sprint(i%50), Name: "svc" + fmt.Sprint(i), Ports: []int32{80, 443},
			VIPs: []netip.Addr{
				netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}),
				netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)}),
			},
		}
	}
	return svcs
}

func buildProgram(b testing.TB, svcs []Service) *Program {
	var p Program
	for _, svc := range svcs {
		flows, err := ARPBypass(Bypass{Uplink: "eth0"}, svc)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Set(svc.Owner(), flows); err != nil {
			b.Fatal(err)
		}
	}
	return &p
}

// BenchmarkBuildRender10kServices builds and renders the ARP/NDP bypass
// program of 10,000 dual-stack services (20,000 flows). Aim: < 50 ms.
func BenchmarkBuildRender10kServices(b *testing.B) {
	svcs := benchServices(10000)
	ports := PortMap{"eth0": 1}
	b.ReportAllocs()
	for b.Loop() {
		text, err := buildProgram(b, svcs).Render(ports)
		if err != nil || len(text) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiffOneServiceChanged diffs a 20,000-flow program against the
// installed state after one service changed its VIPs. Aim: < 5 ms.
func BenchmarkDiffOneServiceChanged(b *testing.B) {
	svcs := benchServices(10000)
	ports := PortMap{"eth0": 1}
	p := buildProgram(b, svcs)
	installed, err := p.entries(ports)
	if err != nil {
		b.Fatal(err)
	}
	changed := svcs[42]
	changed.VIPs = []netip.Addr{netip.MustParseAddr("172.18.0.99")}
	flows, err := ARPBypass(Bypass{Uplink: "eth0"}, changed)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Set(changed.Owner(), flows); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		want, err := p.entries(ports)
		if err != nil {
			b.Fatal(err)
		}
		mods, _, _ := diff(installed, want, func(*entry) bool { return true })
		if len(mods) != 3 {
			b.Fatalf("mods = %v", mods)
		}
	}
}
