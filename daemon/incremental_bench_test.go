package daemon

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/lbsvc"
)

// benchSize is a cluster of the incremental benchmarks.
type benchSize struct{ nodes, pods, svcs, eips int }

// eventSnapshot is scaleSnapshot's shape at any size, with pods labelled
// app=a or app=b and two EgressIPs per namespace, one for each app (a
// relabelled pod moves from one to the other), and every tenth Service a
// LoadBalancer.
func eventSnapshot(z benchSize) desired.Snapshot {
	var s desired.Snapshot
	namespaces := z.eips / 2
	for i := range z.nodes {
		s.Nodes = append(s.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node%d", i), Labels: map[string]string{"k8s.ovn.org/egress-assignable": ""},
				Annotations: map[string]string{
					"k8s.ovn.org/node-subnets":                   fmt.Sprintf(`{"default":["10.244.%d.0/24"]}`, i),
					"k8s.ovn.org/node-primary-ifaddr":            fmt.Sprintf(`{"ipv4":"172.18.%d.%d/16"}`, i/200, i%200+2),
					"k8s.ovn.org/node-gateway-router-lrp-ifaddr": fmt.Sprintf(`{"ipv4":"100.64.%d.%d/16"}`, i/200, i%200+3),
					"k8s.ovn.org/node-chassis-id":                fmt.Sprintf("chassis-%d", i),
				}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("172.18.%d.%d", i/200, i%200+2)}}},
		})
	}
	for i := range namespaces {
		s.Namespaces = append(s.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns%d", i),
			Labels: map[string]string{"tenant": fmt.Sprint(i)}}})
	}
	perNode := z.pods/z.nodes + 1
	for i := range z.pods {
		node := i % z.nodes
		ip := fmt.Sprintf("10.244.%d.%d", node, i/z.nodes%perNode+3)
		s.Pods = append(s.Pods, egress.NewPodInfo(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%namespaces), Name: fmt.Sprintf("pod%d", i),
				Labels: map[string]string{"app": string(rune('a' + i%2))}},
			Spec:   corev1.PodSpec{NodeName: fmt.Sprintf("node%d", node)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
		}))
	}
	for i := range z.svcs {
		svc, sl := eventService(s.Pods, namespaces, i)
		s.Services = append(s.Services, svc)
		s.EndpointSlices = append(s.EndpointSlices, sl)
	}
	for i := range z.eips {
		s.EgressIPs = append(s.EgressIPs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
			"metadata": map[string]any{"name": fmt.Sprintf("eip%d", i)},
			"spec": map[string]any{"egressIPs": []any{fmt.Sprintf("172.18.%d.%d", 100+i/250, i%250+1)},
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"tenant": fmt.Sprint(i / 2)}},
				"podSelector":       map[string]any{"matchLabels": map[string]any{"app": string(rune('a' + i%2))}}},
		}})
	}
	return s
}

// eventService is Service i of eventSnapshot and its EndpointSlice (one
// endpoint).
func eventService(pods []*egress.PodInfo, namespaces, i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	ns, name := fmt.Sprintf("ns%d", i%namespaces), fmt.Sprintf("svc%d", i)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1),
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	if i%10 == 0 {
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
		svc.Spec.Ports[0].NodePort = int32(30000 + i%2000)
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("172.19.%d.%d", i/250, i%250+1)}}
	}
	ready := true
	port, proto, portName := int32(8080), corev1.ProtocolTCP, "http"
	p := pods[i%len(pods)]
	return svc, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{p.IPs[0].String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &p.Node}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
}

// benchEvent is one event of the benchmarks: set(on) puts the event's
// object (or its undoing, !on) into the snapshot and returns the change.
type benchEvent struct {
	name string
	set  func(s *desired.Snapshot, on bool) *desired.Changes
}

