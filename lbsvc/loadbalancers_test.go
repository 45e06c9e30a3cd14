package lbsvc_test

import (
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

func TestBuildGolden(t *testing.T) {
	states, events := lbsvc.Build(cluster(), lbsvc.Options{})
	if len(events) != 0 {
		t.Errorf("events: %v", events)
	}
	flowtest.Golden(t, "../testdata/lbsvc/cluster.nb", lbsvc.Format(states))

	// Deterministic: shuffled inputs give the same rows.
	in := cluster()
	slices.Reverse(in.Services)
	slices.Reverse(in.EndpointSlices)
	again, _ := lbsvc.Build(in, lbsvc.Options{})
	if !reflect.DeepEqual(states, again) {
		t.Errorf("Build depends on input order:\n%s", flowtest.Diff(string(lbsvc.Format(states)), string(lbsvc.Format(again))))
	}
}

// vips returns the vips of the load balancer named suffix
// ("Service_default/<svc>_<suffix>") in the service's state.
func vips(t *testing.T, states map[ovsdbnb.Owner]ovsdbnb.State, svcName, suffix string) (ovsdbnb.LoadBalancer, bool) {
	t.Helper()
	name := "Service_default/" + svcName + "_" + suffix
	for _, lb := range states[lbsvc.ServiceOwner("default", svcName)].LoadBalancers {
		if lb.Name == name {
			return lb, true
		}
	}
	return ovsdbnb.LoadBalancer{}, false
}

func TestBuildSemantics(t *testing.T) {
	states, _ := lbsvc.Build(cluster(), lbsvc.Options{})
	tests := []struct {
		name, svc, lb string
		vips          map[string]string
		options       map[string]string
		routers       []string
		switches      []string
		groups        []string
	}{
		{name: "ready or unset endpoints, by port name", svc: "web", lb: "TCP_cluster",
			vips:   map[string]string{"10.96.0.10:80": "10.244.1.3:8080,10.244.1.5:8080,10.244.2.3:8080"},
			groups: []string{"clusterLBGroup"}},
		{name: "serving+terminating when none ready", svc: "draining", lb: "TCP_cluster",
			vips:   map[string]string{"10.96.0.40:80": "10.244.1.30:80"},
			groups: []string{"clusterLBGroup"}},
		{name: "FQDN slices ignored: reject", svc: "fqdn", lb: "TCP_cluster",
			vips:   map[string]string{"10.96.0.50:80": ""},
			groups: []string{"clusterLBGroup"}},
		{name: "ETP=Cluster: external and ingress VIPs on the cluster LB", svc: "lb-cluster", lb: "TCP_cluster",
			vips: map[string]string{"10.96.0.20:80": "10.244.1.10:8080,10.244.2.10:8080",
				"172.18.0.50:80": "10.244.1.10:8080,10.244.2.10:8080", "172.18.0.60:80": "10.244.1.10:8080,10.244.2.10:8080"},
			options: map[string]string{"affinity_timeout": "600", "skip_snat": "false"},
			groups:  []string{"clusterLBGroup"}},
		{name: "ETP=Cluster: one LB per protocol", svc: "lb-cluster", lb: "UDP_cluster",
			vips: map[string]string{"10.96.0.20:53": "10.244.1.10:5353,10.244.2.10:5353",
				"172.18.0.50:53": "10.244.1.10:5353,10.244.2.10:5353", "172.18.0.60:53": "10.244.1.10:5353,10.244.2.10:5353"},
			groups: []string{"clusterLBGroup"}},
		// An affinity timeout keeps NodePorts per node (no templates); equal
		// router and switch rules make one node_router+switch_<node> LB,
		// with every host address of the node as a VIP (the IPv6 one of an
		// IPv4 Service rejects), as OVN-Kubernetes writes it.
		{name: "NodePort ETP=Cluster on the router and switch", svc: "lb-cluster", lb: "TCP_node_router+switch_node1",
			vips:    map[string]string{"172.18.0.2:30080": "10.244.1.10:8080,10.244.2.10:8080", "[fc00:f853:ccd:e793::2]:30080": ""},
			options: map[string]string{"skip_snat": "false"}, routers: []string{"GR_node1"}, switches: []string{"node1"}},
		{name: "NodePort on the switch", svc: "lb-cluster", lb: "TCP_node_router+switch_node2",
			vips:    map[string]string{"172.18.0.3:30080": "10.244.1.10:8080,10.244.2.10:8080", "[fc00:f853:ccd:e793::3]:30080": ""},
			routers: []string{"GR_node2"}, switches: []string{"node2"}},
		{name: "ETP=Local: only ClusterIPs cluster-wide", svc: "lb-local", lb: "TCP_cluster",
			vips:   map[string]string{"10.96.0.30:443": "10.244.1.20:8443", "[fd00:10:96::30]:443": "[fd00:10:244:2::20]:8443"},
			groups: []string{"clusterLBGroup"}},
		{name: "ETP=Local: local backends, no SNAT", svc: "lb-local", lb: "TCP_node_local_router_node1",
			vips:    map[string]string{"172.18.0.70:443": "10.244.1.20:8443", "172.18.0.2:30443": "10.244.1.20:8443"},
			options: map[string]string{"skip_snat": "true", "reject": "true"}, routers: []string{"GR_node1"}},
		{name: "ETP=Local: local backends, no SNAT (IPv6)", svc: "lb-local", lb: "TCP_node_local_router_node2",
			vips:    map[string]string{"[2001:db8::70]:443": "[fd00:10:244:2::20]:8443", "[fc00:f853:ccd:e793::3]:30443": "[fd00:10:244:2::20]:8443"},
			options: map[string]string{"skip_snat": "true"}, routers: []string{"GR_node2"}},
		// OVN-Kubernetes puts a VIP without local endpoints on the plain
		// router LB (nothing to skip SNAT for): it rejects.
		{name: "ETP=Local: none local rejects", svc: "lb-local", lb: "TCP_node_router_node2",
			vips:    map[string]string{"172.18.0.70:443": "", "172.18.0.3:30443": ""},
			options: map[string]string{"skip_snat": "false"}, routers: []string{"GR_node2"}},
		// The switch: every backend, and the ETP=Local masquerade VIP
		// (169.254.169.3, fd69::3) with the local ones only.
		{name: "ETP=Local: pods reach every backend", svc: "lb-local", lb: "TCP_node_switch_node2",
			vips: map[string]string{"172.18.0.70:443": "10.244.1.20:8443", "[2001:db8::70]:443": "[fd00:10:244:2::20]:8443",
				"172.18.0.3:30443": "10.244.1.20:8443", "[fc00:f853:ccd:e793::3]:30443": "[fd00:10:244:2::20]:8443",
				"169.254.169.3:30443": "", "[fd69::3]:30443": "[fd00:10:244:2::20]:8443"},
			switches: []string{"node2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lb, ok := vips(t, states, tt.svc, tt.lb)
			if !ok {
				t.Fatalf("no load balancer %s of %s in\n%s", tt.lb, tt.svc, lbsvc.Format(states))
			}
			if !reflect.DeepEqual(lb.VIPs, tt.vips) {
				t.Errorf("vips = %v, want %v", lb.VIPs, tt.vips)
			}
			for k, v := range tt.options {
				if lb.Options[k] != v {
					t.Errorf("options:%s = %q, want %q", k, lb.Options[k], v)
				}
			}
			for _, k := range []string{"reject", "event", "neighbor_responder", "hairpin_snat_ip"} {
				want := map[string]string{"reject": "true", "event": "false", "neighbor_responder": "none", "hairpin_snat_ip": "169.254.169.5 fd69::5"}[k]
				if lb.Options[k] != want {
					t.Errorf("options:%s = %q, want %q", k, lb.Options[k], want)
				}
			}
			if lb.ExternalIDs[ovsdbnb.KeyKind] != "Service" || lb.ExternalIDs[ovsdbnb.KeyOwner] != "default/"+tt.svc {
				t.Errorf("external_ids = %v", lb.ExternalIDs)
			}
			if !slices.Equal(lb.Routers, tt.routers) || !slices.Equal(lb.Switches, tt.switches) || !slices.Equal(lb.Groups, tt.groups) {
				t.Errorf("attached to routers %v switches %v groups %v, want %v %v %v",
					lb.Routers, lb.Switches, lb.Groups, tt.routers, tt.switches, tt.groups)
			}
		})
	}
	if st := states[lbsvc.ServiceOwner("default", "headless")]; len(st.LoadBalancers) != 0 {
		t.Errorf("headless service got load balancers: %v", st.LoadBalancers)
	}
	g := states[ovsdbnb.Owner{Type: lbsvc.OwnerLoadBalancerGroup, Name: lbsvc.DefaultClusterLBGroup}].Groups
	want := []ovsdbnb.LoadBalancerGroup{{Name: "clusterLBGroup", Switches: []string{"node1", "node2"}, Routers: []string{"GR_node1", "GR_node2"}},
		{Name: "clusterSwitchLBGroup", Switches: []string{"node1", "node2"}}, {Name: "clusterRouterLBGroup", Routers: []string{"GR_node1", "GR_node2"}}}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("group = %+v, want %+v", g, want)
	}
}

