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
