package scale

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/desired"
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
