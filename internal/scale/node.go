package scale

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/testbed"
)

// Node events: what node 0's bridge follows, timed to the first change
// of the event's flows on the bridge (FlowMonitor).
const (
	// NodeEventNewService: an ExternalIP Service is created; its VIP's
	// flows appear.
	NodeEventNewService = "node-new-service"
	// NodeEventEndpoint: the endpoint on node 0 of an
	// externalTrafficPolicy=Local ExternalIP Service turns from a pod's
	// into a host-network one (the node's address) or back; its VIP's
	// flows change between OVN and the host.
	NodeEventEndpoint = "node-endpoint"
)

// NodeEvents are the node event kinds, in the order of a round.
var NodeEvents = []string{NodeEventNewService, NodeEventEndpoint}

// NodeResources are the kinds whose watches a node instance's result
// counts, as the API server names them.
var NodeResources = []string{"pods", "namespaces", "nodes", "services", "endpointslices", "egressips"}

// NodeResult is one node instance (node 0, in its node's role) measured
// once it has programmed its bridge: which binary, how long it took, its
// memory, the watches it holds on the API server and how fast its bridge
// follows the node events.
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
	// Latency (from just before the API write) and FromEvent (from the
	// write's watch event) are the node events' times to the first
	// change of their flows on the bridge, by kind (NodeEvents); Failed
	// counts those whose change did not come.
	Latency, FromEvent map[string][]time.Duration
	Failed             map[string]int
	// Cgroup are its memory cgroup's counters once the events are done
	// (zero when it ran without a limit).
	Cgroup testbed.MemoryCgroupStats
}

// NodeArgs are deploy/daemonset.yaml's arguments of a node instance, as
// this cluster needs them: node 0 on the bridge of ovs, its gateway flows
// on, egress IPs on without the health check (no chassis here), metrics
// and pprof on metrics.
func NodeArgs(kubeconfig string, ovs *testbed.OVS, metrics string) []string {
	return []string{"daemon", "--kubeconfig=" + kubeconfig, "--node-name=" + NodeName(0), "--leader-elect=false",
		"--ovs-db=" + ovs.DB, "--ovs-rundir=" + ovs.RunDir, "--bridge=" + ovs.Bridge, "--gateway-flows=true",
		"--cluster-subnets=" + ClusterSubnet + "/" + strconv.Itoa(HostPrefix),
		"--gateway-v4-join-subnet=" + JoinSubnet, "--gateway-v4-masquerade-subnet=169.254.169.0/29",
		"--metrics-address=" + metrics, "--log-level=info", "--kube-api-qps=200", "--kube-api-burst=400",
		"--enable-egress-ip=true", "--egressip-reachability-total-timeout=0", "--enable-pprof=true"}
}

// NodeRun is what MeasureNode runs: which binary, where, and the events.
type NodeRun struct {
	Kube *testbed.KubeAPI
	// CS writes the node events' objects (the loader's client).
	CS kubernetes.Interface
	// Bin is the binary's path, Binary its name in the result ("new",
	// "base"); Name names its log, Dir/<Name>.log.
	Bin, Binary, Name, Dir string
	// Kubeconfig is the node instances' (ServiceAccount ovnedge-node).
	Kubeconfig string
	// Settle is how long the flow count must stay put to count as
	// programmed.
	Settle time.Duration
	// Rounds of node events once measured (each kind once per round),
	// each given at most Timeout.
	Rounds  int
	Timeout time.Duration
	// Heap, when not "", is where its heap profile (after a forced GC,
	// once measured) is written.
	Heap string
	// Profile, when not nil, starts a CPU profile of the instance l for
	// its events and returns what ends it.
	Profile func(l *Leader) func()
	// MemLimit is its container's memory limit (see Limited; "off" for
	// none).
	MemLimit string
}

// NodeMemLimit is the memory limit node instances run under:
// SCALE_NODE_MEMORY_LIMIT, by default the chart's (node.resources,
// 256Mi).
func NodeMemLimit() string {
	return cmp.Or(os.Getenv("SCALE_NODE_MEMORY_LIMIT"), "268435456")
}

