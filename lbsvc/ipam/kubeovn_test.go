package ipam_test

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/lbsvc/ipam"
)

// The cases below are ported from Kube-OVN's own unit tests, the
// specification of its subnet IPAM: pkg/util/net_test.go (TestFirstIP,
// TestLastIP, TestExpandExcludeIPs), pkg/util/validator_test.go (the
// excludeIps rules of ValidateSubnet) and pkg/ipam/{ipam,subnet}_test.go.
// A Kube-OVN "pod" is a Service here, its static ip_address annotation the
// Service's spec.loadBalancerIP.

// TestKubeOVNFirstLastIP ports TestFirstIP and TestLastIP: the usable
// range of a CIDR, in IPv6 too without its last address.
func TestKubeOVNFirstLastIP(t *testing.T) {
	for _, tt := range []struct{ cidr, want string }{
		{"192.168.0.23/24", "192.168.0.1..192.168.0.254"},
		{"192.168.0.23/31", "192.168.0.22..192.168.0.23"},
		{"192.168.0.0/31", "192.168.0.0..192.168.0.1"},
		{"192.168.0.2/31", "192.168.0.2..192.168.0.3"},
		// "controversy": Kube-OVN's FirstIP .24 lies after its LastIP .22:
		// a /32 hands out nothing.
		{"192.168.0.23/32", ""},
		{"ffff:ffff:ffff:ffff:ffff:0:ffff:0/96", "ffff:ffff:ffff:ffff:ffff::1..ffff:ffff:ffff:ffff:ffff:0:ffff:fffe"},
		{"ffff:ffff:ffff:ffff:ffff:0:ffff:0/127", "ffff:ffff:ffff:ffff:ffff:0:ffff:0..ffff:ffff:ffff:ffff:ffff:0:ffff:1"},
		{"fd00::/128", ""},
	} {
		p, err := ipam.NewPool("s", tt.cidr, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if r, ok := p.Range(); ok {
			got = r.First.String() + ".." + r.Last.String()
		}
		if got != tt.want {
			t.Errorf("%s: range %q, want %q", tt.cidr, got, tt.want)
		}
	}
}

// subnetExclude runs ParseExclude over each block of a (dual-stack)
// cidrBlock, as NewSubnetPools does.
func subnetExclude(cidrBlock string, entries []string) (string, error) {
	var out []string
	for _, b := range strings.Split(cidrBlock, ",") {
		rs, err := ipam.ParseExclude(netip.MustParsePrefix(b), entries)
		if err != nil {
			return "", err
		}
		for _, r := range rs {
			out = append(out, r.String())
		}
	}
	return strings.Join(out, " "), nil
}

// TestKubeOVNExpandExcludeIPs ports TestExpandExcludeIPs; where
// ExpandExcludeIPs silently drops an entry that ValidateSubnet refuses (a
// backwards range, two addresses in one entry), the Subnet is refused here
// too.
func TestKubeOVNExpandExcludeIPs(t *testing.T) {
	const v6 = "ffff:ffff:ffff:ffff:ffff:0:ffff:"
	for _, tt := range []struct {
		name, cidr string
		excl       []string
		want       string // or "error: ..."
	}{
		{"base", "10.16.0.23/24", []string{"10.16.0.0..10.16.0.20", "10.16.0.23", "10.16.0.255"}, "10.16.0.1..10.16.0.20 10.16.0.23"},
		{"exIPOutCIDR", "10.16.0.23/24", []string{"10.16.0.0..10.16.0.20,10.16.0.23"}, "error: "},
		{"exIPFormatErr", "10.16.0.23/24," + v6 + "23/96", []string{"10.16.0.20..10.16.0.1", "10.16.0.23"}, "error: backwards"},
		{"exIPOverflow", "10.16.0.23/24," + v6 + "23/96", []string{"10.16.0.1..10.16.1.10", "10.16.0.23", v6 + "23.." + v6 + "25"},
			"10.16.0.1..10.16.0.254 " + v6 + "23.." + v6 + "25"},
		{"exIPformatErr", "10.16.0.23/24," + v6 + "23/96", []string{"10.16.0.10..10.16.0.10", "10.16.0.23", v6 + "23.." + v6 + "25"},
			"10.16.0.10 10.16.0.23 " + v6 + "23.." + v6 + "25"},
		// ValidateSubnet: "v6 ip address can not use upper case".
		{"upper", "2001:db8::/64", []string{"2001:DB8::2"}, "error: upper case"},
		{"notIP", "10.16.0.0/24", []string{"10.16.0.0/30"}, "error: CIDR"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := subnetExclude(tt.cidr, tt.excl)
			if want, ok := strings.CutPrefix(tt.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want one containing %q", err, want)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func subnetAllocator(t *testing.T, name, cidr, gw string, excl ...string) *ipam.Allocator {
	t.Helper()
	pools, err := ipam.NewSubnetPools(name, cidr, gw, excl)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ipam.NewAllocator(pools...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func withFamilies(s *corev1.Service, fs ...corev1.IPFamily) *corev1.Service {
	s.Spec.IPFamilies = fs
	return s
}

const (
	v4 = corev1.IPv4Protocol
	v6 = corev1.IPv6Protocol
)

var kubeOVNExclude = []string{
	"10.0.0.2", "10.0.0.4", "10.0.0.100", "10.0.0.252", "10.0.0.253", "10.0.0.254",
	"2001:db8::2", "2001:db8::4", "2001:db8::100", "2001:db8::252", "2001:db8::253", "2001:db8::254",
}

// TestKubeOVNAllocate ports pkg/ipam's random and static allocation
// cases.
func TestKubeOVNAllocate(t *testing.T) {
	type step struct {
		svc  *corev1.Service
		want string
	}
	tests := []struct {
		name     string
		cidr, gw string
		exclude  []string
		steps    []step
	}{
		// TestGetRandomAddress: the lowest free address, per family.
		{"random v4", "10.0.0.0/24", "", kubeOVNExclude, []step{
			{lbSvc("pod1", 0, ""), "10.0.0.1"},
			{lbSvc("pod2", 0, ""), "10.0.0.3"},
			{lbSvc("pod3", 0, ""), "10.0.0.5"},
		}},
		{"random v6", "2001:db8::/64", "", kubeOVNExclude, []step{
			{withFamilies(lbSvc("pod2", 0, ""), v6), "2001:db8::1"},
			{withFamilies(lbSvc("pod5", 0, ""), v6), "2001:db8::3"},
		}},
		{"random dual", "10.0.0.0/24,2001:db8::/64", "", kubeOVNExclude, []step{
			{withFamilies(lbSvc("pod3", 0, ""), v4, v6), "10.0.0.1,2001:db8::1"},
			{withFamilies(lbSvc("pod6", 0, ""), v4, v6), "10.0.0.3,2001:db8::3"},
		}},
		// TestGetStaticAddress: a static address, then the same one for
		// another pod conflicts.
		{"static conflict", "10.0.0.0/24,2001:db8::/64", "", kubeOVNExclude, []step{
			{lbSvc("pod1", 0, "10.0.0.1"), "10.0.0.1"},
			{lbSvc("pod2", 0, "10.0.0.1"), " LoadBalancerIPTaken"},
			{lbSvc("pod3", 0, "2001:db8::1"), "2001:db8::1"},
			{lbSvc("pod4", 0, "2001:db8::1"), " LoadBalancerIPTaken"},
		}},
		// TestIPAMRandomAddressSkipsReleasedExcludeIPsAfterIPPoolReconcile:
		// an excluded address is assignable statically, and never handed
		// out at random.
		{"static excluded", "10.10.0.0/24", "10.10.0.1", []string{"10.10.0.1", "10.10.0.2..10.10.0.5"}, []step{
			{lbSvc("static-pod", 0, "10.10.0.2"), "10.10.0.2"},
			{withFamilies(lbSvc("static-pod", 0, ""), v4), "10.10.0.2"},
			{lbSvc("random-pod", 0, ""), "10.10.0.6"},
		}},
		// TestGetStaticAddressRejectsGatewayIP, also when excludeIps lack
		// the gateway and it is spelled uncanonically.
		{"gateway v4", "10.0.0.0/24", "10.0.0.1", nil, []step{
			{lbSvc("pod", 0, "10.0.0.1"), " LoadBalancerIPIsGateway"},
			{lbSvc("pod", 0, ""), "10.0.0.2"},
		}},
		{"gateway v6", "2001:db8::/64", "2001:0db8:0000:0000:0000:0000:0000:0001", nil, []step{
			{lbSvc("pod", 0, "2001:db8::1"), " LoadBalancerIPIsGateway"},
			{withFamilies(lbSvc("pod", 0, ""), v6), "2001:db8::2"},
		}},
		// TestGetV4StaticAddressPTP and TestGetV4RandomAddressPTP: a /31
		// hands out both addresses.
		{"ptp", "10.0.0.0/31", "", []string{"10.0.0.0"}, []step{
			{lbSvc("pod1", 0, ""), "10.0.0.1"},
			{lbSvc("pod5", 0, "10.0.0.1"), " LoadBalancerIPTaken"},
			{lbSvc("pod6", 0, "10.0.0.0"), "10.0.0.0"},
		}},
		// The last address of an IPv6 subnet is never handed out, at random
		// or statically (LastIP is the second-to-last address).
		{"v6 last address", "fd00::/126", "fd00::1", nil, []step{
			{withFamilies(lbSvc("a", 0, ""), v6), "fd00::2"},
			{withFamilies(lbSvc("b", 0, ""), v6), " NoLoadBalancerIPAvailable"},
			{lbSvc("b", 0, "fd00::3"), " LoadBalancerIPExcluded"},
			{lbSvc("b", 0, "fd00::"), " LoadBalancerIPExcluded"},
		}},
		// Upper-case spec.loadBalancerIP parses as net.ParseIP does; the
		// address is written canonically.
		{"upper-case static", "2001:db8::/64", "", nil, []step{
			{lbSvc("pod", 0, "2001:DB8::10"), "2001:db8::10"},
		}},
		// TestIPAMDualRandomAddressHandlesV4OnV6Exhaustion/RollsBackNewV4:
		// no IPv6 left, so no IPv4 either.
		{"dual one family exhausted", "10.0.0.0/30,fd00::/126", "10.0.0.1,fd00::1", []string{"10.0.0.1", "fd00::1..fd00::2"}, []step{
			{withFamilies(lbSvc("pod", 0, ""), v4, v6), " NoLoadBalancerIPAvailable"},
			{lbSvc("other", 0, ""), "10.0.0.2"}, // nothing was taken
		}},
		// A Service of one family gets only that family from a dual-stack
		// Subnet; one whose families the pools lack gets an event.
		{"family of the Service", "10.0.0.0/24,fd00::/120", "", nil, []step{
			{withFamilies(lbSvc("a", 0, ""), v6), "fd00::1"},
			{lbSvc("b", 0, ""), "10.0.0.1"},
		}},
		{"no pool of the family", "10.0.0.0/24", "", nil, []step{
			{withFamilies(lbSvc("a", 0, ""), v6), " NoLoadBalancerIPAvailable"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := subnetAllocator(t, "subnet", tt.cidr, tt.gw, tt.exclude...)
			for i, s := range tt.steps {
				if got := ingress(a.Allocate(s.svc, "subnet")); got != s.want {
					t.Errorf("step %d (%s): got %q, want %q", i, s.svc.Name, got, s.want)
				}
			}
		})
	}
}

// TestKubeOVNDualPreservesExistingV4 ports
// TestIPAMDualRandomAddressHandlesV4OnV6Exhaustion/PreservesExistingV4:
// a Service holding an IPv4 address keeps it (and its status) when the
// Subnet turns dual-stack with no IPv6 address free.
func TestKubeOVNDualPreservesExistingV4(t *testing.T) {
	a := subnetAllocator(t, "dual", "10.0.0.0/30", "10.0.0.1", "10.0.0.1")
	if got := ingress(a.Allocate(lbSvc("pod", 0, "10.0.0.2"), "dual")); got != "10.0.0.2" {
		t.Fatalf("static: %q", got)
	}
	pools, err := ipam.NewSubnetPools("dual", "10.0.0.0/30,fd00::/126", "10.0.0.1,fd00::1", []string{"10.0.0.1", "fd00::1..fd00::2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetPools(pools...); err != nil {
		t.Fatal(err)
	}
	if got := ingress(a.Allocate(withFamilies(lbSvc("pod", 0, ""), v4, v6), "dual")); got != "10.0.0.2 NoLoadBalancerIPAvailable" {
		t.Errorf("dual: %q", got)
	}
	if o, _ := a.Owner(netip.MustParseAddr("10.0.0.2")); o != "default/pod" {
		t.Errorf("10.0.0.2 owned by %q", o)
	}
}

// TestKubeOVNNewlyExcluded ports the excludeIps updates of pkg/ipam
// (TestIPAMNamedPoolStaticAddressRemainsAllocatableAfterSubnetUpdate,
// TestIPAMNamedPoolDoesNotAllocateNewlyExcludedAddresses,
// TestIPAMReleasedExcludedAddressDoesNotBecomeAvailable): an address that
// becomes excluded while a Service holds it stays the Service's; once
// released it is never handed out at random; one outside a new CIDR is
// forgotten. Also across a restart (Rebuild from the status).
func TestKubeOVNNewlyExcluded(t *testing.T) {
	for _, tt := range []struct{ name, cidr, gw, held, next string }{
		{"IPv4", "10.0.0.0/29", "10.0.0.1", "10.0.0.2", "10.0.0.3"},
		{"IPv6", "fd00::/125", "fd00::1", "fd00::2", "fd00::3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fam := v4
			if strings.Contains(tt.cidr, ":") {
				fam = v6
			}
			a := subnetAllocator(t, "subnet", tt.cidr, tt.gw, tt.gw)
			svc := withFamilies(lbSvc("pod", 0, ""), fam)
			if got := ingress(a.Allocate(svc, "subnet")); got != tt.held {
				t.Fatalf("first: %q", got)
			}
			pools, err := ipam.NewSubnetPools("subnet", tt.cidr, tt.gw, []string{tt.gw, tt.held})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.SetPools(pools...); err != nil {
				t.Fatal(err)
			}
			if got := ingress(a.Allocate(svc, "subnet")); got != tt.held {
				t.Errorf("after the exclusion: %q, want %q kept", got, tt.held)
			}
			// After a restart the status is the memory.
			b, err := ipam.NewAllocator(pools...)
			if err != nil {
				t.Fatal(err)
			}
			b.Rebuild([]*corev1.Service{withFamilies(lbSvc("pod", 0, "", tt.held), fam)})
			if got := ingress(b.Allocate(svc, "subnet")); got != tt.held {
				t.Errorf("after a restart: %q, want %q kept", got, tt.held)
			}
			a.Release("default", "pod")
			if got := ingress(a.Allocate(withFamilies(lbSvc("random", 0, ""), fam), "subnet")); got != tt.next {
				t.Errorf("after release: %q, want %q (the excluded one never)", got, tt.next)
			}
			// A new CIDR without the held address forgets it.
			moved, err := ipam.NewSubnetPools("subnet", strings.Replace(tt.cidr, "0", "1", 1), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.SetPools(moved...); err != nil {
				t.Fatal(err)
			}
			if _, ok := a.Owner(netip.MustParseAddr(tt.next)); ok {
				t.Errorf("%s still owned after the CIDR moved", tt.next)
			}
		})
	}
}

func TestNewSubnetPoolsErrors(t *testing.T) {
	for _, tt := range []struct{ cidr, gw string }{
		{"10.0.0.0/24,10.1.0.0/24", ""},
		{"10.0.0.0/24", "10.1.0.1"},
		{"10.0.0.0/24", "bogus"},
		{"FD00::/64", ""},
		{"", ""},
	} {
		if _, err := ipam.NewSubnetPools("s", tt.cidr, tt.gw, nil); err == nil {
			t.Errorf("NewSubnetPools(%q, %q) accepted", tt.cidr, tt.gw)
		}
	}
}
