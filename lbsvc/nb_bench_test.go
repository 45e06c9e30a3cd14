package lbsvc_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// benchServices is the size of the benchmark cluster.
const benchServices = 10_000

// benchCluster is n ClusterIP Services of one TCP port, each with three
// ready endpoints spread over nbTopology's two nodes.
func benchCluster(n int) lbsvc.Input {
	in := lbsvc.Input{Nodes: []lbsvc.Node{
		{Name: "node1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}},
		{Name: "node2", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.3")}},
	}}
	for i := range n {
		name := "svc-" + strconv.Itoa(i)
		in.Services = append(in.Services, svc(name, corev1.ServiceTypeClusterIP,
			[]string{fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)}, port("http", corev1.ProtocolTCP, 80, 0, "8080")))
		var eps []ep
		for j := range 3 {
			k := 3*i + j
			eps = append(eps, ready(fmt.Sprintf("10.244.%d.%d", 1+k%2, 3+k/2%250), "node"+strconv.Itoa(1+k%2)))
		}
		in.EndpointSlices = append(in.EndpointSlices, slice(name+"-a", name, discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{sport("http", corev1.ProtocolTCP, 8080)}, eps...))
	}
	return in
}

// nbRSS returns the resident set high-water mark of the NB ovsdb-server
// the testbed started in dir, in MiB (0 when unreadable).
func nbRSS(dir string) float64 {
	pid, err := os.ReadFile(filepath.Join(dir, "nb.pid"))
	if err != nil {
		return 0
	}
	status, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkBuild is the pure part of a full sync: Build of 10,000
// Services x 3 endpoints.
func BenchmarkBuild(b *testing.B) {
	in := benchCluster(benchServices)
	b.ReportAllocs()
	for b.Loop() {
		lbsvc.Build(in, lbsvc.Options{})
	}
}

// BenchmarkNBFullSync writes 10,000 Services x 3 endpoints into an empty
// real NB: Build plus one Sync. Reported: time per full sync, the
// client's allocations (-benchmem), its heap growth and the NB
// ovsdb-server's peak RSS.
func BenchmarkNBFullSync(b *testing.B) {
	in := benchCluster(benchServices)
	var rss, heap float64
	for range b.N {
		b.StopTimer()
		o, c := startNB(b)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		desired, _ := lbsvc.Build(in, lbsvc.Options{})
		res := syncNB(b, c, desired)
		b.StopTimer()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heap += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		if res.Inserts < benchServices {
			b.Fatalf("full sync inserted %d rows, want >= %d", res.Inserts, benchServices)
		}
		rss += nbRSS(o.Dir)
		b.StartTimer()
	}
	b.ReportMetric(float64(benchServices)/(b.Elapsed().Seconds()/float64(b.N)), "services/s")
	b.ReportMetric(heap/float64(b.N)/(1<<20), "client-heap-MiB")
	b.ReportMetric(rss/float64(b.N), "nb-rss-MiB")
}

// BenchmarkNBEndpointAdded adds one endpoint to one Service of a synced
// 10,000-Service NB, side by side: "incremental" recomputes that Service
// (ServiceState) and syncs its owner alone; "full" is the baseline that
// rebuilds and syncs everything; "raw" is the server's floor: the same
// one mutation as a bare libovsdb Transact on a connection of its own (no
// cache to read, plan or wait for).
// Reported: NB row operations per change and latency percentiles.
func BenchmarkNBEndpointAdded(b *testing.B) {
	in := benchCluster(benchServices)
	o, c := startNB(b)
	all, _ := lbsvc.Build(in, lbsvc.Options{})
	syncNB(b, c, all)
	dbModel, err := model.NewClientDBModel("OVN_Northbound", map[string]model.Model{nbdb.LoadBalancerTable: &nbdb.LoadBalancer{}})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := client.NewOVSDBClient(dbModel, client.WithEndpoint(o.NB))
	if err == nil {
		err = raw.Connect(context.Background())
	}
	if err != nil {
		b.Fatalf("raw client: %v", err)
	}
	b.Cleanup(raw.Close)
	bySvc := lbsvc.SlicesByService(in.EndpointSlices)
	next := 0
	// grow adds one ready endpoint to the next Service and returns it.
	grow := func() *corev1.Service {
		s := in.Services[next%benchServices]
		sl := bySvc[s.Namespace+"/"+s.Name][0]
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.245.%d.%d", next/250%250, next%250+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}, NodeName: ptr("node1")})
		next++
		return s
	}
	for _, mode := range []string{"incremental", "full", "raw"} {
		b.Run(mode, func(b *testing.B) {
			var lat []time.Duration
			ops := 0
			for range b.N {
				s := grow()
				start := time.Now()
				var want map[ovsdbnb.Owner]ovsdbnb.State
				switch mode {
				case "incremental":
					st, _ := lbsvc.ServiceState(s, bySvc[s.Namespace+"/"+s.Name], in.Nodes, lbsvc.Options{})
					want = map[ovsdbnb.Owner]ovsdbnb.State{lbsvc.ServiceOwner(s.Namespace, s.Name): st}
				case "full":
					want, _ = lbsvc.Build(in, lbsvc.Options{})
				case "raw":
					st, _ := lbsvc.ServiceState(s, bySvc[s.Namespace+"/"+s.Name], in.Nodes, lbsvc.Options{})
					lb := st.LoadBalancers[0]
					for vip, backends := range lb.VIPs {
						op := ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.LoadBalancerTable,
							Where: []ovsdb.Condition{{Column: "name", Function: ovsdb.ConditionEqual, Value: lb.Name}},
							Mutations: []ovsdb.Mutation{
								{Column: "vips", Mutator: ovsdb.MutateOperationDelete, Value: ovsdb.OvsSet{GoSet: []any{vip}}},
								{Column: "vips", Mutator: ovsdb.MutateOperationInsert, Value: ovsdb.OvsMap{GoMap: map[any]any{vip: backends}}},
							}}
						if res, err := raw.Transact(context.Background(), op); err != nil || len(res) != 1 || res[0].Error != "" {
							b.Fatalf("raw transact: %v %+v", err, res)
						}
					}
					lat = append(lat, time.Since(start))
					ops++
					continue
				}
				res := syncNB(b, c, want)
				lat = append(lat, time.Since(start))
				ops += res.Ops()
			}
			slices.Sort(lat)
			pct := func(p int) float64 { return float64(lat[(len(lat)-1)*p/100].Microseconds()) / 1000 }
			b.ReportMetric(float64(ops)/float64(b.N), "nb-ops/op")
			b.ReportMetric(pct(50), "p50-ms")
			b.ReportMetric(pct(99), "p99-ms")
		})
	}
}
