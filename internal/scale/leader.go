package scale

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/ovnedge/ovnedge/testbed"
)

// LeaderArgs are deploy/deployment.yaml's arguments of the leader, in its
// order, as this cluster needs them (its cluster subnet, the NB at nb,
// metrics on metrics), without --sb-address (no chassis installs
// anything here, so make-before-break would wait for nothing), and with
// --egressip-reachability-total-timeout=0 (no node answers the health
// check: every node counts as reachable) and --enable-pprof.
func LeaderArgs(kubeconfig, nb, metrics string) []string {
	return []string{"daemon", "--kubeconfig=" + kubeconfig,
		"--leader-elect=true", "--nb-address=" + nb, "--lb-templates=true",
		"--cluster-subnets=" + ClusterSubnet + "/" + strconv.Itoa(HostPrefix),
		"--gateway-v4-join-subnet=" + JoinSubnet, "--gateway-v6-join-subnet=fd98::/64",
		"--gateway-v4-masquerade-subnet=169.254.169.0/29", "--gateway-v6-masquerade-subnet=fd69::/125",
		"--metrics-address=" + metrics, "--log-level=info", "--kube-api-qps=200", "--kube-api-burst=400", "--enable-egress-ip=true",
		"--egressip-node-healthcheck-port=9107", "--egressip-heartbeat-port=9108",
		"--egressip-reachability-total-timeout=0", "--enable-pprof=true"}
}

// LeaderMemLimit is the container memory limit, in bytes, this tree's
// leader is told (daemon.EnvMemoryLimit, as the chart's Deployment sets
// it from its limit, 512Mi by default; the daemon gives the Go runtime
// 90% of it): SCALE_LEADER_MEMORY_LIMIT, default 536870912 ("off": none).
func LeaderMemLimit() string {
	return cmp.Or(os.Getenv("SCALE_LEADER_MEMORY_LIMIT"), "536870912")
}

// LeaderEnv is what StartLeader adds to the leader's environment:
// GODEBUG=SCALE_DAEMON_GODEBUG when that is set (gctrace=1 puts the
// leader's GC cycles in its log; given to the whole go test command,
// GODEBUG would reach the compiler too, and the build cache would replay
// the compiler's output on later builds), and the container memory limit
// memLimit (daemon.EnvMemoryLimit) unless it is "" or "off".
func LeaderEnv(memLimit string) []string {
	var env []string
	if g := os.Getenv("SCALE_DAEMON_GODEBUG"); g != "" {
		env = append(env, "GODEBUG="+g)
	}
	if memLimit != "" && memLimit != "off" {
		env = append(env, "OVNEDGE_MEMORY_LIMIT="+memLimit) // daemon.EnvMemoryLimit (a cycle in the daemon's tests to import)
	}
	return env
}

// Leader is a running `ovnedge daemon` leader under measurement.
type Leader struct {
	*testbed.Process
	// URL is its metrics server, "http://127.0.0.1:PORT"; LogFile its log
	// file.
	URL, LogFile string
	// Started is when the process was started.
	Started time.Time
	// Cgroup is the memory cgroup it runs in, limited as the chart's
	// container is (nil without a limit).
	Cgroup *testbed.MemoryCgroup
}

// StartLeader starts bin with LeaderArgs and LeaderEnv(memLimit), in a
// memory cgroup limited to memLimit (Limited) unless that is "off",
// logging to dir/name.log; it is stopped (by PID) when t ends.
func StartLeader(t testbed.T, bin, dir, name, kubeconfig, nb, memLimit string) *Leader {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(testbed.FreePorts(t, 1)[0])
	log := filepath.Join(dir, name+".log")
	begin := time.Now()
	args := LeaderArgs(kubeconfig, nb, addr)
	if level := os.Getenv("SCALE_LOG_LEVEL"); level != "" { // e.g. debug: each pass's timings in the log
		args = append(args, "--log-level="+level)
	}
	if every := os.Getenv("SCALE_FULL_RECOMPUTE"); every != "" { // the audits among the events
		args = append(args, "--full-recompute="+every)
	}
	cg, argv := Limited(t, memLimit, append([]string{bin}, args...))
	p := testbed.StartProcess(t, "ovnedge "+name, log, LeaderEnv(memLimit), argv...)
	return &Leader{Process: p, URL: "http://" + addr, LogFile: log, Started: begin, Cgroup: cg}
}

// Limited is argv in a memory cgroup limited to memLimit (bytes or a
// Kubernetes quantity), as a kubelet runs a container with that
// resources.limits.memory; with memLimit "" or "off", argv as it is and
// no group.
func Limited(t testbed.T, memLimit string, argv []string) (*testbed.MemoryCgroup, []string) {
	t.Helper()
	if memLimit == "" || memLimit == "off" {
		return nil, argv
	}
	q, err := resource.ParseQuantity(memLimit)
	if err != nil {
		t.Fatalf("scale: memory limit %q: %v", memLimit, err)
	}
	cg := testbed.NewMemoryCgroup(t, q.Value())
	return cg, cg.Command(argv...)
}