func benchEvents(z benchSize) []benchEvent {
	return []benchEvent{
		{"pod-relabel", func(s *desired.Snapshot, on bool) *desired.Changes {
			p := relabelled(s.Pods[0], "app", map[bool]string{true: "b", false: "a"}[on])
			s.Pods[0] = p
			return &desired.Changes{Pods: map[string]*egress.PodInfo{p.Namespace + "/" + p.Name: p}}
		}},
		{"new-service", func(s *desired.Snapshot, on bool) *desired.Changes {
			svc, sl := eventService(s.Pods, z.eips/2, z.svcs)
			ch := &desired.Changes{Services: map[string]*corev1.Service{svc.Namespace + "/" + svc.Name: svc},
				EndpointSlices: map[string]*discoveryv1.EndpointSlice{sl.Namespace + "/" + sl.Name: sl}}
			if on {
				s.Services, s.EndpointSlices = append(s.Services, svc), append(s.EndpointSlices, sl)
			} else {
				s.Services, s.EndpointSlices = s.Services[:z.svcs], s.EndpointSlices[:z.svcs]
				ch.Services[svc.Namespace+"/"+svc.Name], ch.EndpointSlices[sl.Namespace+"/"+sl.Name] = nil, nil
			}
			return ch
		}},
		{"endpoint", func(s *desired.Snapshot, on bool) *desired.Changes {
			sl := s.EndpointSlices[1].DeepCopy()
			p := s.Pods[map[bool]int{true: 7, false: 1}[on]]
			sl.Endpoints[0].Addresses, sl.Endpoints[0].NodeName = []string{p.IPs[0].String()}, &p.Node
			s.EndpointSlices[1] = sl
			return &desired.Changes{EndpointSlices: map[string]*discoveryv1.EndpointSlice{sl.Namespace + "/" + sl.Name: sl}}
		}},
		{"node-notready", func(s *desired.Snapshot, on bool) *desired.Changes {
			n := s.Nodes[3].DeepCopy()
			n.Status.Conditions[0].Status = map[bool]corev1.ConditionStatus{true: corev1.ConditionFalse, false: corev1.ConditionTrue}[on]
			s.Nodes[3] = n
			return &desired.Changes{Nodes: map[string]*corev1.Node{n.Name: n}}
		}},
	}
}

// BenchmarkIncremental measures one event's recompute of the leader's
// desired state, incremental (clusterIndex.apply) against the full
// recompute every event costs without it (ComputeCluster with the LB
// cache, as the daemon ran it), side by side at the scale and a
// larger one. Each iteration is one event, alternately done and undone.
func BenchmarkIncremental(b *testing.B) {
	cfg, _, err := ParseConfig("bench", []string{"--cluster-subnets", "10.244.0.0/16/24"})
	if err != nil {
		b.Fatal(err)
	}
	for _, z := range []benchSize{{50, 5000, 2000, 200}, {250, 50000, 10000, 1000}} {
		base := withStatus(b, eventSnapshot(z), ParamsFrom(cfg))
		for _, ev := range benchEvents(z) {
			prefix := fmt.Sprintf("pods=%d/svcs=%d/%s", z.pods, z.svcs, ev.name)
			b.Run(prefix+"/full", func(b *testing.B) {
				p := ParamsFrom(cfg)
				p.LBCache = &lbsvc.Cache{}
				s := base
				s.Pods, s.Nodes = append([]*egress.PodInfo(nil), base.Pods...), append([]*corev1.Node(nil), base.Nodes...)
				s.Services, s.EndpointSlices = append([]*corev1.Service(nil), base.Services...), append([]*discoveryv1.EndpointSlice(nil), base.EndpointSlices...)
				cs, err := desired.ComputeCluster(s, p, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				prev := cs.Nodes
				i := 0
				runtime.GC() // not the garbage of the set-up
				for b.Loop() {
					i++
					ev.set(&s, i%2 == 1)
					cs, err := desired.ComputeCluster(s, p, nil, prev)
					if err != nil {
						b.Fatal(err)
					}
					prev = cs.Nodes
				}
			})
			b.Run(prefix+"/incremental", func(b *testing.B) {
				p := ParamsFrom(cfg)
				s := base
				s.Pods, s.Nodes = append([]*egress.PodInfo(nil), base.Pods...), append([]*corev1.Node(nil), base.Nodes...)
				s.Services, s.EndpointSlices = append([]*corev1.Service(nil), base.Services...), append([]*discoveryv1.EndpointSlice(nil), base.EndpointSlices...)
				x := desired.NewIndex(p, nil, nil)
				if _, err := x.Apply(desired.SnapshotChanges(s)); err != nil {
					b.Fatal(err)
				}
				i, dirty := 0, 0
				runtime.GC()
				for b.Loop() {
					i++
					cs, err := x.Apply(ev.set(&s, i%2 == 1))
					if err != nil {
						b.Fatal(err)
					}
					dirty += len(cs.Dirty)
				}
				b.ReportMetric(float64(dirty)/float64(i), "dirty-owners/op")
			})
		}
	}
}

// withStatus writes the leader's assignment into the EgressIPs of s, as
// the daemon does: the assignment sticks.
func withStatus(b *testing.B, s desired.Snapshot, p desired.Params) desired.Snapshot {
	cs, err := desired.ComputeCluster(s, p, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i, u := range s.EgressIPs {
		items := []any{}
		for _, it := range cs.Status[u.GetName()] {
			items = append(items, map[string]any{"node": it.Node, "egressIP": it.EgressIP})
		}
		u = u.DeepCopy()
		u.Object["status"] = map[string]any{"items": items}
		s.EgressIPs[i] = u
	}
	return s
}
