package helm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/internal/e2e/helmenv"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/readiness"
	"github.com/ovnedge/ovnedge/testbed"
)

const (
	release   = helmenv.Release
	namespace = helmenv.Namespace
	imageRepo = helmenv.ImageRepo
	// the ExternalIP Service and its backend
	svcNS, svcName = "default", "web"
	backendName    = "web-1"
	backendPort    = 8080
	payload        = 100_000

	wait = 60 * time.Second
)

var vip = netip.MustParseAddr("172.18.0.150")

// harness is the running cluster and the release.
type harness struct {
	t     *testing.T
	root  string
	cl    *testbed.Cluster
	kc    *testbed.KubeCluster
	cs    kubernetes.Interface
	nodes []*testbed.KubeNode
	helm  *helmenv.Helm
	env   *helmenv.Cluster
	ctx   context.Context
	// leaders is the chart's leader.replicas: candidates for the Lease,
	// one per node on the host network (each holds
	// leader.hostNetworkMetricsPort).
	leaders int
	times   []string // measured durations, reported at the end
	// tag is the image tag installed (Install), then upgraded to
	// (Upgrade).
	tag string
	dyn dynamic.Interface // for the custom resources
	// sender is the network namespace of the EgressIP's kubelet-run pod
	// (Upgrade, Failover).
	sender *testbed.Netns
}

func (h *harness) measured(what string, d time.Duration) {
	h.note(what, d.Round(time.Millisecond).String())
}

// note reports a measurement that is not a duration (counts) with the
// durations.
func (h *harness) note(what, value string) {
	h.times = append(h.times, fmt.Sprintf("%-48s %s", what, value))
	h.t.Logf("TIME %s: %s", what, value)
}

// TestHelm: see the package documentation. The steps share one cluster
// of two nodes and run in order; a failed step stops the rest.
func TestHelm(t *testing.T) {
	h := start(t, 2, 2)
	h.run(t, h.steps())
}

// TestHelmOneNode runs TestHelm's steps on a one-node cluster (single-node
// OpenShift, a one-node kind): one node pod and one leader replica on the
// node whose chassis has the gateway router, every backend, the EgressIP's
// pod and its egress IP. Every Service is then served by pods on the node
// it enters (NodePort templates included), the ExternalIP's backend is on
// the node the client routes through, the EgressIP's pod leaves through its
// own node, and the upgrade replaces the only leader (maxSurge 0: no
// replica holds the Lease until the new pod takes it). The failovers need
// a second node and are not run.
func TestHelmOneNode(t *testing.T) {
	h := start(t, 1, 1)
	h.run(t, h.steps())
}

// steps are the tests' steps in order, those that need a second node (the
// failovers) only when the cluster has one.
func (h *harness) steps() []step {
	steps := []step{
		{"Install", h.install},
		{"Ready", h.ready},
		{"ExternalIP", h.externalIP},
		{"ARPBypass", h.arpBypass},
		{"BridgeDrift", h.bridgeDrift},
		{"KubeletBackends", h.kubeletBackends},
		{"RestartNode", h.restartNode},
		{"Upgrade", h.upgrade},
		{"EgressIPv6", h.egressIPv6},
	}
	if len(h.nodes) > 1 {
		steps = append(steps, step{"Failover", h.failover}, step{"FastFailover", h.fastFailover}, step{"L2Takeover", h.l2Takeover},
			step{"HostEgress", h.hostEgress}, step{"LeaderDiesWithEgressNode", h.leaderDiesWithEgressNode})
	}
	return append(steps, step{"Uninstall", h.uninstall})
}

// step is one of a test's steps.
type step struct {
	name string
	f    func(t *testing.T)
}

// run runs steps in order; a failed step stops the rest.
func (h *harness) run(t *testing.T, steps []step) {
	for _, s := range steps {
		if !t.Run(s.name, s.f) {
			t.FailNow()
		}
	}
}

// image is the image scripts/image.sh builds, once for the package's
// tests (TestMain removes it).
var image struct {
	once         sync.Once
	dir          string
	archive, tag string
	took         time.Duration
	err          error
}

