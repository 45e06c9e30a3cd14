package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/testbed"
)

// daemonArgs are the leader-only `ovnedge daemon` arguments of the NB
// tests: the manifests of dir, the NB at nb, no reachability checks.
func daemonArgs(dir, nb string) []string {
	return []string{"daemon", "--manifests", dir, "--nb-address", nb, "--manifests-poll", "50ms",
		"--cluster-subnets", "10.244.0.0/16/24", "--metrics-address", "", "--egressip-reachability-total-timeout", "0",
		"--log-level", "debug"}
}

// startMain runs Main with args until the returned stop is called (or the
// test ends) and returns its log.
func startMain(t testing.TB, args []string) (log *lockedBuilder, stop func()) {
	t.Helper()
	log = &lockedBuilder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- Main(ctx, args, io.Discard, log) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("daemon exit %d:\n%s", code, log.String())
		}
	}
	t.Cleanup(stop)
	return log, stop
}

// renderedNB is the NB part of what `ovnedge render` prints for the
// manifests of dir (ComputeCluster's rows, with the reply-traffic QoS
// rule replaced as the daemon does on an NB without the QoS mark action),
// in Current's form: sorted, without the shared load balancer groups,
// owners with rows only.
func renderedNB(t testing.TB, c *ovsdbnb.Client, dir string) map[ovsdbnb.Owner]ovsdbnb.State {
	t.Helper()
	cfg, _, err := ParseConfig("test", []string{"--cluster-subnets", "10.244.0.0/16/24", "--metrics-address", ""})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Manifests = dir
	s, _, err := LoadSnapshot(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := desired.ComputeCluster(s, ParamsFrom(cfg), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.SupportsKey(nbdb.QoSTable, "action", "mark") {
		cs.Egress = maps.Clone(cs.Egress)
		cs.WithoutQoSMark()
	}
	return ovsdbnb.AsRead(cs.NB())
}

// nbDiff says how the NB's owned rows differ from want, "" when they do
// not.
func nbDiff(c *ovsdbnb.Client, want map[ovsdbnb.Owner]ovsdbnb.State) string {
	cur, err := c.Current()
	if err != nil {
		return err.Error()
	}
	return strings.Join(ovsdbnb.Diff(cur, want), "\n")
}

// waitNB waits until the NB holds want and returns how long that took.
func waitNB(t testing.TB, c *ovsdbnb.Client, want map[ovsdbnb.Owner]ovsdbnb.State, timeout time.Duration, log *lockedBuilder) time.Duration {
	t.Helper()
	begin := time.Now()
	for {
		d := nbDiff(c, want)
		if d == "" {
			return time.Since(begin)
		}
		if time.Since(begin) > timeout {
			t.Fatalf("the NB does not hold the rendered rows after %v:\n%s\nlog:\n%s", timeout, d, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restoreTopology writes the demo topology into the NB at c, as the
// admin who wipes the NB restores it, once c has reconnected.
func restoreTopology(t testing.TB, c *ovsdbnb.Client, topo ovsdbnb.Topology) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		err := ovsdbnb.EnsureTopology(ctx, c, topo)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("restore the topology: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nbUUID returns the first row of table matching conditions.
func nbUUID(t testing.TB, ovn *testbed.OVN, table string, conditions ...string) string {
	t.Helper()
	out := ovn.Nbctl(append([]string{"--bare", "--columns=_uuid", "find", table}, conditions...)...)
	u, _, _ := strings.Cut(out, "\n")
	if u == "" {
		t.Fatalf("no %s row with %v", table, conditions)
	}
	return u
}

const extraService = `apiVersion: v1
kind: Service
metadata: {namespace: default, name: extra}
spec: {type: ClusterIP, clusterIP: 10.96.0.77, clusterIPs: [10.96.0.77], ports: [{name: http, port: 80, protocol: TCP}]}
`

// TestDaemonRepairsNB runs `ovnedge daemon` on the demo against a real NB
// and changes the NB behind its back, one fault at a time, with no object
// changing: rows deleted or edited by hand, the NB wiped (a new empty
// database) and its topology restored by the admin, and a Service added
// while the NB has no topology. Each time the NB comes back to what
// `ovnedge render` prints for the manifests, within seconds, and the
// repair and the reconnection are logged.
func TestDaemonRepairsNB(t *testing.T) {
	ovn := startNB(t)
	dir := demoDir(t, nil)
	args := daemonArgs(dir, ovn.NB)
	args[slices.Index(args, "--metrics-address")+1] = "127.0.0.1:0"
	log, _ := startMain(t, args)
	ctx := context.Background()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{ovn.NB}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := renderedNB(t, c, dir)
	waitNB(t, c, want, 30*time.Second, log)

	const repaired = "northbound: repaired rows changed behind ovnedge's back"
	tests := []struct {
		name  string
		fault func(t *testing.T)
		// logged are log lines (substrings) the repair writes.
		logged []string
	}{
		{"reroute policy deleted", func(t *testing.T) {
			ovn.Nbctl("lr-policy-del", ovsdbnb.ClusterRouter, nbUUID(t, ovn, "Logical_Router_Policy", "priority=100"))
		}, []string{repaired, "EgressIP/egress-prod (Logical_Router_Policy deleted", "inserted=1"}},
		{"SNAT deleted", func(t *testing.T) {
			ovn.Nbctl("remove", "Logical_Router", "GR_ovn-worker2", "nat", nbUUID(t, ovn, "NAT", "external_ip=172.18.0.44"))
		}, []string{repaired, "NAT deleted"}},
		{"load balancer backends cleared", func(t *testing.T) {
			ovn.Nbctl("clear", "Load_Balancer", nbUUID(t, ovn, "Load_Balancer", `external_ids:"ovnedge.io/owner"="Service/prod/web"`), "vips")
		}, []string{repaired, "Service/prod/web (Load_Balancer updated", "mutated=1"}},
		{"load balancer deleted", func(t *testing.T) {
			ovn.Nbctl("lb-del", nbUUID(t, ovn, "Load_Balancer", `external_ids:"ovnedge.io/owner"="Service/prod/web"`))
		}, []string{repaired, "Load_Balancer deleted"}},
		{"address set edited", func(t *testing.T) {
			ovn.Nbctl("set", "Address_Set", nbUUID(t, ovn, "Address_Set", `external_ids:"k8s.ovn.org/name"="egressip-served-pods"`),
				"addresses=10.9.9.9")
		}, []string{repaired, "Address_Set updated"}},
		{"NB wiped, topology restored", func(t *testing.T) {
			ovn.ReplaceNB()
			restoreTopology(t, c, demoTopology)
		}, []string{"ovsdbnb: connection lost, reconnecting", "ovsdbnb: reconnected", repaired}},
		{"NB wiped, a Service added before the topology is restored", func(t *testing.T) {
			ovn.ReplaceNB()
			testbed.WriteFile(t, dir, "extra.yaml", extraService)
			time.Sleep(time.Second) // the change fails against the empty NB
			restoreTopology(t, c, demoTopology)
			want = renderedNB(t, c, dir)
		}, []string{"ovsdbnb: reconnected", "northbound rows not written (retrying)", "(by the cluster loop)", "Service/default/extra"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			from := len(log.String())
			tc.fault(t)
			begin := time.Now()
			// The repair may come before this client's cache shows the
			// fault: its log says it happened.
			for _, l := range tc.logged {
				for !strings.Contains(log.String()[from:], l) {
					if time.Since(begin) > 20*time.Second {
						t.Fatalf("no %q logged:\n%s", l, log.String()[from:])
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			waitNB(t, c, want, 20*time.Second, log)
			t.Logf("repaired %v after the fault (or the topology's return)", time.Since(begin).Round(time.Millisecond))
			lines := log.String()[from:]
			t.Log(grepLog(lines, "northbound: repaired") + "\n" + grepLog(lines, "ovsdbnb:"))
			if strings.Contains(lines, `endpoint=""`) {
				t.Errorf("a log line names no endpoint:\n%s", lines)
			}
		})
	}
	if _, ok := want[ovsdbnb.Owner{Type: "Service", Name: "default/extra"}]; !ok {
		t.Errorf("the rendered rows have no load balancer of the Service added: %v", slices.Collect(maps.Keys(want)))
	}
	metrics := scrape(t, log.String())
	for _, re := range []string{`ovnedge_nb_repairs_total\{reason="changed"\} [1-9]`,
		`ovnedge_nb_repairs_total\{reason="(reconnected|topology)"\} [1-9]`,
		`ovnedge_nb_repaired_owners_total\{reason="changed"\} [1-9]`} {
		if !regexp.MustCompile(re).MatchString(metrics) {
			t.Errorf("/metrics lacks %s:\n%s", re, grepLog(metrics, "repair"))
		}
	}
}

// scrape returns what /metrics of the daemon whose log is log serves.
func scrape(t testing.TB, log string) string {
	t.Helper()
	m := regexp.MustCompile(`serving metrics and health.*address=(127\.0\.0\.1:\d+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no metrics address logged:\n%s", log)
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// manyEgressIPs is a cluster of three egress nodes and n EgressIPs, each
// serving the one pod of its own namespace.
func manyEgressIPs(n int) (desired.Snapshot, ovsdbnb.Topology) {
	var s desired.Snapshot
	topo := ovsdbnb.Topology{ClusterSubnet: "10.244.0.0/16", JoinRouterIP: "100.64.0.1/16"}
	for i := range 3 {
		name := fmt.Sprintf("node%d", i)
		s.Nodes = append(s.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"k8s.ovn.org/egress-assignable": ""},
				Annotations: map[string]string{
					"k8s.ovn.org/node-subnets":                   fmt.Sprintf(`{"default":["10.244.%d.0/24"]}`, i),
					"k8s.ovn.org/node-primary-ifaddr":            fmt.Sprintf(`{"ipv4":"172.18.0.%d/16"}`, i+2),
					"k8s.ovn.org/node-gateway-router-lrp-ifaddr": fmt.Sprintf(`{"ipv4":"100.64.0.%d/16"}`, i+3),
				}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("172.18.0.%d", i+2)}}},
		})
		topo.Nodes = append(topo.Nodes, ovsdbnb.Node{Name: name, Subnet: fmt.Sprintf("10.244.%d.0/24", i),
			JoinIP: fmt.Sprintf("100.64.0.%d/16", i+3), ExternalIP: fmt.Sprintf("172.18.0.%d/16", i+2)})
	}
	for i := range n {
		ns, node := fmt.Sprintf("ns%d", i), i%3
		ip := fmt.Sprintf("10.244.%d.%d", node, i/3+3)
		s.Namespaces = append(s.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"tenant": fmt.Sprint(i)}}})
		s.Pods = append(s.Pods, egress.NewPodInfo(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod"},
			Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("node%d", node)},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
		}))
		s.EgressIPs = append(s.EgressIPs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
			"metadata": map[string]any{"name": fmt.Sprintf("eip%d", i)},
			"spec": map[string]any{"egressIPs": []any{fmt.Sprintf("172.18.%d.%d", 100+i/250, i%250+1)},
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"tenant": fmt.Sprint(i)}}},
		}})
	}
	return s, topo
}

// egressNB starts an NB with the topology of manyEgressIPs(n), writes
// its manifests and returns them with a client of the test's own.
func egressNB(t testing.TB, n int) (*testbed.OVN, string, *ovsdbnb.Client, ovsdbnb.Topology) {
	t.Helper()
	s, topo := manyEgressIPs(n)
	dir := t.TempDir()
	writeManifests(t, dir, s)
	ovn := testbed.StartOVN(t)
	c, err := ovsdbnb.Dial(context.Background(), ovsdbnb.Options{Endpoints: []string{ovn.NB}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	restoreTopology(t, c, topo)
	return ovn, dir, c, topo
}

// TestDaemonRestartNoChurn runs `ovnedge daemon` on 500 EgressIPs until
// the NB holds their rows, stops it and starts it again: the new process
// starts from the rows in the NB, and a second NB client sees no router
// policy, NAT or address set deleted or inserted by its first sync.
func TestDaemonRestartNoChurn(t *testing.T) {
	const n = 500
	ovn, dir, c, _ := egressNB(t, n)
	want := renderedNB(t, c, dir)
	log, stop := startMain(t, daemonArgs(dir, ovn.NB))
	waitNB(t, c, want, 2*time.Minute, log)
	stop()
	first := log
	defer func() {
		if t.Failed() {
			l := first.String()
			t.Logf("first daemon's log (last 15000 bytes):\n%s", l[max(0, len(l)-15000):])
		}
	}()

	policies := testbed.WatchNB(t, ovn.NB, nbdb.LogicalRouterPolicyTable, &nbdb.LogicalRouterPolicy{},
		func(p *nbdb.LogicalRouterPolicy) string { return p.Match })
	nats := testbed.WatchNB(t, ovn.NB, nbdb.NATTable, &nbdb.NAT{}, func(n *nbdb.NAT) string { return n.ExternalIP })
	sets := testbed.WatchNB(t, ovn.NB, nbdb.AddressSetTable, &nbdb.AddressSet{}, func(a *nbdb.AddressSet) string { return a.Name })
	log, _ = startMain(t, daemonArgs(dir, ovn.NB))
	// The first sync is over when the cluster loop has reconciled after
	// connecting to the NB (a reconcile before leading does nothing).
	waitLog := func(from int, msg string) int {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			if i := strings.Index(log.String()[from:], msg); i >= 0 {
				return from + i
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q within a minute:\n%s", msg, grepLog(log.String(), "msg="))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitLog(waitLog(0, "northbound: starting from the rows in the NB"), "msg=reconciled loop=cluster")
	time.Sleep(time.Second) // and the drift repair that follows it
	if d := nbDiff(c, want); d != "" {
		t.Errorf("after the restart the NB is not the rendered one:\n%s", d)
	}
	for name, w := range map[string]*testbed.NBWatch{"policies": policies, "NATs": nats, "address sets": sets} {
		if ins, del := w.Churn(); ins != 0 || del != 0 {
			t.Errorf("%s: %d inserted and %d deleted by the restarted daemon, want none", name, ins, del)
		}
	}
	if !strings.Contains(log.String(), fmt.Sprintf("egress-owners=%d", n+4)) {
		t.Errorf("the restarted daemon did not start from the NB's EgressIP rows:\n%s", grepLog(log.String(), "northbound"))
	}
}

// grepLog returns the lines of log containing s.
func grepLog(log, s string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// BenchmarkNBWipedRepair runs `ovnedge daemon` on 500 EgressIPs and, per
// iteration, wipes the NB (a new, empty database) and restores its
// topology as an admin would: it reports the time from the topology's
// return to the NB holding every rendered row again (repair-ms), and from
// the wipe (wiped-ms, including the restore). Nothing in the manifests
// changes: only the drift repair brings the rows back.
func BenchmarkNBWipedRepair(b *testing.B) {
	const n = 500
	ovn, dir, c, topo := egressNB(b, n)
	want := renderedNB(b, c, dir)
	args := daemonArgs(dir, ovn.NB)
	log, _ := startMain(b, args[:len(args)-2]) // not at debug level
	waitNB(b, c, want, 2*time.Minute, log)
	var repair, wiped []time.Duration
	for b.Loop() {
		begin, from := time.Now(), len(log.String())
		ovn.ReplaceNB()
		restoreTopology(b, c, topo)
		restored := time.Now()
		waitNB(b, c, want, time.Minute, log)
		repair, wiped = append(repair, time.Since(restored)), append(wiped, time.Since(begin))
		if time.Since(restored) > 5*time.Second {
			b.Logf("slow repair (%v after the topology's return, restored at %s):\n%s", time.Since(restored), restored.Format(time.StampMilli),
				log.String()[from:])
		}
	}
	slices.Sort(repair)
	slices.Sort(wiped)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(repair[len(repair)/2]), "repair-p50-ms")
	b.ReportMetric(ms(repair[len(repair)-1]), "repair-max-ms")
	b.ReportMetric(ms(wiped[len(wiped)/2]), "wiped-p50-ms")
	b.ReportMetric(float64(len(want)), "owners")
	b.Logf("repair after the topology's return: %v", repair)
}

// leaderDataplane returns a leading Dataplane writing the NB at nb for
// the manifests of dir, and their Snapshot; it is closed when t ends.
func leaderDataplane(t *testing.T, nb, dir string, m *Metrics, log *slog.Logger) (*Dataplane, desired.Snapshot) {
	t.Helper()
	cfg := demoConfig(t, "--nb-address", nb, "--manifests", dir, "--egressip-reachability-total-timeout", "0")
	s, clients, err := LoadSnapshot(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDataplane(cfg, clients, record.NewFakeRecorder(1000), m, log)
	t.Cleanup(d.Close)
	d.Leading(true)
	return d, s
}

// TestFormerLeaderWritesNothing: a former leader (Leading(false)) writes
// nothing, nor does a reconcile whose context has ended (how a sync whose
// outcome is unknown is handled is ovsdbnb's TestWriterLostSync).
func TestFormerLeaderWritesNothing(t *testing.T) {
	ovn, dir, _, _ := egressNB(t, 20)
	ctx := context.Background()
	d, s := leaderDataplane(t, ovn.NB, dir, NewMetrics(), quiet)
	d.Leading(false)
	if err := d.Cluster(ctx, s); err != nil || d.cluster.nb.Client() != nil {
		t.Errorf("a former leader's reconcile: %v, NB client %v; want nothing done", err, d.cluster.nb.Client())
	}
	d.Leading(true)
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Cluster(done, s); !errors.Is(err, context.Canceled) || d.cluster.nb.Client() != nil {
		t.Errorf("a reconcile after its context ended: %v, NB client %v; want context.Canceled and nothing done", err, d.cluster.nb.Client())
	}
}

// TestRepairIgnoresEchoes: the NB monitor reports the leader's own
// writes as changes of every owner written; the repair finds their rows
// equal to what was written and syncs nothing (no operation, no repair
// counted), while a row deleted by hand is repaired.
func TestRepairIgnoresEchoes(t *testing.T) {
	ovn, dir, c, _ := egressNB(t, 20)
	want := renderedNB(t, c, dir)
	ctx := context.Background()
	logs := &lockedBuilder{}
	m := NewMetrics()
	d, s := leaderDataplane(t, ovn.NB, dir, m, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := d.Cluster(ctx, s); err != nil {
		t.Fatal(err)
	}
	ops := func() float64 {
		n := 0.0
		for _, op := range []string{"insert", "update", "mutate", "delete"} {
			n += gathered(t, m, "ovnedge_nb_operations_total", "op="+op)
		}
		return n
	}
	written := ops()
	waitLog := func(msg string) string {
		t.Helper()
		for begin := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			if l := grepLog(logs.String(), msg); l != "" {
				return l
			}
			if time.Since(begin) > 20*time.Second {
				t.Fatalf("no %q logged:\n%s", msg, grepLog(logs.String(), "northbound"))
			}
		}
	}
	echo := waitLog("northbound: nothing to repair")
	if !strings.Contains(echo, "echoes=") || strings.Contains(echo, "drifted=") {
		t.Errorf("the echo of the leader's writes: %s; want echoes only", echo)
	}
	if n := ops(); n != written || gathered(t, m, "ovnedge_nb_repairs_total", "reason="+"changed") != 0 {
		t.Errorf("the echo of the leader's writes cost %v NB operations and %v repairs, want none", n-written,
			gathered(t, m, "ovnedge_nb_repairs_total", "reason="+"changed"))
	}

	ovn.Nbctl("lr-policy-del", ovsdbnb.ClusterRouter, nbUUID(t, ovn, "Logical_Router_Policy", "priority=100", `match="ip4.src == 10.244.0.3"`))
	l := waitLog("northbound: repaired rows changed behind ovnedge's back")
	// The leader's steps are separate transactions: under load the echo
	// of a later one can reach the monitor after the first echo's
	// "nothing to repair", in the batch of the hand deletion, and then
	// adds its own "Logical_Router_Policy inserted" to eip0's changes.
	if !strings.Contains(l, "EgressIP/eip0 (Logical_Router_Policy deleted") || !strings.Contains(l, "inserted=1") {
		t.Errorf("repair of a policy deleted by hand: %s", l)
	}
	waitNB(t, c, want, 20*time.Second, logs)
}
