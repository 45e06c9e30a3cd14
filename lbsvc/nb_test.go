package lbsvc_test

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// nbTopology is two nodes of the OVN-Kubernetes topology matching nodes():
// node1 172.18.0.2 with pods 10.244.1.0/24, node2 172.18.0.3 with
// 10.244.2.0/24.
var nbTopology = ovsdbnb.Topology{
	ClusterSubnet: "10.244.0.0/16", JoinRouterIP: "100.64.0.1/16",
	Nodes: []ovsdbnb.Node{
		{Name: "node1", Subnet: "10.244.1.0/24", JoinIP: "100.64.0.2/16", ExternalIP: "172.18.0.2/16", Gateway: "172.18.0.1"},
		{Name: "node2", Subnet: "10.244.2.0/24", JoinIP: "100.64.0.3/16", ExternalIP: "172.18.0.3/16", Gateway: "172.18.0.1"},
	},
}

// startNB starts OVN central with nbTopology and returns a client to it.
func startNB(t testing.TB) (*testbed.OVN, *ovsdbnb.Client) {
	t.Helper()
	o := testbed.StartOVN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{o.NB}})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(c.Close)
	if err := ovsdbnb.EnsureTopology(ctx, c, nbTopology); err != nil {
		t.Fatalf("EnsureTopology: %v", err)
	}
	return o, c
}

// syncNB writes desired with a timeout and fails the test on error.
func syncNB(t testing.TB, c *ovsdbnb.Client, desired map[ovsdbnb.Owner]ovsdbnb.State) ovsdbnb.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := c.Sync(ctx, desired)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return res
}

// A client on the external network reaches VIPs through the gateway
// routers: ovn-trace from the localnet port of ext_node1 shows the load
// balancing, its backends and the SNAT decision.
func TestNBTrace(t *testing.T) {
	o, c := startNB(t)
	// OVN-Kubernetes SNATs load-balanced traffic on the gateway routers
	// to the router's IP (the "force_snat" of ct_lb_mark); skip_snat=true
	// load balancers are exempt ("skip_snat").
	for _, n := range nbTopology.Nodes {
		o.Nbctl("set", "Logical_Router", lbsvc.GatewayRouter(n.Name), "options:lb_force_snat_ip=router_ip")
	}
	tcp := func(name string, p int32, target string) corev1.ServicePort {
		return port(name, corev1.ProtocolTCP, p, 0, target)
	}
	cl := svc("web", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.10"}, tcp("http", 80, "8080"))
	cl.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.50"}}
	local := svc("local", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.20"}, tcp("https", 443, "8443"))
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	local.Spec.ExternalIPs = []string{"172.18.0.70"}
	remote := svc("remote", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.30"}, tcp("http", 80, "80"))
	remote.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	remote.Spec.ExternalIPs = []string{"172.18.0.80"}
	in := lbsvc.Input{
		Services: []*corev1.Service{cl, local, remote},
		EndpointSlices: []*discoveryv1.EndpointSlice{
			slice("web-a", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("http", corev1.ProtocolTCP, 8080)},
				ready("10.244.1.3", "node1"), ready("10.244.2.3", "node2")),
			slice("local-a", "local", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("https", corev1.ProtocolTCP, 8443)},
				ready("10.244.1.20", "node1"), ready("10.244.2.20", "node2"), ready("10.244.2.21", "node2")),
			slice("remote-a", "remote", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("http", corev1.ProtocolTCP, 80)},
				ready("10.244.2.30", "node2")),
		},
		Nodes: []lbsvc.Node{
			{Name: "node1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}},
			{Name: "node2", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.3")}},
		},
	}
	desired, events := lbsvc.Build(in, lbsvc.Options{})
	if len(events) != 0 {
		t.Fatalf("events: %v", events)
	}
	syncNB(t, c, desired)
	if res := syncNB(t, c, desired); res.Ops() != 0 {
		t.Errorf("second sync sent %d operations, want 0", res.Ops())
	}
	o.Nbctl("--wait=sb", "--timeout=20", "sync")

	from := func(node, dst string, dport int) string {
		gr := netip.MustParsePrefix(nbTopology.Nodes[map[string]int{"node1": 0, "node2": 1}[node]].ExternalIP).Addr()
		return `inport == "breth0_` + node + `" && eth.src == 02:00:00:00:00:01 && eth.dst == ` + ovsdbnb.MAC(gr) +
			` && ip4.src == 198.51.100.7 && ip4.dst == ` + dst + ` && ip.ttl == 64 && tcp && tcp.src == 40000 && tcp.dst == ` +
			strconv.Itoa(dport)
	}
	tests := []struct {
		name, node, flow string
		want, not        []string
	}{
		{"ETP=Cluster ingress VIP: every backend, SNATed", "node1", from("node1", "172.18.0.50", 80),
			[]string{"ct_lb_mark(backends=10.244.1.3:8080,10.244.2.3:8080; force_snat)"}, nil},
		{"ETP=Local on node1: the local backend, no SNAT", "node1", from("node1", "172.18.0.70", 443),
			[]string{"ct_lb_mark(backends=10.244.1.20:8443; skip_snat)"}, []string{"force_snat", "ct_snat", "10.244.2.20"}},
		{"ETP=Local on node2: its two local backends, no SNAT", "node2", from("node2", "172.18.0.70", 443),
			[]string{"ct_lb_mark(backends=10.244.2.20:8443,10.244.2.21:8443; skip_snat)"}, []string{"force_snat", "ct_snat", "10.244.1.20"}},
	}
	// No local endpoint: the empty backend list is a reject (a TCP reset).
	tests = append(tests, struct {
		name, node, flow string
		want, not        []string
	}{"ETP=Local without a local endpoint: reset", "node1", from("node1", "172.18.0.80", 80),
		[]string{"tcp_reset"}, []string{"ct_lb_mark(backends=", "10.244.2.30"}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := o.Trace("--ct=new", "ext_"+tt.node, tt.flow)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in ovn-trace:\n%s", w, out)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(out, w) {
					t.Errorf("%q in ovn-trace:\n%s", w, out)
				}
			}
		})
	}
}
