package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovnedge/ovnedge/bgp/metallb"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/testbed"
)

// bgpNodeArgs are the node instances' BGP flags: BFD 100 ms x 3 and
// graceful restart, hold time 9 s.
var bgpNodeArgs = []string{"--enable-bgp", "--bgp-peer-address=" + testbed.ClusterGatewayIP + "," + testbed.ClusterGatewayIP6,
	fmt.Sprintf("--bgp-asn=%d", NodeASN), fmt.Sprintf("--bgp-peer-asn=%d", FRRASN),
	"--bgp-bfd", "--bgp-bfd-interval=100ms", "--bgp-bfd-multiplier=3", "--bgp-hold-time=9s", "--bgp-graceful-restart=30s",
	"--bgp-announce-egress-ips"}

// otherThan is the first node of all that is not n.
func otherThan(all []string, n string) string {
	for _, m := range all {
		if m != n {
			return m
		}
	}
	return ""
}

// nodeOfJoinIP names the node whose gateway router has join address a
// (the source an ETP=Cluster backend sees).
func nodeOfJoinIP(e *Env, a netip.Addr) string {
	for _, n := range e.Nodes {
		if n.JoinIP == a || n.JoinIP6 == a {
			return n.Name
		}
	}
	return "?" + a.String()
}

// bgpSetup restarts the node instances with BGP and starts FRR; the
// router hashes ECMP on ports (L4), so connections of one client spread
// over the nodes.
func bgpSetup(t testing.TB) (*Env, *FRR) {
	e := shared.With(t)
	e.RestartNodes(bgpNodeArgs...)
	t.Cleanup(func() { shared.With(t).RestartNodes() })
	f := StartFRR(t, e.Cluster)
	f.ECMPHash(t, 1)
	f.WaitEstablished(t, 30*time.Second, func(node string) string {
		i := e.Instance(node)
		if i == nil {
			return ""
		}
		b, _ := os.ReadFile(i.Log)
		var logged strings.Builder
		for l := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(l, "bgp") {
				logged.WriteString(l + "\n")
			}
		}
		return logged.String()
	})
	f.WaitBFD(t)
	return e, f
}

// lbService is a LoadBalancer Service app=<selector> port (TCP 80 ->
// 8080, or UDP port -> port) with the given traffic policy.
func lbService(ns, name, selector string, etp corev1.ServiceExternalTrafficPolicy, udp int32) *corev1.Service {
	s := service(ns, name, selector, corev1.ServiceTypeLoadBalancer, etp)
	if udp > 0 {
		s.Spec.Ports = []corev1.ServicePort{{Name: "udp", Protocol: corev1.ProtocolUDP, Port: udp, TargetPort: intstr.FromInt32(udp)}}
	}
	return s
}

// setPodReady sets a pod's Ready condition, as its kubelet would.
func setPodReady(t testing.TB, e *Env, ns, name string, ready bool) {
	t.Helper()
	pods := e.CS.CoreV1().Pods(ns)
	p, err := pods.Get(e.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status = st
		}
	}
	if _, err := pods.UpdateStatus(e.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("pod %s/%s ready=%v: %v", ns, name, ready, err)
	}
}