// MeasureNode starts run.Bin as node 0's instance on a bridge of its own,
// waits until it has programmed the bridge (ready, and the flow count
// unchanged for Settle), measures it and times the node events; the
// instance and its bridge are stopped before it returns.
func MeasureNode(t testbed.T, ctx context.Context, run NodeRun) (NodeResult, error) {
	t.Helper()
	r := NodeResult{Binary: run.Binary, Watches: map[string]int{}, Latency: map[string][]time.Duration{},
		FromEvent: map[string][]time.Duration{}, Failed: map[string]int{}}
	before, err := watches(ctx, run.Kube)
	if err != nil {
		return r, err
	}
	ovs := testbed.StartOVS(t, testbed.OVSOptions{Node: NodeName(0), HostIP: NodeIP(0).String()})
	addr := "127.0.0.1:" + strconv.Itoa(testbed.FreePorts(t, 1)[0])
	log := filepath.Join(run.Dir, run.Name+".log")
	begin := time.Now()
	cg, argv := Limited(t, run.MemLimit, append([]string{run.Bin}, NodeArgs(run.Kubeconfig, ovs, addr)...))
	p := testbed.StartProcess(t, "ovnedge "+run.Name, log, LeaderEnv(run.MemLimit), argv...)
	defer func() { _ = p.Terminate() }()
	l := &Leader{Process: p, URL: "http://" + addr, Cgroup: cg}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if !p.Alive() {
			return false, fmt.Errorf("node instance %s exited: see %s", run.Name, log)
		}
		return l.Ready(ctx), nil
	})
	if err != nil {
		return r, fmt.Errorf("node instance %s ready: %w", run.Name, err)
	}
	r.Ready = time.Since(begin)
	if r.Flows, err = settledFlows(ctx, ovs, run.Settle); err != nil {
		return r, err
	}
	if err := measureNode(ctx, run, l, before, &r); err != nil {
		return r, err
	}
	if err := timeNodeEvents(ctx, run, l, ovs, &r); err != nil {
		return r, err
	}
	if !p.Alive() {
		return r, fmt.Errorf("node instance %s exited during the events: see %s", run.Name, log)
	}
	r.Cgroup, err = l.CgroupStats()
	return r, err
}

// measureNode fills in r the memory of instance l, its heap in use, the
// watches it opened (the API server's, less before) and, with run.Heap,
// writes its heap profile.
func measureNode(ctx context.Context, run NodeRun, l *Leader, before map[string]int, r *NodeResult) error {
	var err error
	if r.Mem, err = ProcMemory(l.Pid()); err != nil {
		return err
	}
	if r.Heap, err = l.heapInuse(ctx); err != nil {
		return err
	}
	after, err := watches(ctx, run.Kube)
	if err != nil {
		return err
	}
	for _, res := range NodeResources {
		r.Watches[res] = after[res] - before[res]
	}
	if run.Heap != "" {
		if err := l.WriteHeap(ctx, run.Heap); err != nil {
			return fmt.Errorf("node instance %s heap profile: %w", run.Name, err)
		}
	}
	return nil
}

// timeNodeEvents times the node events on instance l, whose bridge is
// ovs, under run.Profile when set.
func timeNodeEvents(ctx context.Context, run NodeRun, l *Leader, ovs *testbed.OVS, r *NodeResult) error {
	mon, err := StartFlowMonitor(ovs.Mgmt(), ovs.RunDir)
	if err != nil {
		return err
	}
	defer mon.Close()
	if run.Profile != nil {
		defer run.Profile(l)()
	}
	return nodeEvents(ctx, run, mon, r)
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
// e.g. `git worktree add /tmp/base main && cd /tmp/base && CGO_ENABLED=0
// go build -trimpath -tags nomanifests -o /tmp/ovnedge-base ./daemon/cmd/ovnedge`
// (the image's build, e2e.ImageBuildFlags, as the tree's is built).
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

// NodeLocalVIP is the ExternalIP of NodeEventEndpoint's Service.
var NodeLocalVIP = netip.MustParseAddr("198.51.101.1")

// NodeNewVIP is the ExternalIP of round i's NodeEventNewService Service:
// 198.51.100.100-199, so that no VIP's text is a prefix of another's.
func NodeNewVIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 51, 100, byte(100 + i%100)})
}

// flowsOf is what a bridge flow's line matching vip contains.
func flowsOf(vip netip.Addr) string { return "nw_dst=" + vip.String() }

// nodeService is an ExternalIP Service (port 80 to BackendPort, no
// selector: its endpoints are written here), externalTrafficPolicy Local
// when local.
func nodeService(name string, vip netip.Addr, local bool) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: NamespaceName(0), Name: name}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ExternalIPs: []string{vip.String()},
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(BackendPort)}}}}
	if local {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	return s
}

