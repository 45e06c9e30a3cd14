package arp_test

import (
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/ovnedge/ovnedge/arp"
)

// quiet keeps the examples' logs out of their output; a daemon passes its
// own logger (nil means slog.Default()).
var quiet = slog.New(slog.DiscardHandler)

func ExampleElect() {
	vip := netip.MustParseAddr("172.18.0.50")
	nodes := []string{"ovn-control-plane", "ovn-worker", "ovn-worker2"}
	owner, _ := arp.Elect(vip, nodes)
	fmt.Println("owner:", owner)
	// Every node computes the same owner, whatever the order of its list.
	again, _ := arp.Elect(vip, []string{nodes[2], nodes[0], nodes[1]})
	fmt.Println("same owner:", again == owner)
	// Output:
	// owner: ovn-control-plane
	// same owner: true
}

func ExampleOwned() {
	vips := []arp.VIP{
		{Addr: netip.MustParseAddr("172.18.0.50"), Interface: "br-ex"},
		// externalTrafficPolicy=Local: only nodes with a ready endpoint.
		{Addr: netip.MustParseAddr("172.18.0.51"), Interface: "br-ex", Eligible: []string{"ovn-worker2"}},
		{Addr: netip.MustParseAddr("fc00:f853:ccd:e793::50"), Interface: "br-ex"},
	}
	healthy := []string{"ovn-control-plane", "ovn-worker", "ovn-worker2"}
	for _, node := range healthy {
		owned, err := arp.Owned(vips, node, healthy)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(node, owned["br-ex"])
	}
	// Output:
	// ovn-control-plane [172.18.0.50]
	// ovn-worker [fc00:f853:ccd:e793::50]
	// ovn-worker2 [172.18.0.51]
}

func ExampleResponder() {
	r, err := arp.New(arp.Config{Interface: "br-ex", Logger: quiet}) // default schedule: every 1.1 s for 5 s
	if err != nil {
		fmt.Println(err)
		return
	}
	// The owned set changes at run time; go r.Run(ctx) answers for it on
	// br-ex and reattaches when the interface comes back.
	err = r.SetAddresses([]netip.Addr{netip.MustParseAddr("172.18.0.50"), netip.MustParseAddr("fc00:f853:ccd:e793::50")})
	fmt.Println(r.Addresses(), err)
	r.Remove(netip.MustParseAddr("172.18.0.50"))
	fmt.Println(r.Addresses())
	// Bad input is an error and leaves the set as it was.
	fmt.Println(r.SetAddresses([]netip.Addr{netip.MustParseAddr("224.0.0.1")}))
	fmt.Println(r.Addresses())
	// Counters of every address owned since New, for Prometheus.
	for addr, s := range r.Stats() {
		if addr.Is6() {
			fmt.Printf("%s seen=%d replied=%d gratuitous=%d\n", addr, s.RequestsSeen, s.RepliesSent, s.GratuitousSent)
		}
	}
	// Output:
	// [172.18.0.50 fc00:f853:ccd:e793::50] <nil>
	// [fc00:f853:ccd:e793::50]
	// arp: set addresses on br-ex: address 224.0.0.1 cannot be owned on a link
	// [fc00:f853:ccd:e793::50]
	// fc00:f853:ccd:e793::50 seen=0 replied=0 gratuitous=0
}

func ExampleController() {
	live := arp.NewHealthyNodes("ovn-worker", "ovn-worker2") // fed from node readiness or leases
	r, err := arp.New(arp.Config{Interface: "br-ex", Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := arp.NewController("ovn-worker", live, map[string]arp.AddressSetter{"br-ex": r}, quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	vips := []arp.VIP{
		{Addr: netip.MustParseAddr("172.18.0.50"), Interface: "br-ex"},
		{Addr: netip.MustParseAddr("172.18.0.51"), Interface: "br-ex"},
	}
	if err := c.SetVIPs(vips); err != nil {
		fmt.Println(err)
		return
	}
	// go c.Run(ctx) syncs on every change; Sync does it once.
	if err := c.Sync(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("with both nodes:", r.Addresses())
	live.Set("ovn-worker") // ovn-worker2 is gone: ovn-worker takes everything
	if err := c.Sync(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("alone:", r.Addresses())
	// Output:
	// with both nodes: [172.18.0.50]
	// alone: [172.18.0.50 172.18.0.51]
}
