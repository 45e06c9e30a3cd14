package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/testbed"
)

// routeWatch follows the BGP routes of a namespace's kernel table over
// netlink: each /32's next hops and when they last changed, timed as the
// kernel reported them (no polling).
type routeWatch struct {
	mu      sync.Mutex
	hops    map[netip.Addr][]netip.Addr
	at      map[netip.Addr]time.Time
	changed chan struct{} // closed on every change
}

func watchRoutes(tb testing.TB, ns *testbed.Netns) *routeWatch {
	tb.Helper()
	h, err := netns.GetFromName(ns.Name)
	if err != nil {
		tb.Fatalf("netns %s: %v", ns.Name, err)
	}
	ch := make(chan netlink.RouteUpdate, 1<<14)
	done := make(chan struct{})
	if err := netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{Namespace: &h, ListExisting: true,
		ReceiveBufferSize: 1 << 22}); err != nil {
		tb.Fatalf("route monitor in %s: %v", ns.Name, err)
	}
	tb.Cleanup(func() { close(done); _ = h.Close() })
	w := &routeWatch{hops: map[netip.Addr][]netip.Addr{}, at: map[netip.Addr]time.Time{}, changed: make(chan struct{})}
	go func() {
		for u := range ch {
			now := time.Now()
			if u.Protocol != unix.RTPROT_BGP || u.Dst == nil {
				continue
			}
			if ones, bits := u.Dst.Mask.Size(); ones != 32 || bits != 32 {
				continue
			}
			dst, _ := netip.AddrFromSlice(u.Dst.IP.To4())
			var hops []netip.Addr
			if u.Type == unix.RTM_NEWROUTE {
				gws := []net.IP{u.Gw}
				for _, nh := range u.MultiPath {
					gws = append(gws, nh.Gw)
				}
				for _, g := range gws {
					if a, ok := netip.AddrFromSlice(g.To4()); ok && g != nil {
						hops = append(hops, a)
					}
				}
				slices.SortFunc(hops, netip.Addr.Compare)
			}
			w.mu.Lock()
			w.hops[dst], w.at[dst] = hops, now
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
		}
	}()
	return w
}

// wait returns when the kernel reported vip's next hops to be want (none:
// no route), timeout at most.
func (w *routeWatch) wait(vip netip.Addr, want []netip.Addr, timeout time.Duration) (time.Time, error) {
	want = slices.SortedFunc(slices.Values(want), netip.Addr.Compare)
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		hops, at, ch := w.hops[vip], w.at[vip], w.changed
		w.mu.Unlock()
		if slices.Equal(hops, want) {
			return at, nil
		}
		select {
		case <-ch:
		case <-deadline:
			return time.Time{}, fmt.Errorf("%s: next hops %v, want %v", vip, hops, want)
		}
	}
}

// setEndpoints writes the EndpointSlice of a selectorless Service with
// cs (one ready, or not, endpoint per node given) and returns when the
// write was sent.
func setEndpoints(tb testing.TB, e *Env, cs kubernetes.Interface, svc string, ready map[string]bool) time.Time {
	tb.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: svc + "-bench",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP),
			Port: ptr.To[int32](8080)}},
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range ready {
			if !yield(n) {
				return
			}
		}
	}) {
		n := e.Node(name)
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{n.Subnet.Addr().Next().Next().Next().Next().String()}, // .4 of its pod subnet
			NodeName:   ptr.To(name),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready[name])}})
	}
	api := cs.DiscoveryV1().EndpointSlices("shop")
	old, err := api.Get(e.Context(), slice.Name, metav1.GetOptions{})
	sent := time.Now()
	if err == nil {
		slice.ResourceVersion = old.ResourceVersion
		_, err = api.Update(e.Context(), slice, metav1.UpdateOptions{})
	} else {
		sent = time.Now()
		_, err = api.Create(e.Context(), slice, metav1.CreateOptions{})
	}
	if err != nil {
		tb.Fatalf("endpoints of %s: %v", svc, err)
	}
	return sent
}

