package testbed_test

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// TestNoWayOut checks the guard that make test, make bench, make
// bench-scale and make demo run under (scripts/no-way-out.sh): a network
// namespace with only lo, no route off the machine, so a dial of an
// address that is on no test interface fails at once with "network is
// unreachable" instead of leaving by the machine's default route. Outside
// the guard it does not dial (it would leave the machine); in CI it must
// be under it.
func TestNoWayOut(t *testing.T) {
	if os.Getenv("OVNEDGE_NO_WAY_OUT") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI=true but the tests do not run under scripts/no-way-out.sh (make test runs them there)")
		}
		t.Skip("not under scripts/no-way-out.sh (make test): dialing out would leave the machine")
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Attrs().Name != "lo" {
			t.Errorf("link %q in the test namespace: only lo should be here (tests put their links in namespaces of their own)", l.Attrs().Name)
		}
	}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteList(nil, family)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if r.Dst == nil || r.Dst.IP.IsUnspecified() {
				t.Errorf("default route in the test namespace: %v", r)
			}
		}
	}
	for _, tc := range []struct{ network, addr string }{
		{"tcp", "10.244.2.2:9"},    // the management address TestMainDaemonManifests once reached out to
		{"tcp", "192.0.2.1:80"},    // TEST-NET-1
		{"udp", "198.51.100.1:53"}, // TEST-NET-2: a UDP connect needs a route too
		{"tcp", "[2001:db8::1]:80"},
		{"tcp", "dns.google:53"}, // a name: resolving it needs a dial too
	} {
		start := time.Now()
		c, err := net.DialTimeout(tc.network, tc.addr, 5*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("%s %s: connected from the test namespace", tc.network, tc.addr)
			continue
		}
		took := time.Since(start)
		var dnsErr *net.DNSError
		switch {
		case errors.As(err, &dnsErr):
			// The resolver's dials to the nameservers fail with
			// ENETUNREACH; the DNSError carries no errno.
		case !errors.Is(err, syscall.ENETUNREACH):
			t.Errorf("%s %s: %v, want network is unreachable", tc.network, tc.addr, err)
		}
		if took > time.Second {
			t.Errorf("%s %s failed after %v, want at once", tc.network, tc.addr, took)
		}
	}
}