// CgroupStats are l's memory cgroup's counters (zero without one).
func (l *Leader) CgroupStats() (testbed.MemoryCgroupStats, error) {
	if l.Cgroup == nil {
		return testbed.MemoryCgroupStats{}, nil
	}
	return l.Cgroup.Stats()
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// get returns the body of path on the metrics server.
func (l *Leader) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.URL+path, nil)
	if err != nil {
		return nil, err
	}
	c := httpClient
	if strings.HasPrefix(path, "/debug/pprof/profile") {
		c = &http.Client{} // the request's context bounds it
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", path, resp.Status)
	}
	return body, nil
}

// Logged returns the time of the first line of the leader's log whose
// message is msg, and whether there is one. (Its /readyz turns ready only
// after its first successful pass, so it no longer says when the
// informers synced.)
func (l *Leader) Logged(msg string) (time.Time, bool) {
	f, err := os.Open(l.LogFile)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, ` msg="`+msg+`"`) && !strings.Contains(line, " msg="+msg+" ") {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return at, true
		}
	}
	return time.Time{}, false
}

// Ready reports whether /readyz answers 200 (the instance's first pass
// succeeded).
func (l *Leader) Ready(ctx context.Context) bool {
	_, err := l.get(ctx, "/readyz")
	return err == nil
}

// Metrics are the counters of the daemon's /metrics the report uses.
type Metrics struct {
	// Reconciles and ReconcileSeconds are the cluster loop's finished
	// reconciles and their total duration.
	Reconciles       int
	ReconcileSeconds float64
	// NBOps are the Northbound operations sent, all kinds.
	NBOps int
	// NBRepairs are the leader's NB repairs that wrote rows (all
	// reasons: changed, reconnected, topology, periodic).
	NBRepairs int
	// Comparing is true while the leader compares NB rows with what it
	// wrote (ovnedge_nb_repair_comparing): after the initial sync, the
	// echo of all it wrote.
	Comparing bool
}

// Metrics scrapes /metrics.
func (l *Leader) Metrics(ctx context.Context) (Metrics, error) {
	body, err := l.get(ctx, "/metrics")
	if err != nil {
		return Metrics{}, err
	}
	return parseMetrics(string(body)), nil
}

// parseMetrics reads the samples Metrics holds from the text exposition
// format.
func parseMetrics(text string) Metrics {
	var m Metrics
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch name := line[:i]; {
		case strings.HasPrefix(name, `ovnedge_reconcile_duration_seconds_count{loop="cluster"`):
			m.Reconciles += int(v)
		case strings.HasPrefix(name, `ovnedge_reconcile_duration_seconds_sum{loop="cluster"`):
			m.ReconcileSeconds += v
		case strings.HasPrefix(name, "ovnedge_nb_operations_total{"):
			m.NBOps += int(v)
		case strings.HasPrefix(name, "ovnedge_nb_repairs_total{"):
			m.NBRepairs += int(v)
		case name == "ovnedge_nb_repair_comparing":
			m.Comparing = v != 0
		}
	}
	return m
}

// Memory is a process's resident set size, now (VmRSS) and at its peak
// (VmHWM), and now by kind: Anon, what the process allocated (the Go
// runtime's memory, which GOMEMLIMIT bounds), and File, the pages of
// files it maps (its binary's, which the kernel can reclaim); in bytes.
type Memory struct{ RSS, Peak, Anon, File int64 }

// ProcMemory reads /proc/<pid>/status.
func ProcMemory(pid int) (Memory, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		field := map[string]*int64{"VmRSS": &m.RSS, "VmHWM": &m.Peak, "RssAnon": &m.Anon, "RssFile": &m.File}[k]
		if !ok || field == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		*field = kb << 10
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return m, sc.Err()
}

// WriteAllocs writes the daemon's allocation profile (its
// /debug/pprof/allocs, as of its last GC: no GC is forced) to path.
func (l *Leader) WriteAllocs(ctx context.Context, path string) error {
	return l.writeGet(ctx, "/debug/pprof/allocs", path)
}

// writeGet writes the body of urlPath on the metrics server to path.
func (l *Leader) writeGet(ctx context.Context, urlPath, path string) error {
	body, err := l.get(ctx, urlPath)
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// WriteHeap writes the daemon's heap profile after a forced GC (its
// /debug/pprof/heap?gc=1: what is live, by allocation site) to path.
func (l *Leader) WriteHeap(ctx context.Context, path string) error {
	return l.writeGet(ctx, "/debug/pprof/heap?gc=1", path)
}

// Profile collects CPU profiles of the daemon (its /debug/pprof, in
// slices of slice, whole seconds) until ctx ends and writes them as files
// <prefix>-<n>.pb.gz; it returns their paths. A slice cut short by ctx is
// lost, so the last at most slice is not profiled.
func (l *Leader) Profile(ctx context.Context, prefix string, slice time.Duration) []string {
	var paths []string
	for n := 0; ctx.Err() == nil; n++ {
		body, err := l.get(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(1, int(slice.Seconds()))))
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				select { // not serving yet
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
			continue
		}
		p := fmt.Sprintf("%s-%d.pb.gz", prefix, n)
		if os.WriteFile(p, body, 0o644) == nil {
			paths = append(paths, p)
		}
	}
	return paths
}
