package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ovnedge/ovnedge/testbed"
)

// NodeResources are the kinds whose watches a node instance's result
// counts, as the API server names them.
var NodeResources = []string{"pods", "namespaces", "nodes", "services", "endpointslices", "egressips"}

// NodeResult is one node instance (node 0, in its node's role) measured
// once it has programmed its bridge: which binary, how long it took, its
// memory and the watches it holds on the API server.
type NodeResult struct {
	// Binary is "new" (this tree) or "base" (SCALE_BASE_BIN).
	Binary string
	// Ready is process start -> /readyz (its first successful node
	// reconcile); Flows the bridge's flow count once settled.
	Ready time.Duration
	Flows int
	// Mem is its memory once settled, Heap its Go heap in use then
	// (go_memstats_heap_inuse_bytes: less noisy than the RSS, which
	// keeps what the GC freed until the runtime returns it).
	Mem  Memory
	Heap int64
	// Watches are the watches it opened, by resource (NodeResources).
	Watches map[string]int
}

// NodeArgs are deploy/daemonset.yaml's arguments of a node instance, as
// this cluster needs them: node 0 on the bridge of ovs, its gateway flows
// on, egress IPs on without the health check (no chassis here), metrics
// on metrics.
func NodeArgs(kubeconfig string, ovs *testbed.OVS, metrics string) []string {
	return []string{"daemon", "--kubeconfig=" + kubeconfig, "--node-name=" + NodeName(0), "--leader-elect=false",
		"--ovs-db=" + ovs.DB, "--ovs-rundir=" + ovs.RunDir, "--bridge=" + ovs.Bridge, "--gateway-flows=true",
		"--cluster-subnets=" + ClusterSubnet + "/" + strconv.Itoa(HostPrefix),
		"--gateway-v4-join-subnet=" + JoinSubnet, "--gateway-v4-masquerade-subnet=169.254.169.0/29",
		"--metrics-address=" + metrics, "--log-level=info", "--kube-api-qps=200", "--kube-api-burst=400",
		"--enable-egress-ip=true", "--egressip-reachability-total-timeout=0"}
}

// MeasureNode starts bin as node 0's instance on a bridge of its own,
// waits until it has programmed the bridge (ready, and the flow count
// unchanged for settle), and measures it; the instance and its bridge
// are stopped before it returns. Its log is dir/name.log.
func MeasureNode(t testbed.T, ctx context.Context, kube *testbed.KubeAPI, bin, binary, dir, name, kubeconfig string, settle time.Duration) (NodeResult, error) {
	t.Helper()
	r := NodeResult{Binary: binary, Watches: map[string]int{}}
	before, err := watches(ctx, kube)
	if err != nil {
		return r, err
	}
	ovs := testbed.StartOVS(t, testbed.OVSOptions{Node: NodeName(0), HostIP: NodeIP(0).String()})
	addr := "127.0.0.1:" + strconv.Itoa(testbed.FreePorts(t, 1)[0])
	begin := time.Now()
	p := testbed.StartProcess(t, "ovnedge "+name, filepath.Join(dir, name+".log"), LeaderEnv("off"),
		append([]string{bin}, NodeArgs(kubeconfig, ovs, addr)...)...)
	defer func() { _ = p.Terminate() }()
	l := &Leader{Process: p, URL: "http://" + addr}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if !p.Alive() {
			return false, fmt.Errorf("node instance %s exited: see %s", name, filepath.Join(dir, name+".log"))
		}
		return l.Ready(ctx), nil
	})
	if err != nil {
		return r, fmt.Errorf("node instance %s ready: %w", name, err)
	}
	r.Ready = time.Since(begin)
	if r.Flows, err = settledFlows(ctx, ovs, settle); err != nil {
		return r, err
	}
	if r.Mem, err = ProcMemory(p.Pid()); err != nil {
		return r, err
	}
	if r.Heap, err = l.heapInuse(ctx); err != nil {
		return r, err
	}
	after, err := watches(ctx, kube)
	if err != nil {
		return r, err
	}
	for _, res := range NodeResources {
		r.Watches[res] = after[res] - before[res]
	}
	return r, nil
}

// watches counts the API server's open watches of NodeResources.
func watches(ctx context.Context, kube *testbed.KubeAPI) (map[string]int, error) {
	out := map[string]int{}
	for _, res := range NodeResources {
		n, err := kube.Watches(ctx, res)
		if err != nil {
			return nil, err
		}
		out[res] = n
	}
	return out, nil
}

// settledFlows waits until the bridge's flow count has not changed for
// settle and returns it.
func settledFlows(ctx context.Context, ovs *testbed.OVS, settle time.Duration) (int, error) {
	last, since := -1, time.Now()
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		n, err := flowCount(ovs)
		if err != nil {
			return 0, err
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= settle {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("bridge %s: flows still changing after 10 minutes (%d)", ovs.Bridge, last)
}

// flowCount is the bridge's flow_count (ovs-ofctl dump-aggregate).
func flowCount(ovs *testbed.OVS) (int, error) {
	out := ovs.Ofctl("dump-aggregate", ovs.Mgmt())
	_, v, ok := strings.Cut(out, "flow_count=")
	if !ok {
		return 0, fmt.Errorf("dump-aggregate: %q", out)
	}
	return strconv.Atoi(strings.Fields(v)[0])
}

// BaseBinary is SCALE_BASE_BIN, the baseline binary a node instance is
// also measured with (none when unset): a build of the tree compared with,
// e.g. `git worktree add /tmp/base main && go build -o /tmp/ovnedge-base
// /tmp/base/daemon/cmd/ovnedge`.
func BaseBinary() (string, error) {
	bin := os.Getenv("SCALE_BASE_BIN")
	if bin == "" {
		return "", nil
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("SCALE_BASE_BIN: %w", err)
	}
	return bin, nil
}

// heapInuse is the daemon's go_memstats_heap_inuse_bytes.
func (l *Leader) heapInuse(ctx context.Context) (int64, error) {
	body, err := l.get(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("no go_memstats_heap_inuse_bytes in /metrics")
}
