package scale

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/kubewatch"
	"github.com/ovnedge/ovnedge/lbsvc"
)

// nodeSnapshot is what node 0's instance holds of the cluster of shape
// s: every Node, Namespace, Service (with the ClusterIP and NodePort the
// apiserver would give it), EndpointSlice and EgressIP, and no pod.
func nodeSnapshot(s Shape) desired.Snapshot {
	var snap desired.Snapshot
	for n := range s.Nodes {
		snap.Nodes = append(snap.Nodes, Node(n))
	}
	for n := range s.Namespaces {
		snap.Namespaces = append(snap.Namespaces, Namespace(n))
	}
	for j := range s.Services {
		svc := Service(j)
		svc.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", j/250, j%250+1)
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		if svc.Spec.Type != "ClusterIP" {
			svc.Spec.Ports[0].NodePort = int32(30000 + j%2768)
		}
		snap.Services = append(snap.Services, svc)
		snap.EndpointSlices = append(snap.EndpointSlices, EndpointSlice(j, Endpoints(j)))
	}
	for k := range s.EgressIPs {
		snap.EgressIPs = append(snap.EgressIPs, EgressIP(k))
	}
	return snap
}

// BenchmarkNodePass is the desired state of one pass of node 0's
// instance (desired.ComputeNode, with NodeArgs' settings and a bridge
// MAC) on the scale benchmark's cluster of each size after one Service
// changed: the part of a node's event -> bridge time that grows with the
// cluster, as every event of every Service, EndpointSlice, Node or
// EgressIP is a pass on every node. l2=true is with
// --enable-l2-announce (every VIP's owner elected among every healthy
// node); cache=true is the daemon's (lbsvc.GatewayCache and
// lbsvc.Elections), cache=false every Service built and every VIP
// elected again.
func BenchmarkNodePass(b *testing.B) {
	for _, pods := range []int{1000, 10000, 50000, 150000} {
		s := nodeSnapshot(ShapeFor(pods))
		for _, l2 := range []bool{false, true} {
			cfg, _, err := daemon.ParseConfig("bench", []string{"--node-name=" + NodeName(0), "--gateway-flows=true",
				"--cluster-subnets=" + ClusterSubnet + "/" + fmt.Sprint(HostPrefix), "--gateway-v4-join-subnet=" + JoinSubnet,
				"--gateway-v4-masquerade-subnet=169.254.169.0/29", "--enable-egress-ip=true", "--uplink=eth0",
				"--bridge-mac=0a:58:0a:00:00:01", "--enable-l2-announce=" + fmt.Sprint(l2)})
			if err != nil {
				b.Fatal(err)
			}
			p := daemon.ParamsFrom(cfg)
			for _, cached := range []bool{false, true} {
				p.GatewayCache, p.Elections = nil, nil
				if cached {
					p.GatewayCache, p.Elections = &lbsvc.GatewayCache{}, &lbsvc.Elections{}
				}
				b.Run(fmt.Sprintf("pods=%d/l2=%t/cache=%t", pods, l2, cached), func(b *testing.B) {
					for i := 0; b.Loop(); i++ {
						// An event: one Service replaced, as an informer
						// does, in a new list, as kubewatch's.
						j := i % len(s.Services)
						s.Services = slices.Clone(s.Services)
						s.Services[j] = s.Services[j].DeepCopy()
						ns, err := desired.ComputeNode(s, p, NodeName(0))
						if err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(float64(len(ns.Sets)), "flowsets")
						b.ReportMetric(float64(len(ns.Announce)), "announced")
					}
				})
			}
		}
	}
}