// TestMain removes the image the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if image.dir != "" {
		_ = os.RemoveAll(image.dir)
	}
	os.Exit(code)
}

// buildImage builds the image unless an earlier test did.
func buildImage(root string) {
	image.once.Do(func() {
		begin := time.Now()
		if image.dir, image.err = os.MkdirTemp("", "ovnedge-helm-image"); image.err != nil {
			return
		}
		image.archive, image.tag, image.err = helmenv.BuildImage(root, image.dir)
		image.took = time.Since(begin)
	})
}

// start starts the control plane, an OVN cluster of n chassis that are
// kubelet nodes, and builds the image meanwhile; Install installs the
// chart with leaders replicas.
func start(t *testing.T, n, leaders int) *harness {
	helmBin, crane := helmenv.ToolPath("helm", helmenv.HelmVersion), helmenv.ToolPath("crane", helmenv.CraneVersion)
	for _, p := range []string{helmBin, crane} {
		if _, err := os.Stat(p); err != nil {
			t.Logf("%s: missing: `scripts/tool.sh %s` installs it (make test-deps)", p, strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)))
		}
	}
	testbed.Require(t, helmBin, crane, "go", "git", "ctr")
	root, err := e2e.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{t: t, root: root, ctx: ctx, leaders: leaders}
	t.Cleanup(func() {
		t.Logf("measured:\n  %s", strings.Join(h.times, "\n  "))
	})

	// The control plane first: it skips the test (or fails it with
	// CI=true) without the Kubernetes binaries before anything else runs.
	begin := time.Now()
	h.kc = testbed.StartKubeCluster(t)
	h.cs = h.kc.Client
	h.dyn = dynamic.NewForConfigOrDie(h.kc.Config)
	h.helm = helmenv.NewHelm(h.kc, t.TempDir())
	h.measured("StartKubeCluster", time.Since(begin))

	// The image builds while the OVN cluster and the nodes come up.
	building := make(chan struct{})
	go func() {
		defer close(building)
		buildImage(root)
	}()
	t.Cleanup(func() { <-building })
	h.env = helmenv.Start(t, h.kc, h.root, n, h.measured)
	h.cl, h.nodes = h.env.OVN, h.env.Nodes
	<-building
	if image.err != nil {
		t.Fatalf("scripts/image.sh: %v", image.err)
	}
	h.measured("image build (scripts/image.sh, concurrent; once per package)", image.took)
	return h
}

// install imports the image on every node and runs `helm install --wait`.
func (h *harness) install(t *testing.T) {
	archive, tag := image.archive, image.tag
	h.tag = tag
	values := h.env.Values(t, tag, h.leaders, "loadBalancer:\n  pools: {helm: "+lbPool+", helm6: \""+lbPool6+"\"}\negress:\n  services: true\nuninstall:\n  timeout: 60s\n")
	t.Logf("values:\n%s", values)
	out, took, err := h.env.Install(t, h.helm, archive, values)
	t.Logf("helm install (%v):\n%s", took.Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("helm install: %v%s", err, h.diagnose())
	}
	h.measured("helm install --wait", took)
}

// runHelm runs helm with the cluster's admin kubeconfig.
func (h *harness) runHelm(args ...string) (string, error) { return h.helm.Run(args...) }

// pods are the release's pods (the node DaemonSet's, the leader's).
func (h *harness) pods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := h.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=ovnedge,app.kubernetes.io/component in (node,leader)"})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// everyPodReady checks that the release has its node and leader pods, each
// Running, Ready and Reconciled (podReady) and passing check.
func (h *harness) everyPodReady(check func(*corev1.Pod) error) error {
	pods, err := h.pods(h.ctx)
	if err != nil {
		return err
	}
	if len(pods) != len(h.nodes)+h.leaders {
		return fmt.Errorf("%d pods, want %d", len(pods), len(h.nodes)+h.leaders)
	}
	for i := range pods {
		if err := check(&pods[i]); err != nil {
			return err
		}
		if err := podReady(&pods[i]); err != nil {
			return err
		}
	}
	return nil
}

