package helm

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovnedge/ovnedge/bgp/metallb"
	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/testbed"
)

// bgpValues turn the chart's BGP speaker on, peering with FRR on the
// external segment's router (e2e.StartFRR's plan): BFD 100 ms x 3, hold
// time 9 s, and a stopping instance withdraws its routes (the step turns
// BGP off again and waits for that).
var bgpValues = strings.Join([]string{"bgp.enabled=true", "bgp.peers={" + testbed.ClusterGatewayIP + "}",
	fmt.Sprintf("bgp.asn=%d", e2e.NodeASN), fmt.Sprintf("bgp.peerASN=%d", e2e.FRRASN),
	"bgp.bfd.enabled=true", "bgp.bfd.interval=100ms", "bgp.bfd.multiplier=3", "bgp.holdTime=9s",
	"bgp.shutdown=withdraw"}, ",")

// bgp turns the chart's BGP speaker on (helm upgrade) with FRR as the
// cluster's router: every kubelet-run node pod peers with it (BGP and
// BFD), both LoadBalancer VIPs are routed through every node (ECMP; each
// node runs a backend, so ETP=Local too), and the routed client behind
// the router is answered; for ETP=Local by the pod on the node its path
// enters, which sees the client's own address. Turning BGP off again
// withdraws every route.
func (h *harness) bgp(t *testing.T, svcs map[corev1.ServiceExternalTrafficPolicy]*corev1.Service, pods map[string]corev1.Pod) {
	f := e2e.StartFRR(t, h.cl)
	f.ECMPHash(t, 0) // one client's connections keep one path: Path names it
	begin := time.Now()
	h.setValue(t, bgpValues)
	f.WaitEstablished(t, 60*time.Second, func(node string) string { return h.env.NodeLog(node, "bgp", "BGP") })
	f.WaitBFD(t)
	h.measured("helm upgrade --set bgp.enabled=true -> sessions and BFD up at FRR", time.Since(begin))
	var all []string
	for _, n := range h.cl.Nodes {
		all = append(all, n.Name)
	}
	for etp, svc := range svcs {
		vip := netip.MustParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
		f.WaitHops(t, vip, 30*time.Second, all...)
		through := f.Path(t, vip)
		var line string
		h.eventually(t, 30*time.Second, fmt.Sprintf("the routed client's connection to %s (ETP=%s)", vip, etp), func() (err error) {
			line, err = e2e.Reply(h.cl.RemoteClient, vip.String()+":80", 1000, 3*time.Second)
			return err
		})
		pod, client, _ := strings.Cut(line, " ")
		if etp == corev1.ServiceExternalTrafficPolicyLocal {
			if pod != pods[through].Name {
				t.Errorf("%s (ETP=Local) routed through %s: answered by %s, want %s", vip, through, pod, pods[through].Name)
			}
			if !strings.HasPrefix(client, testbed.ClusterRemoteClientIP+":") {
				t.Errorf("%s (ETP=Local): the pod saw %s, not the client %s", vip, client, testbed.ClusterRemoteClientIP)
			}
		}
		t.Logf("BGP: %s (%s, ETP=%s) routed by FRR through %v, the client's path through %s, answered by %s (saw %s)",
			vip, svc.Name, etp, all, through, pod, client)
	}
	h.measured("BGP on -> both VIPs routed and answered", time.Since(begin))
	if len(all) > 1 {
		h.bgpShutdown(t, f, svcs, all)
	}
	begin = time.Now()
	h.setValue(t, "bgp.enabled=false")
	for _, svc := range svcs {
		f.WaitHops(t, netip.MustParseAddr(svc.Status.LoadBalancer.Ingress[0].IP), 30*time.Second)
	}
	h.measured("helm upgrade --set bgp.enabled=false -> routes withdrawn", time.Since(begin))
	h.bgpPeerCRDs(t, f, svcs, all)
}

// bgpPeerCRDs turns BGP on again with the peers from MetalLB's objects
// instead of the chart's values (bgp.peerCRDs=true, the chart's crds/ has
// MetalLB's BGPPeer and BFDProfile CRDs): a BGPPeer selecting every node
// with a BFDProfile; every node pod peers with FRR, BFD included, and both
// VIPs are routed through every node. Deleting the BGPPeer ends the
// sessions and withdraws the routes; BGP is then turned off.
func (h *harness) bgpPeerCRDs(t *testing.T, f *e2e.FRR, svcs map[corev1.ServiceExternalTrafficPolicy]*corev1.Service, all []string) {
	const ns = "metallb-system"
	if _, err := h.cs.CoreV1().Namespaces().Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	profile := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "metallb.io/v1beta1", "kind": "BFDProfile",
		"metadata": map[string]any{"namespace": ns, "name": "fast"},
		"spec":     map[string]any{"transmitInterval": int64(100), "receiveInterval": int64(100), "detectMultiplier": int64(3)}}}
	peer := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
		"metadata": map[string]any{"namespace": ns, "name": "router"},
		"spec": map[string]any{"myASN": int64(e2e.NodeASN), "peerASN": int64(e2e.FRRASN), "peerAddress": testbed.ClusterGatewayIP,
			"holdTime": "9s", "bfdProfile": "fast"}}}
	if _, err := h.dyn.Resource(metallb.BFDProfileResource).Namespace(ns).Create(h.ctx, profile, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dyn.Resource(metallb.BGPPeerResource).Namespace(ns).Create(h.ctx, peer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	h.upgradeWith(t, "node", "--set bgp.peerCRDs=true --set-json bgp.peers=[]",
		"--set", "bgp.enabled=true,bgp.peerCRDs=true,bgp.crdNamespace="+ns, "--set-json", "bgp.peers=[]")
	f.WaitEstablished(t, 60*time.Second, func(node string) string { return h.env.NodeLog(node, "bgp", "BGP") })
	f.WaitBFD(t)
	for _, svc := range svcs {
		f.WaitHops(t, netip.MustParseAddr(svc.Status.LoadBalancer.Ingress[0].IP), 30*time.Second, all...)
	}
	h.measured("helm upgrade --set bgp.peerCRDs=true -> MetalLB's BGPPeer peered, BFD up, VIPs routed", time.Since(begin))
	ds, err := h.cs.AppsV1().DaemonSets(namespace).Get(h.ctx, release+"-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--bgp-peer-crds") ||
		strings.Contains(args, "--bgp-peer-address") {
		t.Fatalf("the node pods' arguments: %s; want --bgp-peer-crds and no --bgp-peer-address (the peers from the BGPPeer only)", args)
	}
	begin = time.Now()
	if err := h.dyn.Resource(metallb.BGPPeerResource).Namespace(ns).Delete(h.ctx, "router", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, svc := range svcs {
		f.WaitHops(t, netip.MustParseAddr(svc.Status.LoadBalancer.Ingress[0].IP), 30*time.Second)
	}
	h.measured("BGPPeer deleted -> routes withdrawn", time.Since(begin))
	if err := h.dyn.Resource(metallb.BFDProfileResource).Namespace(ns).Delete(h.ctx, "fast", metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	h.setValue(t, "bgp.enabled=false,bgp.peerCRDs=false")
}
