package daemon

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/internal/scale"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// shapeSnapshot is internal/scale's cluster of shape as the leader's
// informers would hold it once synced: the ClusterIPs and NodePorts the
// apiserver would allocate, the EgressIP statuses of the leader's first
// assignment (withStatus).
func shapeSnapshot(b *testing.B, shape scale.Shape, p desired.Params) desired.Snapshot {
	var s desired.Snapshot
	for n := range shape.Nodes {
		s.Nodes = append(s.Nodes, scale.Node(n))
	}
	for n := range shape.Namespaces {
		s.Namespaces = append(s.Namespaces, scale.Namespace(n))
	}
	for i := range shape.Pods {
		s.Pods = append(s.Pods, egress.NewPodInfo(scale.Pod(i)))
	}
	for j := range shape.Services {
		s.Services = append(s.Services, clusterIPService(scale.Service(j), j))
		var eps []int
		for _, i := range scale.Endpoints(j) {
			if i < shape.Pods {
				eps = append(eps, i)
			}
		}
		s.EndpointSlices = append(s.EndpointSlices, scale.EndpointSlice(j, eps))
	}
	for k := range shape.EgressIPs {
		s.EgressIPs = append(s.EgressIPs, scale.EgressIP(k))
	}
	return withStatus(b, s, p)
}

// clusterIPService gives svc the ClusterIP (and NodePort) the apiserver
// would allocate as Service j's.
func clusterIPService(svc *corev1.Service, j int) *corev1.Service {
	ip := fmt.Sprintf("10.96.%d.%d", j/250, j%250+1)
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, []string{ip}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP {
		svc.Spec.Ports[0].NodePort = int32(30000 + j/10) // j%10 == 0
	}
	return svc
}

// clusterEvents are BenchmarkScale's four events on a Snapshot: set(on)
// makes the change (on) or undoes it (!on) and returns it.
func clusterEvents(shape scale.Shape) []benchEvent {
	served := shape.Served()
	var clusterIPs []int
	for j := range shape.Services {
		if scale.ServiceType(j) == corev1.ServiceTypeClusterIP {
			clusterIPs = append(clusterIPs, j)
		}
	}
	round := map[string]int{}
	next := func(name string) int { round[name]++; return round[name] }
	var egressNode string
	return []benchEvent{
		{"pod-relabel", func(s *desired.Snapshot, on bool) *desired.Changes {
			i := served[(next("pod")*7919)%len(served)]
			p := relabelled(s.Pods[i], scale.LabelEIP, map[string]string{"a": "b", "b": "a"}[s.Pods[i].Labels.Get(scale.LabelEIP)])
			s.Pods[i] = p
			return &desired.Changes{Pods: map[string]*egress.PodInfo{p.Namespace + "/" + p.Name: p}}
		}},
		{"new-service", func(s *desired.Snapshot, on bool) *desired.Changes {
			j := shape.Services
			svc := clusterIPService(scale.Service(j), j)
			svc.Spec.Type, svc.Spec.Ports[0].NodePort, svc.Status = corev1.ServiceTypeClusterIP, 0, corev1.ServiceStatus{}
			key := svc.Namespace + "/" + svc.Name
			if on {
				s.Services = append(s.Services, svc)
			} else {
				s.Services = s.Services[:shape.Services]
				svc = nil
			}
			return &desired.Changes{Services: map[string]*corev1.Service{key: svc}}
		}},
		{"endpoint", func(s *desired.Snapshot, on bool) *desired.Changes {
			j := clusterIPs[(next("endpoint")*7919)%len(clusterIPs)]
			sl := s.EndpointSlices[j].DeepCopy()
			first := scale.Endpoints(j)[0]
			if sl.Endpoints[0].Addresses[0] == scale.PodIP(first).String() {
				first++
			}
			sl.Endpoints[0] = scale.EndpointSlice(j, []int{first}).Endpoints[0]
			s.EndpointSlices[j] = sl
			return &desired.Changes{EndpointSlices: map[string]*discoveryv1.EndpointSlice{sl.Namespace + "/" + sl.Name: sl}}
		}},
		{"node-notready", func(s *desired.Snapshot, on bool) *desired.Changes {
			if on { // the node of the round's EgressIP
				u := s.EgressIPs[(next("node")*7919)%len(s.EgressIPs)]
				items, _, _ := unstructured.NestedSlice(u.Object, "status", "items")
				egressNode = ""
				if len(items) > 0 {
					egressNode, _ = items[0].(map[string]any)["node"].(string)
				}
			}
			n := slices.IndexFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == egressNode })
			if n < 0 {
				return &desired.Changes{}
			}
			node := s.Nodes[n].DeepCopy()
			num, _ := strconv.Atoi(node.Name[len("node-"):])
			node.Status = scale.NodeStatus(num, !on)
			s.Nodes[n] = node
			return &desired.Changes{Nodes: map[string]*corev1.Node{node.Name: node}}
		}},
	}
}

