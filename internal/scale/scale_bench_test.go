package scale

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/testbed"
)

// Settings of BenchmarkScale, from the environment (make bench-scale sets
// them).
type settings struct {
	// sizes are the cluster sizes in pods, ascending: SCALE_SIZES
	// (default 1000,10000,50000,150000) up to SCALE_MAX_PODS (default
	// 1000, a quick run; the maximum is always measured).
	sizes []int
	// report is the report directory (SCALE_REPORT; none written when
	// empty, and no CPU profiles taken).
	report string
	// syncTimeout bounds the initial sync (SCALE_SYNC_TIMEOUT, 30m),
	// eventTimeout one event (SCALE_EVENT_TIMEOUT, 2m).
	syncTimeout, eventTimeout time.Duration
	// workers are the loader's concurrent requests (SCALE_WORKERS, 48).
	workers int
	// eventBudget bounds one size's event rounds (SCALE_EVENT_BUDGET,
	// 6m: the 100 rounds of make bench-scale take about 4 at 150k pods):
	// the b.Loop iterations past it do nothing, so a large size reports
	// fewer samples rather than taking hours.
	eventBudget time.Duration
}

func settingsFromEnv(b *testing.B) settings {
	b.Helper()
	s := settings{report: os.Getenv("SCALE_REPORT"), syncTimeout: 30 * time.Minute, eventTimeout: 2 * time.Minute, workers: 48,
		eventBudget: 6 * time.Minute}
	maxPods, list := 1000, "1000,10000,50000,150000"
	if v := os.Getenv("SCALE_MAX_PODS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SCALE_MAX_PODS=%q: want a number of pods", v)
		}
		maxPods = n
	}
	if v := os.Getenv("SCALE_SIZES"); v != "" {
		list = v
	}
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("SCALE_SIZES=%q: want comma-separated numbers of pods", list)
		}
		if n <= maxPods {
			s.sizes = append(s.sizes, n)
		}
	}
	if !slices.Contains(s.sizes, maxPods) {
		s.sizes = append(s.sizes, maxPods)
	}
	slices.Sort(s.sizes)
	for _, d := range []struct {
		env string
		v   *time.Duration
	}{{"SCALE_SYNC_TIMEOUT", &s.syncTimeout}, {"SCALE_EVENT_TIMEOUT", &s.eventTimeout}, {"SCALE_EVENT_BUDGET", &s.eventBudget}} {
		if v := os.Getenv(d.env); v != "" {
			t, err := time.ParseDuration(v)
			if err != nil {
				b.Fatalf("%s=%q: %v", d.env, v, err)
			}
			*d.v = t
		}
	}
	if v := os.Getenv("SCALE_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SCALE_WORKERS=%q: want a number", v)
		}
		s.workers = n
	}
	return s
}

