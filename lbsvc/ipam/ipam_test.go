package ipam_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/lbsvc/ipam"
)

func TestParseExclude(t *testing.T) {
	tests := []struct {
		cidr    string
		entries []string
		want    string // ranges joined by " ", or "error: <substring>"
	}{
		// Clipped to the usable range (the network address is never handed out).
		{"172.18.0.0/16", []string{"172.18.0.0..172.18.0.10"}, "172.18.0.1..172.18.0.10"},
		{"172.18.0.0/24", []string{"172.18.0.5", "172.18.0.7", "172.18.0.6"}, "172.18.0.5..172.18.0.7"},
		{"172.18.0.0/24", []string{"172.18.0.100..172.18.0.130", "172.18.0.120..172.18.0.140"}, "172.18.0.100..172.18.0.140"},
		{"10.0.0.0/24", []string{"9.0.0.0..10.0.0.3", "10.0.0.250..10.0.1.5"}, "10.0.0.1..10.0.0.3 10.0.0.250..10.0.0.254"},
		{"10.0.0.0/24", []string{"10.0.1.0..10.0.1.255", "192.168.0.1", "10.0.0.0", "10.0.0.255"}, ""},
		{"10.0.0.0/24", []string{" 10.0.0.9 "}, "10.0.0.9"},
		{"fd00::/64", []string{"fd00::1..fd00::ff", "fd00::100"}, "fd00::1..fd00::100"},
		// IPv6 too: the last address is not handed out, so not excluded either.
		{"fd00::/120", []string{"fd00::..fd00::ffff"}, "fd00::1..fd00::fe"},
		// A dual-stack Subnet lists both families: the other one is ignored.
		{"10.0.0.0/24", []string{"fd00::1", "10.0.0.7"}, "10.0.0.7"},
		{"10.0.0.0/32", []string{"10.0.0.0"}, ""},
		{"10.0.0.0/24", []string{"10.0.0.9..10.0.0.1"}, "error: backwards"},
		{"10.0.0.0/24", []string{"10.0.0.1..fd00::1"}, "error: different families"},
		{"10.0.0.0/24", []string{"10.0.0.300"}, "error: \"10.0.0.300\""},
		{"10.0.0.0/24", []string{""}, "error: empty"},
		// Kube-OVN's validator refuses CIDRs and upper case.
		{"10.0.0.0/24", []string{"10.0.0.0/30"}, "error: CIDR"},
		{"fd00::/64", []string{"FD00::1"}, "error: upper case"},
		{"fd00::/64", []string{"fd00::1..fd00::A"}, "error: upper case"},
		{"10.0.0.0/24", []string{"10.0.0.1..10.0.0.2..10.0.0.3"}, "error: "},
		{"10.0.0.0/24", []string{"::ffff:10.0.0.1"}, "error: IPv4-mapped"},
	}
	for _, tt := range tests {
		t.Run(tt.cidr+" "+strings.Join(tt.entries, ","), func(t *testing.T) {
			rs, err := ipam.ParseExclude(netip.MustParsePrefix(tt.cidr), tt.entries)
			if want, ok := strings.CutPrefix(tt.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want one containing %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rs {
				got = append(got, r.String())
			}
			if s := strings.Join(got, " "); s != tt.want {
				t.Errorf("got %q, want %q", s, tt.want)
			}
		})
	}
}

// FuzzParseExclude checks the parser's invariants on any input: no panic;
// ranges inside the CIDR's usable range, ordered, disjoint and not
// adjacent; every valid single-IP entry inside that range is covered.
func FuzzParseExclude(f *testing.F) {
	for _, s := range []string{"172.18.0.0..172.18.0.10", "10.0.0.5", "10.0.0.0/30", "fd00::1..fd00::5",
		"10.0.0.9..10.0.0.1", "..", "1.2.3.4..", "/", "fd00::/0", "10.0.0.255..10.0.1.0"} {
		f.Add("10.0.0.0/24", s)
		f.Add("fd00::/120", s)
	}
	f.Fuzz(func(t *testing.T, cidr, entries string) {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return
		}
		list := strings.Split(entries, ",")
		rs, err := ipam.ParseExclude(p, list)
		if err != nil {
			return
		}
		p = p.Masked()
		usable, _ := (&ipam.Pool{CIDR: p}).Range()
		for i, r := range rs {
			if !usable.Contains(r.First) || !usable.Contains(r.Last) || r.Last.Less(r.First) {
				t.Fatalf("range %v outside %v (%v) or backwards", r, usable, p)
			}
			if i > 0 && !rs[i-1].Last.Next().Less(r.First) {
				t.Fatalf("ranges %v and %v overlap or touch", rs[i-1], r)
			}
		}
		for _, e := range list {
			a, err := netip.ParseAddr(strings.TrimSpace(e))
			if err == nil && usable.Contains(a) && !slices.ContainsFunc(rs, func(r ipam.Range) bool { return r.Contains(a) }) {
				t.Fatalf("entry %s not excluded by %v", a, rs)
			}
		}
	})
}

