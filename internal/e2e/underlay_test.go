package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovnedge/ovnedge/testbed"
)

// seed003Subnet is the Subnet of Kube-OVN's MetalLB underlay guide
// (kubeovn/docs, docs/advance/with-metallb.en.md) as it writes it.
const seed003Subnet = `apiVersion: kubeovn.io/v1
kind: Subnet
metadata:
  name: underlay-subnet
spec:
  protocol: IPv4
  provider: ovn
  cidrBlock: 10.180.204.0/24
  gateway: 10.180.204.1
  excludeIps:
  - 10.180.204.250
  - 10.180.204.251
  - 10.180.204.252
  natOutgoing: false
  enableExternalLBAddress: true
`

// nginxOn are the guide's pods by node (seed003).
var nginxOn = map[string][]string{w2: {"nginx-1", "nginx-2"}, w3: {"nginx-3"}}

var subnetGVR = schema.GroupVersionResource{Group: "kubeovn.io", Version: "v1", Resource: "subnets"}

// seed003 sets up Kube-OVN's MetalLB underlay guide on the shared cluster: the underlay, the
// Subnet (with the U2O interconnection MAC in its status, as Kube-OVN's
// controller writes it), the Deployment's pods (ovn.kubernetes.io/
// logical_switch=underlay-subnet, serving port 80: two on ovn-worker2,
// one on ovn-worker3) and the leader and node instances restarted with
// extra arguments. It returns the underlay; everything is undone at the
// end of the test.
func seed003(t *testing.T, e *Env, leaderArgs, nodeArgs []string) *testbed.Underlay {
	t.Helper()
	u := e.Underlay()
	e.ApplyYAML(seed003Subnet)
	ctx := e.Context()
	e.Eventually(Timeout, "the Subnet's status", func() error {
		s, err := e.Dyn.Resource(subnetGVR).Get(ctx, "underlay-subnet", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(s.Object, testbed.UnderlayRouterMAC, "status", "u2oInterconnectionMAC"); err != nil {
			return err
		}
		_, err = e.Dyn.Resource(subnetGVR).UpdateStatus(ctx, s, metav1.UpdateOptions{})
		return err
	})
	for i, node := range []string{w2, w2, w3} {
		p := ServerPod("default", fmt.Sprintf("nginx-%d", i+1), node, map[string]string{"app": "nginx"}, 80)
		p.Annotations = map[string]string{annotationLogicalSwitch: testbed.UnderlaySwitch}
		e.EnsurePod(p)
	}
	e.RestartLeader(leaderArgs...)
	e.RestartNodes(nodeArgs...)
	t.Cleanup(func() {
		e := shared.With(t)
		e.RestartNodes()
		e.RestartLeader()
	})
	return u
}

// nginxLB is the guide's Service (externalTrafficPolicy=Local, port 80),
// with annotations.
func nginxLB(annotations map[string]string) *corev1.Service {
	s := service("default", "nginx-lb", "nginx", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal)
	s.Annotations = annotations
	s.Spec.Ports[0].TargetPort = intstr.FromInt32(80)
	return s
}

// underlayAnswers connects from the underlay client to vip:80 n times
// and returns the pods that answered; each must have seen the client's
// own address.
func underlayAnswers(t *testing.T, e *Env, u *testbed.Underlay, vip netip.Addr, n int) map[string]int {
	t.Helper()
	pods := map[string]int{}
	for range n {
		pod, client := answers(t, e, u.Client, vip.String()+":80")
		if host, _, _ := strings.Cut(client, ":"); host != testbed.UnderlayClientIP {
			t.Fatalf("%s saw the client as %s, want %s (no SNAT)", pod, client, testbed.UnderlayClientIP)
		}
		pods[pod]++
	}
	return pods
}

// underlayDiagnose adds the provider bridges' flows to Diagnose.
func underlayDiagnose(e *Env) string {
	var b strings.Builder
	b.WriteString(e.Diagnose())
	for _, n := range e.Nodes {
		out, err := n.NS.RunErr("ovs-ofctl", "-O", "OpenFlow13", "dump-flows", n.Mgmt(testbed.UnderlayBridge))
		fmt.Fprintf(&b, "--- %s %s flows (%v):\n%s\n", n.Name, testbed.UnderlayBridge, err, out)
	}
	return b.String()
}

// seed003MetalLB is the guide's MetalLB configuration as it writes it, the L2Advertisement limited to the underlay's
// VLAN interface (the guide's Notes: "MetalLB must use the same network
// interface as the Kube-OVN Underlay subnet (e.g., underlay0.341)").
const seed003MetalLB = `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: underlay-pool
  namespace: metallb-system
spec:
  addresses:
  - 10.180.204.250-10.180.204.254
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: l2-advert
  namespace: metallb-system
spec:
  ipAddressPools:
  - underlay-pool
  interfaces:
  - underlay0.341
`

var (
	ipAddressPoolGVR   = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}
	l2AdvertisementGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "l2advertisements"}
)