// BenchmarkScale measures the `ovnedge` leader (started as deploy/ starts
// it, as its ServiceAccount, under deploy/rbac.yaml) against a real
// kube-apiserver + etcd and a real NB ovsdb-server, at growing cluster
// sizes (ShapeFor: up to 150,000 pods, 2,000 nodes, 10,000 Services x 5
// endpoints, 1,000 EgressIPs). Per size: the time to load the objects,
// the initial sync (daemon start -> every Service's load balancer and
// every served pod's SNAT in the NB, and no change for 3 s), the daemon's
// RSS, and per b.Loop iteration one of each event (Events), timed from
// the API write to the NB row change another NB client sees. See the
// package doc for the settings; make bench-scale runs it.
func BenchmarkScale(b *testing.B) {
	st := settingsFromEnv(b)
	root, err := e2e.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	bin := e2e.BuildAsImage(b, root) // what the chart's pods run
	kube := testbed.StartKubeAPI(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Apply(ctx, kube.Config, filepath.Join(root, "deploy", "crds"), filepath.Join(root, "deploy", "rbac.yaml")); err != nil {
		b.Fatal(err)
	}
	kubeconfig := ServiceAccountKubeconfig(b, kube, "ovnedge-leader")
	nodeKubeconfig := ServiceAccountKubeconfig(b, kube, "ovnedge-node")
	base, err := BaseBinary()
	if err != nil {
		b.Fatal(err)
	}
	loader, err := NewLoader(kube.Config, st.workers)
	if err != nil {
		b.Fatal(err)
	}
	notes := []string{
		fmt.Sprintf("machine: %d CPUs, load average at start %s (shared with other sessions: timings are of a loaded machine)", runtime.NumCPU(), loadavg()),
		"write -> NB: from just before the API write (patch or create) to the NB row change arriving at a separate NB client (a libovsdb monitor, as ovn-northd is); event -> NB: from the watch event of the write (the resourceVersion it wrote, arriving at a watch of the object by name in the benchmark, as at the daemon's informer) to the same NB change; p99 is the nearest rank of n samples, so with n < 100 it is the maximum",
		"initial sync: from starting the ovnedge process (leader election, informers' lists, NB connect included) to the last row change of the load balancers, NATs and router policies, once every Service has its load balancer and every served pod its SNAT and nothing changed for 3 s",
		"the daemon runs deploy/deployment.yaml's arguments minus --sb-address (no chassis here) and with --egressip-reachability-total-timeout=0 (no node answers the health check) and --enable-pprof",
	}
	var results []Result
	var have Shape
	// What the events changed stays for the next, larger size.
	labels, swapped := map[int]string{}, map[int]bool{}
	for _, pods := range st.sizes {
		shape := ShapeFor(pods)
		r := Result{Shape: shape, Latency: map[string][]time.Duration{}, FromEvent: map[string][]time.Duration{},
			API: map[string][]time.Duration{}, Failed: map[string]int{}}
		begin := time.Now()
		steps, err := loader.Grow(ctx, have, shape)
		if err != nil {
			b.Fatal(err)
		}
		r.Load, r.Steps = time.Since(begin), steps
		for _, s := range steps {
			r.Objects += s.Objects
			r.Requests += s.Requests
			progressf("loaded %d %ss (%d requests) in %v", s.Objects, s.Kind, s.Requests, s.Duration.Round(time.Millisecond))
		}
		have = shape
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			m := &measure{b: b, st: st, shape: shape, r: &r, cs: loader.CS, bin: bin, kubeconfig: kubeconfig,
				labels: labels, swapped: swapped, kube: kube, nodeKubeconfig: nodeKubeconfig, base: base}
			m.run(ctx)
		})
		results = append(results, r)
		if b.Failed() {
			break
		}
	}
	notes = append(notes, "load average at the end "+loadavg())
	for _, r := range results {
		var parts []string
		for _, s := range r.Steps {
			parts = append(parts, fmt.Sprintf("%d %ss %.1f s", s.Objects, s.Kind, s.Duration.Seconds()))
		}
		notes = append(notes, fmt.Sprintf("loading to %d pods: %d objects, %d requests in %.1f s (%.0f requests/s; %d concurrent, no client rate limit): %s",
			r.Shape.Pods, r.Objects, r.Requests, r.Load.Seconds(), float64(r.Requests)/r.Load.Seconds(), st.workers, strings.Join(parts, ", ")))
		var api []string
		for _, k := range Events {
			api = append(api, fmt.Sprintf("%s %s ms", k, fmtMS(Percentile(r.API[k], 0.5))))
		}
		notes = append(notes, fmt.Sprintf("at %d pods the API write itself took (p50) %s; initial sync: %d cluster reconciles taking %.1f s in all, %d NB operations, %d NB repairs (%d more during the events); informers synced after %.1f s; the leader last seen comparing its writes' echo %.1f s after its start (the events wait for it); NB topology (not the daemon's) created in %.1f s",
			r.Shape.Pods, strings.Join(api, ", "), r.Reconciles, r.ReconcileSeconds, r.NBOps, r.SyncRepairs, r.EventRepairs, r.Informers.Seconds(), r.Compared.Seconds(), r.Topology.Seconds()))
	}
	if st.report != "" && len(results) > 0 {
		notes = append(notes, "CPU profiles of the daemon: cpu-sync-<pods>.pb.gz (initial sync) and cpu-events-<pods>.pb.gz (the events), summaries in the .txt files beside them (`go tool pprof -top`); what the daemon allocated during the events: allocs-events-<pods>.txt (`go tool pprof -sample_index=alloc_space -diff_base allocs-events-<pods>-before.pb.gz allocs-events-<pods>.pb.gz`, between the daemon's last GCs before and after the events); the daemon's log: leader-<pods>.log, the NB's: nb-<pods>.log")
		if err := WriteReport(st.report, results, notes); err != nil {
			b.Fatal(err)
		}
		b.Logf("scale: report in %s", st.report)
	}
}

// loadavg is /proc/loadavg's first three fields.
func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// measure is one size's sub-benchmark.
type measure struct {
	b          *testing.B
	st         settings
	shape      Shape
	r          *Result
	cs         kubernetes.Interface
	bin        string
	kubeconfig string
	leader     *Leader
	lbs        *Table[*nbdb.LoadBalancer]
	nats       *Table[*nbdb.NAT]
	policies   *Table[*nbdb.LogicalRouterPolicy]
	// kube is the API server; nodeKubeconfig the node instances'
	// (ServiceAccount ovnedge-node), base the baseline binary they also
	// run (SCALE_BASE_BIN; "" for none).
	kube                 *testbed.KubeAPI
	nodeKubeconfig, base string
	labels               map[int]string // pods relabelled (by any size): their LabelEIP now
	swapped              map[int]bool   // Services whose first endpoint is pod PodsPerService*j+1
	lastLat              time.Duration
	profDir, label       string
}