func TestPoolUsable(t *testing.T) {
	p, err := ipam.NewPool("attach-subnet", "172.18.0.0/16", []string{"172.18.0.0..172.18.0.10"})
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]string{
		"172.18.0.18":    "",
		"172.18.0.5":     "excluded",
		"172.18.255.255": "broadcast",
		"172.19.0.1":     "outside",
	} {
		err := p.Usable(netip.MustParseAddr(ip))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("Usable(%s) = %v, want %q", ip, err, want)
		}
	}
	for _, bad := range []string{"172.18.0.0", "fe80::1%eth0/64"} {
		if _, err := ipam.NewPool("x", bad, nil); err == nil {
			t.Errorf("NewPool(%q) accepted", bad)
		}
	}
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func lbSvc(name string, age int, lbIP string, status ...string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Minute))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: lbIP},
	}
	for _, ip := range status {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func newAllocator(t *testing.T) *ipam.Allocator {
	t.Helper()
	v4, err := ipam.NewPool("v4", "172.18.0.0/29", []string{"172.18.0.1..172.18.0.2", "172.18.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	v6, err := ipam.NewPool("v6", "fd00::/126", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ipam.NewAllocator(v4, v6)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ingress(r ipam.Result) string {
	var s []string
	for _, in := range r.Ingress {
		s = append(s, in.IP)
	}
	var reasons []string
	for _, e := range r.Events {
		if e.Type == corev1.EventTypeWarning {
			reasons = append(reasons, e.Reason)
		}
	}
	if len(reasons) > 0 {
		return strings.Join(s, ",") + " " + strings.Join(reasons, ",")
	}
	return strings.Join(s, ",")
}

func TestAllocate(t *testing.T) {
	// Pool v4 172.18.0.0/29: .0 network, .7 broadcast, .1-.2 and .5
	// excluded: usable .3 .4 .6.
	type step struct {
		svc   *corev1.Service
		pools []string
		want  string
	}
	dual := lbSvc("dual", 0, "")
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	clusterIP := lbSvc("plain", 0, "")
	clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	tests := []struct {
		name  string
		steps []step
	}{
		{"lowest free, stable, exhausted", []step{
			{lbSvc("a", 0, ""), nil, "172.18.0.3"},
			{lbSvc("b", 0, ""), nil, "172.18.0.4"},
			{lbSvc("a", 0, ""), nil, "172.18.0.3"},
			{lbSvc("c", 0, ""), nil, "172.18.0.6"},
			{lbSvc("d", 0, ""), nil, " NoLoadBalancerIPAvailable"},
		}},
		{"static IP validated", []step{
			{lbSvc("a", 0, "172.18.0.6"), nil, "172.18.0.6"},
			{lbSvc("b", 0, "172.18.0.6"), nil, " LoadBalancerIPTaken"},
			{lbSvc("c", 0, "172.18.0.7"), nil, " LoadBalancerIPExcluded"},
			{lbSvc("c", 0, "172.18.0.0"), nil, " LoadBalancerIPExcluded"},
			{lbSvc("c", 0, "10.0.0.1"), nil, " LoadBalancerIPOutsidePool"},
			{lbSvc("c", 0, "bogus"), nil, " InvalidLoadBalancerIP"},
			{lbSvc("c", 0, "fd00::2"), []string{"v4"}, " LoadBalancerIPOutsidePool"},
			{lbSvc("c", 0, ""), nil, "172.18.0.3"}, // failures took nothing
		}},
		{"static change releases the old address", []step{
			{lbSvc("a", 0, "172.18.0.6"), nil, "172.18.0.6"},
			{lbSvc("a", 0, "172.18.0.4"), nil, "172.18.0.4"},
			{lbSvc("b", 0, "172.18.0.6"), nil, "172.18.0.6"},
		}},
		{"dual-stack in spec order", []step{{dual, nil, "fd00::1,172.18.0.3"}}},
		{"pool restriction", []step{
			{lbSvc("a", 0, ""), []string{"v6"}, " NoLoadBalancerIPAvailable"},
			{lbSvc("a", 0, ""), []string{"nope"}, " UnknownPool"},
			{lbSvc("a", 0, ""), []string{"v4"}, "172.18.0.3"},
		}},
		{"not a LoadBalancer releases", []step{
			{lbSvc("plain", 0, ""), nil, "172.18.0.3"},
			{clusterIP, nil, ""},
			{lbSvc("b", 0, ""), nil, "172.18.0.3"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAllocator(t)
			for i, s := range tt.steps {
				if got := ingress(a.Allocate(s.svc, s.pools...)); got != s.want {
					t.Errorf("step %d (%s): got %q, want %q", i, s.svc.Name, got, s.want)
				}
			}
		})
	}
}

func TestRebuild(t *testing.T) {
	a := newAllocator(t)
	// After a restart: "old" and "young" both claim .3 (young lost a race
	// upstream); "other" holds .4; an address outside the pools is ignored.
	svcs := []*corev1.Service{
		lbSvc("young", 5, "", "172.18.0.3"),
		lbSvc("old", 1, "", "172.18.0.3"),
		lbSvc("other", 2, "", "172.18.0.4", "192.0.2.1"),
	}
	events := a.Rebuild(svcs)
	if len(events) != 1 || events[0].Object.Name != "young" || events[0].Reason != ipam.ReasonDuplicate {
		t.Fatalf("events %v", events)
	}
	if o, _ := a.Owner(netip.MustParseAddr("172.18.0.3")); o != "default/old" {
		t.Errorf("172.18.0.3 owned by %q", o)
	}
	// Never handed out twice: the next ones get what is left.
	for _, step := range []struct{ svc, want string }{
		{"old", "172.18.0.3"}, {"other", "172.18.0.4"}, {"young", "172.18.0.6"}, {"new", " NoLoadBalancerIPAvailable"},
	} {
		if got := ingress(a.Allocate(lbSvc(step.svc, 0, ""))); got != step.want {
			t.Errorf("%s: got %q, want %q", step.svc, got, step.want)
		}
	}
	a.Release("default", "other")
	if got := ingress(a.Allocate(lbSvc("new", 0, ""))); got != "172.18.0.4" {
		t.Errorf("after release: %q", got)
	}
}

func TestNewAllocatorErrors(t *testing.T) {
	p1, _ := ipam.NewPool("a", "10.0.0.0/24", nil)
	p2, _ := ipam.NewPool("b", "10.0.0.128/25", nil)
	p3, _ := ipam.NewPool("a", "10.1.0.0/24", nil)
	for _, pools := range [][]*ipam.Pool{{p1, p2}, {p1, p3}, {p1, nil}} {
		if _, err := ipam.NewAllocator(pools...); err == nil {
			t.Errorf("NewAllocator(%v) accepted", pools)
		}
	}
}

// A static spec.loadBalancerIP outside the pool gets an event, not the
// address; status stays empty.
func ExampleAllocator_Allocate() {
	pool, err := ipam.NewPool("attach-subnet", "172.18.0.0/16", []string{"172.18.0.0..172.18.0.10"})
	if err != nil {
		panic(err)
	}
	a, err := ipam.NewAllocator(pool)
	if err != nil {
		panic(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "test-service"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: "172.18.0.18"}}
	fmt.Println(a.Allocate(svc).Ingress)
	svc2 := svc.DeepCopy()
	svc2.Name, svc2.Spec.LoadBalancerIP = "other", "172.18.0.18"
	r := a.Allocate(svc2)
	fmt.Println(r.Ingress, r.Events[0].Reason)
	// Output:
	// [{172.18.0.18  <nil> []}]
	// [] LoadBalancerIPTaken
}

// TestComplement: the pool of a subnet's excluded addresses hands out
// exactly those (Kube-OVN's MetalLB underlay guide: MetalLB's pool is
// the underlay subnet's excludeIps), never the gateway nor the CIDR's first and last.
func TestComplement(t *testing.T) {
	tests := []struct {
		name, cidr, gateway string
		exclude             []string
		want                []string // addresses handed out in order
	}{
		{"seed 003", "10.180.204.0/24", "10.180.204.1", []string{"10.180.204.250", "10.180.204.251", "10.180.204.252"},
			[]string{"10.180.204.250", "10.180.204.251", "10.180.204.252"}},
		{"range and gateway", "10.0.0.0/28", "10.0.0.1", []string{"10.0.0.0..10.0.0.3", "10.0.0.14..10.0.0.15"},
			[]string{"10.0.0.2", "10.0.0.3", "10.0.0.14"}},
		{"nothing excluded", "10.0.0.0/29", "", nil, nil},
		{"IPv6", "fd00::/125", "", []string{"fd00::6..fd00::7"}, []string{"fd00::6"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pools, err := ipam.NewSubnetPools("s", tt.cidr, tt.gateway, tt.exclude)
			if err != nil {
				t.Fatal(err)
			}
			c := pools[0].Complement()
			var got []string
			r, _ := c.Range()
			for a := r.First; !r.Last.Less(a); a = a.Next() {
				if c.Usable(a) == nil {
					got = append(got, a.String())
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("hands out %v, want %v (exclude %v)", got, tt.want, c.Exclude)
			}
		})
	}
}

// The API server defaults an ingress IP's ipMode to VIP: an ingress read
// back so is the one Allocate made; anything else differs.
func TestIngressEqual(t *testing.T) {
	vip, proxy := corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy
	ing := func(ip string, mode *corev1.LoadBalancerIPMode) corev1.LoadBalancerIngress {
		return corev1.LoadBalancerIngress{IP: ip, IPMode: mode}
	}
	for _, tt := range []struct {
		name       string
		want, have []corev1.LoadBalancerIngress
		equal      bool
	}{
		{"both empty", nil, []corev1.LoadBalancerIngress{}, true},
		{"same", []corev1.LoadBalancerIngress{ing("172.18.0.18", nil)}, []corev1.LoadBalancerIngress{ing("172.18.0.18", nil)}, true},
		{"ipMode VIP defaulted", []corev1.LoadBalancerIngress{ing("172.18.0.18", nil), ing("fd00:18::18", nil)},
			[]corev1.LoadBalancerIngress{ing("172.18.0.18", &vip), ing("fd00:18::18", &vip)}, true},
		{"ipMode Proxy", []corev1.LoadBalancerIngress{ing("172.18.0.18", nil)}, []corev1.LoadBalancerIngress{ing("172.18.0.18", &proxy)}, false},
		{"other address", []corev1.LoadBalancerIngress{ing("172.18.0.18", nil)}, []corev1.LoadBalancerIngress{ing("172.18.0.19", &vip)}, false},
		{"order", []corev1.LoadBalancerIngress{ing("172.18.0.18", nil), ing("fd00:18::18", nil)},
			[]corev1.LoadBalancerIngress{ing("fd00:18::18", &vip), ing("172.18.0.18", &vip)}, false},
		{"one more", []corev1.LoadBalancerIngress{ing("172.18.0.18", nil)}, nil, false},
		{"hostname", nil, []corev1.LoadBalancerIngress{{Hostname: "lb.example"}}, false},
	} {
		if got := ipam.IngressEqual(tt.want, tt.have); got != tt.equal {
			t.Errorf("%s: IngressEqual(%v, %v) = %v", tt.name, tt.want, tt.have, got)
		}
	}
}
