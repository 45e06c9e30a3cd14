package onenode

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/testbed"
)

// lbPool is the leader's LB IPAM pool.
const lbPool = "172.18.0.200/29"

// shared is the one-node cluster every test of the package runs on, with
// the server pod web-1 (app=web, port 8080) on its node.
var shared *e2e.Env

// TestMain starts the shared cluster. Without root (outside CI) the
// package is skipped.
func TestMain(m *testing.M) {
	e2e.Main(m, "onenode", func(p testbed.T) {
		shared = e2e.Start(p, e2e.Options{Nodes: 1, LeaderArgs: []string{"--lb-pools=default=" + lbPool}, EgressNodes: []string{"ovn-worker"}})
		shared.CreatePod(e2e.ServerPod("shop", "web-1", shared.Nodes[0].Name, map[string]string{"app": "web"}, 8080))
	})
}

// TestServices connects from the external client to every kind of
// Service address of the node, whose one backend (web-1) is on the node
// itself, as real TCP connections carrying data: once the first
// connection works, every one of the next ones must (a load balancer that
// serves some connections and resets others fails).
//
// NodePort with templates is the regression: the template load balancer
// (VIP ^NODEIP_IPv4_0) alone gets no unSNAT bypass on the gateway router
// from ovn-northd, and its connections to a backend on the router's own
// chassis were reset; lbsvc adds the node's gateway router load balancer
// (localGatewayLBs).
func TestServices(t *testing.T) {
	e := shared.With(t)
	n := e.Nodes[0]
	tests := []struct {
		name string
		typ  corev1.ServiceType
		etp  corev1.ServiceExternalTrafficPolicy
		// externalIP is the Service's ExternalIP, routed via the node.
		externalIP string
		// addr is the address the client connects to.
		addr func(s *corev1.Service) string
		// clientKept: the backend sees the client's own address (no SNAT).
		clientKept bool
		// check is run once the address answers.
		check func(t *testing.T, e *e2e.Env, s *corev1.Service)
	}{
		{name: "NodePortTemplate", typ: corev1.ServiceTypeNodePort, etp: corev1.ServiceExternalTrafficPolicyCluster,
			addr: func(s *corev1.Service) string { return fmt.Sprintf("%s:%d", n.IP, s.Spec.Ports[0].NodePort) },
			check: func(t *testing.T, e *e2e.Env, s *corev1.Service) {
				// Templates are on: the merged template load balancer, and
				// the node's gateway router load balancer beside it.
				lbs := e.OVN.Nbctl("--bare", "--columns=name", "find", "Load_Balancer", "external_ids:k8s.ovn.org/owner="+s.Namespace+"/"+s.Name)
				for _, want := range []string{"_TCP_node_switch_template_IPv4_merged", "_TCP_nodeport_router_" + n.Name} {
					if !strings.Contains(lbs, want) {
						t.Errorf("no load balancer *%s among\n%s", want, lbs)
					}
				}
			}},
		{name: "NodePortLocal", typ: corev1.ServiceTypeNodePort, etp: corev1.ServiceExternalTrafficPolicyLocal,
			addr:       func(s *corev1.Service) string { return fmt.Sprintf("%s:%d", n.IP, s.Spec.Ports[0].NodePort) },
			clientKept: true},
		{name: "ExternalIPCluster", typ: corev1.ServiceTypeClusterIP, externalIP: "172.18.0.150",
			addr: func(*corev1.Service) string { return "172.18.0.150:80" }},
		{name: "LoadBalancerLocal", typ: corev1.ServiceTypeLoadBalancer, etp: corev1.ServiceExternalTrafficPolicyLocal,
			addr:       func(s *corev1.Service) string { return e.LoadBalancerIP(s.Namespace, s.Name).String() + ":80" },
			clientKept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := shared.With(t)
			s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: strings.ToLower(tt.name)},
				Spec: corev1.ServiceSpec{Type: tt.typ, Selector: map[string]string{"app": "web"},
					Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
			if tt.typ != corev1.ServiceTypeClusterIP {
				s.Spec.ExternalTrafficPolicy = tt.etp
			}
			if tt.externalIP != "" {
				s.Spec.ExternalIPs = []string{tt.externalIP}
			}
			s = createService(t, e, s)
			addr := tt.addr(s)
			if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr() != n.IP {
				e.Client.Run(t, "ip", "route", "replace", ap.Addr().String()+"/32", "via", n.IP.String())
			}
			var line string
			e.Eventually(30*time.Second, "a connection to "+addr, func() (err error) {
				line, err = e2e.Reply(e.Client, addr, 0, 3*time.Second)
				return err
			})
			for i := range 5 {
				got, err := e2e.Reply(e.Client, addr, 200_000, 5*time.Second)
				if err != nil {
					t.Fatalf("connection %d to %s after the first answered: %v\n%s", i+2, addr, err, e.Diagnose())
				}
				line = got
			}
			pod, client, _ := strings.Cut(line, " ")
			t.Logf("%s %s: answered by %s, which saw %s", tt.name, addr, pod, client)
			if pod != "web-1" {
				t.Errorf("answered by %q, want web-1", pod)
			}
			if kept := strings.HasPrefix(client, testbed.ClusterClientIP+":"); kept != tt.clientKept {
				t.Errorf("the backend saw %s (client address kept: %v, want %v)", client, kept, tt.clientKept)
			}
			if tt.check != nil {
				tt.check(t, e, s)
			}
		})
	}
}