// startNB starts a fresh NB with this size's topology and the watches
// of its tables (m.lbs, m.nats, m.policies); it returns the NB and how
// long the topology took.
func (m *measure) startNB(ctx context.Context) (*testbed.NB, time.Duration) {
	b := m.b
	nb := testbed.StartNB(b)
	begin := time.Now()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{nb.Remote}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := ovsdbnb.EnsureTopology(ctx, c, m.shape.Topology()); err != nil {
		b.Fatal(err)
	}
	c.Close()
	topology := time.Since(begin)
	m.lbs = watchNB(b, ctx, nb.Remote, nbdb.LoadBalancerTable, &nbdb.LoadBalancer{}, func(lb *nbdb.LoadBalancer) []string {
		return []string{lb.ExternalIDs[ovsdbnb.KeyOwner]}
	})
	m.nats = watchNB(b, ctx, nb.Remote, nbdb.NATTable, &nbdb.NAT{}, func(n *nbdb.NAT) []string {
		return []string{"ip:" + n.ExternalIP, "pod:" + n.LogicalIP}
	})
	m.policies = watchNB(b, ctx, nb.Remote, nbdb.LogicalRouterPolicyTable, &nbdb.LogicalRouterPolicy{},
		func(*nbdb.LogicalRouterPolicy) []string { return nil })
	return nb, topology
}

// baseLeader runs the baseline binary's leader (SCALE_BASE_BIN) through
// its initial sync, on an NB of its own, before this tree's leader
// starts: its sync times and memory, side by side in the report. It is
// stopped, and its NB's watches closed, before it returns.
func (m *measure) baseLeader(ctx context.Context, logDir string) *LeaderRun {
	saved := *m
	defer func() {
		m.r, m.leader, m.lbs, m.nats, m.policies = saved.r, saved.leader, saved.lbs, saved.nats, saved.policies
	}()
	nb, _ := m.startNB(ctx)
	defer func() { m.lbs.Close(); m.nats.Close(); m.policies.Close() }()
	m.r = &Result{}
	m.leader = StartLeader(m.b, m.base, logDir, "leader-base-"+m.label, m.kubeconfig, nb.Remote, "off")
	defer func() { _ = m.leader.Terminate() }()
	m.sync(ctx)
	mem, err := ProcMemory(m.leader.Pid())
	if err != nil {
		m.b.Fatal(err)
	}
	run := &LeaderRun{Informers: m.r.Informers, Sync: m.r.Sync, Synced: mem}
	progressf("%d pods: base leader: informers synced in %v, NB converged in %v, RSS %.0f MiB (peak %.0f)",
		m.shape.Pods, run.Informers.Round(time.Millisecond), run.Sync.Round(time.Millisecond), mib(mem.RSS), mib(mem.Peak))
	m.b.ReportMetric(mib(mem.Peak), "base-peak-RSS-MiB")
	m.b.ReportMetric(run.Sync.Seconds(), "base-sync-s")
	return run
}

