package hostnet

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/egress/egresssvc"
	"github.com/ovnedge/ovnedge/testbed"
)

// esvcReference is OVN-Kubernetes' egress-services chain and maps
// (go-controller/pkg/node/egress_service_test.go's base rules and the
// elements of its "with Network" case), in ovnedge's table, as nft makes
// them.
const esvcReference = `add table inet ovnedge-egress-service
add map inet ovnedge-egress-service egress-service-snat-v4 { type ipv4_addr : ipv4_addr ; }
add map inet ovnedge-egress-service egress-service-snat-v6 { type ipv6_addr : ipv6_addr ; }
add chain inet ovnedge-egress-service egress-services { type nat hook postrouting priority 100 ; }
add rule inet ovnedge-egress-service egress-services mark == 0x3f0 return
add rule inet ovnedge-egress-service egress-services snat ip to ip saddr map @egress-service-snat-v4
add rule inet ovnedge-egress-service egress-services snat ip6 to ip6 saddr map @egress-service-snat-v6
add element inet ovnedge-egress-service egress-service-snat-v4 { 10.128.0.3 : 5.5.5.5 }
add element inet ovnedge-egress-service egress-service-snat-v4 { 10.128.0.11 : 5.5.5.6 }
add element inet ovnedge-egress-service egress-service-snat-v6 { fe00:10:128::3 : fc00::10 }
`

// TestEgressServices checks that Sync says when the node does not
// forward, programs the ruleset nft makes for the same SNATs, replaces the elements in place, and keeps the ip rules
// of priority 5000 those wanted (by table number and rt_tables name); a
// node without SNATs has no table; an unknown table is an error.
func TestEgressServices(t *testing.T) {
	testbed.Require(t, "ip", "nft")
	a := netip.MustParseAddr
	ref := testbed.NewNetns(t, "hnesref")
	path := filepath.Join(t.TempDir(), "ref.nft")
	if err := os.WriteFile(path, []byte(esvcReference), 0o600); err != nil {
		t.Fatal(err)
	}
	ref.Run(t, "nft", "-f", path)
	want := nftView(t, ref, EgressServicesTable)

	n := testbed.NewNetns(t, "hnes")
	n.Run(t, "ip", "rule", "add", "priority", "5000", "from", "10.9.9.9", "table", "77") // a stale one
	es, err := NewEgressServices(nsPath(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = es.Close() })
	h := egresssvc.Host{SNAT: []egresssvc.SNAT{{Pod: a("10.128.0.3"), Source: a("5.5.5.5")}, {Pod: a("10.128.0.11"), Source: a("5.5.5.6")},
		{Pod: a("fe00:10:128::3"), Source: a("fc00::10")}},
		Rules: []egresssvc.Rule{{From: a("10.128.0.3"), Table: "100"}, {From: a("fe00:10:128::3"), Table: "100"}, {From: a("10.129.0.2"), Table: "main"}}}
	if err := es.Sync(h); !errors.Is(err, ErrNoForwarding) {
		t.Fatalf("Sync on a node that does not forward: %v", err)
	}
	n.Run(t, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	if err := es.Sync(h); err != nil {
		t.Fatal(err)
	}
	got := nftView(t, n, EgressServicesTable)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("view %d differs from nft's:\n--- Sync\n%s\n--- nft\n%s", i, got[i], want[i])
		}
	}
	rules := n.Run(t, "ip", "rule", "show", "priority", "5000") + n.Run(t, "ip", "-6", "rule", "show", "priority", "5000")
	for _, w := range []string{"from 10.128.0.3 lookup 100", "from 10.129.0.2 lookup main", "from fe00:10:128::3 lookup 100"} {
		if !strings.Contains(rules, w) {
			t.Errorf("rules lack %q:\n%s", w, rules)
		}
	}
	if strings.Contains(rules, "10.9.9.9") {
		t.Errorf("stale rule kept:\n%s", rules)
	}
	if err := es.Sync(egresssvc.Host{SNAT: h.SNAT[:1]}); err != nil {
		t.Fatal(err)
	}
	text := n.Run(t, "nft", "list", "map", "inet", EgressServicesTable, "egress-service-snat-v4")
	if !strings.Contains(text, "10.128.0.3 : 5.5.5.5") || strings.Contains(text, "10.128.0.11") {
		t.Errorf("after a change the map is\n%s", text)
	}
	if r := n.Run(t, "ip", "rule", "show", "priority", "5000"); strings.TrimSpace(r) != "" {
		t.Errorf("rules left: %s", r)
	}
	if err := es.Sync(egresssvc.Host{}); err != nil {
		t.Fatal(err)
	}
	if out, err := n.RunErr("nft", "list", "table", "inet", EgressServicesTable); err == nil {
		t.Errorf("the table is left without SNATs:\n%s", out)
	}
	var te *TableError
	if err := es.Sync(egresssvc.Host{Rules: []egresssvc.Rule{{From: a("10.1.1.1"), Table: "nope", Service: "shop/web"}}}); !errors.As(err, &te) || te.Service != "shop/web" {
		t.Errorf("a rule to an unknown table: %v", err)
	}
}

// TestRouteTable reads table ids and names.
func TestRouteTable(t *testing.T) {
	for name, want := range map[string]int{"100": 100, "main": 254, "local": 255} {
		if got, err := RouteTable(name); err != nil || got != want {
			t.Errorf("RouteTable(%q) = %d, %v; want %d", name, got, err, want)
		}
	}
	if _, err := RouteTable("no-such-table"); err == nil {
		t.Error("RouteTable of an unknown name: no error")
	}
}
