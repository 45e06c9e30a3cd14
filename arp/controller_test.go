package arp

import (
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/internal/testbed"
)

var quietLog = slog.New(slog.DiscardHandler)

func TestOwned(t *testing.T) {
	nodes := []string{"node-a", "node-b", "node-c"}
	a1 := netip.MustParseAddr("192.0.2.10")
	a2 := netip.MustParseAddr("2001:db8::10")
	owner := func(addr netip.Addr, candidates ...string) string {
		o, _ := Elect(addr, candidates)
		return o
	}
	for _, tc := range []struct {
		name    string
		vips    []VIP
		healthy []string
		// want maps each node to what it owns on eth0.
		want    map[string][]netip.Addr
		wantErr bool
	}{
		{
			name:    "every healthy node is a candidate",
			vips:    []VIP{{Addr: a1, Interface: "eth0"}},
			healthy: nodes,
			want:    map[string][]netip.Addr{owner(a1, nodes...): {a1}},
		},
		{
			name:    "an unhealthy node owns nothing",
			vips:    []VIP{{Addr: a1, Interface: "eth0"}},
			healthy: slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == owner(a1, nodes...) }),
			want: map[string][]netip.Addr{
				owner(a1, slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == owner(a1, nodes...) })...): {a1},
			},
		},
		{
			name:    "eligible nodes only (externalTrafficPolicy=Local)",
			vips:    []VIP{{Addr: a1, Interface: "eth0", Eligible: []string{"node-c"}}, {Addr: a2, Interface: "eth0", Eligible: []string{"node-a", "node-b"}}},
			healthy: nodes,
			want:    map[string][]netip.Addr{"node-c": {a1}, owner(a2, "node-a", "node-b"): {a2}},
		},
		{
			name:    "eligible but unhealthy",
			vips:    []VIP{{Addr: a1, Interface: "eth0", Eligible: []string{"node-c"}}},
			healthy: nodes[:2],
			want:    map[string][]netip.Addr{},
		},
		{
			name:    "no eligible node",
			vips:    []VIP{{Addr: a1, Interface: "eth0", Eligible: []string{}}},
			healthy: nodes,
			want:    map[string][]netip.Addr{},
		},
		{
			name:    "no healthy node",
			vips:    []VIP{{Addr: a1, Interface: "eth0"}},
			healthy: nil,
			want:    map[string][]netip.Addr{},
		},
		{
			name:    "a VIP listed twice is owned once",
			vips:    []VIP{{Addr: a1, Interface: "eth0"}, {Addr: a1, Interface: "eth0"}},
			healthy: nodes[:1],
			want:    map[string][]netip.Addr{"node-a": {a1}},
		},
		{name: "invalid address", vips: []VIP{{Interface: "eth0"}}, healthy: nodes, wantErr: true},
		{name: "IPv4-mapped address", vips: []VIP{{Addr: netip.MustParseAddr("::ffff:192.0.2.10"), Interface: "eth0"}}, healthy: nodes, wantErr: true},
		{name: "multicast address", vips: []VIP{{Addr: netip.MustParseAddr("ff02::1"), Interface: "eth0"}}, healthy: nodes, wantErr: true},
		{name: "empty interface", vips: []VIP{{Addr: a1}}, healthy: nodes, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string][]netip.Addr{}
			for _, n := range nodes {
				owned, err := Owned(tc.vips, n, tc.healthy)
				if tc.wantErr {
					if err == nil {
						t.Fatalf("Owned(%v) for %s: no error", tc.vips, n)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				for iface := range owned {
					if iface != "eth0" {
						t.Errorf("%s owns on %s", n, iface)
					}
				}
				if addrs := owned["eth0"]; addrs != nil {
					got[n] = addrs
				}
			}
			if !maps.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("owners %v, want %v", got, tc.want)
			}
		})
	}
}

// recorder is an AddressSetter that remembers the last set.
type recorder struct {
	mu    sync.Mutex
	addrs []netip.Addr
}

func (r *recorder) SetAddresses(addrs []netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs = slices.Clone(addrs)
	return nil
}

func (r *recorder) get() []netip.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addrs
}

