package e2e

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The demo cluster (examples/demo) in the shape the daemon is told.
const (
	clusterSubnets = "10.244.0.0/16/24"
	joinSubnet     = "100.64.0.0/16"
	egressNode     = "ovn-worker2" // the egress-assignable node
	otherNode      = "ovn-worker"
	egressIP       = "172.18.0.44"
	podIP          = "10.244.1.3"
	lbVIP          = "172.18.0.200"
)

// topology is the OVN-Kubernetes topology of the demo's two nodes.
var topology = ovsdbnb.Topology{ClusterSubnet: "10.244.0.0/16", JoinRouterIP: "100.64.0.1/16", Nodes: []ovsdbnb.Node{
	{Name: otherNode, Subnet: "10.244.1.0/24", JoinIP: "100.64.0.3/16", ExternalIP: "172.18.0.2/24", Gateway: "172.18.0.1"},
	{Name: egressNode, Subnet: "10.244.2.0/24", JoinIP: "100.64.0.4/16", ExternalIP: "172.18.0.3/24", Gateway: "172.18.0.1"},
}}

// metricsRE finds the metrics address in the daemon's log.
var metricsRE = regexp.MustCompile(`serving metrics and health.*address=(127\.0\.0\.1:\d+)`)

// buildOvnedge builds ./daemon/cmd/ovnedge into a temporary directory,
// or returns $OVNEDGE_BIN, a binary built before, when set.
func buildOvnedge(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("OVNEDGE_BIN"); bin != "" {
		return bin
	}
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "daemon", "cmd", "ovnedge")); err != nil {
		msg := fmt.Sprintf("daemon/cmd/ovnedge missing: %v", err)
		if os.Getenv("CI") == "true" {
			t.Fatalf("FAIL (CI=true): %s", msg)
		}
		t.Skipf("SKIP (not CI): %s", msg)
	}
	begin := time.Now()
	bin := filepath.Join(t.TempDir(), "ovnedge")
	cmd := exec.Command("go", "build", "-o", bin, "./daemon/cmd/ovnedge")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./daemon/cmd/ovnedge: %v\n%s", err, out)
	}
	t.Logf("built ovnedge in %v", time.Since(begin).Round(time.Millisecond))
	return bin
}

// cluster is the API server, OVN central and the ovnedge binary a test
// runs daemons against.
type cluster struct {
	*kube
	ovn *testbed.OVN
	bin string
	// kubeconfig is the daemons' (deploy/rbac.yaml's ovnedge-leader).
	kubeconfig string
	// extraArgs are added to every daemon's arguments (BenchmarkSoak's
	// SOAK_LOG_LEVEL).
	extraArgs []string
}

// instance is one running `ovnedge daemon`.
type instance struct {
	*testbed.Process
	node, log, metrics string
	pod                string // POD_NAME given, "" for none
	ovs                *testbed.OVS
}

// identity is the start of the instance's leader election identity
// (the daemon's default: node name, host name, a per-process suffix).
func (i *instance) identity() string {
	host, _ := os.Hostname()
	return i.node + "_" + cmp.Or(i.pod, host) + "_"
}

// holds reports whether a Lease holder identity is the instance's: its
// node and host name, then a suffix of its own process (the daemon makes
// every process's identity unique).
func (i *instance) holds(holder string) bool { return strings.HasPrefix(holder, i.identity()) }

// startCluster starts everything but the daemons and applies the demo.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	bin := buildOvnedge(t)
	c := &cluster{kube: startKube(t), ovn: testbed.StartOVN(t), bin: bin}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	nb, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{c.ovn.NB}})
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	if err := ovsdbnb.EnsureTopology(ctx, nb, topology); err != nil {
		t.Fatal(err)
	}
	c.apply(t, demoDir)

	// The daemons run as the leader's ServiceAccount of deploy/rbac.yaml,
	// so its least-privilege RBAC is what they get.
	c.apply(t, deployDir, "rbac.yaml")
	sa := "ovnedge-leader"
	tr, err := c.cs.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount kube-system/%s: %v", sa, err)
	}
	c.kubeconfig = c.KubeconfigFor(t, sa, tr.Status.Token)
	return c
}

