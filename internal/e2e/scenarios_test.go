package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovnedge/ovnedge/testbed"
)

// Names of the scenario cluster: ovn-worker hosts the workloads' client
// pods, ovn-worker2 and ovn-worker3 may host egress IPs.
const (
	w1, w2, w3 = "ovn-worker", "ovn-worker2", "ovn-worker3"
	lbPool     = "172.18.0.200/29"
	lbPool6    = "fd00:18::200/125"
	payload    = 200_000 // bytes echoed through every connection
)

// service builds a Service of type typ selecting app=<selector> on port
// 80 (target 8080).
func service(ns, name, selector string, typ corev1.ServiceType, etp corev1.ServiceExternalTrafficPolicy, externalIPs ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": selector}, ExternalIPs: externalIPs,
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if typ != corev1.ServiceTypeClusterIP {
		s.Spec.ExternalTrafficPolicy = etp
	}
	return s
}

// createService creates s with a ClusterIP of 10.96.0.<n> and returns it
// as stored (NodePorts allocated).
func createService(t testing.TB, e *Env, s *corev1.Service) *corev1.Service {
	t.Helper()
	e.ensureNamespace(s.Namespace, nil)
	out, err := e.CS.CoreV1().Services(s.Namespace).Create(e.Context(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s/%s: %v", s.Namespace, s.Name, err)
	}
	t.Cleanup(func() { _ = e.CS.CoreV1().Services(s.Namespace).Delete(e.Context(), s.Name, metav1.DeleteOptions{}) })
	return out
}

// via routes dst from the external client through node (the static
// route OVN-Kubernetes' docs/design/external-ip-and-loadbalancer-ingress.md
// advises).
func via(t *testing.T, e *Env, dst netip.Addr, node string) {
	t.Helper()
	e.Client.Run(t, "ip", "route", "replace", dst.String()+"/32", "via", e.Node(node).IP.String())
}

// answers connects from ns to addr until a whole exchange succeeds and
// returns the server's greeting "<pod> <client>".
func answers(t *testing.T, e *Env, ns *testbed.Netns, addr string) (pod, client string) {
	t.Helper()
	var line string
	if err := poll(30*time.Second, func() (err error) {
		line, err = Reply(ns, addr, payload, 3*time.Second)
		return err
	}); err != nil {
		t.Fatalf("a connection to %s from %s: still failing after 30s: %v\n%s", addr, ns.Name, err, e.Diagnose())
	}
	pod, client, _ = strings.Cut(line, " ")
	return pod, client
}

// refused reports whether a connection to addr from ns fails (RST from
// an empty load balancer, or nothing).
func refused(ns *testbed.Netns, addr string) bool {
	_, err := Reply(ns, addr, 0, 2*time.Second)
	return err != nil
}

// shared is the one cluster every test of the package runs on (started
// by TestMain): bringing it up costs ~12 s, a scenario a few seconds.
var shared *Env

// TestMain starts the shared cluster: egress-assignable ovn-worker2 and
// ovn-worker3, LB IPAM from lbPool, reachability checked every second
// over gRPC.
// Without root (outside CI) the package is skipped.
func TestMain(m *testing.M) {
	Main(m, "e2e", func(p testbed.T) {
		// Nodes serve the gRPC health check (as OVN-Kubernetes' do) and answer
		// heartbeats; the leader probes over gRPC every second, and
		// fast failover tests restart it with --egressip-fast-failover.
		shared = Start(p, Options{EgressNodes: []string{w2, w3},
			NodeArgs: []string{"--egressip-node-healthcheck-port=9107", "--egressip-fast-failover"},
			LeaderArgs: []string{"--lb-pools=default=" + lbPool + ",default6=" + lbPool6, "--egressip-check-interval=1s",
				"--egressip-node-healthcheck-port=9107"}})
		shared.CreatePod(ServerPod("shop", "web-1", w2, map[string]string{"app": "web"}, 8080))
		shared.CreatePod(ServerPod("shop", "web-2", w3, map[string]string{"app": "web"}, 8080))
	})
}

// TestStart: every instance runs and serves /readyz, the leader from a
// pod namespace, as deploy/ runs them.
func TestStart(t *testing.T) {
	e := shared.With(t)
	for _, n := range e.Nodes {
		if i := e.Instance(n.Name); i == nil || !i.Alive() || i.ready() != nil {
			t.Errorf("node %s: no ready instance", n.Name)
		}
	}
	if !e.Leader.Alive() || e.Leader.ready() != nil {
		t.Errorf("leader not ready")
	}
}

// TestServices proves the Service scenarios over real packets (backends
// web-1 on ovn-worker2 and web-2 on ovn-worker3): a TCP connection
// carrying data from a host outside the cluster, through the dataplane
// ovnedge programmed and nothing else.
func TestServices(t *testing.T) {
	env := shared
	t.Run("ExternalIPCluster", func(t *testing.T) {
		e := env.With(t)
		vip := netip.MustParseAddr("172.18.0.150")
		createService(t, e, service("shop", "ext", "web", corev1.ServiceTypeClusterIP, "", vip.String()))
		for _, n := range []string{w1, w2, w3} { // ETP=Cluster: every node serves, SNATed
			via(t, e, vip, n)
			pod, client := answers(t, e, e.Client, vip.String()+":80")
			t.Logf("ExternalIP %s via %s: answered by %s, which saw %s", vip, n, pod, client)
			if !strings.HasPrefix(pod, "web-") || strings.HasPrefix(client, testbed.ClusterClientIP+":") {
				t.Errorf("via %s: answered by %q seeing %q: want a web pod seeing a SNATed source", n, pod, client)
			}
		}
	})

	t.Run("LoadBalancerLocal", func(t *testing.T) {
		e := env.With(t)
		createService(t, e, service("shop", "lb-local", "web", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal))
		vip := e.LoadBalancerIP("shop", "lb-local")
		if !netip.MustParsePrefix(lbPool).Contains(vip) {
			t.Fatalf("ingress %s not from pool %s", vip, lbPool)
		}
		// ETP=Local: a node with a local endpoint serves and the backend
		// sees the client's own address; one without refuses.
		for n, pod := range map[string]string{w2: "web-1", w3: "web-2"} {
			via(t, e, vip, n)
			got, client := answers(t, e, e.Client, vip.String()+":80")
			t.Logf("LoadBalancer %s (ETP=Local) via %s: answered by %s, which saw %s", vip, n, got, client)
			if got != pod || !strings.HasPrefix(client, testbed.ClusterClientIP+":") {
				t.Errorf("via %s: answered by %q seeing %q, want %s seeing %s", n, got, client, pod, testbed.ClusterClientIP)
			}
		}
		via(t, e, vip, w1)
		if !refused(e.Client, vip.String()+":80") {
			t.Errorf("via %s (no local endpoint): the connection was served", w1)
		}
	})

	t.Run("NodePort", func(t *testing.T) {
		e := env.With(t)
		s := createService(t, e, service("shop", "np", "web", corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyCluster))
		np := s.Spec.Ports[0].NodePort
		for _, n := range e.Nodes {
			addr := fmt.Sprintf("%s:%d", n.IP, np)
			pod, client := answers(t, e, e.Client, addr)
			t.Logf("NodePort %s: answered by %s, which saw %s", addr, pod, client)
			if !strings.HasPrefix(pod, "web-") {
				t.Errorf("%s answered by %q", addr, pod)
			}
		}
		// From a routed client too (through the router namespace).
		addr := fmt.Sprintf("%s:%d", e.Node(w1).IP, np)
		if pod, _ := answers(t, e, e.RemoteClient, addr); !strings.HasPrefix(pod, "web-") {
			t.Errorf("routed client: %s answered by %q", addr, pod)
		}
	})
}

// egressIP is the EgressIP of the scenarios, for namespace prod.
const egressIP = "172.18.0.44"

// TestEgress proves OVN-Kubernetes' EgressIP example over real packets: app-1 on ovn-worker, in
// namespace prod, leaves with the EgressIP living on ovn-worker2 or
// ovn-worker3.
func TestEgress(t *testing.T) {
	env := shared.With(t)
	env.CreateNamespace("prod", map[string]string{"env": "prod"})
	env.CreatePod(ServerPod("prod", "app-1", w1, map[string]string{"app": "prod-web"}, 8080))
	env.ApplyYAML(`
apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: prod}
spec:
  egressIPs: [` + egressIP + `]
  namespaceSelector: {matchLabels: {env: prod}}
`)
	pod := env.WaitPod("prod", "app-1")
	eip := netip.MustParseAddr(egressIP)
	ctx := env.Context()
	if err := Serve(ctx, env.Client, "client", 9000); err != nil {
		t.Fatal(err)
	}

	t.Run("SourceIsEgressIP", func(t *testing.T) {
		e := env.With(t)
		node := e.EgressNode("prod", eip, "")
		// app-1 runs on ovn-worker, the egress IP lives on another node:
		// the packet crossed geneve to that node's gateway router. The
		// status may be written before the rows: wait for the source.
		var seen string
		e.Eventually(30*time.Second, "the external host seeing "+egressIP, func() error {
			_, seen = answers(t, e, pod.Netns, testbed.ClusterClientIP+":9000")
			if !strings.HasPrefix(seen, egressIP+":") {
				return fmt.Errorf("seen from %s", seen)
			}
			return nil
		})
		t.Logf("EgressIP %s on %s: the external host saw %s from app-1 on %s", eip, node, seen, w1)
	})

	t.Run("PodToNodeIP", func(t *testing.T) {
		// As OVN-Kubernetes' EgressIP page says: pod -> node IP is not rerouted (102 + pkt_mark 1008)
		// and leaves its own node SNATed to that node's IP (br-ex 105).
		e := env.With(t)
		n3 := e.Node(w3)
		if err := Serve(ctx, n3.NS, w3, 9001); err != nil {
			t.Fatal(err)
		}
		_, seen := answers(t, e, pod.Netns, n3.IP.String()+":9001")
		t.Logf("app-1 -> node IP %s: the node saw %s", n3.IP, seen)
		if want := e.Node(w1).IP.String() + ":"; !strings.HasPrefix(seen, want) {
			t.Errorf("node %s saw %s, want the source node's IP %s", w3, seen, want)
		}
	})

	t.Run("ServiceToSelectedPod", func(t *testing.T) {
		// A client outside connects to a Service whose backend (app-1 on
		// ovn-worker) is selected by the EgressIP living on another node:
		// the connection works both ways, SNATed (ETP=Cluster) or with the
		// client's address kept (ETP=Local, the reply-traffic rule).
		e := env.With(t)
		for _, c := range []struct {
			name string
			etp  corev1.ServiceExternalTrafficPolicy
			vip  string
		}{{"eip-cluster", corev1.ServiceExternalTrafficPolicyCluster, "172.18.0.160"}, {"eip-local", corev1.ServiceExternalTrafficPolicyLocal, "172.18.0.161"}} {
			createService(t, e, service("prod", c.name, "prod-web", corev1.ServiceTypeNodePort, c.etp, c.vip))
			vip := netip.MustParseAddr(c.vip)
			via(t, e, vip, w1)
			got, seen := answers(t, e, e.Client, c.vip+":80")
			t.Logf("%s (ETP=%s) via %s: answered by %s, which saw %s", c.vip, c.etp, w1, got, seen)
			if got != "app-1" {
				t.Errorf("%s: answered by %q", c.name, got)
			}
			if kept := strings.HasPrefix(seen, testbed.ClusterClientIP+":"); kept != (c.etp == corev1.ServiceExternalTrafficPolicyLocal) {
				t.Errorf("%s: the backend saw %s", c.name, seen)
			}
		}
	})

	t.Run("Failover", func(t *testing.T) {
		// The egress node's chassis dies (processes killed): new packets
		// leave with the egress IP through the other egress node.
		e := env.With(t)
		from := e.EgressNode("prod", eip, "")
		s := egressStream(t, e, pod, eip, 9100, 10*time.Second)
		defer s.Stop()
		killed, sentAtKill := time.Now(), s.Sent()
		e.KillNode(from)
		t.Cleanup(func() { shared.With(t).RestoreNode(from) })
		to := e.EgressNode("prod", eip, from)
		e.Eventually(30*time.Second, "stream arriving again from the egress IP after the kill", func() error {
			return s.ArrivedAfter(sentAtKill+5, eip)
		})
		time.Sleep(300 * time.Millisecond)
		gap, lost := s.Gap(killed)
		t.Logf("EgressIP failover %s -> %s (chassis killed): loss window %v, %d of %d packets lost (10 ms interval); sources %v",
			from, to, gap.Round(time.Millisecond), lost, s.Sent(), s.Sources())
		_, seen := answers(t, e, pod.Netns, testbed.ClusterClientIP+":9000")
		if !strings.HasPrefix(seen, egressIP+":") {
			t.Errorf("after failover, a new connection was seen from %s, want %s", seen, egressIP)
		}
	})
}