// TestTrimForNodeKeepsNodeState: node instances keep their Services,
// EndpointSlices and EgressIPs trimmed (kubewatch.TrimForNode: ClusterIP
// Services, their EndpointSlices and EgressIPs that give the node no IP
// stubbed, other nodes' endpoints compacted); the desired state of two
// nodes of the scale benchmark's 10,000-pod cluster, with and without L2
// announcements and BGP, is the same from the trimmed objects as from the
// whole ones. The cluster has every kind of Service the benchmark makes
// (ClusterIP, NodePort, LoadBalancer with ingress), plus ExternalIP
// Services with externalTrafficPolicy Local and Cluster and host-network
// endpoints, and a ClusterIP Service whose endpoints are on the host
// network.
func TestTrimForNodeKeepsNodeState(t *testing.T) {
	whole := nodeSnapshot(ShapeFor(10000))
	for j := range 5 {
		name := fmt.Sprintf("trim-%d", j)
		svc := nodeService(name, NodeNewVIP(j), j%2 == 0)
		if j == 4 { // a ClusterIP Service of host-network endpoints
			svc.Spec.ExternalIPs, svc.Spec.ExternalTrafficPolicy = nil, ""
		}
		svc.Spec.ClusterIP = fmt.Sprintf("10.97.0.%d", j+1)
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		whole.Services = append(whole.Services, svc)
		slice := EndpointSlice(0, nil)
		slice.Name, slice.Labels = name+"-1", map[string]string{discoveryv1.LabelServiceName: name}
		slice.Endpoints = nodeEndpoints(j >= 2)
		whole.EndpointSlices = append(whole.EndpointSlices, slice)
	}
	// The first EgressIPs assigned: to nodes 0, 1, 2, 0, 1, 2, ...
	for k, u := range whole.EgressIPs[:12] {
		items := []any{map[string]any{"node": NodeName(k % 3), "egressIP": EgressIPAddr(k).String()}}
		if err := unstructured.SetNestedSlice(u.Object, items, "status", "items"); err != nil {
			t.Fatal(err)
		}
	}
	trimmed := whole
	trimmed.Services, trimmed.EndpointSlices = nil, nil
	stubs := 0
	stubbed := map[string]bool{} // their slices are stubs too, and not listed
	for _, svc := range whole.Services {
		c, kept := kubewatch.TrimForNode(svc.DeepCopy(), NodeName(0)).(*corev1.Service)
		if !kept { // a stub: the node's Watcher lists none
			stubs++
			stubbed[svc.Namespace+"/"+svc.Name] = true
			continue
		}
		trimmed.Services = append(trimmed.Services, c)
	}
	if stubs < len(whole.Services)*8/10 {
		t.Fatalf("%d of %d Services stubbed", stubs, len(whole.Services))
	}
	for _, node := range []string{NodeName(0), NodeName(1)} {
		trimmed.EndpointSlices, trimmed.EgressIPs = nil, nil
		for _, u := range whole.EgressIPs {
			if c, kept := kubewatch.TrimForNode(u.DeepCopy(), node).(*unstructured.Unstructured); kept {
				trimmed.EgressIPs = append(trimmed.EgressIPs, c)
			}
		}
		if len(trimmed.EgressIPs) != 4 {
			t.Fatalf("%s: %d EgressIPs kept, want the 4 assigned to it", node, len(trimmed.EgressIPs))
		}
		for _, s := range whole.EndpointSlices {
			if stubbed[s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName]] {
				continue
			}
			trimmed.EndpointSlices = append(trimmed.EndpointSlices, kubewatch.TrimForNode(s.DeepCopy(), node).(*discoveryv1.EndpointSlice))
		}
		for _, flags := range [][]string{{"--enable-l2-announce=false"}, {"--enable-l2-announce=true"},
			{"--enable-bgp=true", "--bgp-peer-address=172.18.0.1", "--bgp-announce-egress-ips=true"}} {
			cfg, _, err := daemon.ParseConfig("test", append([]string{"--node-name=" + node, "--gateway-flows=true",
				"--cluster-subnets=" + ClusterSubnet + "/" + fmt.Sprint(HostPrefix), "--gateway-v4-join-subnet=" + JoinSubnet,
				"--gateway-v4-masquerade-subnet=169.254.169.0/29", "--enable-egress-ip=true", "--uplink=eth0",
				"--bridge-mac=0a:58:0a:00:00:01"}, flags...))
			if err != nil {
				t.Fatal(err)
			}
			p := daemon.ParamsFrom(cfg)
			w, err1 := desired.ComputeNode(whole, p, node)
			c, err2 := desired.ComputeNode(trimmed, p, node)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s %v: %v, %v", node, flags, err1, err2)
			}
			if !reflect.DeepEqual(w, c) {
				t.Errorf("%s %v: the node's desired state differs from trimmed objects", node, flags)
			}
			if len(w.Sets) == 0 || len(w.Held) != 4 {
				t.Errorf("%s %v: %d flow sets, %d egress IPs held, want some and 4", node, flags, len(w.Sets), len(w.Held))
			}
		}
	}
	t.Logf("%d of %d Services stubbed", stubs, len(whole.Services))
}
