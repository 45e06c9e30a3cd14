package egress_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// benchNodes are n egress nodes on 172.16.0.0/12 (node i has 172.16.i/8.x).
func benchNodes(n int) []egress.Node {
	nodes := make([]egress.Node, n)
	for i := range nodes {
		nodes[i] = egress.Node{
			Name:        fmt.Sprintf("node-%03d", i),
			Subnets:     []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 128 + byte(i/256), byte(i), 0}), 24)},
			Primary:     []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16, byte(i), 1}), 12)},
			GatewayJoin: []netip.Addr{netip.AddrFrom4([4]byte{100, 64, byte(i / 250), byte(i%250 + 2)})},
			Assignable:  true, Ready: true,
			Capacity: egress.Capacity{IPv4: egress.Unlimited, IPv6: egress.Unlimited, Total: egress.Unlimited},
		}
		nodes[i].HostCIDRs = nodes[i].Primary
	}
	return nodes
}

// benchEIPs are n EgressIPs of two IPs each on 172.20.0.0/16, EgressIP i
// selecting namespace ns-<i> (pods labelled app=web).
func benchEIPs(n int) []*egressv1.EgressIP {
	eips := make([]*egressv1.EgressIP, n)
	for i := range eips {
		eips[i] = &egressv1.EgressIP{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("eip-%04d", i)},
			Spec: egressv1.EgressIPSpec{
				EgressIPs:         []string{fmt.Sprintf("172.20.%d.%d", i/100, i%100*2+1), fmt.Sprintf("172.20.%d.%d", i/100, i%100*2+2)},
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"name": fmt.Sprintf("ns-%d", i)}},
				PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			}}
	}
	return eips
}

// BenchmarkAssign assigns 1,000 EgressIPs (2,000 IPs) over 100 nodes:
// "fresh" from empty status, "steady" re-validating a full assignment,
// "failover" with one node unreachable (its IPs move).
func BenchmarkAssign(b *testing.B) {
	nodes, eips := benchNodes(100), benchEIPs(1000)
	first := egress.Assign(eips, nodes, nil, nil)
	assigned := withStatus(eips, first)
	for _, c := range []struct {
		name      string
		eips      []*egressv1.EgressIP
		reachable func(string) bool
	}{
		{"fresh", eips, nil},
		{"steady", assigned, nil},
		{"failover", assigned, func(n string) bool { return n != "node-000" }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				egress.Assign(c.eips, nodes, c.reachable, nil)
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/assign")
		})
	}
}

// BenchmarkLabelChange is one pod's label change at 10,000 pods (10 per
// namespace) and 1,000 EgressIPs: find the EgressIPs whose selection
// changes, re-select their pods, recompute their rows and the cluster
// rows (served-pods address set). The baseline, reported as full-ms and
// speedup-x, recomputes every EgressIP's selection and rows.
func BenchmarkLabelChange(b *testing.B) {
	const nPods, nEIPs = 10000, 1000
	nodes, eips := benchNodes(100), benchEIPs(nEIPs)
	eips = withStatus(eips, egress.Assign(eips, nodes, nil, nil))
	namespaces := make([]*corev1.Namespace, nEIPs)
	nsByName := map[string]*corev1.Namespace{}
	for i := range namespaces {
		name := fmt.Sprintf("ns-%d", i)
		namespaces[i] = namespace(name, map[string]string{"name": name})
		nsByName[name] = namespaces[i]
	}
	pods := make([]*corev1.Pod, nPods)
	for i := range pods {
		pods[i] = pod(fmt.Sprintf("ns-%d", i%nEIPs), fmt.Sprintf("pod-%d", i), nodes[i%len(nodes)].Name,
			map[string]string{"app": "web"}, fmt.Sprintf("10.%d.%d.%d", 128+i/65536, i/256%256, i%256+0))
	}
	cluster := egress.Cluster{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.128.0.0/9")}}
	byName := map[string]*egress.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	selectors := make([]*egress.Selector, nEIPs)
	served := make([]egress.Served, nEIPs)
	full := func() {
		for i, e := range eips {
			ps, err := egress.SelectPods(e, namespaces, pods)
			if err != nil {
				b.Fatal(err)
			}
			served[i] = egress.Served{Name: e.Name, Status: e.Status.Items, Pods: ps}
		}
		if _, err := egress.Compute(cluster, nodes, served); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	full()
	fullTime := time.Since(start)
	for i, e := range eips {
		s, err := egress.NewSelector(&e.Spec)
		if err != nil {
			b.Fatal(err)
		}
		selectors[i] = s
	}

	target := pods[4242]
	b.ResetTimer()
	for b.Loop() {
		if target.Labels["app"] == "web" {
			target.Labels = map[string]string{"app": "batch"}
		} else {
			target.Labels = map[string]string{"app": "web"}
		}
		ns := nsByName[target.Namespace]
		var all []egress.Pod
		for i, s := range selectors {
			was := false
			for _, p := range served[i].Pods {
				if p.Namespace == target.Namespace && p.Name == target.Name {
					was = true
					break
				}
			}
			if s.Selects(ns, target) == was {
				continue
			}
			ps, err := egress.SelectPods(eips[i], namespaces, pods)
			if err != nil {
				b.Fatal(err)
			}
			served[i].Pods = ps
			egress.EgressIPState(cluster, served[i], byName)
		}
		for i := range served {
			all = append(all, served[i].Pods...)
		}
		if _, err := egress.ClusterState(cluster, nodes, all); err != nil {
			b.Fatal(err)
		}
	}
	perOp := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(fullTime.Microseconds())/1000, "full-ms")
	b.ReportMetric(float64(fullTime)/float64(perOp), "speedup-x")
}