func condition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// podReady says why p is not Running, Ready (readiness probe) and
// Reconciled (ovnedge.io/Reconciled True), nil if it is.
func podReady(p *corev1.Pod) error {
	if p.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("pod %s: %s", p.Name, p.Status.Phase)
	}
	if c := condition(p, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
		return fmt.Errorf("pod %s not Ready: %+v", p.Name, c)
	}
	if c := condition(p, readiness.Condition); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "Reconciled" {
		return fmt.Errorf("pod %s: %s %+v", p.Name, readiness.Condition, c)
	}
	return nil
}

// ready checks the release's pods and the Lease.
func (h *harness) ready(t *testing.T) {
	var pods []corev1.Pod
	h.eventually(t, wait, "every ovnedge pod Running, Ready and Reconciled", func() error {
		var err error
		if pods, err = h.pods(h.ctx); err != nil {
			return err
		}
		byComponent := map[string]int{}
		for i := range pods {
			if err := podReady(&pods[i]); err != nil {
				return err
			}
			byComponent[pods[i].Labels["app.kubernetes.io/component"]]++
		}
		if byComponent["node"] != len(h.nodes) || byComponent["leader"] != h.leaders {
			return fmt.Errorf("pods %v, want %d node and %d leader", byComponent, len(h.nodes), h.leaders)
		}
		return nil
	})
	for i := range pods {
		p := &pods[i]
		ready, rec := condition(p, corev1.PodReady), condition(p, readiness.Condition)
		started := p.Status.StartTime.Time
		h.measured(fmt.Sprintf("pod %s on %s: started -> Ready", p.Name, p.Spec.NodeName), ready.LastTransitionTime.Sub(started))
		t.Logf("pod %s (%s, IP %s): created %s, started %s, %s=%s at %s, Ready at %s, image %s",
			p.Name, p.Spec.NodeName, p.Status.PodIP, p.CreationTimestamp.Format(time.TimeOnly), started.Format(time.TimeOnly),
			rec.Type, rec.Status, rec.LastTransitionTime.Format(time.TimeOnly), ready.LastTransitionTime.Format(time.TimeOnly),
			p.Status.ContainerStatuses[0].ImageID)
		if !p.Spec.HostNetwork || p.Status.PodIP != h.cl.Node(p.Spec.NodeName).IP.String() {
			t.Errorf("pod %s: hostNetwork %v, IP %s: want the host network of %s", p.Name, p.Spec.HostNetwork, p.Status.PodIP, p.Spec.NodeName)
		}
	}
	l := daemon.DefaultLease("")
	h.eventually(t, wait, "the Lease "+l.Namespace+"/"+l.Name+" held", func() error {
		lease, err := h.cs.CoordinationV1().Leases(l.Namespace).Get(h.ctx, l.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		if holder == "" {
			return errors.New("no holder")
		}
		// The holder names its leader Pod (POD_NAME), not the node's
		// host name a hostNetwork Pod has.
		for _, p := range pods {
			if p.Labels["app.kubernetes.io/component"] == "leader" && strings.HasPrefix(holder, p.Name+"_") {
				t.Logf("Lease %s/%s held by %q", l.Namespace, l.Name, holder)
				return nil
			}
		}
		return fmt.Errorf("held by %q, which names no leader pod", holder)
	})
}

// eventually fails t unless cond returns nil within timeout.
func (h *harness) eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v%s", what, timeout, err, h.diagnose())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cookieRE, tableRE and priorityRE find a dumped flow's cookie, table
// and priority.
var (
	cookieRE   = regexp.MustCompile(`cookie=0x([0-9a-f]+)`)
	tableRE    = regexp.MustCompile(`table=([0-9]+)`)
	priorityRE = regexp.MustCompile(`priority=([0-9]+)`)
)

// ownedFlows are node's breth0 flows that are ovnedge's (brex.Owns with
// the gateway flows: the gateway program's cookies and shape),
// statistics stripped (stats false) or not, sorted.
func ownedFlows(n *testbed.ClusterNode, stats bool) ([]string, error) {
	argv := []string{"-O", "OpenFlow13", "dump-flows", n.Mgmt(testbed.ClusterBridge)}
	if !stats {
		argv = append(argv, "--no-stats")
	}
	out, err := exec.Command("ovs-ofctl", argv...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ovs-ofctl dump-flows on %s: %v: %s", n.Name, err, out)
	}
	var owned []string
	for _, l := range strings.Split(string(out), "\n") {
		m := cookieRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		id := ovsflow.FlowID{}
		id.Cookie, _ = strconv.ParseUint(m[1], 16, 64)
		head, _, _ := strings.Cut(l, " actions=")
		if m := tableRE.FindStringSubmatch(head); m != nil {
			v, _ := strconv.ParseUint(m[1], 10, 8)
			id.Table = uint8(v)
		}
		if m := priorityRE.FindStringSubmatch(head); m != nil {
			v, _ := strconv.ParseUint(m[1], 10, 16)
			id.Priority = uint16(v)
		}
		if brex.Owns(true)(id) {
			owned = append(owned, strings.TrimSpace(l))
		}
	}
	slices.Sort(owned)
	return owned, nil
}

// vipFlows are the owned flows matching the Service's ExternalIP.
func vipFlows(flows []string) []string {
	return slices.DeleteFunc(slices.Clone(flows), func(l string) bool { return !strings.Contains(l, "nw_dst="+vip.String()) })
}

// lbRows are the NB load balancers whose VIPs hold the ExternalIP:
// "uuid name vips" lines.
func (h *harness) lbRows() ([]string, error) {
	out, err := h.cl.OVN.NbctlErr("--format=csv", "--no-headings", "--data=bare", "--columns=_uuid,name,vips", "find", "Load_Balancer")
	if err != nil {
		return nil, err
	}
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, vip.String()+":80") {
			rows = append(rows, l)
		}
	}
	slices.Sort(rows)
	return rows, nil
}