// start runs `ovnedge daemon` for node on a bridge of its own and waits
// until it serves /readyz.
func (c *cluster) start(t testing.TB, node string, ovs *testbed.OVS) *instance {
	t.Helper()
	return c.startWith(t, node, ovs, nil, true)
}

// startWith is start with env added to the daemon's environment and args
// to its arguments (later ones win); unless ready it waits only for the
// metrics server, not for /readyz.
func (c *cluster) startWith(t testing.TB, node string, ovs *testbed.OVS, env []string, ready bool, extra ...string) *instance {
	t.Helper()
	if ovs == nil {
		host := topology.Nodes[slices.IndexFunc(topology.Nodes, func(n ovsdbnb.Node) bool { return n.Name == node })].ExternalIP
		ovs = testbed.StartOVS(t, testbed.OVSOptions{Node: node, HostIP: host})
	}
	// In the bridge's directory, which the testbed keeps, logs included,
	// when the test fails; a restart appends to it.
	log := filepath.Join(ovs.Dir, "ovnedge.log")
	i := &instance{node: node, log: log, ovs: ovs}
	for _, e := range env {
		if pod, ok := strings.CutPrefix(e, "POD_NAME="); ok {
			i.pod = pod
		}
	}
	args := append([]string{"daemon",
		"--kubeconfig", c.kubeconfig, "--node-name", node,
		"--nb-address", c.ovn.NB, "--ovs-db", ovs.DB, "--ovs-rundir", ovs.RunDir, "--bridge", ovs.Bridge,
		"--metrics-address", "127.0.0.1:0", "--cluster-subnets", clusterSubnets, "--join-subnet", joinSubnet,
		"--egressip-reachability-total-timeout", "0"}, c.extraArgs...)
	args = append(args, extra...)
	i.Process = testbed.StartProcess(t, "ovnedge "+node, log, env, append([]string{c.bin}, args...)...)
	c.poll(t, "ovnedge "+node+" /readyz", func(ctx context.Context) error {
		data, err := os.ReadFile(log)
		if err != nil {
			return err
		}
		m := metricsRE.FindAllSubmatch(data, -1)
		if len(m) == 0 {
			return errors.New("no metrics address logged yet")
		}
		i.metrics = string(m[len(m)-1][1]) // this run's, after a restart's
		if !i.Alive() {
			return fmt.Errorf("ovnedge %s (pid %d) exited", node, i.Pid())
		}
		if _, err = i.get(ctx, "/readyz"); !ready && err != nil && strings.Contains(err.Error(), "503") {
			return nil
		}
		return err
	})
	return i
}

// get fetches path from the instance's metrics server.
func (i *instance) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+i.metrics+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", path, resp.Status)
	}
	return string(body), err
}

// nbRows returns the rows of the tables ovnedge writes, one line per row
// with its UUID, sorted.
func (c *cluster) nbRows() []string {
	var rows []string
	for _, table := range []struct{ name, columns string }{
		{"Logical_Router_Policy", "_uuid,priority,match,action,nexthops"},
		{"NAT", "_uuid,type,external_ip,logical_ip,logical_port"},
		{"Load_Balancer", "_uuid,name,vips"},
		{"Address_Set", "_uuid,name,addresses"},
	} {
		out := c.ovn.Nbctl("--format=csv", "--data=bare", "--no-headings", "--columns="+table.columns, "list", table.name)
		for l := range strings.SplitSeq(out, "\n") {
			if l != "" {
				rows = append(rows, table.name+","+l)
			}
		}
	}
	slices.Sort(rows)
	return rows
}

