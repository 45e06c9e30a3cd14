package egresssvc_test

import (
	"maps"
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/egresssvc"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// The fixtures of OVN-Kubernetes' egressservice_cluster_test.go: node1
// (10.128.1.0/24) and node2 (10.128.2.0/24), Services of namespace testns
// with ingress IP 1.1.1.1, cluster subnets 10.128.0.0/16 and fe00::/16.
var cluster = []netip.Prefix{netip.MustParsePrefix("10.128.0.0/16"), netip.MustParsePrefix("fe00::/16")}

type node struct {
	name     string
	labels   map[string]string
	notReady bool
}

func (n node) objects() (*corev1.Node, *ovnknode.Node) {
	st := corev1.ConditionTrue
	if n.notReady {
		st = corev1.ConditionFalse
	}
	k := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
	i := n.name[len(n.name)-1:]
	p := &ovnknode.Node{Name: n.name, Ready: !n.notReady, Subnets: []netip.Prefix{
		netip.MustParsePrefix("10.128." + i + ".0/24"), netip.MustParsePrefix("fe00:10:128:" + i + "::/64")}}
	return k, p
}

type esvc struct {
	name, sourceIPBy, host string
	selector               map[string]string
	badSelector            bool
	local                  bool     // the Service's externalTrafficPolicy=Local
	noService, clusterIP   bool     // no Service; a ClusterIP Service
	eps                    []string // "ip@node" ("ip@" no node)
}

type world struct {
	nodes []node
	ess   []esvc
	down  map[string]bool // unreachable nodes
}

func (w world) input() egresssvc.Input {
	in := egresssvc.Input{Parsed: map[string]*ovnknode.Node{}}
	svcs, slices := map[string]*corev1.Service{}, map[string][]*discoveryv1.EndpointSlice{}
	for _, n := range w.nodes {
		k, p := n.objects()
		in.Nodes = append(in.Nodes, k)
		in.Parsed[n.name] = p
	}
	for _, e := range w.ess {
		es := &egressv1.EgressService{ObjectMeta: metav1.ObjectMeta{Namespace: "testns", Name: e.name},
			Spec:   egressv1.EgressServiceSpec{SourceIPBy: e.sourceIPBy, NodeSelector: metav1.LabelSelector{MatchLabels: e.selector}},
			Status: egressv1.EgressServiceStatus{Host: e.host}}
		if e.badSelector {
			es.Spec.NodeSelector.MatchLabels = map[string]string{"a:b": "c&"}
		}
		in.EgressServices = append(in.EgressServices, es)
		key := "testns/" + e.name
		if !e.noService {
			svcs[key] = lbService(e.name, e.local, e.clusterIP)
		}
		slices[key] = []*discoveryv1.EndpointSlice{slice(e.name, e.eps)}
	}
	in.Service = func(k string) *corev1.Service { return svcs[k] }
	in.Slices = func(k string) []*discoveryv1.EndpointSlice { return slices[k] }
	in.Reachable = func(n string) bool { return !w.down[n] }
	return in
}

func lbService(name string, local, clusterIP bool) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "testns", Name: name},
		Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"10.96.0.10"}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.1.1.1"}}}}}
	if local {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	if clusterIP {
		s.Spec.Type, s.Status = corev1.ServiceTypeClusterIP, corev1.ServiceStatus{}
	}
	return s
}

func slice(svc string, eps []string) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "testns", Name: svc + "-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4}
	for _, e := range eps {
		ip, n := e, ""
		for i := range e {
			if e[i] == '@' {
				ip, n = e[:i], e[i+1:]
			}
		}
		ep := discoveryv1.Endpoint{Addresses: []string{ip}}
		if n != "" {
			ep.NodeName = &n
		}
		sl.Endpoints = append(sl.Endpoints, ep)
	}
	return sl
}