// externalIP creates the Service and its EndpointSlice and checks the NB,
// the flows and a connection from the external client.
func (h *harness) externalIP(t *testing.T) {
	backendNode := h.cl.Nodes[len(h.cl.Nodes)-1]
	viaNode := h.cl.Nodes[0]
	backend := h.cl.AddPod(backendNode.Name, svcNS, backendName, testbed.ClusterPodOptions{})
	if err := e2e.Serve(h.ctx, backend.Netns, backendName, backendPort); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svcNS, Name: svcName},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ExternalIPs: []string{vip.String()},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(backendPort)}}}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svcNS, Name: svcName + "-harness",
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName, discoveryv1.LabelManagedBy: "ovnedge-helm-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](backendPort)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{backend.IP.String()}, NodeName: ptr.To(backendNode.Name),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	begin := time.Now()
	if _, err := h.cs.DiscoveryV1().EndpointSlices(svcNS).Create(h.ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cs.CoreV1().Services(svcNS).Create(h.ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var rows []string
	h.eventually(t, wait, "an NB load balancer with "+vip.String()+":80", func() (err error) {
		rows, err = h.lbRows()
		if err == nil && len(rows) == 0 {
			err = errors.New("none")
		}
		return err
	})
	h.measured("Service apply -> NB load balancer row", time.Since(begin))
	for _, r := range rows {
		t.Logf("NB: %s", r)
	}
	h.eventually(t, wait, "every node's breth0 flows for "+vip.String(), func() error {
		for _, n := range h.cl.Nodes {
			flows, err := ownedFlows(n, false)
			if err != nil {
				return err
			}
			if len(vipFlows(flows)) == 0 {
				return fmt.Errorf("%s: no flow for %s among %d owned", n.Name, vip, len(flows))
			}
		}
		return nil
	})
	h.measured("Service apply -> breth0 flows on every node", time.Since(begin))

	h.cl.Client.Run(t, "ip", "route", "replace", vip.String()+"/32", "via", viaNode.IP.String())
	var line string
	h.eventually(t, 30*time.Second, "a connection from the client to "+vip.String()+":80 via "+viaNode.Name, func() (err error) {
		line, err = e2e.Reply(h.cl.Client, vip.String()+":80", payload, 3*time.Second)
		return err
	})
	h.measured("Service apply -> external TCP connection answered", time.Since(begin))
	pod, client, _ := strings.Cut(line, " ")
	t.Logf("ExternalIP %s:80 via %s: answered by %s, which saw %s (%d bytes echoed)", vip, viaNode.Name, pod, client, payload)
	if pod != backendName {
		t.Errorf("answered by %q, want %s", pod, backendName)
	}
	if strings.HasPrefix(client, viaNode.MgmtIP.String()+":") {
		t.Errorf("the backend saw %s, %s's management port: the host's kube-proxy, not OVN, carried it", client, viaNode.Name)
	}
	// The packets took ovnedge's breth0 flows (to OVN), not the host.
	flows, err := ownedFlows(viaNode, true)
	if err != nil {
		t.Fatal(err)
	}
	var packets int
	for _, l := range vipFlows(flows) {
		if m := regexp.MustCompile(`n_packets=(\d+)`).FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			packets += n
		}
	}
	if packets == 0 {
		t.Errorf("no packet counted by %s's breth0 flows for %s:\n%s", viaNode.Name, vip, strings.Join(vipFlows(flows), "\n"))
	}
	t.Logf("%s's breth0 flows for %s counted %d packets", viaNode.Name, vip, packets)
}

