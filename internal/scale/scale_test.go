package scale

import (
	"context"
	"encoding/csv"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/testbed"
)

func TestShapeFor(t *testing.T) {
	for _, tc := range []struct {
		pods int
		want Shape
	}{
		{MaxPods, Shape{Pods: 150000, Nodes: 2000, Namespaces: 1000, Services: 10000, EgressIPs: 1000}},
		{50000, Shape{Pods: 50000, Nodes: 667, Namespaces: 334, Services: 3333, EgressIPs: 334}},
		{1000, Shape{Pods: 1000, Nodes: 14, Namespaces: 7, Services: 66, EgressIPs: 8}},
		{300, Shape{Pods: 300, Nodes: MinNodes, Namespaces: 2, Services: 20, EgressIPs: 2}},
	} {
		if got := ShapeFor(tc.pods); got != tc.want {
			t.Errorf("ShapeFor(%d) = %+v, want %+v", tc.pods, got, tc.want)
		}
	}
}

// TestShapeConsistent checks that every generated reference points at an
// object of the same Shape: endpoints at pods of the Service's namespace,
// pods at their node's subnet, served pods at existing EgressIPs that
// select their namespace, and egress nodes for every size.
func TestShapeConsistent(t *testing.T) {
	for _, pods := range []int{1, 300, 1000, 10000, MaxPods} {
		s := ShapeFor(pods)
		for j := range s.Services {
			for _, i := range Endpoints(j) {
				if i >= s.Pods || PodNamespace(i) != ServiceNamespace(j) {
					t.Fatalf("%d pods: Service %d endpoint pod %d (of %d) in %s", pods, j, i, s.Pods, PodNamespace(i))
				}
			}
			if i := Endpoints(j)[0] + 1; i >= s.Pods || PodNamespace(i) != ServiceNamespace(j) {
				t.Fatalf("%d pods: Service %d's spare endpoint pod %d", pods, j, i)
			}
		}
		for _, i := range []int{0, s.Pods - 1} {
			n := i / PodsPerNode
			if n >= s.Nodes || !NodeSubnet(n).Contains(PodIP(i)) || PodIP(i) == NodeSubnet(n).Addr() {
				t.Fatalf("%d pods: pod %d IP %s, node %d of %d (%s)", pods, i, PodIP(i), n, s.Nodes, NodeSubnet(n))
			}
		}
		egressNodes := 0
		for n := range s.Nodes {
			if _, ok := Node(n).Labels["k8s.ovn.org/egress-assignable"]; ok {
				egressNodes++
			}
		}
		if egressNodes < 2 {
			t.Errorf("%d pods: %d egress nodes, want 2 or more", pods, egressNodes)
		}
		for _, i := range s.Served() {
			for _, e := range []string{"a", "b"} {
				k := EgressIPOf(i, e)
				if k >= s.EgressIPs {
					t.Fatalf("%d pods: pod %d eip=%s: EgressIP %d of %d", pods, i, e, k, s.EgressIPs)
				}
				sel := EgressIP(k).Object["spec"].(map[string]any)["namespaceSelector"].(map[string]any)["matchLabels"].(map[string]any)
				if ns := Namespace(i / PodsPerNamespace); ns.Labels[LabelGroup] != sel[LabelGroup] {
					t.Fatalf("%d pods: EgressIP %d selects group %v, pod %d is in %v", pods, k, sel[LabelGroup], i, ns.Labels[LabelGroup])
				}
			}
			if PodEIP(i) == "" || Pod(i).Labels[LabelEIP] != PodEIP(i) {
				t.Fatalf("%d pods: served pod %d has no eip label", pods, i)
			}
		}
	}
	if n := len(ShapeFor(MaxPods).Served()); n != 15000 {
		t.Errorf("served pods at full size = %d, want 15000", n)
	}
}