// TestController runs one controller per node and checks that exactly one
// node's responder holds each VIP after every change of VIPs or liveness.
func TestController(t *testing.T) {
	nodes := []string{"node-a", "node-b", "node-c"}
	live := NewHealthyNodes(nodes...)
	rec := map[string]*recorder{}
	ctrl := map[string]*Controller{}
	for _, n := range nodes {
		rec[n] = &recorder{}
		c, err := NewController(n, live, map[string]AddressSetter{"eth0": rec[n]}, quietLog)
		if err != nil {
			t.Fatal(err)
		}
		ctrl[n] = c
		startController(t, c)
	}
	var vipAddrs []netip.Addr
	var vips []VIP
	for i := range 8 {
		a := netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)})
		vipAddrs = append(vipAddrs, a)
		vips = append(vips, VIP{Addr: a, Interface: "eth0"})
	}
	// wantOwners waits until every VIP is held by exactly the node Elect
	// picks among healthy, and no other.
	wantOwners := func(vips []VIP, healthy []string) {
		t.Helper()
		testbed.Eventually(t, 5*time.Second, func() error {
			for _, v := range vips {
				owner, _ := Elect(v.Addr, healthy)
				for _, n := range nodes {
					if has := slices.Contains(rec[n].get(), v.Addr); has != (n == owner) {
						return fmt.Errorf("%s holds %s: %v, owner is %q", n, v.Addr, has, owner)
					}
				}
			}
			return nil
		})
	}
	for _, n := range nodes {
		if err := ctrl[n].SetVIPs(vips); err != nil {
			t.Fatal(err)
		}
	}
	wantOwners(vips, nodes)

	live.Set("node-a", "node-c") // node-b dies
	wantOwners(vips, []string{"node-a", "node-c"})
	live.Set(nodes...) // and comes back
	wantOwners(vips, nodes)

	// Invalid VIPs are refused and what is programmed stays.
	for _, n := range nodes {
		if err := ctrl[n].SetVIPs(append(slices.Clone(vips), VIP{Interface: "eth0"})); err == nil {
			t.Errorf("%s: SetVIPs with an invalid VIP: no error", n)
		}
	}
	live.Set(nodes...) // a resync with the VIPs kept
	wantOwners(vips, nodes)

	// A removed VIP is released by its owner.
	for _, n := range nodes {
		if err := ctrl[n].SetVIPs(vips[1:]); err != nil {
			t.Fatal(err)
		}
	}
	testbed.Eventually(t, 5*time.Second, func() error {
		for _, n := range nodes {
			if slices.Contains(rec[n].get(), vipAddrs[0]) {
				return fmt.Errorf("%s still holds %s", n, vipAddrs[0])
			}
		}
		return nil
	})
}

func TestNewController(t *testing.T) {
	for _, tc := range []struct {
		name string
		node string
		live Liveness
	}{
		{"empty node", "", NewHealthyNodes()},
		{"nil liveness", "node-a", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewController(tc.node, tc.live, nil, quietLog); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    Config // timing fields only
		wantErr bool
	}{
		{"defaults: every 1.1 s for 5 s", Config{Interface: "br-ex"}, Config{Interval: 1100 * time.Millisecond, Duration: 5 * time.Second, Poll: DefaultPoll}, false},
		{"configured", Config{Interface: "br-ex", Interval: time.Second, Duration: 3 * time.Second, Poll: time.Second}, Config{Interval: time.Second, Duration: 3 * time.Second, Poll: time.Second}, false},
		{"empty interface", Config{}, Config{}, true},
		{"negative interval", Config{Interface: "br-ex", Interval: -time.Second}, Config{}, true},
		{"negative duration", Config{Interface: "br-ex", Duration: -time.Second}, Config{}, true},
		{"negative poll", Config{Interface: "br-ex", Poll: -time.Second}, Config{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = quietLog
			r, err := New(tc.cfg)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := (Config{Interval: r.cfg.Interval, Duration: r.cfg.Duration, Poll: r.cfg.Poll}); got != tc.want {
				t.Errorf("timing %+v, want %+v", got, tc.want)
			}
		})
	}
}
