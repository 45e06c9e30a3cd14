package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/testbed"
)

// writeManifests writes s as YAML files in dir, one file per kind.
func writeManifests(b testing.TB, dir string, s desired.Snapshot) {
	b.Helper()
	files := map[string][]any{}
	add := func(file string, gv schema.GroupVersion, kind string, objs []any) {
		for _, o := range objs {
			m := map[string]any{}
			j, err := yaml.Marshal(o)
			if err != nil {
				b.Fatal(err)
			}
			if err := yaml.Unmarshal(j, &m); err != nil {
				b.Fatal(err)
			}
			m["apiVersion"], m["kind"] = gv.String(), kind
			files[file] = append(files[file], m)
		}
	}
	toAny := func(n int, get func(int) any) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = get(i)
		}
		return out
	}
	core := schema.GroupVersion{Version: "v1"}
	add("nodes.yaml", core, "Node", toAny(len(s.Nodes), func(i int) any { return s.Nodes[i] }))
	add("namespaces.yaml", core, "Namespace", toAny(len(s.Namespaces), func(i int) any { return s.Namespaces[i] }))
	add("pods.yaml", core, "Pod", toAny(len(s.Pods), func(i int) any { return k8sPod(s.Pods[i]) }))
	add("services.yaml", core, "Service", toAny(len(s.Services), func(i int) any { return s.Services[i] }))
	add("endpointslices.yaml", schema.GroupVersion{Group: "discovery.k8s.io", Version: "v1"}, "EndpointSlice",
		toAny(len(s.EndpointSlices), func(i int) any { return s.EndpointSlices[i] }))
	add("egressips.yaml", schema.GroupVersion{Group: "k8s.ovn.org", Version: "v1"}, "EgressIP",
		toAny(len(s.EgressIPs), func(i int) any { return s.EgressIPs[i].Object }))
	for file, objs := range files {
		var docs []string
		for _, o := range objs {
			y, err := yaml.Marshal(o)
			if err != nil {
				b.Fatal(err)
			}
			docs = append(docs, string(y))
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the process's user + system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reconciles counts the cluster loop's "reconciled" records in the
// daemon's debug log (slog writes a record in one Write) and remembers
// when the last one came.
type reconciles struct {
	mu   sync.Mutex
	n    int
	last time.Time
}

func (r *reconciles) Write(p []byte) (int, error) {
	if n := bytes.Count(p, []byte("msg=reconciled loop=cluster")); n > 0 {
		r.mu.Lock()
		r.n += n
		r.last = time.Now()
		r.mu.Unlock()
	}
	return len(p), nil
}

// quiet reports how many cluster reconciles have finished and for how long
// none has.
func (r *reconciles) quiet() (int, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, time.Since(r.last)
}

// BenchmarkDaemonSteadyState runs the leader's work of `ovnedge daemon`
// (no --node-name: no bridge) on the manifests source at the issue's
// scale (scaleSnapshot: 50 nodes, 5,000 pods, 2,000 Services, 200
// EgressIPs) against a real NB, and reports its heap and CPU while idle
// and, per iteration, the time from writing a new Service's manifest to
// its load balancer showing in the NB (to an NB client of its own),
// p50/p99. The manifests directory is polled every 20 ms ("poll-ms").
func BenchmarkDaemonSteadyState(b *testing.B) {
	s := scaleSnapshot()
	dir := b.TempDir()
	writeManifests(b, dir, s)
	ovn := testbed.StartOVN(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{ovn.NB}, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer watch.Close()
	topo := ovsdbnb.Topology{ClusterSubnet: "10.244.0.0/16", JoinRouterIP: "100.64.0.1/16"}
	for i := range s.Nodes {
		topo.Nodes = append(topo.Nodes, ovsdbnb.Node{Name: s.Nodes[i].Name, Subnet: fmt.Sprintf("10.244.%d.0/24", i),
			JoinIP: fmt.Sprintf("100.64.0.%d/16", i+3), ExternalIP: fmt.Sprintf("172.18.%d.%d/16", i/200, i%200+2)})
	}
	if err := ovsdbnb.EnsureTopology(ctx, watch, topo); err != nil {
		b.Fatal(err)
	}
	owners := func(typ string) int {
		o, err := watch.Owners(typ)
		if err != nil {
			b.Fatal(err)
		}
		return len(o)
	}

	rec := &reconciles{}
	start := time.Now()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"daemon", "--manifests", dir, "--nb-address", ovn.NB, "--manifests-poll", "20ms",
			"--cluster-subnets", "10.244.0.0/16/24", "--metrics-address", "", "--egressip-reachability-total-timeout", "0",
			"--log-level", "debug"}, io.Discard, rec)
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(5 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("every Service's load balancer", func() bool { return owners("Service") >= len(s.Services) })
	waitFor("every EgressIP's rows", func() bool { return owners("EgressIP") >= len(s.EgressIPs) })
	// The owners show up batch by batch, while the initial reconcile
	// runs: it is over when the cluster loop has finished one more
	// reconcile (the EgressIP status writes queue another) and none for
	// two seconds.
	before, _ := rec.quiet()
	waitFor("the cluster loop to settle", func() bool {
		n, since := rec.quiet()
		return n > before && since > 2*time.Second
	})
	settled, _ := rec.quiet()
	initial := time.Since(start) - 2*time.Second

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cpu0, t0 := cpuTime(b), time.Now()
	time.Sleep(5 * time.Second)
	idle := 100 * float64(cpuTime(b)-cpu0) / float64(time.Since(t0))
	if n, _ := rec.quiet(); n != settled {
		b.Errorf("%d cluster reconciles while idle, want none", n-settled)
	}

	// A client of its own sees the load balancers arrive, as ovn-northd
	// does (ovn-nbctl would download the whole NB at every poll).
	lbs := testbed.WatchNB(b, ovn.NB, nbdb.LoadBalancerTable, &nbdb.LoadBalancer{},
		func(lb *nbdb.LoadBalancer) string { return lb.ExternalIDs[ovsdbnb.KeyOwner] })
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("bench%d", i)
		svc := fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {namespace: ns0, name: %s}\n"+
			"spec: {type: ClusterIP, clusterIP: 10.97.%d.%d, clusterIPs: [10.97.%d.%d], ports: [{name: http, port: 80, protocol: TCP}]}\n",
			name, i/250, i%250+1, i/250, i%250+1)
		t := time.Now()
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(svc), 0o600); err != nil {
			b.Fatal(err)
		}
		lbs.Wait(b, "ns0/"+name, true, time.Minute)
		lat = append(lat, time.Since(t))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "change-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "change-p99-ms")
	b.ReportMetric(20, "poll-ms")
	b.ReportMetric(initial.Seconds(), "initial-sync-s")
	b.ReportMetric(idle, "idle-cpu-%")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
}