// TestHosts ports the cases of OVN-Kubernetes'
// go-controller/pkg/clustermanager/egressservice_cluster_test.go, each
// step a row whose EgressServices carry the host the previous step chose.
func TestHosts(t *testing.T) {
	albus, severus := map[string]string{"firstName": "Albus"}, map[string]string{"firstName": "Severus"}
	bison, lemur := map[string]string{"animal": "FlyingBison"}, map[string]string{"animal": "Lemur"}
	pants := map[string]string{"square": "pants"}
	pine, rock, moai := map[string]string{"home": "pineapple"}, map[string]string{"home": "rock"}, map[string]string{"home": "moai"}
	ep1, ep2 := []string{"10.128.1.5@node1"}, []string{"10.128.2.5@node2"}
	l1, l2 := egresssvc.Label("testns/svc1"), egresssvc.Label("testns/svc2")
	for _, c := range []struct {
		name      string
		w         world
		shared    bool
		hosts     map[string]string
		labels    map[string][]string
		eventsFor []string // reasons
	}{
		{"services: host by selector", world{nodes: []node{{"node1", albus, false}, {"node2", severus, false}},
			ess: []esvc{{name: "svc1", selector: albus, eps: ep1}}},
			false, map[string]string{"testns/svc1": "node1"}, map[string][]string{"node1": {l1}}, nil},
		{"services: sourceIPBy Network is ALL", world{nodes: []node{{"node1", albus, false}},
			ess: []esvc{{name: "svc1", sourceIPBy: egressv1.SourceIPNetwork, host: "node1", selector: albus, eps: ep1}}},
			false, map[string]string{"testns/svc1": "ALL"}, map[string][]string{}, nil},
		{"services: sourceIPBy Network on the shared gateway", world{nodes: []node{{"node1", albus, false}},
			ess: []esvc{{name: "svc1", sourceIPBy: egressv1.SourceIPNetwork, selector: albus, eps: ep1}}},
			true, map[string]string{"testns/svc1": ""}, map[string][]string{}, []string{egresssvc.ReasonUnsupported}},
		{"services: second service on its node", world{nodes: []node{{"node1", albus, false}, {"node2", severus, false}},
			ess: []esvc{{name: "svc1", sourceIPBy: egressv1.SourceIPNetwork, eps: ep1}, {name: "svc2", selector: severus, eps: ep2}}},
			false, map[string]string{"testns/svc1": "ALL", "testns/svc2": "node2"}, map[string][]string{"node2": {l2}}, nil},
		{"services: selector changed moves the host", world{nodes: []node{{"node1", albus, false}, {"node2", severus, false}},
			ess: []esvc{{name: "svc2", selector: albus, host: "node2", eps: ep2}}},
			false, map[string]string{"testns/svc2": "node1"}, map[string][]string{"node1": {l2}}, nil},
		{"labels: created", world{nodes: []node{{"node1", bison, false}, {"node2", lemur, false}},
			ess: []esvc{{name: "svc1", selector: bison, eps: ep1}}},
			false, map[string]string{"testns/svc1": "node1"}, map[string][]string{"node1": {l1}}, nil},
		{"labels: moved", world{nodes: []node{{"node1", bison, false}, {"node2", lemur, false}},
			ess: []esvc{{name: "svc1", selector: lemur, host: "node1", eps: ep1}}},
			false, map[string]string{"testns/svc1": "node2"}, map[string][]string{"node2": {l1}}, nil},
		{"labels: EgressService deleted", world{nodes: []node{{"node1", bison, false}, {"node2", lemur, false}}},
			false, map[string]string{}, map[string][]string{}, nil},
		{"invalid nodeSelector: nothing", world{nodes: []node{{"node1", nil, false}},
			ess: []esvc{{name: "svc1", badSelector: true, eps: ep1}}},
			false, map[string]string{"testns/svc1": ""}, map[string][]string{}, []string{egresssvc.ReasonInvalid}},
		{"invalid nodeSelector keeps the host", world{nodes: []node{{"node1", nil, false}},
			ess: []esvc{{name: "svc1", badSelector: true, host: "node1", eps: ep1}}},
			false, map[string]string{"testns/svc1": "node1"}, map[string][]string{"node1": {l1}}, []string{egresssvc.ReasonInvalid}},
		{"ETP=Local: no local endpoint", world{nodes: []node{{"node1", pants, false}},
			ess: []esvc{{name: "svc1", selector: pants, local: true, eps: ep2}}},
			false, map[string]string{"testns/svc1": ""}, map[string][]string{}, []string{egresssvc.ReasonNoHost}},
		{"ETP=Local: local endpoint added", world{nodes: []node{{"node1", pants, false}},
			ess: []esvc{{name: "svc1", selector: pants, local: true, eps: []string{"10.128.2.5@node2", "10.128.1.5@node1"}}}},
			false, map[string]string{"testns/svc1": "node1"}, map[string][]string{"node1": {l1}}, nil},
		{"ETP=Local: local endpoint gone", world{nodes: []node{{"node1", pants, false}},
			ess: []esvc{{name: "svc1", selector: pants, local: true, host: "node1", eps: ep2}}},
			false, map[string]string{"testns/svc1": ""}, map[string][]string{}, []string{egresssvc.ReasonNoHost}},
		{"nodes: one eligible", world{nodes: []node{{"node1", pine, false}, {"node2", rock, false}},
			ess: []esvc{{name: "svc1", selector: pine, eps: ep1}, {name: "svc2", selector: moai, eps: ep2}}},
			false, map[string]string{"testns/svc1": "node1", "testns/svc2": ""}, map[string][]string{"node1": {l1}}, []string{egresssvc.ReasonNoHost}},
		{"nodes: node1 NotReady, node2 relabelled", world{nodes: []node{{"node1", pine, true}, {"node2", moai, false}},
			ess: []esvc{{name: "svc1", selector: pine, host: "node1", eps: ep1}, {name: "svc2", selector: moai, eps: ep2}}},
			false, map[string]string{"testns/svc1": "", "testns/svc2": "node2"}, map[string][]string{"node2": {l2}}, []string{egresssvc.ReasonNoHost}},
		{"nodes: node2 deleted", world{nodes: []node{{"node1", pine, true}},
			ess: []esvc{{name: "svc2", selector: moai, host: "node2", eps: ep2}}},
			false, map[string]string{"testns/svc2": ""}, map[string][]string{}, []string{egresssvc.ReasonNoHost}},
		{"reachability: lost", world{nodes: []node{{"node1", nil, false}}, down: map[string]bool{"node1": true},
			ess: []esvc{{name: "svc1", host: "node1", eps: ep1}}},
			false, map[string]string{"testns/svc1": ""}, map[string][]string{}, []string{egresssvc.ReasonNoHost}},
		{"reachability: back", world{nodes: []node{{"node1", nil, false}},
			ess: []esvc{{name: "svc1", eps: ep1}}},
			false, map[string]string{"testns/svc1": "node1"}, map[string][]string{"node1": {l1}}, nil},
		// ovnedge's own cases.
		{"no Service, a ClusterIP Service, no endpoints, host endpoints only", world{nodes: []node{{"node1", nil, false}},
			ess: []esvc{{name: "a", noService: true, host: "node1", eps: ep1}, {name: "b", clusterIP: true, eps: ep1},
				{name: "c", host: "node1"}, {name: "d", eps: []string{"172.18.0.2@node1"}}}},
			false, map[string]string{"testns/a": "", "testns/b": "", "testns/c": "", "testns/d": ""}, map[string][]string{}, nil},
		{"fewest first, ties by name, kept hosts counted", world{nodes: []node{{"node1", nil, false}, {"node2", nil, false}, {"node3", nil, false}},
			ess: []esvc{{name: "a", host: "node2", eps: ep1}, {name: "b", eps: ep1}, {name: "c", eps: ep1}, {name: "d", eps: ep1}}},
			false, map[string]string{"testns/a": "node2", "testns/b": "node1", "testns/c": "node3", "testns/d": "node1"},
			map[string][]string{"node1": {egresssvc.Label("testns/b"), egresssvc.Label("testns/d")}, "node2": {egresssvc.Label("testns/a")}, "node3": {egresssvc.Label("testns/c")}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := egresssvc.Hosts(c.w.input(), egresssvc.Options{ClusterSubnets: cluster, SharedGateway: c.shared})
			if !maps.Equal(res.Hosts, c.hosts) {
				t.Errorf("hosts = %v, want %v", res.Hosts, c.hosts)
			}
			if !reflect.DeepEqual(res.Labels, c.labels) {
				t.Errorf("labels = %v, want %v", res.Labels, c.labels)
			}
			var reasons []string
			for _, e := range res.Events {
				reasons = append(reasons, e.Reason)
			}
			if !reflect.DeepEqual(reasons, c.eventsFor) {
				t.Errorf("events = %v, want reasons %v", res.Events, c.eventsFor)
			}
		})
	}
}