// createService creates s and returns it as stored (NodePorts
// allocated); it is deleted when t ends.
func createService(t *testing.T, e *e2e.Env, s *corev1.Service) *corev1.Service {
	t.Helper()
	e.CreateNamespace(s.Namespace, nil)
	out, err := e.CS.CoreV1().Services(s.Namespace).Create(e.Context(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s/%s: %v", s.Namespace, s.Name, err)
	}
	t.Cleanup(func() { _ = e.CS.CoreV1().Services(s.Namespace).Delete(e.Context(), s.Name, metav1.DeleteOptions{}) })
	return out
}

// TestEgressIP: the one node is the egress node of its own pod's EgressIP
// (the gateway router's SNAT on the same chassis): the external host sees
// the pod's connection from the egress IP.
func TestEgressIP(t *testing.T) {
	e := shared.With(t)
	const eip = "172.18.0.45"
	e.CreateNamespace("egr", map[string]string{"env": "egr"})
	e.CreatePod(e2e.ServerPod("egr", "sender", e.Nodes[0].Name, nil))
	e.ApplyYAML(`
apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: egr}
spec:
  egressIPs: [` + eip + `]
  namespaceSelector: {matchLabels: {env: egr}}
`)
	pod := e.WaitPod("egr", "sender")
	if err := e2e.Serve(e.Context(), e.Client, "client", 9000); err != nil {
		t.Fatal(err)
	}
	node := e.EgressNode("egr", netip.MustParseAddr(eip), "")
	var seen string
	e.Eventually(30*time.Second, "the external host seeing "+eip, func() error {
		line, err := e2e.Reply(pod.Netns, testbed.ClusterClientIP+":9000", 1000, 3*time.Second)
		if _, seen, _ = strings.Cut(line, " "); err == nil && !strings.HasPrefix(seen, eip+":") {
			err = fmt.Errorf("seen from %s", seen)
		}
		return err
	})
	t.Logf("EgressIP %s on %s: the external host saw %s from egr/sender on the same node", eip, node, seen)
}

// TestL2Announce: without L2 announce nobody answers ARP for an
// ExternalIP (the bypass flows keep the gateway router from answering);
// with --enable-l2-announce the one node does and serves it, the client
// having no route to the VIP.
func TestL2Announce(t *testing.T) {
	e := shared.With(t)
	const vip = "172.18.0.171"
	n := e.Nodes[0]
	createService(t, e, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "l2"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ExternalIPs: []string{vip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}})
	_, _ = e.Client.RunErr("ip", "route", "del", vip+"/32")
	_, _ = e.Client.RunErr("ip", "neigh", "flush", "dev", "eth0")
	w, err := e2e.StartARPWatch(e.Client, "eth0", netip.MustParseAddr(vip), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e.Eventually(30*time.Second, "the ARP bypass flows for "+vip, func() error {
		out := n.Ofctl("dump-flows", testbed.ClusterBridge, "arp,arp_tpa="+vip)
		if !strings.Contains(out, "arp_tpa="+vip) {
			return fmt.Errorf("none:\n%s", out)
		}
		return nil
	})
	time.Sleep(time.Second)
	if owners := w.Owners(); len(owners) != 0 {
		t.Fatalf("without L2 announce, ARP for %s answered by %v", vip, owners)
	}
	e.RestartNodes("--enable-l2-announce")
	t.Cleanup(func() { shared.With(t).RestartNodes() })
	e.Eventually(30*time.Second, "the node answering ARP for "+vip, func() error {
		if owners := w.Owners(); len(owners) != 1 || !strings.EqualFold(owners[0], n.MAC) {
			return fmt.Errorf("answered by %v, want %s alone", owners, n.MAC)
		}
		return nil
	})
	var line string
	e.Eventually(30*time.Second, "a connection to "+vip+":80", func() (err error) {
		line, err = e2e.Reply(e.Client, vip+":80", 100_000, 3*time.Second)
		return err
	})
	t.Logf("L2: nobody answered ARP for %s before; with L2 announce %s (%s) does, and a connection was answered by %s", vip, n.Name, n.MAC, line)
}