// containerPID returns the host PID of pod's container's process.
func containerPID(n *testbed.KubeNode, p *corev1.Pod) (int, error) {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0, fmt.Errorf("pod %s: no container status", p.Name)
	}
	return n.ContainerPID(p.Status.ContainerStatuses[0].ContainerID)
}

// snapshot is what a restart must leave as it is.
type snapshot struct {
	flows map[string][]string // node -> owned breth0 flows, no stats
	lbs   []string
	// rows are every NB router policy, NAT and address set ("uuid
	// columns" lines): the EgressIP rows (Upgrade) and the topology's.
	rows []string
}

func (h *harness) snapshot(t *testing.T) snapshot {
	s := snapshot{flows: map[string][]string{}}
	for _, n := range h.cl.Nodes {
		f, err := ownedFlows(n, false)
		if err != nil {
			t.Fatal(err)
		}
		s.flows[n.Name] = f
	}
	var err error
	if s.lbs, err = h.lbRows(); err != nil {
		t.Fatal(err)
	}
	for _, q := range [][]string{
		{"--columns=_uuid,priority,match,action,nexthops,options,external_ids", "find", nbdb.LogicalRouterPolicyTable},
		{"--columns=_uuid,type,external_ip,logical_ip,logical_port,options,external_ids", "find", nbdb.NATTable},
		{"--columns=_uuid,name,addresses", "find", nbdb.AddressSetTable},
	} {
		out, err := h.cl.OVN.NbctlErr(append([]string{"--format=csv", "--no-headings", "--data=bare"}, q...)...)
		if err != nil {
			t.Fatal(err)
		}
		s.rows = append(s.rows, strings.Split(strings.TrimSpace(out), "\n")...)
	}
	slices.Sort(s.rows)
	return s
}

// kept is what a step must leave as it is: a snapshot, and the churn of
// the NB tables ovnedge writes, counted from then on.
type kept struct {
	before snapshot
	watch  map[string]*testbed.NBWatch // table -> rows by key
}