func TestBuildBadInput(t *testing.T) {
	in := cluster()
	bad := svc("bad", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.99"}, port("", corev1.ProtocolTCP, 80, 0, "80"),
		port("", "ICMP", 81, 0, "81"))
	bad.Spec.ExternalIPs = []string{"not-an-ip", "127.0.0.1", "172.18.0.99"}
	in.Services = append(in.Services, bad, nil)
	in.EndpointSlices = append(in.EndpointSlices, nil,
		slice("bad-a", "bad", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("", corev1.ProtocolTCP, 80)},
			ready("garbage", "node1"), ready("10.244.1.99", "node1")))
	states, events := lbsvc.Build(in, lbsvc.Options{})
	var reasons []string
	for _, e := range events {
		if e.Object.Name != "bad" || e.Type != corev1.EventTypeWarning {
			t.Errorf("unexpected event %v", e)
		}
		reasons = append(reasons, e.Reason)
	}
	if want := []string{"InvalidServiceIP", "InvalidServiceIP", "UnsupportedProtocol"}; !slices.Equal(reasons, want) {
		t.Errorf("event reasons %v, want %v (%v)", reasons, want, events)
	}
	lb, _ := vips(t, states, "bad", "TCP_cluster")
	if want := map[string]string{"10.96.0.99:80": "10.244.1.99:80", "172.18.0.99:80": "10.244.1.99:80"}; !reflect.DeepEqual(lb.VIPs, want) {
		t.Errorf("bad service vips %v, want %v", lb.VIPs, want)
	}
	// Other services are unaffected.
	good, _ := lbsvc.Build(cluster(), lbsvc.Options{})
	delete(states, lbsvc.ServiceOwner("default", "bad"))
	if !reflect.DeepEqual(states, good) {
		t.Errorf("a bad service changed the others:\n%s", flowtest.Diff(string(lbsvc.Format(good)), string(lbsvc.Format(states))))
	}
}