// TestUnderlayMetalLB is Kube-OVN's MetalLB underlay guide as written, with the ovnedge binary in
// kube-ovn-controller's and kube-ovn-cni's place (--underlay-lb-mode=
// metallb, --enable-ovn-lb-prefer-local, --ls-ct-skip-dst-lport-ips=false
// on the leader, the provider bridge on the nodes) and MetalLB itself
// (StartMetalLB: its controller and a speaker per node, native L2 mode)
// with the guide's IPAddressPool and L2Advertisement. MetalLB's controller
// gives nginx-lb its VIP (first in the pool: 10.180.204.250, not the
// documentation's example .252), and the speaker MetalLB elects among the
// nodes with a local endpoint answers the client's ARP on its
// underlay0.341 (one node only, no neighbour entry pinned). The external
// client on VLAN 341 reaches the VIP; only the announcing node's pods
// answer, and they see the client's own address. When that node's
// speaker stops (SIGTERM: it leaves MetalLB's memberlist), MetalLB moves
// the VIP to the other node, and that node's pod answers.
//
// The shared cluster's leader also has --lb-pools: it may give nginx-lb
// one of its addresses before MetalLB does; MetalLB's controller then
// replaces it (event ClearAssignment, "not allowed by config") and
// ovnedge leaves MetalLB's underlay VIP alone from then on.
func TestUnderlayMetalLB(t *testing.T) {
	e := shared.With(t)
	u := seed003(t, e, []string{"--underlay-lb-mode=metallb", "--enable-ovn-lb-prefer-local", "--ls-ct-skip-dst-lport-ips=false"},
		[]string{"--underlay-lb-mode=metallb", "--provider-bridge=" + testbed.UnderlayBridge, "--provider-nic=" + testbed.UnderlayNIC,
			fmt.Sprintf("--provider-vlan=%d", testbed.UnderlayVLAN)})
	m := e.StartMetalLB(t)
	e.ApplyYAML(seed003MetalLB)
	t.Cleanup(func() {
		for _, r := range []schema.GroupVersionResource{l2AdvertisementGVR, ipAddressPoolGVR} {
			_ = e.Dyn.Resource(r).Namespace(MetalLBNamespace).DeleteCollection(e.Context(), metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	})
	// The controller has read the pool once it reports it in the pool's
	// status.
	e.Eventually(Timeout, "MetalLB's controller counting underlay-pool", func() error {
		p, err := e.Dyn.Resource(ipAddressPoolGVR).Namespace(MetalLBNamespace).Get(e.Context(), "underlay-pool", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n, _, _ := unstructured.NestedInt64(p.Object, "status", "availableIPv4"); n != 5 {
			return fmt.Errorf("status %v%s", p.Object["status"], m.Logs())
		}
		return nil
	})

	createService(t, e, nginxLB(nil))
	var vip netip.Addr
	pool := netip.MustParsePrefix("10.180.204.248/29")
	e.Eventually(Timeout, "MetalLB's VIP on nginx-lb", func() error {
		in := e.Service("default", "nginx-lb").Status.LoadBalancer.Ingress
		if len(in) != 1 {
			return fmt.Errorf("ingress %v%s", in, m.Logs())
		}
		a, err := netip.ParseAddr(in[0].IP)
		if err != nil || !pool.Contains(a) || a.As4()[3] < 250 {
			return fmt.Errorf("ingress %v, want an address of underlay-pool", in)
		}
		vip = a
		return nil
	})
	// MetalLB's controller wrote it (client-go's field manager is the
	// binary's name).
	var managers []string
	for _, f := range e.Service("default", "nginx-lb").ManagedFields {
		if f.Subresource == "status" {
			managers = append(managers, f.Manager)
		}
	}
	if !slices.Contains(managers, "controller") {
		t.Errorf("nginx-lb's status written by %v, want MetalLB's controller", managers)
	}

	nodeOf := map[string]string{u.MAC(w1): w1, u.MAC(w2): w2, u.MAC(w3): w3}
	announcer := func(not string) string {
		var owner string
		e.Eventually(Timeout, "one node answering ARP for "+vip.String(), func() error {
			macs := arpRepliesOn(u.Client, vip, 2)
			if len(macs) != 1 || nodeOf[macs[0]] == not {
				return fmt.Errorf("answered by %v%s", macs, m.Logs())
			}
			owner = nodeOf[macs[0]]
			return nil
		})
		// The client resolves the VIP itself (nothing pinned).
		_, _ = u.Client.RunErr("ip", "neigh", "flush", "dev", "eth0")
		return owner
	}
	owner := announcer("")
	if owner != w2 && owner != w3 {
		t.Fatalf("MetalLB announces %s from %s, which has no local endpoint (externalTrafficPolicy=Local)", vip, owner)
	}
	speakerSays(t, e, owner)
	pods := underlayAnswers(t, e, u, vip, 8)
	for pod := range pods {
		if !slices.Contains(nginxOn[owner], pod) {
			t.Fatalf("announced from %s, answered by %s (%v): want %v only\n%s", owner, pod, pods, nginxOn[owner], underlayDiagnose(e))
		}
	}
	t.Logf("MetalLB mode: MetalLB gave nginx-lb %s and announces it from %s; answered by %v, every time seeing the client's %s",
		vip, owner, pods, testbed.UnderlayClientIP)

	// The announcing node's speaker stops: MetalLB moves the VIP.
	w, err := StartARPWatch(u.Client, "eth0", vip, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	m.StopSpeaker(owner)
	next := announcer(owner)
	speakerSays(t, e, next)
	w.Stop()
	// MetalLB's own numbers (not ovnedge's): the new owner's first ARP
	// answer, and the old speaker's last one (it answers until its
	// graceful shutdown ends).
	var took, oldUntil time.Duration
	for _, r := range w.Replies() {
		switch at := r.At.Sub(stopped); {
		case at < 0:
		case nodeOf[r.MAC] == next && took == 0:
			took = at
		case nodeOf[r.MAC] == owner:
			oldUntil = at
		}
	}
	pods = underlayAnswers(t, e, u, vip, 8)
	for pod := range pods {
		if !slices.Contains(nginxOn[next], pod) {
			t.Fatalf("announced from %s, answered by %s (%v): want %v only\n%s", next, pod, pods, nginxOn[next], underlayDiagnose(e))
		}
	}
	t.Logf("MetalLB mode: %s's speaker stopped, MetalLB announces %s from %s (its first ARP answer %v after the stop, the old speaker's last %v, machine loaded); answered by %v",
		owner, vip, next, took.Round(time.Millisecond), oldUntil.Round(time.Millisecond), pods)
	// The VIP's status is MetalLB's: ovnedge (with --lb-pools) left it.
	if got := e.Service("default", "nginx-lb").Status.LoadBalancer.Ingress; len(got) != 1 || got[0].IP != vip.String() {
		t.Errorf("nginx-lb ingress %v, want MetalLB's %s", got, vip)
	}
}

// speakerSays waits for MetalLB's speaker's event on nginx-lb that it
// announces from node.
func speakerSays(t *testing.T, e *Env, node string) {
	t.Helper()
	e.Eventually(Timeout, "MetalLB's speaker announcing nginx-lb from "+node, func() error {
		evs, err := e.CS.CoreV1().Events("default").List(e.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=nginx-lb"})
		if err != nil {
			return err
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.Source.Component == "metallb-speaker" && ev.Reason == "nodeAssigned" {
				if strings.Contains(ev.Message, `"`+node+`"`) {
					return nil
				}
				seen = append(seen, ev.Message)
			}
		}
		return fmt.Errorf("speaker events %q", seen)
	})
}

// TestUnderlayStandalone: --underlay-lb-mode=standalone, no MetalLB.
// ovnedge gives nginx-lb the subnet's first excluded address and one node
// with a local pod answers ARP for it on underlay0.341; the client
// reaches it there. When that node's chassis and ovnedge die, another
// node answers (the node heartbeat of --egressip-fast-failover), never
// two at once, and the next connection is served by its pods. The
// takeover is measured from the kill to the new owner's first ARP answer
// (the client asks every 10 ms).
func TestUnderlayStandalone(t *testing.T) {
	e := shared.With(t)
	args := []string{"--underlay-lb-mode=standalone", "--enable-ovn-lb-prefer-local", "--ls-ct-skip-dst-lport-ips=false"}
	u := seed003(t, e, args, append(args, "--provider-bridge="+testbed.UnderlayBridge, "--provider-nic="+testbed.UnderlayNIC,
		"--underlay-interface="+testbed.UnderlayInterface))
	// The cluster's leader also has --lb-pools: the annotation picks the
	// subnet.
	createService(t, e, nginxLB(map[string]string{"ovn.kubernetes.io/service_external_ip_from_subnet": testbed.UnderlaySwitch}))
	vip := e.LoadBalancerIP("default", "nginx-lb")
	if vip.String() != "10.180.204.250" {
		t.Fatalf("nginx-lb got %s, want the subnet's first excluded address 10.180.204.250", vip)
	}
	nodeOf := map[string]string{u.MAC(w1): w1, u.MAC(w2): w2, u.MAC(w3): w3}
	var owner string
	e.Eventually(30*time.Second, "one node answering ARP for "+vip.String(), func() error {
		macs := arpRepliesOn(u.Client, vip, 2)
		if len(macs) != 1 {
			return fmt.Errorf("answered by %v", macs)
		}
		owner = nodeOf[macs[0]]
		return nil
	})
	if owner != w2 && owner != w3 {
		t.Fatalf("%s owns %s, which has no local pod", owner, vip)
	}
	pods := underlayAnswers(t, e, u, vip, 4)
	t.Logf("standalone: %s got %s, announced by %s; answered by %v", "nginx-lb", vip, owner, pods)

	w, err := StartARPWatch(u.Client, "eth0", vip, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	e.KillNode(owner)
	t.Cleanup(func() {
		e := shared.With(t)
		e.RestoreNode(owner)
		e.Underlay().Up(owner)
	})
	var next string
	var took time.Duration
	e.Eventually(30*time.Second, "another node answering for "+vip.String(), func() error {
		for _, r := range w.Replies() {
			if n := nodeOf[r.MAC]; n != owner && r.At.After(killed) {
				next, took = n, r.At.Sub(killed)
				return nil
			}
		}
		return fmt.Errorf("owners %v", w.Owners())
	})
	time.Sleep(300 * time.Millisecond)
	w.Stop()
	if err := w.Overlap(); err != nil {
		t.Errorf("two nodes answered ARP for %s: %v", vip, err)
	}
	_, _ = u.Client.RunErr("ip", "neigh", "flush", "dev", "eth0")
	pods = underlayAnswers(t, e, u, vip, 4)
	t.Logf("standalone takeover: %s killed, %s answers ARP for %s %v after the kill (machine loaded); answered by %v",
		owner, next, vip, took.Round(time.Millisecond), pods)
	if took > time.Second {
		t.Errorf("takeover took %v, want < 1s", took)
	}
	for pod := range pods {
		if !slices.Contains(nginxOn[next], pod) {
			t.Errorf("after the takeover by %s, answered by %s: want %v only", next, pod, nginxOn[next])
		}
	}
}