func TestPercentile(t *testing.T) {
	d := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{d(5), 0.99, 5 * time.Millisecond},
		{d(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{d(4, 1, 3, 2), 0.99, 4 * time.Millisecond},
		{d(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9 * time.Millisecond},
	} {
		if got := Percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP ovnedge_reconcile_duration_seconds Time from the start of a reconcile to the dataplane holding its result.
ovnedge_reconcile_duration_seconds_bucket{loop="cluster",result="ok",le="0.001"} 1
ovnedge_reconcile_duration_seconds_sum{loop="cluster",result="ok"} 1.5
ovnedge_reconcile_duration_seconds_count{loop="cluster",result="ok"} 7
ovnedge_reconcile_duration_seconds_sum{loop="cluster",result="error"} 0.5
ovnedge_reconcile_duration_seconds_count{loop="cluster",result="error"} 2
ovnedge_reconcile_duration_seconds_count{loop="node",result="ok"} 40
ovnedge_nb_operations_total{op="insert"} 100
ovnedge_nb_operations_total{op="mutate"} 23
ovnedge_nb_repairs_total{reason="changed"} 2
ovnedge_nb_repairs_total{reason="periodic"} 1
`
	want := Metrics{Reconciles: 9, ReconcileSeconds: 2, NBOps: 123, NBRepairs: 3}
	if got := parseMetrics(text); got != want {
		t.Errorf("parseMetrics = %+v, want %+v", got, want)
	}
}

func TestProcMemory(t *testing.T) {
	m, err := ProcMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.Peak < m.RSS || m.Anon <= 0 || m.File <= 0 || m.Anon+m.File > m.RSS {
		t.Errorf("ProcMemory = %+v, want 0 < RSS <= Peak, 0 < Anon + File <= RSS", m)
	}
}

// TestWriteReport writes a three-size report and reads it back: the
// tables, the aims missed, and PNG plots that decode.
func TestWriteReport(t *testing.T) {
	lat := func(base time.Duration) map[string][]time.Duration {
		out := map[string][]time.Duration{}
		for _, k := range Events {
			for i := range 10 {
				out[k] = append(out[k], base+time.Duration(i)*time.Millisecond)
			}
		}
		return out
	}
	var rs []Result
	for i, pods := range []int{1000, 10000, MaxPods} {
		f := time.Duration(i + 1)
		rs = append(rs, Result{Shape: ShapeFor(pods), Load: f * 10 * time.Second, Objects: pods, Requests: 2 * pods,
			Informers: f * time.Second, Sync: f * 40 * time.Second, Reconciles: 3, Synced: Memory{RSS: int64(f) << 29},
			After: Memory{RSS: int64(f) << 29, Peak: int64(f) << 30}, Latency: lat(f * 20 * time.Millisecond),
			FromEvent: lat(f * 15 * time.Millisecond), API: lat(time.Millisecond), Failed: map[string]int{EventEndpoint: i}})
		node := NodeResult{Binary: "new", Mem: Memory{RSS: 90 << 20, Anon: 20 << 20, File: 70 << 20}, Heap: 10 << 20,
			Latency: map[string][]time.Duration{}, FromEvent: map[string][]time.Duration{}, Failed: map[string]int{},
			Cgroup: testbed.MemoryCgroupStats{Limit: 256 << 20, MaxUsage: 120 << 20}}
		for _, k := range NodeEvents {
			node.Latency[k] = []time.Duration{f * 5 * time.Millisecond}
			node.FromEvent[k] = []time.Duration{f * 4 * time.Millisecond}
		}
		rs[i].Nodes = []NodeResult{node}
	}
	dir := filepath.Join(t.TempDir(), "report")
	if err := WriteReport(dir, rs, []string{"a note"}); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 150000 | 2000 | 10000 | 1000 |", "pod-label p99 from the event 54.0 ms: **not met**; from before the write 69.0 ms: **not met**",
		"initial sync 120.0 s: **not met**", "RSS peak 3072 MiB: **not met**", "2 failed", "- a note",
		"| 150000 | new | 15.0 / 15.0 | 12.0 / 12.0 (1, 0) |", "| 150000 | node (new) | 256 | 120 |"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md lacks %q:\n%s", want, readme)
		}
	}
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || !slices.Contains(rows[0], "node-notready_p99_ms") || !slices.Contains(rows[0], "node-notready_event_p99_ms") || rows[3][0] != "150000" {
		t.Errorf("results.csv = %v", rows)
	}
	for _, p := range []string{"latency-p50.png", "latency-p99.png", "memory.png", "sync.png", "node-memory.png", "node-latency.png"} {
		f, err := os.Open(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 300 {
			t.Errorf("%s is %v", p, b)
		}
	}
}

// TestTable follows a real NB's load balancers as another client writes
// them: an Expectation completes at the change that makes it hold (an
// insert, an update of the indexed row, a delete), and one that never
// holds ends with its context.
func TestTable(t *testing.T) {
	testbed.Require(t, "ovn-nbctl")
	nb := testbed.StartNB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lbs, err := WatchTable(ctx, nb.Remote, nbdb.LoadBalancerTable, &nbdb.LoadBalancer{}, func(lb *nbdb.LoadBalancer) []string {
		return []string{lb.ExternalIDs[ovsdbnb.KeyOwner]}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lbs.Close()
	nbctl := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ovn-nbctl", append([]string{"--db=" + nb.Remote}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ovn-nbctl %v: %v\n%s", args, err, out)
		}
	}
	backends := func(want string) func(View[*nbdb.LoadBalancer]) bool {
		return func(v View[*nbdb.LoadBalancer]) bool {
			rows := v.Rows("ns/web")
			return len(rows) == 1 && rows[0].Vips["10.96.0.1:80"] == want
		}
	}
	for _, step := range []struct {
		name  string
		want  func(View[*nbdb.LoadBalancer]) bool
		write []string
	}{
		{"insert", backends("10.128.0.3:8080"), []string{"create", "load_balancer", "name=web", "protocol=tcp",
			`external_ids:"k8s.ovn.org/owner"="ns/web"`, `vips:"10.96.0.1:80"="10.128.0.3:8080"`}},
		{"update", backends("10.128.0.4:8080"), []string{"set", "load_balancer", "web", `vips:"10.96.0.1:80"="10.128.0.4:8080"`}},
		{"delete", func(v View[*nbdb.LoadBalancer]) bool { return v.Len() == 0 && len(v.Rows("ns/web")) == 0 },
			[]string{"destroy", "load_balancer", "web"}},
	} {
		e := lbs.Expect(step.want)
		begin := time.Now()
		nbctl(step.write...)
		at, err := e.Wait(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if at.Before(begin) {
			t.Errorf("%s: completed at %v, before the write at %v", step.name, at, begin)
		}
		if last, _ := lbs.LastChange(); !last.Equal(at) {
			t.Errorf("%s: completed at %v, the last change arrived at %v", step.name, at, last)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if _, err := lbs.Wait(short, func(v View[*nbdb.LoadBalancer]) bool { return v.Len() > 0 }); err == nil {
		t.Error("Wait for a row that never comes returned no error")
	}
}

// ExampleShapeFor prints the cluster of the full size.
func ExampleShapeFor() {
	s := ShapeFor(MaxPods)
	fmt.Printf("%d pods on %d nodes in %d namespaces, %d Services, %d EgressIPs serving %d pods\n",
		s.Pods, s.Nodes, s.Namespaces, s.Services, s.EgressIPs, len(s.Served()))
	// Output: 150000 pods on 2000 nodes in 1000 namespaces, 10000 Services, 1000 EgressIPs serving 15000 pods
}

// TestLeaderEnv: SCALE_DAEMON_GODEBUG reaches the leader as GODEBUG, a
// memory limit as the chart passes it (512Mi, the chart's, unless
// SCALE_LEADER_MEMORY_LIMIT says otherwise), and nothing is added without
// them.
func TestLeaderEnv(t *testing.T) {
	for _, tc := range []struct {
		godebug, limit, setLimit string
		want                     []string
	}{
		{"", "off", "", nil},
		{"gctrace=1", "", "", []string{"GODEBUG=gctrace=1"}},
		{"", "536870912", "", []string{"OVNEDGE_MEMORY_LIMIT=536870912"}},
		{"gctrace=1", "", "1073741824", []string{"GODEBUG=gctrace=1", "OVNEDGE_MEMORY_LIMIT=1073741824"}},
	} {
		t.Setenv("SCALE_DAEMON_GODEBUG", tc.godebug)
		t.Setenv("SCALE_LEADER_MEMORY_LIMIT", tc.setLimit)
		limit := tc.limit
		if tc.setLimit != "" {
			limit = LeaderMemLimit()
		}
		if got := LeaderEnv(limit); !slices.Equal(got, tc.want) {
			t.Errorf("SCALE_DAEMON_GODEBUG=%q, limit %q: %q, want %q", tc.godebug, limit, got, tc.want)
		}
	}
}

// TestLeaderLogged finds a message's first line in a leader's log and
// its time.
func TestLeaderLogged(t *testing.T) {
	log := filepath.Join(t.TempDir(), "leader.log")
	text := `time=2026-11-29T15:58:32.709Z level=WARN msg="no --node-name: no node work (bridge flows, ARP/NDP)"
time=2026-11-29T15:58:51.491Z level=INFO msg="informers synced" node="" manifests=""
time=2026-11-29T15:58:51.491Z level=INFO msg=ready reason=Reconciled
time=2026-11-29T15:59:51.491Z level=INFO msg="informers synced" node="" manifests=""
`
	if err := os.WriteFile(log, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &Leader{LogFile: log}
	for msg, want := range map[string]string{"informers synced": "2026-11-29T15:58:51.491Z", "ready": "2026-11-29T15:58:51.491Z", "none": ""} {
		at, ok := l.Logged(msg)
		if got := map[bool]string{true: at.Format(time.RFC3339Nano)}[ok]; got != want {
			t.Errorf("Logged(%q) = %q, want %q", msg, got, want)
		}
	}
}
