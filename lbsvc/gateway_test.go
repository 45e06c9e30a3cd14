package lbsvc_test

import (
	"reflect"

	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow/brex"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

// The inputs of OVN-Kubernetes' gateway_localnet_linux_test.go: newService,
// newEndpointSlice and initFakeNodePortWatcher (node "node", host address
// 192.168.18.15 in its node IP manager, gateway IP 10.244.0.1 on breth0,
// gwMAC 0a:0b:0c:0d:0e:0f, ofportPhys eth0, patch port patch-breth0_ov).

func ovnkService(ports []corev1.ServicePort, typ corev1.ServiceType, externalIPs []string, ingress []string, etpLocal bool) *corev1.Service {
	etp := corev1.ServiceExternalTrafficPolicyTypeCluster
	if etpLocal {
		etp = corev1.ServiceExternalTrafficPolicyTypeLocal
	}
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "service1", Namespace: "namespace1"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.129.0.2", ClusterIPs: []string{"10.129.0.2"}, Ports: ports,
			Type: typ, ExternalIPs: externalIPs, ExternalTrafficPolicy: etp},
	}
	for _, ip := range ingress {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func ovnkSlice(endpoints []discoveryv1.Endpoint, ports []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "service1ab23", Namespace: "namespace1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "service1"}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: endpoints, Ports: ports,
	}
}

var ovnkNode = lbsvc.Node{Name: "node", IPs: []netip.Addr{netip.MustParseAddr("192.168.18.15")}}

