package ovsflow

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// benchService is a Service of the benchmarks: its owner and VIPs.
type benchService struct {
	owner string
	vips  []netip.Addr
}

// benchServices are n services with one IPv4 and one IPv6 VIP each: 2n flows.
func benchServices(n int) []benchService {
	svcs := make([]benchService, n)
	for i := range svcs {
		svcs[i] = benchService{owner: "service/ns" + fmt.Sprint(i%50) + "/svc" + fmt.Sprint(i),
			vips: []netip.Addr{
				netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}),
				netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)}),
			}}
	}
	return svcs
}

// bypassFlows are svc's VIPs' ARP/NDP bypass flows, shaped as
// brex.ARPBypass makes them (which package ovsflow's own tests cannot
// import): one flow per VIP from the uplink to LOCAL.
func bypassFlows(svc benchService) []Flow {
	flows := make([]Flow, 0, len(svc.vips))
	for _, vip := range svc.vips {
		m := Match{InPort: PortName("eth0")}
		if vip.Is4() {
			m.Proto, m.ARPOp, m.ARPTpa = ProtoARP, 1, Host(vip)
		} else {
			m.Proto, m.ICMP, m.NDTarget = ProtoICMP6, &ICMP{Type: 135}, vip
		}
		h := fnv.New64a()
		h.Write([]byte(svc.owner + " " + vip.String()))
		flows = append(flows, Flow{Priority: 110, Cookie: h.Sum64(), Match: m, Actions: []Action{Output(LOCAL)}})
	}
	return flows
}

func buildProgram(b testing.TB, svcs []benchService) *Program {
	var p Program
	for _, svc := range svcs {
		if err := p.Set(svc.owner, bypassFlows(svc)); err != nil {
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

// nopTransport takes every bundle and holds nothing.
type nopTransport struct{}

func (nopTransport) Dump(context.Context, string) ([]byte, error)    { return nil, nil }
func (nopTransport) Replace(context.Context, string, []byte) error   { return nil }
func (nopTransport) Bundle(context.Context, string, []FlowMod) error { return nil }
func (nopTransport) Watch(context.Context, string) <-chan struct{}   { return nil }

// BenchmarkDiffOneServiceChanged works out the flow mods of one changed
// service against the installed state of a 20,000-flow program (10,000
// dual-stack services), the Applier's two ways in the same run:
//
//   - full: the whole program resolved into a key map and diffed against
//     the installed flows (the Applier before per-owner tracking);
//   - owners: the changed owner's old and new flows only.
//
// full/owners is the speed-up. Aim: owners < 1 ms.
func BenchmarkDiffOneServiceChanged(b *testing.B) {
	svcs := benchServices(10000)
	ports := PortMap{"eth0": 1}
	p := buildProgram(b, svcs)
	a := NewApplier("br", nopTransport{}, StaticPorts(ports), ApplierOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if _, err := a.Apply(context.Background(), p); err != nil {
		b.Fatal(err)
	}
	changed := svcs[42]
	changed.vips = []netip.Addr{netip.MustParseAddr("172.18.0.99")}
	if err := p.Set(changed.owner, bypassFlows(changed)); err != nil {
		b.Fatal(err)
	}
	h := portsHash(ports)
	var full, owners time.Duration
	for b.Loop() {
		start := time.Now()
		want, err := p.entries(ports)
		if err != nil {
			b.Fatal(err)
		}
		mods, _, _ := diff(a.st.installed, want, func(*entry) bool { return true })
		if len(mods) != 3 {
			b.Fatalf("mods = %v", mods)
		}
		full += time.Since(start)

		start = time.Now()
		pl, err := a.planOwners(p.sets, slices.Collect(maps.Keys(p.dirty)), ports, h)
		if err != nil || len(pl.mods) != 3 {
			b.Fatalf("mods = %v, %v", pl.mods, err)
		}
		owners += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(full.Microseconds())/n/1000, "full-ms")
	b.ReportMetric(float64(owners.Microseconds())/n/1000, "owners-ms")
	b.ReportMetric(float64(full)/float64(owners), "full/owners")
}
