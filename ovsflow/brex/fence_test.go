package brex_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

func TestEgressFence(t *testing.T) {
	ip := netip.MustParseAddr
	for _, tc := range []struct {
		name  string
		patch string
		ips   []netip.Addr
		want  []string
		err   string
	}{
		{name: "none", patch: "patch"},
		{name: "v4 and v6, sorted, duplicates once", patch: "patch",
			ips: []netip.Addr{ip("2001:db8::46"), ip("172.18.0.46"), ip("172.18.0.46")},
			want: []string{
				"cookie=0xede0000000fe9ce, priority=120,arp,in_port=patch,arp_spa=172.18.0.46,arp_op=2 actions=drop",
				"cookie=0xede0000000fe9ce, priority=120,icmp6,in_port=patch,icmp_type=136,icmp_code=0,nd_target=2001:db8::46 actions=drop",
			}},
		{name: "no patch port", ips: []netip.Addr{ip("172.18.0.46")}, err: "no patch port"},
		{name: "not unicast", patch: "patch", ips: []netip.Addr{ip("224.0.0.1")}, err: "not a unicast address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flows, err := brex.EgressFence(tc.patch, tc.ips)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range flows {
				if !brex.OwnedCookie(f.Cookie) {
					t.Errorf("cookie %#x is not owned", f.Cookie)
				}
				got = append(got, string(f.AppendText(nil)))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("flows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestFenced: the IPs of the fence flows in a bridge's dump are read back
// (what a restarted process resumes); flows with another cookie or
// priority are not fences.
func TestFenced(t *testing.T) {
	dump := `cookie=0xede0000000fe9ce, priority=120,arp,in_port=patch,arp_spa=172.18.0.46,arp_op=2 actions=drop
cookie=0xede0000000fe9ce, priority=120,icmp6,in_port=patch,icmp_type=136,icmp_code=0,nd_target=2001:db8::46 actions=drop
cookie=0x1, priority=120,arp,in_port=patch,arp_spa=172.18.0.47,arp_op=2 actions=drop
cookie=0xede0000000fe9ce, priority=100,arp,in_port=patch,arp_spa=172.18.0.48,arp_op=2 actions=drop
cookie=0xdeff105, priority=0 actions=NORMAL
`
	flows, err := ovsflow.ParseFlows([]byte(dump))
	if err != nil {
		t.Fatal(err)
	}
	got := brex.Fenced(flows)
	want := []netip.Addr{netip.MustParseAddr("172.18.0.46"), netip.MustParseAddr("2001:db8::46")}
	if !slices.Equal(got, want) {
		t.Fatalf("Fenced = %v, want %v", got, want)
	}
	made, err := brex.EgressFence("patch", want)
	if err != nil {
		t.Fatal(err)
	}
	if got := brex.Fenced(made); !slices.Equal(got, want) {
		t.Fatalf("Fenced(EgressFence(%v)) = %v", want, got)
	}
}