// keep snapshots the flows and NB rows and starts watching the NB
// tables' churn.
func (h *harness) keep(t *testing.T) *kept {
	nb := h.cl.OVN.NB
	return &kept{before: h.snapshot(t), watch: map[string]*testbed.NBWatch{
		nbdb.LoadBalancerTable: testbed.WatchNB(t, nb, nbdb.LoadBalancerTable, &nbdb.LoadBalancer{},
			func(lb *nbdb.LoadBalancer) string { return lb.Name }),
		nbdb.LogicalRouterPolicyTable: testbed.WatchNB(t, nb, nbdb.LogicalRouterPolicyTable, &nbdb.LogicalRouterPolicy{},
			func(p *nbdb.LogicalRouterPolicy) string { return strconv.Itoa(p.Priority) + " " + p.Match }),
		nbdb.NATTable: testbed.WatchNB(t, nb, nbdb.NATTable, &nbdb.NAT{},
			func(n *nbdb.NAT) string { return n.Type + " " + n.LogicalIP + " " + n.ExternalIP }),
	}}
}

// check fails t unless, across what, every node's owned flows and the
// NB rows are as k's snapshot has them, no row of a watched table was
// inserted or deleted, and no owned flow of the nodes given is younger
// than since (none was re-added). It returns a summary.
func (h *harness) check(t *testing.T, k *kept, what string, since time.Time, nodes ...*testbed.ClusterNode) string {
	t.Helper()
	changed := false
	errorf := func(format string, args ...any) {
		t.Helper()
		changed = true
		t.Errorf(format, args...)
	}
	after := h.snapshot(t)
	for _, n := range h.cl.Nodes {
		if !slices.Equal(k.before.flows[n.Name], after.flows[n.Name]) {
			errorf("%s's owned flows changed across %s:\nbefore:\n%s\nafter:\n%s", n.Name, what,
				strings.Join(k.before.flows[n.Name], "\n"), strings.Join(after.flows[n.Name], "\n"))
		}
	}
	if !slices.Equal(k.before.lbs, after.lbs) {
		errorf("NB load balancers changed across %s:\nbefore %q\nafter %q", what, k.before.lbs, after.lbs)
	}
	if !slices.Equal(k.before.rows, after.rows) {
		gone := slices.DeleteFunc(slices.Clone(k.before.rows), func(r string) bool { return slices.Contains(after.rows, r) })
		added := slices.DeleteFunc(slices.Clone(after.rows), func(r string) bool { return slices.Contains(k.before.rows, r) })
		errorf("NB router policies, NATs or address sets changed across %s:\ngone:\n%s\nnew:\n%s", what,
			strings.Join(gone, "\n"), strings.Join(added, "\n"))
	}
	for table, w := range k.watch {
		if ins, del := w.Churn(); ins != 0 || del != 0 {
			errorf("NB %s churn across %s: %d inserted, %d deleted: %q", table, what, ins, del, w.Churned())
		}
	}
	// No flow was re-added: every owned flow of the nodes is older than
	// since.
	age := time.Since(since).Seconds()
	var total int
	for _, n := range nodes {
		flows, err := ownedFlows(n, true)
		if err != nil {
			t.Fatal(err)
		}
		total += len(flows)
		var young []string
		for _, l := range flows {
			if m := durationRE.FindStringSubmatch(l); m != nil {
				if d, _ := strconv.ParseFloat(m[1], 64); d < age-0.5 {
					young = append(young, l)
				}
			}
		}
		if len(young) > 0 {
			errorf("%d of %d owned flows on %s were (re)installed across %s, %.1fs ago:\n%s", len(young), len(flows),
				n.Name, what, age, strings.Join(young, "\n"))
		}
	}
	if changed {
		return "CHANGED: see the errors"
	}
	return fmt.Sprintf("%d owned flows on %d node(s) unchanged and older than %s (%.1fs), NB load balancers %q and %d router policy/NAT/address set rows unchanged (same UUIDs), no %s insert or delete",
		total, len(nodes), what, age, after.lbs, len(after.rows), strings.Join(slices.Sorted(maps.Keys(k.watch)), "/"))
}

// durationRE finds a dumped flow's age.
var durationRE = regexp.MustCompile(`duration=([0-9.]+)s`)