// TestGatewayFlowsMatchOVNKubernetes builds the SGW test cases of
// gateway_localnet_linux_test.go from their Service and EndpointSlice and
// compares the flows of owner service/namespace1/service1 with the union
// of the flow cache entries the case checks, verbatim.
func TestGatewayFlowsMatchOVNKubernetes(t *testing.T) {
	tcp := corev1.ProtocolTCP
	cases := []struct {
		name string
		svc  *corev1.Service
		eps  *discoveryv1.EndpointSlice
		want []string
	}{
		{
			name: "inits nftables rules and openflows with LoadBalancer where ETP=local, SGW mode",
			svc: ovnkService([]corev1.ServicePort{{NodePort: 31111, Protocol: tcp, Port: 8080}},
				corev1.ServiceTypeLoadBalancer, []string{"1.1.1.1"}, []string{"5.5.5.5"}, true),
			eps: ovnkSlice(nil, nil),
			want: []string{
				"cookie=0x453ae29bcbbc08bd, priority=110, in_port=eth0, tcp, tp_dst=31111, actions=output:patch-breth0_ov",
				"cookie=0x453ae29bcbbc08bd, priority=110, in_port=patch-breth0_ov, dl_src=0a:0b:0c:0d:0e:0f, tcp, tp_src=31111, actions=output:eth0",
				"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, arp, arp_op=1, arp_tpa=5.5.5.5, actions=output:LOCAL",
				"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, icmp, nw_dst=5.5.5.5, icmp_type=3, icmp_code=4, actions=output:patch-breth0_ov",
				"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, tcp, nw_dst=5.5.5.5, tp_dst=8080, actions=output:patch-breth0_ov",
				"cookie=0x10c6b89e483ea111, priority=110, in_port=patch-breth0_ov, dl_src=0a:0b:0c:0d:0e:0f, tcp, nw_src=5.5.5.5, tp_src=8080, actions=output:eth0",
				"cookie=0x71765945a31dc2f1, priority=110, in_port=eth0, arp, arp_op=1, arp_tpa=1.1.1.1, actions=output:LOCAL",
				"cookie=0x71765945a31dc2f1, priority=110, in_port=eth0, icmp, nw_dst=1.1.1.1, icmp_type=3, icmp_code=4, actions=output:patch-breth0_ov",
				"cookie=0x71765945a31dc2f1, priority=110, in_port=eth0, tcp, nw_dst=1.1.1.1, tp_dst=8080, actions=output:patch-breth0_ov",
				"cookie=0x71765945a31dc2f1, priority=110, in_port=patch-breth0_ov, dl_src=0a:0b:0c:0d:0e:0f, tcp, nw_src=1.1.1.1, tp_src=8080, actions=output:eth0",
			},
		},
		{
			name: "inits nftables rules and openflows with LoadBalancer where ETP=local, SGW mode, with named ports, with host networked pods and with external IP",
			svc: ovnkService([]corev1.ServicePort{{Name: "https-port", NodePort: 31111, Protocol: tcp, Port: 8080,
				TargetPort: intstr.FromString("https-target")}},
				corev1.ServiceTypeLoadBalancer, []string{"1.1.1.1"}, []string{"5.5.5.5"}, true),
			eps: ovnkSlice([]discoveryv1.Endpoint{{Addresses: []string{"192.168.18.15"}, NodeName: ptr("node")}},
				[]discoveryv1.EndpointPort{{Name: ptr("https-port"), Port: ptr(int32(8888)), Protocol: &tcp}}),
			want: []string{
				"cookie=0x453ae29bcbbc08bd, priority=110, in_port=eth0, tcp, tp_dst=31111, actions=ct(commit,zone=64003,nat(dst=10.244.0.1:8888),table=6)",
				"cookie=0xe745ecf105, priority=110, table=6, actions=output:LOCAL",
				"cookie=0xe352697d7a317b80, priority=110, in_port=LOCAL, tcp, tp_src=8888, actions=ct(zone=64003 nat,table=7)",
				"cookie=0xe745ecf105, priority=110, table=7, actions=output:eth0",
				"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, arp, arp_op=1, arp_tpa=5.5.5.5, actions=output:LOCAL",
				"cookie=0x10c6b89e483ea111, priority=110, in_port=eth0, tcp, nw_dst=5.5.5.5, tp_dst=8080, actions=ct(commit,zone=64003,nat(dst=10.244.0.1:8888),table=6)",
				"cookie=0xe745ecf105, priority=110, table=6, actions=output:LOCAL",
				"cookie=0xe352697d7a317b80, priority=110, in_port=LOCAL, tcp, tp_src=8888, actions=ct(zone=64003 nat,table=7)",
				"cookie=0xe745ecf105, priority=110, table=7, actions=output:eth0",
				"cookie=0x71765945a31dc2f1, priority=110, in_port=eth0, arp, arp_op=1, arp_tpa=1.1.1.1, actions=output:LOCAL",
				"cookie=0x71765945a31dc2f1, priority=110, in_port=eth0, tcp, nw_dst=1.1.1.1, tp_dst=8080, actions=ct(commit,zone=64003,nat(dst=10.244.0.1:8888),table=6)",
				"cookie=0xe745ecf105, priority=110, table=6, actions=output:LOCAL",
				"cookie=0xe352697d7a317b80, priority=110, in_port=LOCAL, tcp, tp_src=8888, actions=ct(zone=64003 nat,table=7)",
				"cookie=0xe745ecf105, priority=110, table=7, actions=output:eth0",
			},
		},
		{
			name: "manages nftables rules and openflows for NodePort backed by ovn-k pods where ETP=local, SGW",
			svc: ovnkService([]corev1.ServicePort{{NodePort: 31111, Protocol: tcp, Port: 8080}},
				corev1.ServiceTypeNodePort, nil, nil, true),
			eps: ovnkSlice([]discoveryv1.Endpoint{{Addresses: []string{"10.244.0.3"}}},
				[]discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(443)), Protocol: &tcp}}),
			want: []string{
				"cookie=0x453ae29bcbbc08bd, priority=110, in_port=eth0, tcp, tp_dst=31111, actions=output:patch-breth0_ov",
				"cookie=0x453ae29bcbbc08bd, priority=110, in_port=patch-breth0_ov, dl_src=0a:0b:0c:0d:0e:0f, tcp, tp_src=31111, actions=output:eth0",
			},
		},
		{
			// An LGW case: "case 1" flows do not depend on the gateway mode.
			name: "manages nftables rules and openflows for NodePort backed by local-host-networked pods where ETP=local, LGW",
			svc: ovnkService([]corev1.ServicePort{{Name: "https", NodePort: 31111, Protocol: tcp, Port: 8080,
				TargetPort: intstr.FromInt(443)}}, corev1.ServiceTypeNodePort, nil, nil, true),
			eps: ovnkSlice([]discoveryv1.Endpoint{{Addresses: []string{"192.168.18.15"}, NodeName: ptr("node")}},
				[]discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(443)), Protocol: &tcp}}),
			want: []string{
				"cookie=0x453ae29bcbbc08bd, priority=110, in_port=eth0, tcp, tp_dst=31111, actions=ct(commit,zone=64003,nat(dst=10.244.0.1:443),table=6)",
				"cookie=0xe745ecf105, priority=110, table=6, actions=output:LOCAL",
				"cookie=0x8ba455e19afe30d1, priority=110, in_port=LOCAL, tcp, tp_src=443, actions=ct(zone=64003 nat,table=7)",
				"cookie=0xe745ecf105, priority=110, table=7, actions=output:eth0",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := lbsvc.NodeGatewayFlows(brextest.OVNKGateway(), []*corev1.Service{c.svc}, []*discoveryv1.EndpointSlice{c.eps}, ovnkNode)
			if len(res.Failed) > 0 || len(res.Events) > 0 || len(res.Sets) != 1 {
				t.Fatalf("sets %v, failed %v, events %v", res.Sets, res.Failed, res.Events)
			}
			var got []string
			for _, f := range res.Sets["service/namespace1/service1"] {
				got = append(got, f.String())
			}
			slices.Sort(got)
			if want := brextest.Canonical(t, c.want); !slices.Equal(got, want) {
				t.Errorf("flows differ from OVN-Kubernetes':\n%s", flowtest.Diff(strings.Join(want, "\n"), strings.Join(got, "\n")))
			}
		})
	}
}