// One Service recomputed alone equals its part of the full Build.
func TestServiceStateMatchesBuild(t *testing.T) {
	in := cluster()
	states, _ := lbsvc.Build(in, lbsvc.Options{})
	bySvc := lbsvc.SlicesByService(in.EndpointSlices)
	for _, s := range in.Services {
		st, _ := lbsvc.ServiceState(s, bySvc["default/"+s.Name], in.Nodes, lbsvc.Options{})
		if !reflect.DeepEqual(st, states[lbsvc.ServiceOwner("default", s.Name)]) {
			t.Errorf("%s: ServiceState differs from Build", s.Name)
		}
	}
}

// TestUnderlayPreferLocal: the nginx-lb of Kube-OVN's MetalLB underlay
// guide (externalTrafficPolicy=
// Local, VIP 10.180.204.252 of underlay-subnet) is on a load balancer of
// the underlay switch only. Without prefer-local every endpoint serves
// it; with it, a template load balancer whose per-chassis backends are the
// node's own endpoints (node3 has none: all of them, Kube-OVN's
// prefer_local_backend). An ETP=Cluster Service ignores prefer-local.
func TestUnderlayPreferLocal(t *testing.T) {
	pool, err := ipam.NewPool("underlay-subnet", "10.180.204.0/24", []string{"10.180.204.250", "10.180.204.251", "10.180.204.252"})
	if err != nil {
		t.Fatal(err)
	}
	s := svc("nginx-lb", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.80"}, port("", corev1.ProtocolTCP, 80, 0, "80"))
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.180.204.252"}}
	eps := []*discoveryv1.EndpointSlice{slice("nginx-a", "nginx-lb", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{sport("", corev1.ProtocolTCP, 80)},
		ready("10.180.204.10", "node1"), ready("10.180.204.11", "node2"))}
	cluster := s.DeepCopy()
	cluster.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	under := []lbsvc.UnderlaySubnet{{Subnet: pool, EnableExternalLBAddress: true}}
	three := append(nodes(), lbsvc.Node{Name: "node3", Chassis: "chassis-node3"})
	const all = "10.180.204.10:80,10.180.204.11:80"
	const tmpl = "Service__default_nginx_lb__TCP__80__underlay__IPv4" // TemplateName of Service_default/nginx-lb_TCP_80_underlay_IPv4
	tests := []struct {
		name        string
		svc         *corev1.Service
		opts        lbsvc.Options
		lbs         map[string]string // load balancer name suffix -> VIP backends
		vars        string            // chassis=value of the template variable
		eventReason string
	}{
		{"without prefer-local: every endpoint", s, lbsvc.Options{Underlay: under},
			map[string]string{"underlay_underlay-subnet": all}, "", ""},
		{"prefer-local: the chassis' own endpoints", s, lbsvc.Options{Underlay: under, PreferLocal: true},
			map[string]string{"underlay_underlay-subnet_IPv4": "^" + tmpl},
			"chassis-node1=10.180.204.10:80 chassis-node2=10.180.204.11:80 chassis-node3=" + all, ""},
		{"ETP=Cluster: every endpoint", cluster, lbsvc.Options{Underlay: under, PreferLocal: true},
			map[string]string{"underlay_underlay-subnet": all}, "", ""},
		{"ls-ct-skip-dst-lport-ips warns", s, lbsvc.Options{Underlay: under, PreferLocal: true, LSCtSkipDstLportIPs: true},
			map[string]string{"underlay_underlay-subnet_IPv4": "^" + tmpl},
			"chassis-node1=10.180.204.10:80 chassis-node2=10.180.204.11:80 chassis-node3=" + all, "LSCtSkipDstLportIPs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, events := lbsvc.ServiceState(tt.svc, eps, three, tt.opts)
			got := map[string]string{}
			for _, lb := range st.LoadBalancers {
				if v, ok := lb.VIPs["10.180.204.252:80"]; ok {
					name := strings.TrimPrefix(lb.Name, "Service_default/nginx-lb_TCP_")
					got[name] = v
					if !slices.Equal(lb.Switches, []string{"underlay-subnet"}) || len(lb.Routers)+len(lb.Groups) != 0 {
						t.Errorf("%s attached to switches %v, routers %v, groups %v", name, lb.Switches, lb.Routers, lb.Groups)
					}
					if tmpl := strings.HasSuffix(name, "_IPv4"); (lb.Options["template"] == "true") != tmpl ||
						tmpl && lb.Options["address-family"] != "ipv4" {
						t.Errorf("%s options %v", name, lb.Options)
					}
				}
			}
			if !maps.Equal(got, tt.lbs) {
				t.Errorf("VIP on %v, want %v", got, tt.lbs)
			}
			var vars []string
			for _, v := range st.TemplateVars {
				if v.Name == tmpl {
					vars = append(vars, v.Chassis+"="+v.Value)
				}
			}
			if strings.Join(vars, " ") != tt.vars {
				t.Errorf("template variables %v, want %q", vars, tt.vars)
			}
			var reasons []string
			for _, e := range events {
				reasons = append(reasons, e.Reason)
			}
			if tt.eventReason == "" && len(reasons) > 0 || tt.eventReason != "" && !slices.Equal(reasons, []string{tt.eventReason}) {
				t.Errorf("events %v, want %q", events, tt.eventReason)
			}
		})
	}

	// A VIP in the subnet but not excluded, or in a subnet without
	// enableExternalLBAddress, gets a warning.
	s2 := s.DeepCopy()
	s2.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.180.204.20"}}
	_, events := lbsvc.ServiceState(s2, eps, nodes(), lbsvc.Options{Underlay: under})
	if len(events) != 1 || events[0].Reason != "UnderlayVIPNotExcluded" {
		t.Errorf("not excluded VIP: events %v", events)
	}
	_, events = lbsvc.ServiceState(s, eps, nodes(), lbsvc.Options{Underlay: []lbsvc.UnderlaySubnet{{Subnet: pool}}})
	if len(events) != 1 || events[0].Reason != "UnderlayLBAddressDisabled" {
		t.Errorf("disabled subnet: events %v", events)
	}
}

