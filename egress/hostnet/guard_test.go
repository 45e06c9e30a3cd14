package hostnet

import (
	"context"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// guardRuleset is the guard of the topology's pods on eg0 as nft lists it
// (handles and counters left out).
const guardRuleset = `table inet ovnedge-egressip-guard {
	chain postrouting {
		type filter hook postrouting priority srcnat + 1; policy accept;
		ip saddr 10.244.0.0/16 oifname "eg0" ct direction original counter drop comment "pods 10.244.0.0/16 leaving eg0 unSNATed"
		ip6 saddr fd00:10:244::/48 oifname "eg0" ct direction original counter drop comment "pods fd00:10:244::/48 leaving eg0 unSNATed"
	}
}
`

var (
	nftCounter = regexp.MustCompile(` counter packets \d+ bytes \d+`)
	guardDrops = regexp.MustCompile(`ip saddr 10.244.0.0/16 oifname "eg0" ct direction original counter packets (\d+)`)
)

// udpFlow sends the pod's UDP datagrams to the far host and tells which
// source the far host sees them from ("" none within wait).
type udpFlow struct {
	src  net.Conn
	sink *net.UDPConn
}

func newUDPFlow(t *testing.T, tp *topology) *udpFlow {
	t.Helper()
	f := &udpFlow{}
	if err := mustNamespace(t, tp.far).do(func() (err error) {
		f.sink, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(farIP+":9501")))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.sink.Close() })
	if err := mustNamespace(t, tp.pod).do(func() (err error) { f.src, err = net.Dial("udp", farIP+":9501"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.src.Close() })
	return f
}

func (f *udpFlow) seen(wait time.Duration) string {
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		_, _ = f.src.Write([]byte("x"))
		_ = f.sink.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		buf := make([]byte, 16)
		if _, from, err := f.sink.ReadFromUDP(buf); err == nil {
			return from.AddrPort().Addr().String()
		}
	}
	return ""
}

// TestGuard: with the leak guard on the node's host network, a pod's
// packets do not leave eg0 with the pod's address (its flow was routed
// there before any SNAT rule), while a connection the far host opens to
// the pod is answered; once the pod's SNAT rule is added the flow leaves
// from the egress IP; the guard follows its spec and goes away with it.
func TestGuard(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tp := newTopology(t, b)
			tp.node.Run(t, "ip", "route", "add", farIP+"/32", "dev", "eg0")
			g, err := NewGuard(nsPath(tp.node))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = g.Close() })
			spec := GuardSpec{
				PodSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")},
				Networks:   []netip.Prefix{netip.MustParsePrefix("192.168.100.0/24"), netip.MustParsePrefix("192.168.200.0/24")},
			}
			converge := func(spec GuardSpec, wantChanged bool, wantLinks ...string) {
				t.Helper()
				links, changed, err := g.Converge(ctx, spec)
				if err != nil || changed != wantChanged || !slices.Equal(links, wantLinks) {
					t.Fatalf("Converge(%v) = %v, %v, %v; want %v, %v", spec, links, changed, err, wantLinks, wantChanged)
				}
			}
			converge(spec, true, "eg0")
			converge(spec, false, "eg0")
			if got := nftCounter.ReplaceAllString(nftHandle.ReplaceAllString(tp.node.Run(t, "nft", "-a", "list", "table", "inet", GuardTable), ""), " counter"); strings.TrimSpace(got) != strings.TrimSpace(guardRuleset) {
				t.Errorf("guard ruleset:\n%q\nwant:\n%q", got, guardRuleset)
			}

			flow := newUDPFlow(t, tp)
			if from := flow.seen(time.Second); from != "" {
				t.Fatalf("the pod's flow left eg0 unSNATed, from %s", from)
			}
			listing := tp.node.Run(t, "nft", "list", "table", "inet", GuardTable)
			if m := guardDrops.FindStringSubmatch(listing); m == nil || m[1] == "0" {
				t.Errorf("the guard counted no drop of the pod's packets:\n%s", listing)
			}
			if err := farDials(t, tp); err != nil {
				t.Errorf("a connection from the far host to the pod: %v", err)
			}

			a := Assignment{Link: "eg0", EgressIP: netip.MustParseAddr(egressIP), PodIPs: []netip.Addr{netip.MustParseAddr(podIP)}}
			if _, err := tp.mgr.Converge(ctx, State{a}); err != nil {
				t.Fatalf("Converge: %v", err)
			}
			if from := flow.seen(3 * time.Second); from != egressIP {
				t.Errorf("after the SNAT rule the flow left from %q, want %s", from, egressIP)
			}

			converge(GuardSpec{PodSubnets: spec.PodSubnets, Networks: spec.Networks[1:]}, true) // no link in it
			if out, err := tp.node.RunErr("nft", "list", "table", "inet", GuardTable); err == nil {
				t.Errorf("guard table left with no link to guard:\n%s", out)
			}
			converge(spec, true, "eg0")
			converge(GuardSpec{}, true)
			converge(GuardSpec{}, false)
		})
	}
}

// farDials opens a TCP connection from the far host to the pod: its
// replies leave eg0 with the pod's address, in the reply direction.
func farDials(t *testing.T, tp *topology) error {
	t.Helper()
	var ln net.Listener
	if err := mustNamespace(t, tp.pod).do(func() (err error) { ln, err = net.Listen("tcp", podIP+":9502"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_, _ = c.Write([]byte("hi"))
			c.Close()
		}
	}()
	return mustNamespace(t, tp.far).do(func() error {
		c, err := net.DialTimeout("tcp", podIP+":9502", 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 2)
		_, err = c.Read(buf)
		return err
	})
}
