package daemon

import (
	"fmt"
	"testing"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// scaleSnapshot is the steady-state scale: 5,000 pods in 100
// namespaces on 50 nodes, 2,000 Services (every tenth a LoadBalancer)
// with one EndpointSlice each, and 200 EgressIPs, two per namespace.
func scaleSnapshot() desired.Snapshot {
	var s desired.Snapshot
	for i := range 50 {
		s.Nodes = append(s.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node%d", i), Labels: map[string]string{"k8s.ovn.org/egress-assignable": ""},
				Annotations: map[string]string{
					"k8s.ovn.org/node-subnets":                   fmt.Sprintf(`{"default":["10.244.%d.0/24"]}`, i),
					"k8s.ovn.org/node-primary-ifaddr":            fmt.Sprintf(`{"ipv4":"172.18.%d.%d/16"}`, i/200, i%200+2),
					"k8s.ovn.org/node-gateway-router-lrp-ifaddr": fmt.Sprintf(`{"ipv4":"100.64.0.%d/16"}`, i+3),
				}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("172.18.%d.%d", i/200, i%200+2)}}},
		})
	}
	for i := range 100 {
		s.Namespaces = append(s.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns%d", i),
			Labels: map[string]string{"tenant": fmt.Sprint(i)}}})
	}
	for i := range 5000 {
		node := i % 50
		s.Pods = append(s.Pods, egress.NewPodInfo(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("pod%d", i)},
			Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("node%d", node)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.244.%d.%d", node, i/50+3),
				PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", node, i/50+3)}}},
		}))
	}
	for i := range 2000 {
		svc, slice := eventService(s.Pods[:5000], 100, i)
		s.Services = append(s.Services, svc)
		s.EndpointSlices = append(s.EndpointSlices, slice)
	}
	for i := range 200 {
		s.EgressIPs = append(s.EgressIPs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
			"metadata": map[string]any{"name": fmt.Sprintf("eip%d", i)},
			"spec": map[string]any{"egressIPs": []any{fmt.Sprintf("172.18.100.%d", i+1)},
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"tenant": fmt.Sprint(i % 100)}}},
		}})
	}
	return s
}

// BenchmarkCompute measures one full recompute of the desired state at
// the scale (every reconcile is one): the leader's (ComputeCluster)
// and one node's (ComputeNode), side by side.
func BenchmarkCompute(b *testing.B) {
	s := scaleSnapshot()
	cfg, _, err := ParseConfig("bench", []string{"--cluster-subnets", "10.244.0.0/16/24"})
	if err != nil {
		b.Fatal(err)
	}
	p := ParamsFrom(cfg)
	b.Run("cluster", func(b *testing.B) {
		for b.Loop() {
			cs, err := desired.ComputeCluster(s, p, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(cs.Egress)+len(cs.LB)), "owners")
		}
	})
	b.Run("node", func(b *testing.B) {
		for b.Loop() {
			ns, err := desired.ComputeNode(s, p, "node7")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(ns.Sets)), "flowsets")
		}
	})
}