func (m *measure) run(ctx context.Context) {
	b := m.b
	pods := m.shape.Pods
	m.label = strconv.Itoa(pods)
	m.profDir = m.st.report
	if m.profDir != "" {
		if err := os.MkdirAll(m.profDir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if m.base != "" {
		dir := m.profDir
		if dir == "" {
			dir = b.TempDir()
		}
		m.r.BaseLeader = m.baseLeader(ctx, dir)
	}
	nb, topology := m.startNB(ctx)
	m.r.Topology = topology

	logDir := nb.Dir // removed with the NB unless the benchmark fails
	if m.profDir != "" {
		logDir = m.profDir
	}
	m.leader = StartLeader(b, m.bin, logDir, "leader-"+m.label, m.kubeconfig, nb.Remote, LeaderMemLimit())
	if m.profDir != "" {
		// The NB's own log (its compactions, slow transactions), kept
		// before the NB's directory is removed (cleanups run last first).
		b.Cleanup(func() {
			if log, err := os.ReadFile(filepath.Join(nb.Dir, "nb.log")); err != nil {
				b.Logf("scale: the NB's log: %v", err)
			} else if err := os.WriteFile(filepath.Join(m.profDir, "nb-"+m.label+".log"), log, 0o644); err != nil {
				b.Logf("scale: the NB's log: %v", err)
			}
		})
	}
	stopProf := m.profile(ctx, "cpu-sync-"+m.label)
	m.sync(ctx)
	stopProf()
	met, err := m.leader.Metrics(ctx)
	if err != nil {
		b.Fatal(err)
	}
	m.r.Reconciles, m.r.ReconcileSeconds, m.r.NBOps, m.r.SyncRepairs = met.Reconciles, met.ReconcileSeconds, met.NBOps, met.NBRepairs
	if m.r.Synced, err = ProcMemory(m.leader.Pid()); err != nil {
		b.Fatal(err)
	}
	m.heap(ctx, "heap-synced-"+m.label)
	progressf("%d pods: informers synced in %v, first NB row after %v, NB converged in %v, RSS %.0f MiB (peak %.0f), %d reconciles (%.1f s), %d NB ops",
		pods, m.r.Informers.Round(time.Millisecond), m.r.FirstRow.Round(time.Millisecond), m.r.Sync.Round(time.Millisecond), mib(m.r.Synced.RSS), mib(m.r.Synced.Peak),
		met.Reconciles, met.ReconcileSeconds, met.NBOps)

	events := []struct {
		kind string
		f    func(ctx context.Context, round int) (sample, error)
	}{{EventPodLabel, m.podLabel}, {EventNewService, m.newService}, {EventEndpoint, m.endpoint}, {EventNodeNotReady, m.nodeNotReady}}
	stopProf = m.profile(ctx, "cpu-events-"+m.label)
	stopAllocs := m.allocs(ctx, "allocs-events-"+m.label)
	b.ResetTimer()
	eventsBegin := time.Now()
	for round := 0; b.Loop(); round++ {
		if time.Since(eventsBegin) > m.st.eventBudget {
			m.r.Skipped++
			continue
		}
		var line []string
		for _, e := range events {
			sm, err := e.f(ctx, round)
			if err != nil {
				m.r.Failed[e.kind]++
				progressf("%d pods: %s, round %d: %v", pods, e.kind, round, err)
			} else {
				m.r.Latency[e.kind] = append(m.r.Latency[e.kind], sm.Latency)
				m.r.FromEvent[e.kind] = append(m.r.FromEvent[e.kind], sm.FromEvent)
				m.r.API[e.kind] = append(m.r.API[e.kind], sm.API)
				m.lastLat = sm.Latency
				line = append(line, fmt.Sprintf("%s %v (event %v)", e.kind, sm.Latency.Round(100*time.Microsecond), sm.FromEvent.Round(100*time.Microsecond)))
			}
			m.settle(ctx)
		}
		progressf("%d pods: round %d: %s", pods, round, strings.Join(line, ", "))
	}
	b.StopTimer()
	if after, err := m.leader.Metrics(ctx); err == nil {
		m.r.EventRepairs = after.NBRepairs - met.NBRepairs
	}
	if m.r.Skipped > 0 {
		progressf("%d pods: %d rounds skipped (SCALE_EVENT_BUDGET %v spent)", pods, m.r.Skipped, m.st.eventBudget)
	}
	stopProf()
	stopAllocs()
	if m.r.After, err = ProcMemory(m.leader.Pid()); err != nil {
		b.Fatal(err)
	}
	if m.r.Cgroup, err = m.leader.CgroupStats(); err != nil {
		b.Fatal(err)
	}
	if c := m.r.Cgroup; c.Limit > 0 {
		progressf("%d pods: leader's memory cgroup: limit %.0f MiB, peak charged %.0f MiB, now anon %.0f MiB and page cache %.0f MiB, limit hit %d times, %d OOM kills",
			pods, mib(c.Limit), mib(c.MaxUsage), mib(c.RSS), mib(c.Cache), c.Failcnt, c.OOMKills)
	}
	for _, k := range Events {
		b.ReportMetric(ms(Percentile(m.r.Latency[k], 0.5)), k+"-p50-ms")
		b.ReportMetric(ms(Percentile(m.r.Latency[k], 0.99)), k+"-p99-ms")
		b.ReportMetric(ms(Percentile(m.r.FromEvent[k], 0.99)), k+"-event-p99-ms")
	}
	m.r.Nodes = m.nodes(ctx, logDir)
	b.ReportMetric(m.r.Sync.Seconds(), "sync-s")
	b.ReportMetric(m.r.Load.Seconds(), "load-s")
	b.ReportMetric(mib(m.r.After.Peak), "peak-RSS-MiB")
	b.ReportMetric(mib(m.r.Synced.RSS), "synced-RSS-MiB")
}

// nodes measures node 0's instance beside the leader, once its events
// are done: with the baseline binary first when there is one
// (SCALE_BASE_BIN), then with this tree's.
func (m *measure) nodes(ctx context.Context, dir string) []NodeResult {
	type binary struct{ name, path string }
	bins := []binary{{"new", m.bin}}
	if m.base != "" {
		bins = append([]binary{{"base", m.base}}, bins...)
	}
	var out []NodeResult
	for _, bin := range bins {
		name := "node-" + bin.name + "-" + m.label
		run := NodeRun{Kube: m.kube, CS: m.cs, Bin: bin.path, Binary: bin.name, Name: name, Dir: dir, Kubeconfig: m.nodeKubeconfig,
			Settle: 3 * time.Second, Rounds: m.b.N, Timeout: m.st.eventTimeout, MemLimit: NodeMemLimit()}
		if bin.name == "base" {
			run.MemLimit = "off" // the baseline's node outgrew the chart's limit
		}
		if m.profDir != "" {
			run.Heap = filepath.Join(m.profDir, "heap-"+name+".pb.gz")
			run.Profile = func(l *Leader) func() { return m.profileOf(ctx, l, "cpu-events-"+name, time.Second) }
		}
		r, err := MeasureNode(m.b, ctx, run)
		if err != nil {
			m.b.Fatal(err)
		}
		if run.Heap != "" {
			m.summary("heap-"+name, "heap", "-sample_index=inuse_space", run.Heap)
		}
		var lat []string
		for _, k := range NodeEvents {
			lat = append(lat, fmt.Sprintf("%s p50 %s / p99 %s ms (event -> bridge p50 %s / p99 %s, %d failed)", k,
				fmtMS(Percentile(r.Latency[k], 0.5)), fmtMS(Percentile(r.Latency[k], 0.99)),
				fmtMS(Percentile(r.FromEvent[k], 0.5)), fmtMS(Percentile(r.FromEvent[k], 0.99)), r.Failed[k]))
			m.b.ReportMetric(ms(Percentile(r.FromEvent[k], 0.5)), "node-"+bin.name+"-"+k+"-event-p50-ms")
			m.b.ReportMetric(ms(Percentile(r.FromEvent[k], 0.99)), "node-"+bin.name+"-"+k+"-event-p99-ms")
		}
		progressf("%d pods: node instance (%s): ready after %v, %d flows, RSS %.0f MiB (anon %.0f, file %.0f; peak %.0f), heap in use %.0f MiB, watches %v; %s",
			m.shape.Pods, bin.name, r.Ready.Round(time.Millisecond), r.Flows, mib(r.Mem.RSS), mib(r.Mem.Anon), mib(r.Mem.File), mib(r.Mem.Peak),
			mib(r.Heap), r.Watches, strings.Join(lat, "; "))
		m.b.ReportMetric(mib(r.Mem.RSS), "node-"+bin.name+"-RSS-MiB")
		m.b.ReportMetric(mib(r.Heap), "node-"+bin.name+"-heap-MiB")
		m.b.ReportMetric(float64(r.Watches["pods"]), "node-"+bin.name+"-pod-watches")
		out = append(out, r)
	}
	return out
}

func watchNB[M Row](b *testing.B, ctx context.Context, endpoint, table string, row M, key func(M) []string) *Table[M] {
	t, err := WatchTable(ctx, endpoint, table, row, key)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(t.Close)
	return t
}

// heap writes the daemon's live heap (after a forced GC) to <name>.pb.gz
// and its summary by in-use space to <name>.txt.
func (m *measure) heap(ctx context.Context, name string) {
	if m.profDir == "" {
		return
	}
	out := filepath.Join(m.profDir, name+".pb.gz")
	if err := m.leader.WriteHeap(ctx, out); err != nil {
		m.b.Logf("scale: heap profile %s: %v", name, err)
		return
	}
	m.summary(name, "heap", "-sample_index=inuse_space", out)
}

// allocs reads the daemon's allocation profile now and again when the
// returned function is called, which writes the second to
// <name>.pb.gz with what was allocated between the two (`go tool pprof
// -sample_index=alloc_space -diff_base`) in <name>.txt: the garbage the
// events make, which sets how often the daemon's GC runs.
func (m *measure) allocs(ctx context.Context, name string) func() {
	if m.profDir == "" {
		return func() {}
	}
	base := filepath.Join(m.profDir, name+"-before.pb.gz")
	if err := m.leader.WriteAllocs(ctx, base); err != nil {
		m.b.Logf("scale: allocation profile %s: %v", name, err)
		return func() {}
	}
	return func() {
		out := filepath.Join(m.profDir, name+".pb.gz")
		if err := m.leader.WriteAllocs(ctx, out); err != nil {
			m.b.Logf("scale: allocation profile %s: %v", name, err)
			return
		}
		m.summary(name, "allocation", "-sample_index=alloc_space", "-diff_base", base, out)
	}
}

// summary writes `go tool pprof -top` of a profile (args: the options
// and the file), then sorted by cumulative what, to <name>.txt.
func (m *measure) summary(name, what string, args ...string) {
	pprof := func(more ...string) ([]byte, error) {
		return exec.Command("go", append(append([]string{"tool", "pprof", "-top", "-nodecount=40"}, more...), args...)...).CombinedOutput()
	}
	top, err := pprof()
	if err != nil {
		m.b.Logf("scale: pprof -top %s: %v\n%s", name, err, top)
		return
	}
	cum, _ := pprof("-cum")
	_ = os.WriteFile(filepath.Join(m.profDir, name+".txt"), append(append(top, "\n--- sorted by cumulative "+what+" ---\n"...), cum...), 0o644)
}

// profile collects the daemon's CPU profile into the report directory
// until the returned function is called, which merges the slices into
// <name>.pb.gz with a `go tool pprof -top` summary in <name>.txt.
func (m *measure) profile(ctx context.Context, name string) func() {
	return m.profileOf(ctx, m.leader, name, 5*time.Second)
}

// profileOf is profile of the daemon l, in slices of slice.
func (m *measure) profileOf(ctx context.Context, l *Leader, name string, slice time.Duration) func() {
	if m.profDir == "" {
		return func() {}
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan []string, 1)
	go func() { done <- l.Profile(pctx, filepath.Join(m.profDir, name), slice) }()
	return func() {
		cancel()
		parts := <-done
		if len(parts) == 0 {
			m.b.Logf("scale: no CPU profile %s (shorter than one %v slice)", name, slice)
			return
		}
		out := filepath.Join(m.profDir, name+".pb.gz")
		merge := exec.Command("go", append([]string{"tool", "pprof", "-proto", "-output", out}, parts...)...)
		if o, err := merge.CombinedOutput(); err != nil {
			m.b.Logf("scale: merge profile %s: %v\n%s", name, err, o)
			return
		}
		for _, p := range parts {
			_ = os.Remove(p)
		}
		m.summary(name, "time", out)
	}
}

// sync waits for the daemon's informers (its log's "informers synced"),
// then for the NB to hold every
// Service's load balancer and every served pod's SNAT with nothing
// changing for 3 s, and for the leader to have compared the echo of what
// it wrote (the monitor shows its own writes as changes).
func (m *measure) sync(ctx context.Context) {
	b, l := m.b, m.leader
	deadline := l.Started.Add(m.st.syncTimeout)
	for {
		if at, ok := l.Logged("informers synced"); ok {
			m.r.Informers = at.Sub(l.Started)
			break
		}
		if !l.Alive() || time.Now().After(deadline) {
			b.Fatalf("scale: leader's informers not synced%s", l.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	served := m.shape.Served()
	var missing string
	complete := func() bool {
		missing = ""
		m.lbs.Read(func(v View[*nbdb.LoadBalancer]) {
			for j := range m.shape.Services {
				if len(v.Rows(ServiceNamespace(j)+"/"+ServiceName(j))) == 0 {
					missing = "the load balancer of Service " + ServiceName(j)
					return
				}
			}
		})
		if missing != "" {
			return false
		}
		m.nats.Read(func(v View[*nbdb.NAT]) {
			for _, i := range served {
				want := EgressIPAddr(EgressIPOf(i, m.podEIP(i))).String()
				if !slices.ContainsFunc(v.Rows("pod:"+PodIP(i).String()), func(n *nbdb.NAT) bool { return n.ExternalIP == want }) {
					missing = fmt.Sprintf("the SNAT of pod %d to %s", i, want)
					return
				}
			}
		})
		return missing == ""
	}
	const quiet = 3 * time.Second
	var lastReconciles int
	var stableSince time.Time
	progress := time.Now()
	for {
		if !l.Alive() {
			b.Fatalf("scale: leader exited%s", l.Log())
		}
		if time.Now().After(deadline) {
			b.Fatalf("scale: NB not converged within %v: missing %s%s", m.st.syncTimeout, missing, l.Log())
		}
		time.Sleep(250 * time.Millisecond)
		met, err := l.Metrics(ctx)
		if time.Since(progress) > 30*time.Second {
			progress = time.Now()
			last := "none yet"
			if t := m.lastNBChange(); !t.IsZero() {
				last = time.Since(t).Round(time.Millisecond).String() + " ago"
			}
			progressf("%d pods: syncing for %v: %d cluster reconciles done, last NB change %s, missing %s (metrics: %v)",
				m.shape.Pods, time.Since(l.Started).Round(time.Second), met.Reconciles, last, cmp.Or(missing, "not checked yet"), cmp.Or[error](err, errNone))
		}
		if err != nil {
			continue
		}
		if met.Comparing { // the echo of the initial sync, being compared
			m.r.Compared = time.Since(l.Started)
			stableSince = time.Now()
			continue
		}
		if met.Reconciles != lastReconciles {
			lastReconciles, stableSince = met.Reconciles, time.Now()
			continue
		}
		last := m.lastNBChange()
		if last.IsZero() || time.Since(last) < quiet || time.Since(stableSince) < quiet || !complete() {
			continue
		}
		m.r.Sync = last.Sub(l.Started)
		var first time.Time
		for _, t := range []time.Time{m.lbs.FirstChange(), m.nats.FirstChange(), m.policies.FirstChange()} {
			if first.IsZero() || (!t.IsZero() && t.Before(first)) {
				first = t
			}
		}
		m.r.FirstRow = first.Sub(l.Started)
		return
	}
}

var errNone = errors.New("ok")

// lastNBChange is when the last change of the watched tables arrived.
func (m *measure) lastNBChange() time.Time {
	var last time.Time
	for _, f := range []func() (time.Time, int64){m.lbs.LastChange, m.nats.LastChange, m.policies.LastChange} {
		if t, _ := f(); t.After(last) {
			last = t
		}
	}
	return last
}

// settle waits until the daemon is idle: no reconcile finished, no NB
// repair comparing and no NB change for 1.2 times the last event's
// latency (at least 300 ms), so a reconcile that follows (the status
// writes' own echo) is over too.
func (m *measure) settle(ctx context.Context) {
	quiet := max(300*time.Millisecond, m.lastLat*6/5)
	deadline := time.Now().Add(m.st.eventTimeout)
	met, _ := m.leader.Metrics(ctx)
	n, since := met.Reconciles, time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		met, err := m.leader.Metrics(ctx)
		if err != nil {
			continue
		}
		if met.Reconciles != n || met.Comparing {
			n, since = met.Reconciles, time.Now()
			continue
		}
		if time.Since(since) >= quiet && time.Since(m.lastNBChange()) >= quiet {
			return
		}
	}
}

// pick returns the round-th of n candidates, stepping by a prime so
// consecutive rounds touch different objects.
func pick(round, n int) int { return (round * 7919) % n }

// podEIP is pod i's LabelEIP now.
func (m *measure) podEIP(i int) string {
	if e, ok := m.labels[i]; ok {
		return e
	}
	return PodEIP(i)
}

// podLabel moves a served pod from its group's one EgressIP to the other
// (label eip=a <-> b): its SNAT's external IP changes.
func (m *measure) podLabel(ctx context.Context, round int) (sample, error) {
	served := m.shape.Served()
	i := served[pick(round, len(served))]
	cur := m.podEIP(i)
	next := map[string]string{"a": "b", "b": "a"}[cur]
	podIP := PodIP(i).String()
	oldIP, newIP := EgressIPAddr(EgressIPOf(i, cur)).String(), EgressIPAddr(EgressIPOf(i, next)).String()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, LabelEIP, next)
	pods := m.cs.CoreV1().Pods(PodNamespace(i))
	sm, err := timed(ctx, m.st.eventTimeout, m.nats, func(v View[*nbdb.NAT]) bool {
		rows := v.Rows("pod:" + podIP)
		return slices.ContainsFunc(rows, func(n *nbdb.NAT) bool { return n.ExternalIP == newIP }) &&
			!slices.ContainsFunc(rows, func(n *nbdb.NAT) bool { return n.ExternalIP == oldIP })
	}, func(ctx context.Context) (watch.Interface, error) { return pods.Watch(ctx, byName(PodName(i))) },
		func() (string, error) {
			p, err := pods.Patch(ctx, PodName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return resourceVersion(p, err)
		})
	if err == nil {
		m.labels[i] = next
	}
	return sm, err
}

// newService creates a ClusterIP Service (no endpoints) and times its
// load balancer; it is deleted again (not timed) so the size stays.
func (m *measure) newService(ctx context.Context, round int) (sample, error) {
	ns, name := NamespaceName(0), fmt.Sprintf("new-%d", round)
	owner := ns + "/" + name
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	services := m.cs.CoreV1().Services(ns)
	sm, err := timed(ctx, m.st.eventTimeout, m.lbs, func(v View[*nbdb.LoadBalancer]) bool { return len(v.Rows(owner)) > 0 },
		func(ctx context.Context) (watch.Interface, error) { return services.Watch(ctx, byName(name)) },
		func() (string, error) { return resourceVersion(services.Create(ctx, svc, metav1.CreateOptions{})) })
	if err != nil {
		return sm, err
	}
	m.settle(ctx)
	gone := m.lbs.Expect(func(v View[*nbdb.LoadBalancer]) bool { return len(v.Rows(owner)) == 0 })
	derr := services.Delete(ctx, name, metav1.DeleteOptions{})
	if derr == nil {
		wctx, cancel := context.WithTimeout(ctx, m.st.eventTimeout)
		_, derr = gone.Wait(wctx)
		cancel()
	}
	if derr != nil {
		m.b.Logf("scale: delete Service %s: %v", owner, derr)
	}
	return sm, nil
}

// endpoint replaces the first endpoint of a ClusterIP Service's
// EndpointSlice (pod PodsPerService*j <-> PodsPerService*j+1).
func (m *measure) endpoint(ctx context.Context, round int) (sample, error) {
	var candidates []int
	for j := range m.shape.Services {
		if ServiceType(j) == corev1.ServiceTypeClusterIP {
			candidates = append(candidates, j)
		}
	}
	if len(candidates) == 0 {
		return sample{}, fmt.Errorf("no ClusterIP Service")
	}
	j := candidates[pick(round, len(candidates))]
	eps := Endpoints(j)
	oldPod, newPod := eps[0], eps[0]+1
	if m.swapped[j] {
		oldPod, newPod = newPod, oldPod
	}
	eps[0] = newPod
	body, err := json.Marshal(map[string]any{"endpoints": EndpointSlice(j, eps).Endpoints})
	if err != nil {
		return sample{}, err
	}
	owner := ServiceNamespace(j) + "/" + ServiceName(j)
	oldBE, newBE := PodIP(oldPod).String()+":"+strconv.Itoa(BackendPort), PodIP(newPod).String()+":"+strconv.Itoa(BackendPort)
	sliceAPI := m.cs.DiscoveryV1().EndpointSlices(ServiceNamespace(j))
	sliceName := ServiceName(j) + "-scale"
	sm, err := timed(ctx, m.st.eventTimeout, m.lbs, func(v View[*nbdb.LoadBalancer]) bool {
		rows := v.Rows(owner)
		for _, lb := range rows {
			for _, backends := range lb.Vips {
				be := strings.Split(backends, ",")
				if !slices.Contains(be, newBE) || slices.Contains(be, oldBE) {
					return false
				}
			}
		}
		return len(rows) > 0
	}, func(ctx context.Context) (watch.Interface, error) { return sliceAPI.Watch(ctx, byName(sliceName)) },
		func() (string, error) {
			return resourceVersion(sliceAPI.Patch(ctx, sliceName, types.MergePatchType, body, metav1.PatchOptions{}))
		})
	if err == nil {
		m.swapped[j] = !m.swapped[j]
	}
	return sm, err
}

// nodeNotReady sets the node hosting an egress IP NotReady and times the
// move of that egress IP's SNATs to another node; the node is made Ready
// again (not timed).
func (m *measure) nodeNotReady(ctx context.Context, round int) (sample, error) {
	var ip, port string
	var count int
	for try := range m.shape.EgressIPs {
		ip = EgressIPAddr(pick(round+try, m.shape.EgressIPs)).String()
		m.nats.Read(func(v View[*nbdb.NAT]) {
			rows := v.Rows("ip:" + ip)
			count = len(rows)
			if count > 0 && rows[0].LogicalPort != nil {
				port = *rows[0].LogicalPort
			}
		})
		if port != "" {
			break
		}
	}
	node, ok := strings.CutPrefix(port, "k8s-")
	if !ok {
		return sample{}, fmt.Errorf("no egress IP with SNATs on a node")
	}
	nodes := m.cs.CoreV1().Nodes()
	setReady := func(ready bool) (string, error) {
		st := corev1.ConditionTrue
		if !ready {
			st = corev1.ConditionFalse
		}
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now()}}}})
		if err != nil {
			return "", err
		}
		return resourceVersion(nodes.Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"))
	}
	sm, err := timed(ctx, m.st.eventTimeout, m.nats, func(v View[*nbdb.NAT]) bool {
		rows := v.Rows("ip:" + ip)
		return len(rows) == count && !slices.ContainsFunc(rows, func(n *nbdb.NAT) bool { return n.LogicalPort == nil || *n.LogicalPort == port })
	}, func(ctx context.Context) (watch.Interface, error) { return nodes.Watch(ctx, byName(node)) },
		func() (string, error) { return setReady(false) })
	m.settle(ctx)
	if _, rerr := setReady(true); rerr != nil {
		m.b.Logf("scale: node %s Ready again: %v", node, rerr)
	}
	return sm, err
}