// restartNode kills the first node's instance's process; the kubelet
// restarts it.
func (h *harness) restartNode(t *testing.T) {
	node := h.nodes[0]
	pods, err := h.pods(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool {
		return p.Labels["app.kubernetes.io/component"] == "node" && p.Spec.NodeName == node.Name
	})
	if i < 0 {
		t.Fatalf("no node pod on %s", node.Name)
	}
	pod := pods[i]
	restarts := pod.Status.ContainerStatuses[0].RestartCount
	k := h.keep(t)
	if len(vipFlows(k.before.flows[node.Name])) == 0 || len(k.before.lbs) == 0 {
		t.Fatalf("nothing to keep: flows %v, NB %v", k.before.flows[node.Name], k.before.lbs)
	}
	pid, err := containerPID(node, &pod)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); !strings.Contains(string(b), "ovnedge") {
		t.Fatalf("pid %d is %q, not ovnedge", pid, b)
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	t.Logf("killed pod %s's ovnedge, pid %d on %s", pod.Name, pid, node.Name)
	var restarted time.Duration
	h.eventually(t, 90*time.Second, "pod "+pod.Name+" restarted, Ready and Reconciled again", func() error {
		p, err := h.cs.CoreV1().Pods(namespace).Get(h.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := p.Status.ContainerStatuses[0]
		if st.RestartCount <= restarts {
			return fmt.Errorf("restart count %d", st.RestartCount)
		}
		if restarted == 0 && st.State.Running != nil {
			restarted = time.Since(killed)
		}
		if err := podReady(p); err != nil {
			return err
		}
		if c := condition(p, corev1.PodReady); !c.LastTransitionTime.After(killed.Add(-time.Second)) {
			return fmt.Errorf("Ready since %s, before the kill", c.LastTransitionTime)
		}
		return nil
	})
	h.measured("node instance killed -> container running again", restarted)
	h.measured("node instance killed -> pod Ready again", time.Since(killed))

	t.Logf("across the restart: %s", h.check(t, k, "the kill", killed, h.cl.Nodes[0]))
	// Still served.
	if line, err := e2e.Reply(h.cl.Client, vip.String()+":80", payload, 3*time.Second); err != nil || !strings.HasPrefix(line, backendName+" ") {
		t.Errorf("after the restart, %s:80 answered %q, %v", vip, line, err)
	}
}

// uninstall runs `helm uninstall --wait` and checks that nothing ovnedge
// wrote is left.
func (h *harness) uninstall(t *testing.T) {
	begin := time.Now()
	out, err := h.runHelm("uninstall", release, "--namespace", namespace, "--wait", "--timeout", "120s")
	took := time.Since(begin)
	t.Logf("helm uninstall (%v):\n%s", took.Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("helm uninstall: %v%s", err, h.diagnose())
	}
	h.measured("helm uninstall --wait (pre-delete hook included)", took)
	if rows, err := h.lbRows(); err != nil || len(rows) > 0 {
		t.Errorf("NB load balancers of the Service left: %q, %v", rows, err)
	}
	if out := h.cl.OVN.Nbctl("--columns=name,external_ids", "find", "Load_Balancer"); out != "" {
		t.Logf("NB Load_Balancer rows left (not ovnedge's?):\n%s", out)
	}
	for _, n := range h.cl.Nodes {
		flows, err := ownedFlows(n, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(flows) > 0 {
			t.Errorf("%d flows with ovnedge cookies left on %s's breth0:\n%s", len(flows), n.Name, strings.Join(flows, "\n"))
		}
	}
	for _, n := range h.cl.Nodes {
		for _, table := range []string{hostnet.GuardTable, hostnet.NFTablesTable} {
			if out, err := n.NS.RunErr("nft", "list", "table", "inet", table); err == nil {
				t.Errorf("nftables table %s left on %s:\n%s", table, n.Name, out)
			}
		}
	}
	if left := h.esvcLeft(); len(left) > 0 {
		t.Errorf("EgressService %s/%s's traces left: %q", svcNS, keptESvc, left)
	}
	l := daemon.DefaultLease("")
	if lease, err := h.cs.CoordinationV1().Leases(l.Namespace).Get(h.ctx, l.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease %s/%s is still there (%v): held by %q", l.Namespace, l.Name, err, ptr.Deref(lease.Spec.HolderIdentity, ""))
	}
	if _, err := h.cs.CoreV1().ConfigMaps(namespace).Get(h.ctx, daemon.UninstallMarker, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the uninstall marker ConfigMap: %v, want it gone", err)
	}
	// helm deletes the DaemonSet and the Deployment with background
	// propagation: --wait waits for those objects, not for their pods,
	// which the garbage collector and the kubelets remove next.
	list, err := h.cs.CoreV1().Pods(namespace).List(h.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ovnedge"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("when helm uninstall --wait returned: %d ovnedge pods still there (terminating)", len(list.Items))
	for _, p := range list.Items {
		if c := condition(&p, readiness.Condition); c != nil {
			t.Logf("pod %s: %s=%s %s", p.Name, c.Type, c.Status, c.Reason)
			if c.Reason != "Uninstalled" && p.DeletionTimestamp == nil {
				t.Errorf("pod %s: %s reason %q, want Uninstalled", p.Name, c.Type, c.Reason)
			}
		}
	}
	// The hook ran as a kubelet-run Job (deleted once it succeeded:
	// hook-succeeded); its events stay.
	evs, err := h.cs.CoreV1().Events(namespace).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name == "ovnedge-uninstall" && e.Reason == "Completed"
	}) {
		t.Errorf("no Completed event of the pre-delete hook Job ovnedge-uninstall")
	}
	for _, e := range evs.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, "ovnedge-uninstall") {
			t.Logf("event %s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	exited := map[string]bool{}
	h.eventually(t, wait, "the release's pods deleted and their containers gone from every node", func() error {
		list, err := h.cs.CoreV1().Pods(namespace).List(h.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ovnedge"})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			if len(p.Status.ContainerStatuses) > 0 {
				if st := p.Status.ContainerStatuses[0].State.Terminated; st != nil && !exited[p.Name] {
					exited[p.Name] = true
					t.Logf("pod %s: ovnedge exited %v after helm uninstall began (%s, code %d; deletion requested %v after)",
						p.Name, st.FinishedAt.Sub(begin).Round(time.Second), st.Reason, st.ExitCode, p.DeletionTimestamp.Sub(begin).Round(time.Second))
				}
			}
		}
		for _, p := range list.Items {
			return fmt.Errorf("pod %s (%s) still there", p.Name, p.Status.Phase)
		}
		for _, n := range h.nodes {
			out, err := exec.Command("ctr", "-n", "k8s.io", "--address", n.Socket, "containers", "ls").CombinedOutput()
			if err != nil {
				return fmt.Errorf("ctr containers ls: %v: %s", err, out)
			}
			if strings.Contains(string(out), imageRepo) {
				return fmt.Errorf("containers of the image left on %s:\n%s", n.Name, out)
			}
		}
		return nil
	})
	h.measured("helm uninstall -> pods and containers gone", time.Since(begin))
	t.Logf("after helm uninstall: no NB load balancer for %s, no ovnedge flow on any breth0, no Lease, no pod, no container", vip)
}

// diagnose returns the release's pods, the namespace's events and the
// tails of the ovnedge containers' logs.
func (h *harness) diagnose() string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if list, err := h.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range list.Items {
			fmt.Fprintf(&b, "\n--- pod %s on %q: %s %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
			for _, c := range p.Status.ContainerStatuses {
				fmt.Fprintf(&b, "\n    container %s: ready %v restarts %d state %+v last %+v", c.Name, c.Ready, c.RestartCount, c.State, c.LastTerminationState)
			}
		}
	}
	if evs, err := h.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			fmt.Fprintf(&b, "\n--- event %s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	for _, n := range h.nodes {
		logs, _ := filepath.Glob(filepath.Join(n.Dir, "log", "pods", namespace+"_ovnedge*", "*", "*.log"))
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			fmt.Fprintf(&b, "\n--- %s: %s (last 15 lines):\n%s", n.Name, l, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	}
	return b.String()
}