// nodeEndpoints are the endpoints of NodeEventEndpoint's Service: one on
// node 0, host-network (the node's address) or pod 0.
func nodeEndpoints(host bool) []discoveryv1.Endpoint {
	addr := PodIP(0)
	if host {
		addr = NodeIP(0)
	}
	return []discoveryv1.Endpoint{{Addresses: []string{addr.String()}, NodeName: ptr.To(NodeName(0)),
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
}

// nodeEvents times run.Rounds rounds of the node events on the instance
// whose bridge mon follows; what they create is deleted again.
func nodeEvents(ctx context.Context, run NodeRun, mon *FlowMonitor, r *NodeResult) error {
	if run.Rounds == 0 {
		return nil
	}
	slice, cleanup, err := nodeLocalService(ctx, run, mon)
	defer cleanup()
	if err != nil {
		return fmt.Errorf("node events: %w", err)
	}
	epSlices := run.CS.DiscoveryV1().EndpointSlices(slice.Namespace)
	record := func(kind string) func(sample, error) {
		return func(sm sample, err error) {
			if err != nil {
				r.Failed[kind]++
				progressf("node instance (%s): %s: %v", run.Binary, kind, err)
				return
			}
			r.Latency[kind] = append(r.Latency[kind], sm.Latency)
			r.FromEvent[kind] = append(r.FromEvent[kind], sm.FromEvent)
		}
	}
	for i := range run.Rounds {
		record(NodeEventNewService)(newNodeService(ctx, run, mon, i))
		body, err := json.Marshal(map[string]any{"endpoints": nodeEndpoints(i%2 == 0)})
		if err != nil {
			return err
		}
		record(NodeEventEndpoint)(timedBy(ctx, run.Timeout, func() expected { return mon.Expect(flowsOf(NodeLocalVIP)) },
			func(ctx context.Context) (watch.Interface, error) { return epSlices.Watch(ctx, byName(slice.Name)) },
			func() (string, error) {
				return resourceVersion(epSlices.Patch(ctx, slice.Name, types.MergePatchType, body, metav1.PatchOptions{}))
			}))
	}
	return nil
}

// nodeLocalService creates NodeEventEndpoint's Service and its
// EndpointSlice (a pod's endpoint on node 0) and waits for its flows on
// the bridge; cleanup deletes them.
func nodeLocalService(ctx context.Context, run NodeRun, mon *FlowMonitor) (*discoveryv1.EndpointSlice, func(), error) {
	services := run.CS.CoreV1().Services(NamespaceName(0))
	epSlices := run.CS.DiscoveryV1().EndpointSlices(NamespaceName(0))
	svc := nodeService("node-local-"+run.Binary, NodeLocalVIP, true)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name, Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: nodeEndpoints(false),
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](BackendPort)}},
	}
	var undo []func()
	cleanup := func() {
		for _, f := range undo {
			f()
		}
	}
	programmed := mon.Expect(flowsOf(NodeLocalVIP))
	if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return nil, cleanup, err
	}
	undo = append(undo, func() { _ = services.Delete(context.WithoutCancel(ctx), svc.Name, metav1.DeleteOptions{}) })
	if _, err := epSlices.Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return nil, cleanup, err
	}
	undo = append(undo, func() { _ = epSlices.Delete(context.WithoutCancel(ctx), slice.Name, metav1.DeleteOptions{}) })
	wctx, cancel := context.WithTimeout(ctx, run.Timeout)
	defer cancel()
	if _, err := programmed.Wait(wctx); err != nil {
		return nil, cleanup, fmt.Errorf("flows of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return slice, cleanup, nil
}

// newNodeService creates round i's ExternalIP Service and times its
// flows; it is deleted again (not timed).
func newNodeService(ctx context.Context, run NodeRun, mon *FlowMonitor, i int) (sample, error) {
	vip := NodeNewVIP(i)
	svc := nodeService(fmt.Sprintf("node-new-%s-%d", run.Binary, i), vip, false)
	services := run.CS.CoreV1().Services(svc.Namespace)
	sm, err := timedBy(ctx, run.Timeout, func() expected { return mon.Expect(flowsOf(vip)) },
		func(ctx context.Context) (watch.Interface, error) { return services.Watch(ctx, byName(svc.Name)) },
		func() (string, error) { return resourceVersion(services.Create(ctx, svc, metav1.CreateOptions{})) })
	gone := mon.Expect(flowsOf(vip))
	if derr := services.Delete(ctx, svc.Name, metav1.DeleteOptions{}); derr != nil {
		return sm, errors.Join(err, derr)
	}
	if err == nil { // its flows go before the next round uses the VIP
		wctx, cancel := context.WithTimeout(ctx, run.Timeout)
		defer cancel()
		_, err = gone.Wait(wctx)
	}
	return sm, err
}