func TestVIPOwners(t *testing.T) {
	in := cluster()
	healthy := []string{"node1", "node2", "node3"}
	owners := lbsvc.VIPOwners(in.Services, in.EndpointSlices, healthy)
	count := map[netip.Addr]int{}
	for node, vs := range owners {
		if !slices.Contains(healthy, node) {
			t.Errorf("VIPs %v owned by unhealthy node %s", vs, node)
		}
		for _, v := range vs {
			count[v]++
		}
	}
	for _, v := range []string{"172.18.0.50", "172.18.0.60", "172.18.0.70", "2001:db8::70"} {
		if count[netip.MustParseAddr(v)] != 1 {
			t.Errorf("VIP %s has %d owners, want exactly 1: %v", v, count[netip.MustParseAddr(v)], owners)
		}
	}
	// ETP=Local: only nodes with a ready local endpoint (node1 for the v4
	// endpoint, node2 for the v6 one: either may own either VIP).
	for node, vs := range owners {
		for _, v := range vs {
			if (v.String() == "172.18.0.70" || v.String() == "2001:db8::70") && node == "node3" {
				t.Errorf("ETP=Local VIP %s owned by %s, which has no endpoint", v, node)
			}
		}
	}
	// Losing its owner moves a VIP; no candidate, no owner.
	vip := netip.MustParseAddr("172.18.0.50")
	var first string
	for n, vs := range owners {
		if slices.Contains(vs, vip) {
			first = n
		}
	}
	rest := slices.DeleteFunc(slices.Clone(healthy), func(n string) bool { return n == first })
	moved := lbsvc.VIPOwners(in.Services, in.EndpointSlices, rest)
	if slices.Contains(moved[first], vip) || len(moved) == 0 {
		t.Errorf("VIP %s did not move off %s: %v", vip, first, moved)
	}
	if got := lbsvc.VIPOwners(in.Services, in.EndpointSlices, nil); len(got) != 0 {
		t.Errorf("owners without healthy nodes: %v", got)
	}
}