// TestBGP proves --enable-bgp against a real FRR peer: ECMP routes in the
// router's kernel table bring an external client's connections to a VIP
// through several nodes, over IPv4 and IPv6 sessions; an ETP=Local Service's route leaves a node as
// soon as its local endpoint goes, while connections keep working through
// the others; an egress IP is announced from its assigned node alone
// (--bgp-announce-egress-ips); a dead node is removed by BFD (loss window
// of a stream measured); a restarted ovnedge keeps traffic flowing
// (graceful restart).
func TestBGP(t *testing.T) {
	e, f := bgpSetup(t)
	all := []string{w1, w2, w3}

	t.Run("ECMP", func(t *testing.T) {
		e := e.With(t)
		createService(t, e, lbService("shop", "bgp-cluster", "web", corev1.ServiceExternalTrafficPolicyCluster, 0))
		vip := e.LoadBalancerIP("shop", "bgp-cluster")
		took := f.WaitHops(t, vip, 30*time.Second, all...)
		t.Logf("%s: routes through %v at FRR %v after the VIP was known", vip, all, took.Round(time.Millisecond))
		via := map[string]int{}
		for range 24 {
			_, client := answers(t, e, e.RemoteClient, vip.String()+":80")
			ap, err := netip.ParseAddrPort(client)
			if err != nil {
				t.Fatalf("client %q: %v", client, err)
			}
			via[nodeOfJoinIP(e, ap.Addr())]++
		}
		t.Logf("24 connections from %s to %s entered through %v", testbed.ClusterRemoteClientIP, vip, via)
		if len(via) < 2 {
			t.Errorf("connections entered through %v, want several nodes (ECMP)", via)
		}
	})

	t.Run("IPv6", func(t *testing.T) {
		e := e.With(t)
		createService(t, e, v6(lbService("shop", "bgp-cluster6", "web", corev1.ServiceExternalTrafficPolicyCluster, 0)))
		vip := e.LoadBalancerIP("shop", "bgp-cluster6")
		f.WaitHops(t, vip, 30*time.Second, all...)
		via := map[string]int{}
		for range 24 {
			_, client := answers(t, e, e.RemoteClient, net.JoinHostPort(vip.String(), "80"))
			ap, err := netip.ParseAddrPort(client)
			if err != nil {
				t.Fatalf("client %q: %v", client, err)
			}
			via[nodeOfJoinIP(e, ap.Addr())]++
		}
		t.Logf("IPv6: %s/128 from every node over the IPv6 sessions; 24 connections from %s entered through %v",
			vip, testbed.ClusterRemoteClientIP6, via)
		if len(via) < 2 {
			t.Errorf("connections entered through %v, want several nodes (ECMP)", via)
		}
	})

	t.Run("LocalEndpointGone", func(t *testing.T) {
		e := e.With(t)
		for _, p := range []*corev1.Pod{ServerPod("shop", "bgp-a", w2, map[string]string{"app": "bgplocal"}, 8080),
			ServerPod("shop", "bgp-b", w3, map[string]string{"app": "bgplocal"}, 8080)} {
			e.EnsurePod(p)
			e.WaitPod("shop", p.Name)
		}
		createService(t, e, lbService("shop", "bgp-local", "bgplocal", corev1.ServiceExternalTrafficPolicyLocal, 0))
		vip := e.LoadBalancerIP("shop", "bgp-local")
		f.WaitHops(t, vip, 30*time.Second, w2, w3)
		answers(t, e, e.RemoteClient, vip.String()+":80")
		// bgp-a stops being ready (its readiness probe fails, or it
		// terminates): the endpoint controller drops it from the ready
		// endpoints.
		deleted := time.Now()
		setPodReady(t, e, "shop", "bgp-a", false)
		t.Cleanup(func() { setPodReady(t, shared.With(t), "shop", "bgp-a", true) })
		failed, total := 0, 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			for time.Since(deleted) < 3*time.Second {
				total++
				if _, err := Reply(e.RemoteClient, vip.String()+":80", 1000, time.Second); err != nil {
					failed++
				}
			}
		}()
		took := f.WaitHops(t, vip, 10*time.Second, w3)
		<-done
		t.Logf("bgp-a not ready: %s's route to %s withdrawn at FRR after %v; %d of %d connections during 3 s failed",
			w2, vip, took.Round(time.Millisecond), failed, total)
		for range 10 {
			if pod, _ := answers(t, e, e.RemoteClient, vip.String()+":80"); pod != "bgp-b" {
				t.Errorf("answered by %q, want bgp-b", pod)
			}
		}
	})

	t.Run("EgressIP", func(t *testing.T) {
		e := e.With(t)
		eip := netip.MustParseAddr("172.18.0.47")
		e.ApplyYAML(`
apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: bgp}
spec:
  egressIPs: [` + eip.String() + `]
  namespaceSelector: {matchLabels: {env: bgp-egress}}
`)
		t.Cleanup(func() { _ = e.Dyn.Resource(EgressGVR).Delete(e.Context(), "bgp", metav1.DeleteOptions{}) })
		node := e.EgressNode("bgp", eip, "")
		took := f.WaitHops(t, eip, 30*time.Second, node)
		t.Logf("egress IP %s assigned to %s: announced from it alone (at FRR %v after the assignment was seen)", eip, node,
			took.Round(time.Millisecond))
	})

	t.Run("EgressService", func(t *testing.T) {
		// --enable-egress-service (the chart's RBAC with
		// egress.services=true): an EgressService's LoadBalancer IP is
		// announced from its host alone, moves with it, and from every
		// node again once the EgressService is gone.
		e := e.With(t)
		chartRBAC(t, e, "egress.services=true")
		t.Cleanup(func() { shared.With(t).ApplyFile(filepath.Join("..", "..", "deploy", "rbac.yaml")) })
		e.RestartLeader("--enable-egress-service")
		e.RestartNodes(append(slices.Clone(bgpNodeArgs), "--enable-egress-service")...)
		t.Cleanup(func() {
			s := shared.With(t)
			s.RestartNodes(bgpNodeArgs...)
			s.RestartLeader()
		})
		createService(t, e, lbService("shop", "bgp-esvc", "web", corev1.ServiceExternalTrafficPolicyCluster, 0))
		vip := e.LoadBalancerIP("shop", "bgp-esvc")
		f.WaitHops(t, vip, 30*time.Second, all...)
		e.ApplyYAML(`
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {namespace: shop, name: bgp-esvc}
spec:
  nodeSelector: {matchLabels: {k8s.ovn.org/egress-assignable: ""}}
`)
		esvcs := e.Dyn.Resource(egressv1.ServiceResource).Namespace("shop")
		t.Cleanup(func() { _ = esvcs.Delete(e.Context(), "bgp-esvc", metav1.DeleteOptions{}) })
		host := esvcHost(t, e, "bgp-esvc", "", "")
		took := f.WaitHops(t, vip, 30*time.Second, host)
		other := otherThan([]string{w2, w3}, host)
		patch := []byte(`{"spec":{"nodeSelector":{"matchLabels":null,"matchExpressions":[{"key":"k8s.ovn.org/egress-assignable","operator":"Exists"},` +
			`{"key":"kubernetes.io/hostname","operator":"NotIn","values":["` + host + `"]}]}}}`)
		if _, err := esvcs.Patch(e.Context(), "bgp-esvc", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		esvcHost(t, e, "bgp-esvc", other, "")
		moved := f.WaitHops(t, vip, 30*time.Second, other)
		if err := esvcs.Delete(e.Context(), "bgp-esvc", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.WaitHops(t, vip, 30*time.Second, all...)
		t.Logf("EgressService bgp-esvc: %s announced by its host %s alone (at FRR %v), then by %s alone when the host moved (%v), by every node once deleted",
			vip, host, took.Round(time.Millisecond), other, moved.Round(time.Millisecond))
	})

	t.Run("NodeDeathBFD", func(t *testing.T) {
		e := e.With(t)
		f.ECMPHash(t, 0)
		const port = 9410
		// The receiver's Service: its VIP's path decides the receiver's
		// node, so the selector is set once the path is known.
		svc := createService(t, e, lbService("shop", "bgp-udp", "none", corev1.ServiceExternalTrafficPolicyCluster, port))
		vip := e.LoadBalancerIP("shop", "bgp-udp")
		f.WaitHops(t, vip, 30*time.Second, all...)
		// The stream enters through node `through`; its receiver lives
		// on another node.
		through := f.Path(t, vip)
		svc = e.Service("shop", svc.Name)
		svc.Spec.Selector = map[string]string{"app": "bgpudp-" + otherThan(all, through)}
		if _, err := e.CS.CoreV1().Services("shop").Update(e.Context(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		rx := "bgp-udp-" + otherThan(all, through) // one receiver per node, kept for later runs
		e.EnsurePod(ServerPod("shop", rx, otherThan(all, through), map[string]string{"app": "bgpudp-" + otherThan(all, through)}))
		pod := e.WaitPod("shop", rx)
		s, err := StartStream(e.RemoteClient, pod.Netns, netip.AddrPortFrom(vip, port), 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		e.Eventually(30*time.Second, "stream to "+vip.String(), func() error { return s.ArrivedAfter(0, netip.Addr{}) })
		rest := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == through })
		// The machine dies: no packet leaves it any more (no FIN, no
		// notification), then its processes are gone.
		killed := time.Now()
		e.Node(through).SetUplink(false)
		e.KillNode(through)
		t.Cleanup(func() {
			e := shared.With(t)
			e.Node(through).SetUplink(true)
			e.RestoreNode(through)
		})
		removed := f.WaitHops(t, vip, 10*time.Second, rest...)
		sent := s.Sent()
		if err := poll(10*time.Second, func() error { return s.ArrivedAfter(sent, netip.Addr{}) }); err != nil {
			t.Fatalf("stream after %s died: %v", through, err)
		}
		time.Sleep(200 * time.Millisecond)
		gap, lost := s.Gap(killed)
		t.Logf("%s died: its route removed at FRR (BFD 100 ms x 3) after %v; stream loss window %v (%d packets), now through %s",
			through, removed.Round(time.Millisecond), gap.Round(time.Millisecond), lost, f.Path(t, vip))
		if gap > 2*time.Second {
			t.Errorf("loss window %v", gap)
		}
	})

	t.Run("GracefulRestart", func(t *testing.T) {
		e := e.With(t)
		f.ECMPHash(t, 0)
		const port = 9411
		svc := createService(t, e, lbService("shop", "bgp-gr", "none", corev1.ServiceExternalTrafficPolicyCluster, port))
		vip := e.LoadBalancerIP("shop", "bgp-gr")
		alive := all
		f.WaitHops(t, vip, 60*time.Second, alive...)
		through := f.Path(t, vip)
		rx := "bgp-gr-" + otherThan(all, through)
		e.EnsurePod(ServerPod("shop", rx, otherThan(all, through), map[string]string{"app": rx}))
		pod := e.WaitPod("shop", rx)
		svc = e.Service("shop", svc.Name)
		svc.Spec.Selector = map[string]string{"app": rx}
		if _, err := e.CS.CoreV1().Services("shop").Update(e.Context(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		s, err := StartStream(e.RemoteClient, pod.Netns, netip.AddrPortFrom(vip, port), 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		e.Eventually(30*time.Second, "stream to "+vip.String(), func() error { return s.ArrivedAfter(0, netip.Addr{}) })
		start := time.Now()
		// SIGTERM: ovnedge leaves without a notification; FRR keeps the
		// routes (stale) until the new instance's End-of-RIB. BFD goes
		// down too, after the TCP session: FRR's BFD only stops
		// established sessions, so a restart keeps the routes while a
		// dead node (BFD down first) loses them at once. (FRR's
		// "bfd check-control-plane-failure" would ignore BFD for every
		// graceful restart capable peer, dead nodes included: not set.)
		if err := e.Instance(through).Terminate(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // BFD would have removed the node 3 times over
		if hops, _ := f.NextHops(vip); len(hops) != len(alive) {
			t.Errorf("during the restart the route has next hops %v, want all of %v kept", hops, alive)
		}
		e.StartNode(through)
		f.WaitHops(t, vip, 30*time.Second, alive...)
		time.Sleep(500 * time.Millisecond)
		gap, lost := s.Gap(start)
		t.Logf("ovnedge on %s (carrying the stream) restarted: routes kept throughout, stream loss window %v (%d packets)",
			through, gap.Round(time.Millisecond), lost)
		if gap > 500*time.Millisecond {
			t.Errorf("loss window %v during a graceful restart", gap)
		}
	})
}

// cordon sets node's spec.unschedulable and waits until its ovnedge has
// seen it (the line the node instance logs when the node's service state
// changes).
func cordon(t testing.TB, e *Env, node string, on bool) {
	t.Helper()
	n, err := e.CS.CoreV1().Nodes().Get(e.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Unschedulable = on
	if _, err := e.CS.CoreV1().Nodes().Update(e.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if i := e.Instance(node); on && i != nil && i.Alive() {
		e.Eventually(10*time.Second, node+"'s ovnedge sees the cordon", func() error {
			b, _ := os.ReadFile(i.Log)
			if !strings.Contains(string(b), "node service state changed") || !strings.Contains(string(b), "leaving=true") {
				return fmt.Errorf("not logged yet")
			}
			return nil
		})
	}
}

// TestBGPShutdownAndPeerCRDs (after TestBGP's graceful restart, which
// keeps the routes): a node that is leaving (cordoned) withdraws its
// routes when its ovnedge stops, so the router drops it at once instead
// of after the restart time; and the peers can come from MetalLB's
// BGPPeer and BFDProfile objects, per node by their nodeSelectors.
func TestBGPShutdownAndPeerCRDs(t *testing.T) {
	e, f := bgpSetup(t)
	all := []string{w1, w2, w3}

	t.Run("CordonedNodeWithdraws", func(t *testing.T) {
		e := e.With(t)
		createService(t, e, lbService("shop", "bgp-leave", "web", corev1.ServiceExternalTrafficPolicyCluster, 0))
		vip := e.LoadBalancerIP("shop", "bgp-leave")
		f.WaitHops(t, vip, 60*time.Second, all...)
		cordon(t, e, w3, true)
		t.Cleanup(func() { cordon(t, e, w3, false) })
		if err := e.Instance(w3).Terminate(); err != nil {
			t.Fatal(err)
		}
		// The graceful restart time is 30 s (bgpNodeArgs): a route kept
		// for a restart would stay that long.
		took := f.WaitHops(t, vip, 10*time.Second, w1, w2)
		t.Logf("cordoned %s's ovnedge stopped: its next hop left the router's route in %v (graceful restart would keep it 30 s)",
			w3, took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("route through the leaving node kept %v", took)
		}
		cordon(t, e, w3, false)
		e.StartNode(w3)
		f.WaitHops(t, vip, 30*time.Second, all...)
	})

	t.Run("PeerCRDs", func(t *testing.T) {
		e := e.With(t)
		e.ApplyYAML(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: metallb-system}
---
apiVersion: metallb.io/v1beta1
kind: BFDProfile
metadata: {name: fast, namespace: metallb-system}
spec: {transmitInterval: 100, receiveInterval: 100, detectMultiplier: 3}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec:
  myASN: %d
  peerASN: %d
  peerAddress: %s
  holdTime: 9s
  bfdProfile: fast
  enableGracefulRestart: true
  nodeSelectors:
  - matchExpressions:
    - {key: kubernetes.io/hostname, operator: In, values: [%s, %s]}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: broken, namespace: metallb-system}
spec: {myASN: %d, peerAddress: 192.0.2.1}
`, NodeASN, FRRASN, testbed.ClusterGatewayIP, w1, w2, NodeASN))
		// Nothing is left for later tests: MetalLB's native (L2) mode
		// refuses a configuration with a BFD profile or BGP peers in its
		// namespace (TestUnderlayMetalLB runs it there).
		t.Cleanup(func() {
			for _, name := range []string{"router", "broken"} {
				_ = e.Dyn.Resource(metallb.BGPPeerResource).
					Namespace("metallb-system").Delete(e.Context(), name, metav1.DeleteOptions{})
			}
			_ = e.Dyn.Resource(metallb.BFDProfileResource).
				Namespace("metallb-system").Delete(e.Context(), "fast", metav1.DeleteOptions{})
		})
		// The nodes' peers now come from the objects only.
		e.RestartNodes(append(slices.DeleteFunc(slices.Clone(bgpNodeArgs), func(a string) bool {
			return strings.HasPrefix(a, "--bgp-peer-address=")
		}), "--bgp-peer-crds")...)
		createService(t, e, lbService("shop", "bgp-crd", "web", corev1.ServiceExternalTrafficPolicyCluster, 0))
		vip := e.LoadBalancerIP("shop", "bgp-crd")
		took := f.WaitHops(t, vip, 60*time.Second, w1, w2)
		t.Logf("BGPPeer selecting %s and %s: %s routed through them only (%v)", w1, w2, vip, took.Round(time.Millisecond))
		// FRR runs BFD with every neighbour; the sessions come up only
		// where ovnedge runs it too, from the BGPPeer's BFDProfile.
		f.WaitBFD(t, w1, w2)
		ev := e.WaitEvent("metallb-system", "broken", metallb.ReasonInvalid)
		t.Logf("the broken BGPPeer: %s", ev)
		// Every node selected: the third node peers too, the others'
		// sessions stay up.
		e.ApplyYAML(fmt.Sprintf(`apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec: {myASN: %d, peerASN: %d, peerAddress: %s, holdTime: 9s, bfdProfile: fast, enableGracefulRestart: true}
`, NodeASN, FRRASN, testbed.ClusterGatewayIP))
		took = f.WaitHops(t, vip, 30*time.Second, all...)
		t.Logf("BGPPeer without nodeSelectors: %s through all three nodes after %v", vip, took.Round(time.Millisecond))
	})
}
