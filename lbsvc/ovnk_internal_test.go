package lbsvc

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// OVN-Kubernetes' own unit-test vectors
// (go-controller/pkg/ovn/controller/services/lb_config_test.go and
// services_controller_test.go at the commit ovsdbnb/doc.go names), ported
// as table cases: the same inputs, the same expected load balancers. Only
// the router names differ: ovn-k's tests name them "gr-node-a", here they
// are GatewayRouter(node), "GR_node-a" (what ovn-k writes in a cluster).

// ep is a ready endpoint.
func ovnkEP(addr string, port int32, node string) endpoint {
	return endpoint{addr: netip.MustParseAddr(addr), port: port, node: node, ready: true, serving: true}
}

// ovnkNodes are Test_buildPerNodeLBs' defaultNodes: node-a with two host
// addresses, node-b with one.
func ovnkNodes() []Node {
	return []Node{
		{Name: "node-a", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.111")}, Chassis: "chassis-a"},
		{Name: "node-b", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, Chassis: "chassis-b"},
	}
}

// lbString renders a built load balancer for comparison: name, protocol,
// attachments and vips in order of source.
func lbString(lb ovsdbnb.LoadBalancer) string {
	var b strings.Builder
	b.WriteString(lb.Name + " " + lb.Protocol)
	b.WriteString(" routers=" + strings.Join(lb.Routers, ",") + " switches=" + strings.Join(lb.Switches, ",") + " groups=" + strings.Join(lb.Groups, ","))
	for _, k := range slices.Sorted(maps.Keys(lb.VIPs)) {
		b.WriteString(" " + k + "=" + lb.VIPs[k])
	}
	if lb.Options["skip_snat"] == "true" {
		b.WriteString(" skip_snat")
	}
	if lb.Options["template"] == "true" {
		b.WriteString(" template " + lb.Options["address-family"])
	}
	return b.String()
}

func rows(svc *corev1.Service, lbs []ovnLB, opts Options) []string {
	var out []string
	for _, lb := range lbs {
		out = append(out, lbString(lb.row(svc, opts)))
	}
	return out
}

func TestOVNKBuildPerNodeLBs(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "testns"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	opts := Options{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.128.0.0/16"), netip.MustParsePrefix("fe00::/64")}}
	hostNet := []endpoint{ovnkEP("10.0.0.1", 8080, "node-a")}
	tests := []struct {
		name    string
		configs []lbConfig
		want    []string
	}{
		{
			name:    "host-network pod",
			configs: []lbConfig{{vips: []string{"1.2.3.4"}, proto: corev1.ProtocolTCP, inport: 80, eps: hostNet}},
			want: []string{
				"Service_testns/foo_TCP_node_router_node-a tcp routers=GR_node-a switches= groups= 1.2.3.4:80=169.254.169.2:8080",
				"Service_testns/foo_TCP_node_switch_node-a_merged tcp routers=GR_node-b switches=node-a,node-b groups= 1.2.3.4:80=10.0.0.1:8080",
			},
		},
		{
			name: "nodeport service, standard pod",
			configs: []lbConfig{{vips: []string{nodeVIP}, proto: corev1.ProtocolTCP, inport: 80, nodePort: true,
				eps: []endpoint{ovnkEP("10.128.0.2", 8080, "node-a")}}},
			want: []string{
				"Service_testns/foo_TCP_node_router+switch_node-a tcp routers=GR_node-a switches=node-a groups= 10.0.0.111:80=10.128.0.2:8080 10.0.0.1:80=10.128.0.2:8080",
				"Service_testns/foo_TCP_node_router+switch_node-b tcp routers=GR_node-b switches=node-b groups= 10.0.0.2:80=10.128.0.2:8080",
			},
		},
		{
			name: "nodeport service, host-network pod",
			configs: []lbConfig{
				{vips: []string{"192.168.0.1"}, proto: corev1.ProtocolTCP, inport: 80, eps: hostNet},
				{vips: []string{nodeVIP}, proto: corev1.ProtocolTCP, inport: 80, nodePort: true, eps: hostNet},
			},
			want: []string{
				"Service_testns/foo_TCP_node_router_node-a tcp routers=GR_node-a switches= groups= 10.0.0.111:80=169.254.169.2:8080 10.0.0.1:80=169.254.169.2:8080 192.168.0.1:80=169.254.169.2:8080",
				"Service_testns/foo_TCP_node_switch_node-a tcp routers= switches=node-a groups= 10.0.0.111:80=10.0.0.1:8080 10.0.0.1:80=10.0.0.1:8080 192.168.0.1:80=10.0.0.1:8080",
				"Service_testns/foo_TCP_node_router+switch_node-b tcp routers=GR_node-b switches=node-b groups= 10.0.0.2:80=10.0.0.1:8080 192.168.0.1:80=10.0.0.1:8080",
			},
		},
		{
			// The masquerade VIP rule is added once per node address, so
			// node-a's lists its target twice, as ovn-k's does.
			name: "nodeport service, host-network pod, ExternalTrafficPolicy=local",
			configs: []lbConfig{
				{vips: []string{"192.168.0.1"}, proto: corev1.ProtocolTCP, inport: 80, eps: hostNet},
				{vips: []string{nodeVIP}, proto: corev1.ProtocolTCP, inport: 80, nodePort: true, externalLocal: true, eps: hostNet},
			},
			want: []string{
				"Service_testns/foo_TCP_node_router_node-a tcp routers=GR_node-a switches= groups= 192.168.0.1:80=169.254.169.2:8080",
				"Service_testns/foo_TCP_node_local_router_node-a tcp routers=GR_node-a switches= groups= 10.0.0.111:80=169.254.169.2:8080 10.0.0.1:80=169.254.169.2:8080 skip_snat",
				"Service_testns/foo_TCP_node_switch_node-a tcp routers= switches=node-a groups= 10.0.0.111:80=10.0.0.1:8080 10.0.0.1:80=10.0.0.1:8080 169.254.169.3:80=10.0.0.1:8080,10.0.0.1:8080 192.168.0.1:80=10.0.0.1:8080",
				"Service_testns/foo_TCP_node_router_node-b tcp routers=GR_node-b switches= groups= 10.0.0.2:80= 192.168.0.1:80=10.0.0.1:8080",
				"Service_testns/foo_TCP_node_switch_node-b tcp routers= switches=node-b groups= 10.0.0.2:80=10.0.0.1:8080 169.254.169.3:80= 192.168.0.1:80=10.0.0.1:8080",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rows(svc, perNodeLBs(svc, tt.configs, ovnkNodes(), opts), opts)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// Test_buildTemplateLBs_multipleTargetPorts: an ETP=Local NodePort whose
// endpoints use two target ports on two nodes (a rolling update) needs
// per-chassis targets, and every chassis value keeps both ports' targets
// where they are local.
func TestOVNKBuildTemplateLBsMultipleTargetPorts(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "testns"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}}
	nodes := []Node{
		{Name: "node-a", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Chassis: "chassis-a"},
		{Name: "node-b", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, Chassis: "chassis-b"},
	}
	cfg := lbConfig{vips: []string{nodeVIP}, proto: corev1.ProtocolTCP, inport: 80, nodePort: true, externalLocal: true,
		eps: []endpoint{ovnkEP("192.168.0.1", 8080, "node-a"), ovnkEP("192.168.0.2", 9090, "node-b")}}
	lbs, vars := templateLBs(svc, []lbConfig{cfg}, nodes, Options{})
	got := rows(svc, lbs, Options{})
	want := []string{
		"Service_testns/foo_TCP_node_switch_template_IPv4 tcp routers= switches= groups=clusterSwitchLBGroup ^NODEIP_IPv4_0:80=^Service__testns_foo__TCP__80__node__switch__template__IPv4 template ipv4",
		"Service_testns/foo_TCP_node_router_template_IPv4 tcp routers= switches= groups=clusterRouterLBGroup ^NODEIP_IPv4_0:80=^Service__testns_foo__TCP__80__node__router__template__IPv4 template ipv4",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantVars := []ovsdbnb.TemplateVar{
		{Chassis: "chassis-a", Name: "Service__testns_foo__TCP__80__node__router__template__IPv4", Value: "192.168.0.1:8080"},
		{Chassis: "chassis-b", Name: "Service__testns_foo__TCP__80__node__router__template__IPv4", Value: "192.168.0.2:9090"},
		{Chassis: "chassis-a", Name: "Service__testns_foo__TCP__80__node__switch__template__IPv4", Value: "192.168.0.1:8080"},
		{Chassis: "chassis-b", Name: "Service__testns_foo__TCP__80__node__switch__template__IPv4", Value: "192.168.0.2:9090"},
	}
	if !slices.Equal(vars, wantVars) {
		t.Errorf("template vars\n%v\nwant\n%v", vars, wantVars)
	}
}

// services_controller_test "NodePort service, multiple IP addresses,
// ETP=cluster": a dual-stack NodePort on a node with three IPv4 and two
// IPv6 host addresses is one merged template load balancer per family
// (node_switch_template_<family>_merged, in both template groups), one VIP
// per NODEIP variable, and the NODEIP variables of the chassis.
func TestOVNKNodePortMultipleIPsTemplates(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "testns"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIP: "192.168.1.1", ClusterIPs: []string{"192.168.1.1", "fd00::7777:0:0:1"},
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
		Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30123}},
	}}
	tcp, port := corev1.ProtocolTCP, int32(3456)
	slice := func(at discoveryv1.AddressType, addrs ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "testns", Name: "foo" + string(at),
			Labels: map[string]string{discoveryv1.LabelServiceName: "foo"}}, AddressType: at,
			Ports: []discoveryv1.EndpointPort{{Protocol: &tcp, Port: &port}}}
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: new("node-a")})
		}
		return s
	}
	node := Node{Name: "node-a", Chassis: "chassis-a", IPs: []netip.Addr{
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.2.2.2"), netip.MustParseAddr("10.3.3.3"),
		netip.MustParseAddr("fd00::1:0:0:1"), netip.MustParseAddr("fd00::2:0:0:2")}}
	st, _ := ServiceState(svc, []*discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv4, "10.128.0.2", "10.128.0.3"),
		slice(discoveryv1.AddressTypeIPv6, "fe00::5555:0:0:2", "fe00::5555:0:0:3")}, []Node{node}, Options{})
	var got []string
	for _, lb := range st.LoadBalancers {
		got = append(got, lbString(lb))
	}
	v4, v6 := "10.128.0.2:3456,10.128.0.3:3456", "[fe00::5555:0:0:2]:3456,[fe00::5555:0:0:3]:3456"
	// OVN-Kubernetes' vector plus node-a's gateway router load balancer
	// (the backends are on node-a: localGatewayLBs).
	want := []string{
		"Service_testns/foo_TCP_cluster tcp routers= switches= groups=clusterLBGroup 192.168.1.1:80=" + v4 + " [fd00::7777:0:0:1]:80=" + v6,
		"Service_testns/foo_TCP_node_switch_template_IPv4_merged tcp routers= switches= groups=clusterSwitchLBGroup,clusterRouterLBGroup" +
			" ^NODEIP_IPv4_0:30123=" + v4 + " ^NODEIP_IPv4_1:30123=" + v4 + " ^NODEIP_IPv4_2:30123=" + v4 + " template ipv4",
		"Service_testns/foo_TCP_node_switch_template_IPv6_merged tcp routers= switches= groups=clusterSwitchLBGroup,clusterRouterLBGroup" +
			" ^NODEIP_IPv6_0:30123=" + v6 + " ^NODEIP_IPv6_1:30123=" + v6 + " template ipv6",
		"Service_testns/foo_TCP_nodeport_router_node-a tcp routers=GR_node-a switches= groups= 10.0.0.1:30123=" + v4 + " 10.2.2.2:30123=" + v4 +
			" 10.3.3.3:30123=" + v4 + " [fd00::1:0:0:1]:30123=" + v6 + " [fd00::2:0:0:2]:30123=" + v6,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(st.TemplateVars) != 0 {
		t.Errorf("a Service with the same backends on every node needs no target variables: %v", st.TemplateVars)
	}
	vars, counts := NodeIPTemplates([]Node{node})
	if counts != [2]int{3, 2} || len(vars) != 5 || vars[0] != (ovsdbnb.TemplateVar{Chassis: "chassis-a", Name: "NODEIP_IPv4_0", Value: "10.0.0.1"}) ||
		vars[4] != (ovsdbnb.TemplateVar{Chassis: "chassis-a", Name: "NODEIP_IPv6_1", Value: "fd00::2:0:0:2"}) {
		t.Errorf("NODEIP variables %v (counts %v)", vars, counts)
	}
	if o := st.LoadBalancers[1].Options; o["hairpin_snat_ip"] != "169.254.169.5 fd69::5" || o["neighbor_responder"] != "none" || o["reject"] != "true" {
		t.Errorf("options %v, want servicesOptions()", o)
	}
	// The gateway router load balancer gives GR_node-a the flows the
	// template gives it: the same options but the template's own.
	rt, tpl := maps.Clone(st.LoadBalancers[3].Options), maps.Clone(st.LoadBalancers[1].Options)
	delete(tpl, "template")
	delete(tpl, "address-family")
	if !maps.Equal(rt, tpl) {
		t.Errorf("gateway router load balancer options %v, template's %v", rt, tpl)
	}
}

// TemplateName is ovn-k's makeTemplateName (its doc's example).
func TestOVNKTemplateName(t *testing.T) {
	if got := TemplateName("Service_default/node-port-svc_UDP_30957_node_router_template_IPv4"); got != "Service__default_node_port_svc__UDP__30957__node__router__template__IPv4" {
		t.Errorf("TemplateName = %s", got)
	}
}