// TestGatewayService checks which Services get flows and how endpoints
// pick the host target port.
func TestGatewayService(t *testing.T) {
	node := lbsvc.Node{Name: "node2", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.3"), netip.MustParseAddr("fc00::3")}}
	local := func() *corev1.Service {
		s := svc("local", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.30"},
			port("https", corev1.ProtocolTCP, 443, 30443, "https"), port("dns", corev1.ProtocolUDP, 53, 0, "53"))
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.70"}}
		return s
	}
	https := []discoveryv1.EndpointPort{sport("https", corev1.ProtocolTCP, 8443)}
	for _, c := range []struct {
		name       string
		svc        *corev1.Service
		eps        []*discoveryv1.EndpointSlice
		want       string // fmt of the ServicePorts; "-" when no flows
		wantEvents int
	}{
		{name: "ClusterIP only", svc: svc("c", corev1.ServiceTypeClusterIP, []string{"10.96.0.1"}, port("", corev1.ProtocolTCP, 80, 0, "80")), want: "-"},
		{name: "ExternalName", svc: svc("x", corev1.ServiceTypeExternalName, nil), want: "-"},
		{name: "NodePort", svc: svc("n", corev1.ServiceTypeNodePort, []string{"10.96.0.2"}, port("", corev1.ProtocolSCTP, 9, 30009, "9")),
			want: "[{sctp 9 30009 0 0}]"},
		{name: "ETP=Local, pod endpoints only", svc: local(),
			eps:  []*discoveryv1.EndpointSlice{slice("l", "local", discoveryv1.AddressTypeIPv4, https, ready("10.244.2.5", "node2"))},
			want: "[{tcp 443 30443 0 0} {udp 53 0 0 0}]"},
		{name: "ETP=Local, host-network endpoint on another node", svc: local(),
			eps:  []*discoveryv1.EndpointSlice{slice("l", "local", discoveryv1.AddressTypeIPv4, https, ready("172.18.0.3", "node1"))},
			want: "[{tcp 443 30443 0 0} {udp 53 0 0 0}]"},
		{name: "ETP=Local, host-network endpoint here", svc: local(),
			eps:  []*discoveryv1.EndpointSlice{slice("l", "local", discoveryv1.AddressTypeIPv4, https, ready("172.18.0.3", "node2"))},
			want: "[{tcp 443 30443 8443 0} {udp 53 0 0 0}]"},
		{name: "ETP=Local, host-network endpoint not ready", svc: local(),
			eps:  []*discoveryv1.EndpointSlice{slice("l", "local", discoveryv1.AddressTypeIPv4, https, notReady("172.18.0.3", "node2"))},
			want: "[{tcp 443 30443 0 0} {udp 53 0 0 0}]"},
		{name: "ETP=Local, terminating host-network endpoint is the fallback", svc: local(),
			eps:  []*discoveryv1.EndpointSlice{slice("l", "local", discoveryv1.AddressTypeIPv4, https, terminating("172.18.0.3", "node2"))},
			want: "[{tcp 443 30443 8443 0} {udp 53 0 0 0}]"},
		{name: "ETP=Local, IPv6 host-network endpoint", svc: local(),
			eps:  []*discoveryv1.EndpointSlice{slice("l6", "local", discoveryv1.AddressTypeIPv6, https, ready("fc00::3", "node2"))},
			want: "[{tcp 443 30443 0 8443} {udp 53 0 0 0}]"},
		{name: "ETP=Local, two target ports: the lowest and an event", svc: local(),
			eps: []*discoveryv1.EndpointSlice{
				slice("a", "local", discoveryv1.AddressTypeIPv4, https, ready("172.18.0.3", "node2")),
				slice("b", "local", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("https", corev1.ProtocolTCP, 7443)}, ready("172.18.0.3", "node2")),
			},
			want: "[{tcp 443 30443 7443 0} {udp 53 0 0 0}]", wantEvents: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			gs, ok, events := lbsvc.GatewayService(c.svc, c.eps, node)
			got := "-"
			if ok {
				var b strings.Builder
				b.WriteString("[")
				for i, p := range gs.Ports {
					if i > 0 {
						b.WriteString(" ")
					}
					b.WriteString("{" + p.Protocol.String() + " " + itoa(p.Port) + " " + itoa(p.NodePort) + " " + itoa(p.HostPort4) + " " + itoa(p.HostPort6) + "}")
				}
				got = b.String() + "]"
			}
			if got != c.want || len(events) != c.wantEvents {
				t.Errorf("ports %s, events %v; want %s and %d events", got, events, c.want, c.wantEvents)
			}
		})
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// Two Services on one VIP and port, one to a host-network endpoint: the
// second by namespace/name is an event and Failed, the first keeps its
// flows; a Service whose flows cannot be built fails alone.
func TestNodeGatewayFlowsClash(t *testing.T) {
	a := svc("a", corev1.ServiceTypeClusterIP, []string{"10.96.0.1"}, port("", corev1.ProtocolTCP, 80, 0, "80"))
	a.Spec.ExternalIPs = []string{"1.1.1.1"}
	b := svc("b", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.2"}, port("web", corev1.ProtocolTCP, 80, 30080, "8080"))
	b.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	b.Spec.ExternalIPs = []string{"1.1.1.1"}
	eps := []*discoveryv1.EndpointSlice{slice("b", "b", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{sport("web", corev1.ProtocolTCP, 8080)}, ready("192.168.18.15", "node"))}
	v6 := svc("v6", corev1.ServiceTypeClusterIP, []string{"10.96.0.3"}, port("", corev1.ProtocolTCP, 80, 0, "80"))
	v6.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	v6.Spec.ExternalIPs = []string{"fd00::1"}
	eps = append(eps, slice("v6", "v6", discoveryv1.AddressTypeIPv6, []discoveryv1.EndpointPort{sport("", corev1.ProtocolTCP, 80)},
		ready("fd00::15", "node")))
	node := ovnkNode
	node.IPs = append(node.IPs, netip.MustParseAddr("fd00::15")) // but the gateway has no IPv6 address
	res := lbsvc.NodeGatewayFlows(brextest.OVNKGateway(), []*corev1.Service{b, v6, a}, eps, node)
	if _, ok := res.Sets["service/default/a"]; !ok {
		t.Errorf("service a lost its flows: %v", res.Sets)
	}
	if !slices.Equal(res.Failed, []string{"service/default/b", "service/default/v6"}) || len(res.Events) != 2 {
		t.Errorf("failed %v, events %v; want b (clash with a) and v6 (no IPv6 gateway address)", res.Failed, res.Events)
	}
	for _, e := range res.Events {
		if e.Reason != lbsvc.ReasonGatewayFlows {
			t.Errorf("event %v", e)
		}
	}
}

// TestGatewayCache: a GatewayCache's flows equal those built from scratch
// through a run of changes (a Service replaced, its EndpointSlice
// replaced, a clashing Service added and removed, another bridge, the
// very lists again), and an unchanged Service's flows are the very slice
// built before.
func TestGatewayCache(t *testing.T) {
	a := svc("a", corev1.ServiceTypeClusterIP, []string{"10.96.0.1"}, port("", corev1.ProtocolTCP, 80, 0, "80"))
	a.Spec.ExternalIPs = []string{"1.1.1.1"}
	b := svc("b", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.2"}, port("web", corev1.ProtocolTCP, 80, 30080, "8080"))
	b.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	b.Spec.ExternalIPs = []string{"2.2.2.2"}
	bSlice := func(addr string) *discoveryv1.EndpointSlice {
		return slice("b", "b", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("web", corev1.ProtocolTCP, 8080)}, ready(addr, "node"))
	}
	clash := svc("0clash", corev1.ServiceTypeClusterIP, []string{"10.96.0.3"}, port("", corev1.ProtocolTCP, 80, 0, "9090"))
	clash.Spec.ExternalIPs = []string{"1.1.1.1"}
	other := brextest.OVNKGateway()
	other.Base.Uplink = "eth1"
	steps := []struct {
		name string
		g    brex.Gateway
		svcs []*corev1.Service
		eps  []*discoveryv1.EndpointSlice
	}{
		{"first", brextest.OVNKGateway(), []*corev1.Service{a, b}, []*discoveryv1.EndpointSlice{bSlice("10.244.0.5")}},
		{"unchanged", brextest.OVNKGateway(), []*corev1.Service{a, b}, []*discoveryv1.EndpointSlice{bSlice("10.244.0.5")}},
		{"host-network endpoint", brextest.OVNKGateway(), []*corev1.Service{a, b}, []*discoveryv1.EndpointSlice{bSlice("192.168.18.15")}},
		{"service replaced", brextest.OVNKGateway(), []*corev1.Service{a.DeepCopy(), b}, []*discoveryv1.EndpointSlice{bSlice("192.168.18.15")}},
		{"clash", brextest.OVNKGateway(), []*corev1.Service{a, b, clash}, nil},
		{"clash gone", brextest.OVNKGateway(), []*corev1.Service{a, b}, nil},
		{"other bridge", other, []*corev1.Service{a, b}, nil},
	}
	steps[1].svcs, steps[1].eps = steps[0].svcs, steps[0].eps // the very lists again
	var c lbsvc.GatewayCache
	var last lbsvc.GatewayFlows
	for _, st := range steps {
		got := c.NodeGatewayFlows(st.g, st.svcs, st.eps, ovnkNode)
		want := lbsvc.NodeGatewayFlows(st.g, st.svcs, st.eps, ovnkNode)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: cached %+v, want %+v", st.name, got, want)
		}
		if st.name == "unchanged" && &got.Sets["service/default/a"][0] != &last.Sets["service/default/a"][0] {
			t.Errorf("unchanged: service a's flows built again")
		}
		last = got
	}
}