// BenchmarkClusterEventsNB times the leader's pass (Dataplane.Cluster:
// the incremental recompute, the status writes, the NB sync through a
// real NB ovsdb-server) for BenchmarkScale's four events, in process: the
// leader's own cost per event at internal/scale's shape of
// CLUSTER_BENCH_PODS pods (default 10,000; 150000 is the full size: 2,000
// nodes, 10,000 Services, 1,000 EgressIPs), without the apiserver and its
// watch. Each iteration is one event of each kind, made then undone,
// both timed: EVENT-p50-ms and EVENT-p99-ms are of the events made (as
// BenchmarkScale times them: a node going NotReady moves its EgressIPs,
// making it Ready again moves none), EVENT-undone-p50-ms and
// EVENT-undone-p99-ms of the events undone. CLUSTER_BENCH_CPUPROFILE
// names a CPU profile of the events alone, CLUSTER_BENCH_EVENTS a subset of them; CLUSTER_BENCH_ALLOCS an allocation profile P, and P.before
// its base (go tool pprof -diff_base P.before P: the events' garbage);
// CLUSTER_BENCH_HEAP a heap profile once synced; CLUSTER_BENCH_NB_ONLY
// runs no ovn-northd; CLUSTER_BENCH_DEBUG logs at debug level on stderr;
// CLUSTER_BENCH_GC_AHEAD=false runs the leader with --gc-ahead=false;
// CLUSTER_BENCH_AUDIT runs the periodic audit (Dataplane.Audit) over and
// over beside the events, each checked by the next event's pass.
// CLUSTER_BENCH_GAP (a duration) idles the leader that long before each
// pass, untimed, as the scale benchmark's rounds do (giving --gc-ahead
// time to collect between the passes). CLUSTER_BENCH_NB_LOG (with
// CLUSTER_BENCH_NB_ONLY) names a file that gets the NB server's log, with
// every JSON-RPC message of the events: when the server received each
// transaction (received request, method="transact", id=N), sent its
// update and its reply (send reply, id=N); beside CLUSTER_BENCH_DEBUG's
// "transaction committed" lines, where a step's time went.
func BenchmarkClusterEventsNB(b *testing.B) {
	pods := 10000
	if v := os.Getenv("CLUSTER_BENCH_PODS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("CLUSTER_BENCH_PODS=%q: want a number of pods", v)
		}
		pods = n
	}
	var gap time.Duration
	if v := os.Getenv("CLUSTER_BENCH_GAP"); v != "" {
		var err error
		if gap, err = time.ParseDuration(v); err != nil || gap < 0 {
			b.Fatalf("CLUSTER_BENCH_GAP=%q: want a duration", v)
		}
	}
	shape := scale.ShapeFor(pods)
	// CLUSTER_BENCH_NB_ONLY runs the NB alone, as BenchmarkScale does:
	// no ovn-northd recomputing beside the leader after each write.
	var nbRemote string
	var nb *testbed.NB
	if os.Getenv("CLUSTER_BENCH_NB_ONLY") != "" {
		nb = testbed.StartNB(b)
		nbRemote = nb.Remote
	} else {
		nbRemote = testbed.StartOVN(b).NB
	}
	ctx := context.Background()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{nbRemote}, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := ovsdbnb.EnsureTopology(ctx, c, shape.Topology()); err != nil {
		b.Fatal(err)
	}
	c.Close()
	cfg, _, err := ParseConfig("bench", []string{"--nb-address", nbRemote, "--metrics-address", "", "--lb-templates=true",
		"--cluster-subnets", scale.ClusterSubnet + "/" + strconv.Itoa(scale.HostPrefix), "--enable-egress-ip=true",
		"--gateway-v4-join-subnet", scale.JoinSubnet, "--egressip-reachability-total-timeout=0",
		"--gc-ahead=" + cmp.Or(os.Getenv("CLUSTER_BENCH_GC_AHEAD"), "true")})
	if err != nil {
		b.Fatal(err)
	}
	s := shapeSnapshot(b, shape, ParamsFrom(cfg))
	// The EgressIP status writes go to an in-memory dynamic client (the
	// benchmark times the leader, not the apiserver).
	var objs []runtime.Object
	for _, u := range s.EgressIPs {
		objs = append(objs, u.DeepCopy())
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{egressv1.Resource: "EgressIPList"}, objs...)
	log := quiet
	if os.Getenv("CLUSTER_BENCH_DEBUG") != "" { // each pass's and transaction's timings, on stderr
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d := NewDataplane(cfg, &Clients{Typed: kubefake.NewClientset(), Dynamic: dyn}, record.NewFakeRecorder(100000), NewMetrics(), log)
	b.Cleanup(d.Close)
	// As the daemon's (its heartbeat and health checks): the leader
	// sets their targets when the nodes change.
	d.hooks.targets = func([]reach.Target) {}
	begin := time.Now()
	if err := d.Cluster(ctx, s); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d pods: initial sync %v", pods, time.Since(begin).Round(time.Millisecond))
	if path := os.Getenv("CLUSTER_BENCH_NB_LOG"); path != "" {
		if nb == nil {
			b.Fatal("CLUSTER_BENCH_NB_LOG needs CLUSTER_BENCH_NB_ONLY")
		}
		// From here on: the initial sync's messages would be most of it.
		if _, err := nb.Appctl("vlog/set", "jsonrpc:file:dbg"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { // before the NB's own, which removes its directory
			data, err := os.ReadFile(filepath.Join(nb.Dir, "nb.log"))
			if err == nil {
				err = os.WriteFile(path, data, 0o644)
			}
			if err != nil {
				b.Errorf("CLUSTER_BENCH_NB_LOG: %v", err)
			}
		})
	}
	if path := os.Getenv("CLUSTER_BENCH_HEAP"); path != "" { // what the synced leader holds
		goruntime.GC()
		writeProfile(b, "heap", path)
	}
	events := clusterEvents(shape)
	if only := os.Getenv("CLUSTER_BENCH_EVENTS"); only != "" { // a comma-separated subset
		events = slices.DeleteFunc(events, func(ev benchEvent) bool { return !slices.Contains(strings.Split(only, ","), ev.name) })
	}
	lat := map[string][]time.Duration{}
	if path := os.Getenv("CLUSTER_BENCH_ALLOCS"); path != "" { // path.before and path: pprof -diff_base
		writeProfile(b, "allocs", path+".before")
		defer writeProfile(b, "allocs", path)
	}
	if path := os.Getenv("CLUSTER_BENCH_CPUPROFILE"); path != "" { // the events only
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	var mu sync.Mutex // s, between the events and the audits' lists
	if os.Getenv("CLUSTER_BENCH_AUDIT") != "" {
		actx, stop := context.WithCancel(ctx)
		done := make(chan int)
		go func() {
			n := 0
			defer func() { done <- n }()
			for actx.Err() == nil {
				err := d.Audit(actx, func() (desired.Snapshot, error) {
					mu.Lock()
					defer mu.Unlock()
					// The events replace objects in place: the list is
					// copied.
					listed := s
					listed.Changed = nil
					listed.Nodes, listed.Pods, listed.Services = slices.Clone(s.Nodes), slices.Clone(s.Pods), slices.Clone(s.Services)
					listed.EndpointSlices, listed.EgressIPs = slices.Clone(s.EndpointSlices), slices.Clone(s.EgressIPs)
					return listed, nil
				})
				if err != nil && actx.Err() == nil {
					b.Errorf("audit: %v", err)
					return
				}
				n++
			}
		}()
		defer func() {
			stop()
			b.Logf("%d audits", <-done)
		}()
	}
	for b.Loop() {
		for _, ev := range events {
			for _, on := range []bool{true, false} {
				if gap > 0 {
					b.StopTimer()
					time.Sleep(gap)
					b.StartTimer()
				}
				mu.Lock()
				s.Changed = ev.set(&s, on)
				pass := s
				mu.Unlock()
				begin := time.Now()
				if err := d.Cluster(ctx, pass); err != nil {
					b.Fatalf("%s: %v", ev.name, err)
				}
				name := ev.name
				if !on {
					name += "-undone"
				}
				lat[name] = append(lat[name], time.Since(begin))
			}
		}
	}
	for _, ev := range events {
		for _, name := range []string{ev.name, ev.name + "-undone"} {
			l := lat[name]
			slices.Sort(l)
			b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, name+"-p50-ms")
			b.ReportMetric(float64(l[len(l)*99/100].Microseconds())/1000, name+"-p99-ms")
		}
	}
}

// writeProfile writes the named runtime profile ("heap", "allocs") to
// path.
func writeProfile(b *testing.B, name, path string) {
	if name == "allocs" {
		goruntime.GC() // the profile is as of the last completed cycle
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
