package lbsvc_test

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/testbed"
)

// nodePortCluster is svcs NodePort Services (ETP=Cluster, one TCP port,
// two ready endpoints) on nodes nodes with a chassis each, and the NB
// topology of those nodes.
func nodePortCluster(svcs, nodes int) (lbsvc.Input, ovsdbnb.Topology) {
	topo := ovsdbnb.Topology{ClusterSubnet: "10.128.0.0/14", JoinRouterIP: "100.64.0.1/16"}
	var in lbsvc.Input
	for i := range nodes {
		ext := netip.AddrFrom4([4]byte{172, 18, byte(1 + i/250), byte(2 + i%250)})
		topo.Nodes = append(topo.Nodes, ovsdbnb.Node{Name: fmt.Sprintf("node%d", i),
			Subnet: fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256), JoinIP: fmt.Sprintf("100.64.%d.%d/16", i/250, 2+i%250),
			ExternalIP: ext.String() + "/16", Gateway: "172.18.0.1"})
		in.Nodes = append(in.Nodes, lbsvc.Node{Name: fmt.Sprintf("node%d", i), IPs: []netip.Addr{ext}, Chassis: fmt.Sprintf("chassis-%d", i)})
	}
	for i := range svcs {
		name := "np-" + strconv.Itoa(i)
		s := svc(name, corev1.ServiceTypeNodePort, []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)},
			port("http", corev1.ProtocolTCP, 80, int32(30000+i), "8080"))
		in.Services = append(in.Services, s)
		in.EndpointSlices = append(in.EndpointSlices, slice(name+"-a", name, discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{sport("http", corev1.ProtocolTCP, 8080)},
			ready(fmt.Sprintf("10.128.%d.%d", i%nodes, 3+i/250), "node"+strconv.Itoa(i%nodes)),
			ready(fmt.Sprintf("10.128.%d.%d", (i+1)%nodes, 3+i/250), "node"+strconv.Itoa((i+1)%nodes))))
	}
	return in, topo
}

// BenchmarkNodePortScale writes 500 NodePort Services into a real NB of
// 10 and 100 nodes, with OVN-Kubernetes' template load balancers and with
// per-node load balancers, side by side. Reported: the Load_Balancer rows,
// the Chassis_Template_Var rows, all NB rows written (load balancers +
// template rows) and the time of the first full Sync. With templates the
// load balancer count does not depend on the node count (one per Service
// and family, plus the cluster one); per node it is one per Service and
// node. A second Sync must send nothing.
func BenchmarkNodePortScale(b *testing.B) {
	const svcs = 500
	for _, mode := range []string{"templates", "per-node"} {
		for _, nodes := range []int{10, 100} {
			b.Run(fmt.Sprintf("%s/nodes=%d", mode, nodes), func(b *testing.B) {
				in, topo := nodePortCluster(svcs, nodes)
				opts := lbsvc.Options{PerNodeLBs: mode == "per-node"}
				var lbs, tvs int
				var sync time.Duration
				for range b.N {
					b.StopTimer()
					o := testbed.StartOVN(b)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
					c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{o.NB}})
					if err != nil {
						b.Fatal(err)
					}
					if err := ovsdbnb.EnsureTopology(ctx, c, topo); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start := time.Now()
					desired, _ := lbsvc.Build(in, opts)
					if _, err := c.Sync(ctx, desired); err != nil {
						b.Fatal(err)
					}
					sync += time.Since(start)
					b.StopTimer()
					if res, err := c.Sync(ctx, desired); err != nil || res.Ops() != 0 {
						b.Fatalf("second sync: %+v, %v", res, err)
					}
					lbs = countRows(o, nbdb.LoadBalancerTable)
					tvs = countRows(o, nbdb.ChassisTemplateVarTable)
					// Templates: one cluster and one (merged) template load
					// balancer per Service, whatever the node count; the
					// template rows are one per chassis, shared by all.
					if mode == "templates" && (lbs != 2*svcs || tvs != nodes) {
						b.Fatalf("templates at %d nodes: %d load balancers, %d template rows; want %d and %d", nodes, lbs, tvs, 2*svcs, nodes)
					}
					cancel()
					c.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(lbs), "lb-rows")
				b.ReportMetric(float64(tvs), "template-rows")
				b.ReportMetric(float64(lbs+tvs), "rows")
				b.ReportMetric(sync.Seconds()/float64(b.N), "sync-s")
			})
		}
	}
}

// BenchmarkBuildNodePorts is the pure part of a leader's first pass over
// NodePort Services (one TCP port, two ready endpoints) on nodes with a
// chassis each: `make bench-scale`'s 1,000 of them on 2,000 nodes with
// template load balancers, and smaller clusters for ETP=Local (a
// template variable per node and Service) and per-node load balancers.
func BenchmarkBuildNodePorts(b *testing.B) {
	for _, tc := range []struct {
		etp         corev1.ServiceExternalTrafficPolicy
		perNode     bool
		svcs, nodes int
	}{
		{corev1.ServiceExternalTrafficPolicyCluster, false, 1000, 2000},
		{corev1.ServiceExternalTrafficPolicyLocal, false, 100, 2000},
		{corev1.ServiceExternalTrafficPolicyCluster, true, 100, 200},
		{corev1.ServiceExternalTrafficPolicyLocal, true, 100, 200},
	} {
		mode := map[bool]string{false: "templates", true: "per-node"}[tc.perNode]
		b.Run(fmt.Sprintf("etp=%s/%s/svcs=%d/nodes=%d", tc.etp, mode, tc.svcs, tc.nodes), func(b *testing.B) {
			in, _ := nodePortCluster(tc.svcs, tc.nodes)
			for _, s := range in.Services {
				s.Spec.ExternalTrafficPolicy = tc.etp
			}
			opts := lbsvc.Options{PerNodeLBs: tc.perNode}
			b.ReportAllocs()
			for b.Loop() {
				lbsvc.Build(in, opts)
			}
		})
	}
}

// countRows counts the rows of table in the NB.
func countRows(o *testbed.OVN, table string) int {
	n := 0
	for _, l := range strings.Split(o.Nbctl("--bare", "--columns=_uuid", "list", table), "\n") {
		if l != "" {
			n++
		}
	}
	return n
}
