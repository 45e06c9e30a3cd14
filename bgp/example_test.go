package bgp_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/ovnedge/ovnedge/bgp"
)

// A node announces the VIPs it can serve to its top-of-rack router, with
// BFD and graceful restart; every later call to Announce sends only the
// difference. (No output: the example needs a router to talk to.)
func ExampleSpeaker() {
	ctx := context.Background()
	cfg := bgp.Config{
		ASN:             64513,
		RouterID:        netip.MustParseAddr("172.18.0.2"), // the node's IP
		GracefulRestart: 120 * time.Second,
		Peers: []bgp.Peer{{
			Address:  netip.MustParseAddr("172.18.0.1"),
			ASN:      64512,
			HoldTime: 9 * time.Second,
			BFD:      bgp.BFD{Enabled: true, Interval: 100 * time.Millisecond, Multiplier: 3},
		}},
		Pools: []bgp.Pool{{Name: "public", Prefixes: []netip.Prefix{netip.MustParsePrefix("172.18.0.200/29")},
			Communities: []bgp.Community{64513<<16 | 100}}},
	}
	s, err := bgp.Start(ctx, cfg, slog.Default())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(true) // keep the routes at the router while ovnedge restarts

	vips := []netip.Prefix{netip.MustParsePrefix("172.18.0.200/32"), netip.MustParsePrefix("172.18.0.201/32")}
	if err := s.Announce(vips); err != nil {
		fmt.Println(err)
	}
	// The Service behind .201 lost its last local endpoint: withdraw it.
	if err := s.Announce(vips[:1]); err != nil {
		fmt.Println(err)
	}
}

func ExampleParseCommunity() {
	c, _ := bgp.ParseCommunity("64513:100")
	fmt.Println(uint32(c), c)
	// Output: 4227924068 64513:100
}