// fastClient is a client of the API server without client-go's default
// rate limit (5 requests/s): a benchmark's own writes must not wait.
func fastClient(tb testing.TB, e *Env) kubernetes.Interface {
	cfg := rest.CopyConfig(e.Kube.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// minChanges is how many endpoint changes BenchmarkBGPEndpointWithdraw
// measures at least (b.N when larger).
const minChanges = 30

// BenchmarkBGPEndpointWithdraw measures, at the FRR peer, the time from an
// endpoint change written to the API server to the router's kernel route
// following it: an externalTrafficPolicy=Local LoadBalancer Service has a
// ready endpoint on ovn-worker2 and ovn-worker3; the one on ovn-worker2
// turns not ready (its route must be withdrawn: "withdraw") and ready
// again (announced again: "announce"). Times are the kernel's route
// notifications in the router's namespace (netlink), so they include the
// informer, ovnedge's reconcile, GoBGP, FRR's bgpd and zebra.
func BenchmarkBGPEndpointWithdraw(b *testing.B) {
	e, _ := bgpSetup(b)
	w := watchRoutes(b, e.Router)
	s := service("shop", "bench-bgp", "", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal)
	s.Spec.Selector = nil // endpoints written by the benchmark
	createService(b, e, s)
	vip := e.LoadBalancerIP("shop", "bench-bgp")
	n2, n3 := e.Node(w2).IP, e.Node(w3).IP
	cs := fastClient(b, e)
	setEndpoints(b, e, cs, "bench-bgp", map[string]bool{w2: true, w3: true})
	if _, err := w.wait(vip, []netip.Addr{n2, n3}, 30*time.Second); err != nil {
		b.Fatal(err)
	}
	var withdraw, announce []time.Duration
	for range max(b.N, minChanges) {
		start := setEndpoints(b, e, cs, "bench-bgp", map[string]bool{w2: false, w3: true})
		at, err := w.wait(vip, []netip.Addr{n3}, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		withdraw = append(withdraw, at.Sub(start))
		start = setEndpoints(b, e, cs, "bench-bgp", map[string]bool{w2: true, w3: true})
		if at, err = w.wait(vip, []netip.Addr{n2, n3}, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		announce = append(announce, at.Sub(start))
	}
	b.ReportMetric(float64(percentile(withdraw, 50).Microseconds())/1000, "withdraw-p50-ms")
	b.ReportMetric(float64(percentile(withdraw, 99).Microseconds())/1000, "withdraw-p99-ms")
	b.ReportMetric(float64(percentile(announce, 50).Microseconds())/1000, "announce-p50-ms")
	b.ReportMetric(float64(percentile(announce, 99).Microseconds())/1000, "announce-p99-ms")
	b.ReportMetric(float64(len(withdraw)), "changes")
	b.Logf("endpoint not ready -> route withdrawn at FRR: %v", withdraw)
	b.Logf("endpoint ready -> route announced at FRR: %v", announce)
}

// minNodeDeaths is how many node deaths BenchmarkBGPNodeDeath measures at
// least.
const minNodeDeaths = 5

// BenchmarkBGPNodeDeath measures, with BFD 100 ms x 3, the loss window of
// a UDP stream (a packet every 10 ms) from the routed client to an
// externalTrafficPolicy=Cluster VIP when the node it enters through dies
// (its uplink goes silent, then its chassis and ovnedge are killed): FRR
// removes the node's next hop when BFD expires and the stream moves to
// another node. The node is restored after each death.
func BenchmarkBGPNodeDeath(b *testing.B) {
	e, f := bgpSetup(b)
	f.ECMPHash(b, 0)
	w := watchRoutes(b, e.Router)
	const port = 9412
	createService(b, e, lbService("shop", "bench-bgp-udp", "benchudp", corev1.ServiceExternalTrafficPolicyCluster, port))
	vip := e.LoadBalancerIP("shop", "bench-bgp-udp")
	all := []string{w1, w2, w3}
	f.WaitHops(b, vip, 30*time.Second, all...)
	through := f.Path(b, vip)
	e.EnsurePod(ServerPod("shop", "bench-udp", otherThan(all, through), map[string]string{"app": "benchudp"}))
	pod := e.WaitPod("shop", "bench-udp")
	podNode := otherThan(all, through)
	var gaps, removed []time.Duration
	for range max(b.N, minNodeDeaths) {
		f.WaitHops(b, vip, 60*time.Second, all...)
		f.WaitBFD(b)
		through := f.Path(b, vip)
		if through == podNode {
			b.Fatalf("the stream enters through the receiver's node %s", podNode)
		}
		s, err := StartStream(e.RemoteClient, pod.Netns, netip.AddrPortFrom(vip, port), 10*time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		e.Eventually(30*time.Second, "stream to "+vip.String(), func() error { return s.ArrivedAfter(0, netip.Addr{}) })
		rest := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == through })
		var want []netip.Addr
		for _, n := range rest {
			want = append(want, e.Node(n).IP)
		}
		killed := time.Now()
		e.Node(through).SetUplink(false)
		e.KillNode(through)
		at, err := w.wait(vip, want, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		sent := s.Sent()
		if err := poll(10*time.Second, func() error { return s.ArrivedAfter(sent, netip.Addr{}) }); err != nil {
			b.Fatalf("stream after %s died: %v", through, err)
		}
		time.Sleep(200 * time.Millisecond)
		gap, _ := s.Gap(killed)
		s.Stop()
		gaps, removed = append(gaps, gap), append(removed, at.Sub(killed))
		e.Node(through).SetUplink(true)
		e.RestoreNode(through)
	}
	b.ReportMetric(float64(percentile(removed, 50).Microseconds())/1000, "route-removed-p50-ms")
	b.ReportMetric(float64(percentile(gaps, 50).Microseconds())/1000, "loss-p50-ms")
	b.ReportMetric(float64(percentile(gaps, 99).Microseconds())/1000, "loss-p99-ms")
	b.ReportMetric(float64(slices.Max(gaps).Microseconds())/1000, "loss-max-ms")
	b.ReportMetric(float64(len(gaps)), "deaths")
	b.Logf("node death -> next hop removed at FRR: %v; stream loss windows: %v", removed, gaps)
}
