package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestHostSNATWithoutBinaries opens the SNAT backend of egress IPs on host
// interfaces as --egressip-host-backend names it, with PATH emptied as in
// the ovnedge image (the binary alone): auto and nftables open the
// netlink nftables backend, which installs and lists a rule; iptables,
// which runs commands, fails and says so.
func TestHostSNATWithoutBinaries(t *testing.T) {
	testbed.Require(t, "ip")
	node := testbed.NewNetns(t, "dsnat")
	netns := "/var/run/netns/" + node.Name
	t.Setenv("PATH", t.TempDir())
	if _, err := exec.LookPath("nft"); err == nil {
		t.Fatal("nft still on PATH")
	}
	rule := hostnet.SNATRule{PodIP: netip.MustParseAddr("10.244.1.3"), Link: "eg0", EgressIP: netip.MustParseAddr("192.168.100.50")}
	for _, tc := range []struct{ backend, want string }{
		{"auto", "*hostnet.NFTables"},
		{"nftables", "*hostnet.NFTables"},
		{"iptables", "iptables"}, // the error names the missing command
	} {
		t.Run(tc.backend, func(t *testing.T) {
			snat, err := newHostSNAT(tc.backend, netns, quiet)
			if tc.backend == "iptables" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("iptables without binaries: %v, want an error naming %s", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer snat.(interface{ Close() error }).Close()
			if got := fmt.Sprintf("%T", snat); got != tc.want {
				t.Fatalf("backend %s opened %s, want %s", tc.backend, got, tc.want)
			}
			ctx := context.Background()
			if err := snat.Apply(ctx, []hostnet.SNATRule{rule}, nil); err != nil {
				t.Fatal(err)
			}
			if rules, present, err := snat.List(ctx); err != nil || !present || !slices.Equal(rules, []hostnet.SNATRule{rule}) {
				t.Errorf("List = %v, %v, %v; want %v", rules, present, err, rule)
			}
			if err := snat.Reset(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
