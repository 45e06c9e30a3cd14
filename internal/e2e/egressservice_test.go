package e2e

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/egresssvc"
	"github.com/ovnedge/ovnedge/testbed"
)

// esvcPort is where the external client serves the EgressService tests.
const esvcPort = 9010

// esvcHost waits until EgressService shop/name's status.host is want (not
// not: any other non-empty node when want is "") and its node alone
// carries the label; it returns the host.
func esvcHost(t *testing.T, e *Env, name, want, not string) string {
	t.Helper()
	var host string
	label := egresssvc.Label("shop/" + name)
	e.Eventually(Timeout, "EgressService shop/"+name+" on "+want, func() error {
		u, err := e.Dyn.Resource(egressv1.ServiceResource).Namespace("shop").Get(e.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		host, _, _ = unstructured.NestedString(u.Object, "status", "host")
		if (want != "" && host != want) || (want == "" && (host == "" || host == not)) {
			return fmt.Errorf("status.host %q", host)
		}
		for _, n := range e.Nodes {
			node, err := e.CS.CoreV1().Nodes().Get(e.Context(), n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, has := node.Labels[label]; has != (n.Name == host) {
				return fmt.Errorf("node %s: label %s is %v", n.Name, label, has)
			}
		}
		return nil
	})
	return host
}

// leavesAs waits until a connection from each pod to the external
// client's esvcPort arrives from src, and returns how long that took.
func leavesAs(t *testing.T, e *Env, f family, src netip.Addr, pods ...*testbed.Pod) time.Duration {
	t.Helper()
	dst := net.JoinHostPort(f.clientAddr(), fmt.Sprint(esvcPort))
	start := time.Now()
	e.Eventually(Timeout, "connections to "+dst+" from "+src.String(), func() error {
		for _, p := range pods {
			line, err := Reply(p.Netns, dst, payload, time.Second)
			if err != nil {
				return fmt.Errorf("from %s: %v", p.Name, err)
			}
			if _, seen, _ := strings.Cut(line, " "); !strings.HasPrefix(seen, net.JoinHostPort(src.String(), "")) {
				return fmt.Errorf("from %s: the client saw %s", p.Name, seen)
			}
		}
		return nil
	})
	return time.Since(start)
}

// announcer waits until vip is answered for by node alone (ARP or NDP).
func announcer(t *testing.T, e *Env, vip netip.Addr, node string) {
	t.Helper()
	e.Eventually(Timeout, vip.String()+" announced by "+node, func() error {
		var macs []string
		if vip.Is6() {
			macs = ndpReplies(e, vip)
		} else {
			macs = arpReplies(e, vip, 2)
		}
		if len(macs) != 1 || nodeOfMAC(e, macs[0]) != node {
			return fmt.Errorf("answered by %v", macs)
		}
		return nil
	})
}

// setETP sets the Service's externalTrafficPolicy.
func setETP(t *testing.T, e *Env, name string, etp corev1.ServiceExternalTrafficPolicy) {
	t.Helper()
	s, err := e.CS.CoreV1().Services("shop").Get(e.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.ExternalTrafficPolicy = etp
	if _, err := e.CS.CoreV1().Services("shop").Update(e.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestEgressService proves k8s.ovn.org/v1 EgressService with the leader
// and nodes run with --enable-egress-service (and --enable-l2-announce),
// under the chart's RBAC rendered with egress.services=true:
// the endpoints of a LoadBalancer Service (esvc-a on ovn-worker, esvc-b
// on ovn-worker3) reach the external client from the Service's ingress
// IP, through the host chosen among the nodeSelector's nodes (the egress
// nodes ovn-worker2 and ovn-worker3), which alone answers ARP/NDP for
// it; status.host and the node label name the host; the NB holds one 101
// policy per endpoint to the host's management IP; externalTrafficPolicy
// Local moves the host to the node with an endpoint; when the host's
// chassis dies, the other node takes over and new connections leave with
// the same IP; an EgressIP selecting the same pods does not change their
// source (the 101 policies beat its 100 ones) until the EgressService is
// deleted; spec.network sends the endpoints' traffic by its routing
// table on the host. IPv4 and IPv6.
func TestEgressService(t *testing.T) {
	env := shared.With(t)
	chartRBAC(t, env, "egress.services=true")
	t.Cleanup(func() { shared.With(t).ApplyFile(filepath.Join("..", "..", "deploy", "rbac.yaml")) })
	env.RestartLeader("--enable-egress-service")
	env.RestartNodes("--enable-egress-service", "--enable-l2-announce")
	t.Cleanup(func() {
		e := shared.With(t)
		e.RestartNodes()
		e.RestartLeader()
	})
	if err := Serve(env.Context(), env.Client, "client", esvcPort); err != nil {
		t.Fatal(err)
	}
	env.EnsurePod(ServerPod("shop", "esvc-a", w1, map[string]string{"app": "esvc"}, 8080))
	env.EnsurePod(ServerPod("shop", "esvc-b", w3, map[string]string{"app": "esvc"}, 8080))
	a, b := env.WaitPod("shop", "esvc-a"), env.WaitPod("shop", "esvc-b")
	parent := t
	for _, f := range []family{
		{"IPv4", false, testbed.ClusterClientIP + "/32", ""},
		{"IPv6", true, testbed.ClusterClientIP6 + "/128", ""},
	} {
		t.Run(f.name, func(t *testing.T) {
			e := env.With(t)
			name := "esvc" + f.suffix()
			createService(t, e, f.service(service("shop", name, "esvc", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyCluster)))
			vip := e.LoadBalancerIP("shop", name)
			delRoute := []string{"ip", "route", "del", vip.String() + "/32"}
			if f.v6 {
				delRoute = []string{"ip", "-6", "route", "del", vip.String() + "/128"}
			}
			_, _ = e.Client.RunErr(delRoute...) // on-link: the client asks who has the VIP
			e.ApplyYAML(`
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {namespace: shop, name: ` + name + `}
spec:
  nodeSelector: {matchLabels: {k8s.ovn.org/egress-assignable: ""}}
`)
			t.Cleanup(func() {
				_ = e.Dyn.Resource(egressv1.ServiceResource).Namespace("shop").Delete(e.Context(), name, metav1.DeleteOptions{})
			})
			host := esvcHost(t, e, name, w2, "")
			if !f.v6 {
				// The nodes do not forward yet: the host says so on its Node.
				t.Logf("%s without forwarding: %s", w2, e.WaitEvent("", w2, "EgressServiceHostRequirement"))
				for _, n := range e.Nodes {
					n.SetForwarding(true)
				}
				parent.Cleanup(func() {
					for _, n := range shared.Nodes {
						n.SetForwarding(false)
					}
				})
			}
			took := leavesAs(t, e, f, vip, a, b)
			announcer(t, e, vip, w2)
			t.Logf("%s: host %s; esvc-a (%s) and esvc-b (%s) reach the client from %s (%v after the host was set)", name, host, w1, w3, vip, took)
			mgmt := e.Node(w2).MgmtIP
			if f.v6 {
				mgmt = e.Node(w2).MgmtIP6
			}
			policies := e.OVN.Nbctl("--bare", "--columns=match,nexthops", "find", "Logical_Router_Policy", "priority=101", "external_ids:EgressSVC=shop/"+name)
			t.Logf("101 policies of shop/%s:\n%s", name, policies)
			if n := strings.Count(policies, mgmt.String()); n != 2 {
				t.Errorf("%d policies to %s, want 2 (one per endpoint)", n, mgmt)
			}
			if pod, _ := answers(t, e, e.Client, net.JoinHostPort(vip.String(), "80")); !strings.HasPrefix(pod, "esvc-") {
				t.Errorf("the VIP answered by %q", pod)
			}

			esvcETPLocal(t, e, f, name, vip, a, b)
			esvcFailover(t, e, f, name, vip, a)
			network(t, e, f, name, w2, a)

			esvcUnderEgressIP(t, e, f, name, vip, a)
		})
	}
}

// network proves spec.network on host: the host's priority-5000 ip rules
// send pod's traffic by routing table 100, which first has no route
// (connections fail) and then routes the external client on breth0 (they
// leave from the VIP again); without spec.network the rules are gone.
func network(t *testing.T, e *Env, f family, name, host string, pod *testbed.Pod) {
	t.Helper()
	ns := e.Node(host).NS
	ipf := "-4"
	podIP := pod.IP
	if f.v6 {
		ipf, podIP = "-6", pod.IP6
	}
	ns.Run(t, "ip", ipf, "route", "replace", "unreachable", "default", "table", "100")
	t.Cleanup(func() { _, _ = ns.RunErr("ip", ipf, "route", "flush", "table", "100") })
	setNetwork := func(network string) {
		patch := []byte(`{"spec":{"network":"` + network + `"}}`)
		if _, err := e.Dyn.Resource(egressv1.ServiceResource).Namespace("shop").Patch(e.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setNetwork("100")
	client := f.clientAddr()
	dst := net.JoinHostPort(client, fmt.Sprint(esvcPort))
	e.Eventually(Timeout, "table 100 used on "+host, func() error {
		if rules := ns.Run(t, "ip", ipf, "rule", "show", "priority", "5000"); !strings.Contains(rules, "from "+podIP.String()+" lookup 100") {
			return fmt.Errorf("rules: %s", rules)
		}
		if !refused(pod.Netns, dst) {
			return fmt.Errorf("%s still reaches %s", pod.Name, dst)
		}
		return nil
	})
	ns.Run(t, "ip", ipf, "route", "replace", client, "dev", testbed.ClusterBridge, "table", "100")
	vip := e.LoadBalancerIP("shop", name)
	leavesAs(t, e, f, vip, pod)
	setNetwork("")
	e.Eventually(Timeout, "no rules left on "+host, func() error {
		if rules := ns.Run(t, "ip", ipf, "rule", "show", "priority", "5000"); strings.TrimSpace(rules) != "" {
			return fmt.Errorf("rules: %s", rules)
		}
		return nil
	})
	t.Logf("spec.network 100 on %s: %s's traffic follows table 100 (no route: refused; a route: from %s)", host, pod.Name, vip)
}

// esvcETPLocal sets the Service's externalTrafficPolicy to Local: the
// host moves to ovn-worker3, the node with an endpoint among the selected
// ones, and so does the announcement; the VIP's ETP=Local ingress keeps
// working. Back to Cluster, the host stays.
func esvcETPLocal(t *testing.T, e *Env, f family, name string, vip netip.Addr, a, b *testbed.Pod) {
	t.Helper()
	setETP(t, e, name, corev1.ServiceExternalTrafficPolicyLocal)
	esvcHost(t, e, name, w3, "")
	leavesAs(t, e, f, vip, a, b)
	announcer(t, e, vip, w3)
	// Its replies are not rerouted (the reply-traffic rules of the
	// EgressService's pods): the client keeps reaching the VIP.
	pod, seen := answers(t, e, e.Client, net.JoinHostPort(vip.String(), "80"))
	if pod != "esvc-b" || !strings.HasPrefix(seen, net.JoinHostPort(f.clientAddr(), "")) {
		t.Errorf("ETP=Local: the VIP answered by %q, which saw %s", pod, seen)
	}
	setETP(t, e, name, corev1.ServiceExternalTrafficPolicyCluster)
	time.Sleep(time.Second)
	esvcHost(t, e, name, w3, "") // kept
}

// esvcFailover kills the host ovn-worker3's chassis: ovn-worker2 becomes
// the host and esvc-a leaves with the same IP again; it restores the node.
func esvcFailover(t *testing.T, e *Env, f family, name string, vip netip.Addr, a *testbed.Pod) {
	t.Helper()
	killed := time.Now()
	e.KillNode(w3)
	t.Cleanup(func() { shared.With(t).RestoreNode(w3) })
	esvcHost(t, e, name, w2, "")
	moved := time.Since(killed)
	leavesAs(t, e, f, vip, a)
	announcer(t, e, vip, w2)
	t.Logf("%s's chassis killed: host %s after %v, esvc-a leaving from %s again after %v", w3, w2, moved.Round(time.Millisecond), vip, time.Since(killed).Round(time.Millisecond))
	e.RestoreNode(w3)
	e.WaitPod("shop", "esvc-b")
}

// esvcUnderEgressIP applies an EgressIP of the same pods: the
// EgressService's 101 policies win over its 100 ones while it is there;
// deleted, the pods leave from the egress IP, and no label nor 101 policy
// is left.
func esvcUnderEgressIP(t *testing.T, e *Env, f family, name string, vip netip.Addr, a *testbed.Pod) {
	t.Helper()
	eip := netip.MustParseAddr(map[bool]string{false: "172.18.0.48", true: "fd00:18::48"}[f.v6])
	e.ApplyYAML(`
apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: esvc-eip` + f.suffix() + `}
spec:
  egressIPs: [` + eip.String() + `]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: shop}}
  podSelector: {matchLabels: {app: esvc}}
`)
	t.Cleanup(func() {
		_ = e.Dyn.Resource(EgressGVR).Delete(e.Context(), "esvc-eip"+f.suffix(), metav1.DeleteOptions{})
	})
	e.EgressNode("esvc-eip"+f.suffix(), eip, "")
	leavesAs(t, e, f, vip, a)
	if err := e.Dyn.Resource(egressv1.ServiceResource).Namespace("shop").Delete(e.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	leavesAs(t, e, f, eip, a)
	t.Logf("with EgressIP %s on the same pods: from %s while the EgressService lives, from %s once it is deleted", eip, vip, eip)
	e.Eventually(Timeout, "no label left", func() error {
		for _, n := range e.Nodes {
			node, err := e.CS.CoreV1().Nodes().Get(e.Context(), n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if slices.ContainsFunc(slices.Collect(maps.Keys(node.Labels)), func(k string) bool { return strings.HasPrefix(k, egresssvc.LabelPrefix) }) {
				return fmt.Errorf("%s: %v", n.Name, node.Labels)
			}
		}
		return nil
	})
	if p := e.OVN.Nbctl("--bare", "--columns=_uuid", "find", "Logical_Router_Policy", "priority=101"); p != "" {
		t.Errorf("101 policies left: %s", p)
	}
}

// clientAddr is the external client's address of the family.
func (f family) clientAddr() string { return f.client[:strings.IndexByte(f.client, '/')] }