// wantNB checks that the Northbound holds what the demo asks for.
func wantNB(rows []string, podIPs ...string) error {
	joined := strings.Join(rows, "\n")
	var missing []string
	for _, ip := range podIPs {
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^Logical_Router_Policy,[^,]*,100,ip4\.src == ` + regexp.QuoteMeta(ip) + `,reroute,100\.64\.0\.4$`),
			regexp.MustCompile(`(?m)^NAT,[^,]*,snat,` + regexp.QuoteMeta(egressIP+","+ip) + `,k8s-` + egressNode + `$`),
		} {
			if !want.MatchString(joined) {
				missing = append(missing, want.String())
			}
		}
	}
	lb := regexp.MustCompile(`(?m)^Load_Balancer,.*"?` + regexp.QuoteMeta(lbVIP+":80") + `"?=` + `"?` + regexp.QuoteMeta(podIP+":8080"))
	if !lb.MatchString(joined) {
		missing = append(missing, lb.String())
	}
	if len(missing) > 0 {
		return fmt.Errorf("Northbound lacks %q; it holds:\n%s", missing, joined)
	}
	return nil
}

// wantStatus waits until the demo's EgressIP has its egress IP on the
// egress node in its status. The EgressIP CRD has no status subresource
// (as in OVN-Kubernetes): the daemon writes it with Update, which
// deploy/rbac.yaml grants on egressips.
func (c *cluster) wantStatus(t testing.TB) {
	t.Helper()
	want := []string{egressNode + "=" + egressIP}
	err := waitFor("EgressIP egress-prod status "+strings.Join(want, ","), func(ctx context.Context) error {
		u, err := c.dyn.Resource(egressv1.Resource).Get(ctx, "egress-prod", metav1.GetOptions{})
		if err != nil {
			return err
		}
		items, _, _ := unstructured.NestedSlice(u.Object, "status", "items")
		var got []string
		for _, it := range items {
			m, _ := it.(map[string]any)
			got = append(got, fmt.Sprintf("%v=%v", m["node"], m["egressIP"]))
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("status %v", got)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// flows returns the bridge's flows without statistics, sorted.
func flows(s *testbed.OVS) []string {
	out := strings.Split(s.Ofctl("--no-stats", "dump-flows", s.Mgmt()), "\n")
	slices.Sort(out)
	return out
}

// reconciled waits until the instance has finished a reconcile of loop
// ("node" or "cluster") without error.
func (c *cluster) reconciled(t testing.TB, i *instance, loop string) {
	t.Helper()
	re := regexp.MustCompile(`ovnedge_reconcile_duration_seconds_count\{loop="` + loop + `",result="ok"\} [1-9]`)
	c.poll(t, "a successful "+loop+" reconcile of ovnedge "+i.node, func(ctx context.Context) error {
		body, err := i.get(ctx, "/metrics")
		if err == nil && !re.MatchString(body) {
			err = errors.New("none yet")
		}
		return err
	})
}

// leaderLease is what the tests read of the leader Lease.
type leaderLease struct {
	holder            string
	acquired, renewed time.Time
}

// lease reads the leader Lease.
func (c *cluster) lease(ctx context.Context) (leaderLease, error) {
	l := daemon.DefaultLease("")
	lease, err := c.cs.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return leaderLease{}, err
	}
	var got leaderLease
	if lease.Spec.HolderIdentity != nil {
		got.holder = *lease.Spec.HolderIdentity
	}
	if lease.Spec.AcquireTime != nil {
		got.acquired = lease.Spec.AcquireTime.Time
	}
	if lease.Spec.RenewTime != nil {
		got.renewed = lease.Spec.RenewTime.Time
	}
	return got, nil
}

// waitLeader waits until i holds the leader Lease, and returns it.
func (c *cluster) waitLeader(t testing.TB, i *instance) leaderLease {
	t.Helper()
	var l leaderLease
	c.poll(t, "ovnedge "+i.node+" to hold the leader Lease", func(ctx context.Context) error {
		var err error
		l, err = c.lease(ctx)
		if err == nil && !i.holds(l.holder) {
			err = fmt.Errorf("held by %q", l.holder)
		}
		return err
	})
	return l
}

// TestDaemon runs `ovnedge daemon` against the real API server and OVN:
// the dataplane and the EgressIP status follow the objects, a restart
// removes and duplicates nothing, a second instance takes over from a
// killed leader within the lease duration, and bad input gives events, no
// crash, and leaves the rest alone.
func TestDaemon(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	c := startCluster(t)
	a := c.start(t, egressNode, nil)

	c.poll(t, "the Northbound rows of the demo", func(context.Context) error { return wantNB(c.nbRows(), podIP) })
	c.wantStatus(t)
	c.reconciled(t, a, "node")
	if f := strings.Join(flows(a.ovs), "\n"); !strings.Contains(f, lbVIP) {
		t.Errorf("br-ex of %s has no flow for the VIP %s:\n%s", egressNode, lbVIP, f)
	}
	t.Logf("dataplane programmed %v after the test began", time.Since(begin).Round(time.Millisecond))

	a = restart(t, c, a)
	a = failover(t, c, a)
	badInput(t, c, a)
	t.Logf("e2e run took %v", time.Since(begin).Round(time.Millisecond))
}

// restart stops the daemon a with SIGTERM and starts it again: the
// Northbound and the bridge must be left as they were, then kept.
func restart(t testing.TB, c *cluster, a *instance) *instance {
	rows, fl := c.nbRows(), flows(a.ovs)
	if err := a.Terminate(); err != nil {
		t.Fatal(err)
	}
	if got := c.nbRows(); !slices.Equal(got, rows) {
		t.Errorf("shutdown changed the Northbound:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(rows, "\n"))
	}
	a = c.start(t, egressNode, a.ovs)
	c.waitLeader(t, a) // the Lease was released on SIGTERM
	c.reconciled(t, a, "node")
	// The new leader syncs the Northbound as soon as it leads; watch it
	// for a few seconds.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if got := c.nbRows(); !slices.Equal(got, rows) {
			t.Errorf("after a restart the Northbound holds\n%s\nwant (same UUIDs, nothing removed or duplicated)\n%s",
				strings.Join(got, "\n"), strings.Join(rows, "\n"))
			break
		}
	}
	if got := flows(a.ovs); !slices.Equal(got, fl) {
		t.Errorf("after a restart br-ex holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(fl, "\n"))
	}

	return a
}

// failover starts a second instance, kills the leader a, and checks that
// the second takes over within the lease duration and does the leader's
// work. It returns the new leader.
// takeover starts a second instance, SIGKILLs the leader a and returns
// the new leader's Lease once it acquires it, with the time from the dead
// leader's last renewal. A takeover before the Lease expired (the
// lease duration after that renewal) fails t: two leaders at once.
func takeover(t testing.TB, c *cluster, a *instance) (*instance, time.Duration) {
	ctx := context.Background()
	b := c.start(t, otherNode, nil)
	if l, err := c.lease(ctx); err != nil || !a.holds(l.holder) {
		t.Fatalf("Lease held by %q (%v), want the first instance %q...", l.holder, err, a.identity())
	}
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	last, err := c.lease(ctx) // the dead leader's last renewal
	if err != nil {
		t.Fatal(err)
	}
	next := c.waitLeader(t, b)
	l := daemon.DefaultLease("")
	gap := next.acquired.Sub(last.renewed)
	if gap < l.Duration {
		t.Errorf("takeover %v after the last renewal, before the lease duration %v", gap, l.Duration)
	}
	return b, gap
}

// BenchmarkLeaseTakeover reports how long after the dead leader's last
// renewal another instance holds the Lease (takeover-ms): client-go's
// elector deems a Lease expired Duration after it saw the last renewal and
// retries every RetryPeriod jittered by up to 1.2 times, so expect the
// lease duration plus up to two jittered retry periods. Each iteration
// starts a cluster.
func BenchmarkLeaseTakeover(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		c := startCluster(b)
		a := c.start(b, egressNode, nil)
		_, gap := takeover(b, c, a)
		total += gap
	}
	l := daemon.DefaultLease("")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "takeover-ms")
	b.ReportMetric(float64((l.Duration + 2*time.Duration(2.2*float64(l.RetryPeriod))).Milliseconds()), "bound-ms")
}

func failover(t testing.TB, c *cluster, a *instance) *instance {
	ctx := context.Background()
	b, gap := takeover(t, c, a)
	t.Logf("takeover %v after the dead leader's last renewal (BenchmarkLeaseTakeover reports it)", gap.Round(time.Millisecond))
	// The new leader does the cluster-wide work: a new pod gets its policy and SNAT.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "prod", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: otherNode, Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.4", PodIPs: []corev1.PodIP{{IP: "10.244.1.4"}}},
	}
	pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	if _, err := c.create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	c.poll(t, "the new leader to program the new pod", func(context.Context) error { return wantNB(c.nbRows(), podIP, "10.244.1.4") })
	return b
}

// badInput sends bad objects through the API: each gives a Warning event
// (or is refused at admission), the leader a keeps running and the
// objects programmed before are untouched.
func badInput(t testing.TB, c *cluster, a *instance) {
	ctx := context.Background()
	rows := c.nbRows()
	cases := []struct {
		name, kind string
		obj        runtime.Object
		reason     string // "" when any Warning will do
		rejectable bool   // the API may refuse it at admission, which also counts
	}{
		{"bad-ip", "EgressIP", egressIPObject("bad-ip", "not-an-ip"), egress.ReasonInvalidEgressIP, true},
		{"node-ip", "EgressIP", egressIPObject("node-ip", "172.18.0.3"), egress.ReasonEgressIPConflict, false},
		{"taken-ip", "EgressIP", egressIPObject("taken-ip", egressIP), egress.ReasonUnsupportedRequest, false},
		{"web-dup", "Service", lbService("web-dup", lbVIP), "", false},
		{"bare", "Node", &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: "bare", Labels: map[string]string{"k8s.ovn.org/egress-assignable": ""}}},
			desired.ReasonInvalidNode, false},
	}
	for _, tc := range cases {
		if _, err := c.create(ctx, tc.obj); err != nil {
			if tc.rejectable && apierrors.IsInvalid(err) {
				t.Logf("%s %s refused at admission: %v", tc.kind, tc.name, err)
				continue
			}
			t.Fatalf("%s %s: %v", tc.kind, tc.name, err)
		}
		c.poll(t, "a Warning event on "+tc.kind+" "+tc.name, func(ctx context.Context) error {
			evs, err := c.cs.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			var seen []string
			for _, e := range evs.Items {
				o := e.InvolvedObject
				if o.Kind == tc.kind && o.Name == tc.name && e.Type == corev1.EventTypeWarning &&
					(tc.reason == "" || e.Reason == tc.reason) {
					t.Logf("event on %s %s: %s: %s", o.Kind, o.Name, e.Reason, e.Message)
					return nil
				}
				seen = append(seen, fmt.Sprintf("%s %s/%s %s %s", e.Type, o.Kind, o.Name, e.Reason, e.Message))
			}
			return fmt.Errorf("events so far: %q", seen)
		})
	}
	c.reconciled(t, a, "cluster")
	if !a.Alive() {
		t.Fatalf("the daemon did not survive the bad input:%s", a.Log())
	}
	c.wantStatus(t)
	if err := wantNB(c.nbRows(), podIP, "10.244.1.4"); err != nil {
		t.Errorf("after the bad input: %v (before:\n%s)", err, strings.Join(rows, "\n"))
	}
	if data, err := os.ReadFile(a.log); err != nil || bytes.Contains(data, []byte("panic")) {
		t.Errorf("the daemon's log %s mentions a panic (or cannot be read: %v)", a.log, err)
	}

}

// egressIPObject is an EgressIP of the prod namespace asking for ips.
func egressIPObject(name string, ips ...string) *unstructured.Unstructured {
	list := make([]any, len(ips))
	for i, ip := range ips {
		list[i] = ip
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"egressIPs": list,
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"env": "prod"}}},
	}}
}

// lbService is a LoadBalancer Service of the prod namespace whose
// loadBalancerIP and ingress are ip.
func lbService(name, ip string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: ip,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: ip}}}},
	}
}