func TestServedVIPs(t *testing.T) {
	in := cluster()
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	// ETP=Cluster VIPs from every node; the ETP=Local ones (.70 and
	// 2001:db8::70) only from the nodes with a ready endpoint.
	for node, want := range map[string][]netip.Addr{
		"node1": addrs("172.18.0.50", "172.18.0.60", "172.18.0.70", "2001:db8::70"),
		"node2": addrs("172.18.0.50", "172.18.0.60", "172.18.0.70", "2001:db8::70"),
		"node3": addrs("172.18.0.50", "172.18.0.60"),
	} {
		if got := lbsvc.ServedVIPs(in.Services, in.EndpointSlices, node); !slices.Equal(got, want) {
			t.Errorf("%s serves %v, want %v", node, got, want)
		}
	}
	if got := lbsvc.ServedVIPs(in.Services, nil, "node1"); !slices.Equal(got, addrs("172.18.0.50", "172.18.0.60")) {
		t.Errorf("without endpoints node1 serves %v, want the ETP=Cluster VIPs only", got)
	}
}

// TestUnderlayOwners: in standalone mode an underlay VIP is announced by
// one healthy node with a ready endpoint, externalTrafficPolicy=Cluster
// too (node3, without one, has no patch port to steer through); other
// VIPs are not underlay VIPs.
func TestUnderlayOwners(t *testing.T) {
	pool, err := ipam.NewPool("underlay-subnet", "10.180.204.0/24", []string{"10.180.204.250..10.180.204.252"})
	if err != nil {
		t.Fatal(err)
	}
	opts := lbsvc.Options{Underlay: []lbsvc.UnderlaySubnet{{Subnet: pool, EnableExternalLBAddress: true}}}
	s := svc("nginx-lb", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.80"}, port("", corev1.ProtocolTCP, 80, 0, "80"))
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.180.204.250"}}
	s.Spec.ExternalIPs = []string{"172.18.0.50"}
	eps := []*discoveryv1.EndpointSlice{slice("nginx-a", "nginx-lb", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{sport("", corev1.ProtocolTCP, 80)},
		ready("10.180.204.10", "node1"), ready("10.180.204.11", "node2"))}
	for _, healthy := range [][]string{{"node1", "node2", "node3"}, {"node2", "node3"}, {"node3"}} {
		got := lbsvc.UnderlayOwners([]*corev1.Service{s}, eps, healthy, opts)
		var owners []string
		for n, vips := range got {
			if !slices.Equal(vips, []netip.Addr{netip.MustParseAddr("10.180.204.250")}) {
				t.Errorf("healthy %v: %s owns %v", healthy, n, vips)
			}
			owners = append(owners, n)
		}
		want := slices.DeleteFunc(slices.Clone(healthy), func(n string) bool { return n == "node3" })
		if len(want) == 0 && len(owners) != 0 || len(want) > 0 && (len(owners) != 1 || !slices.Contains(want, owners[0])) {
			t.Errorf("healthy %v: owners %v, want one of %v", healthy, owners, want)
		}
	}
}
