package e2e

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// report is one callback of the reachability checker.
type report struct {
	node string
	up   bool
	at   time.Time
}

// awaitReport waits up to timeout for the checker to report node as up
// (or down), logging the other reports.
func awaitReport(t *testing.T, reports <-chan report, node string, up bool, timeout time.Duration) report {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case r := <-reports:
			if r.node == node && r.up == up {
				return r
			}
			t.Logf("checker: node %s up=%v", r.node, r.up)
		case <-deadline:
			t.Fatalf("checker did not report node %s up=%v within %v", node, up, timeout)
		}
	}
}

// assignedTo fails the test unless status puts the egress IP on node.
func assignedTo(t *testing.T, status []egressv1.EgressIPStatusItem, node string) {
	t.Helper()
	if len(status) != 1 || status[0].Node != node || status[0].EgressIP != egressIP.String() {
		t.Fatalf("status %+v, want %s on %s", status, egressIP, node)
	}
}

// TestFailover is issue 5's real-packet proof: a pod's TCP connections
// reach the external host with the egress IP as source through the egress
// node's gateway router; when that node stops answering its health probe
// the checker reports it, the leader re-assigns the IP, ovsdbnb re-syncs
// NB make-before-break, and new connections arrive with the egress IP
// through the other node's gateway router.
func TestFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		// port is the checker's egressip-node-healthcheck-port: 0 is the
		// DISCARD probe, else the nodes' gRPC health port.
		port int
	}{
		{"grpc", 9107}, // OVN-Kubernetes' usual health port
		{"discard", 0},
	} {
		t.Run(tc.name, func(t *testing.T) { failover(t, tc.port) })
	}
}

// failover runs the test with the checker's health port.
func failover(t *testing.T, port int) {
	sb := newSandbox(t)
	nodes, broken := ovnknode.ParseAll(k8sNodes())
	if len(broken) > 0 {
		t.Fatal(broken)
	}
	eip := &egressv1.EgressIP{
		ObjectMeta: metav1.ObjectMeta{Name: "egressip-prod"},
		Spec: egressv1.EgressIPSpec{EgressIPs: []string{egressIP.String()},
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	k8sPods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Labels: map[string]string{"app": "web"}},
			Spec:   corev1.PodSpec{NodeName: "worker0"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: podIP.String()}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", Labels: map[string]string{"app": "db"}},
			Spec:   corev1.PodSpec{NodeName: "worker0"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.244.0.6"}}}},
	}
	pods, err := egress.SelectPods(eip, []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}, egress.PodInfos(k8sPods))
	if err != nil || len(pods) != 1 {
		t.Fatalf("selected %+v, %v; want the web pod", pods, err)
	}
	l := &leader{t: t, sb: sb, eip: eip, nodes: nodes, pods: pods}

	// The reachability checker, interval 1 s and timeout 1 s, probing the
	// nodes' health port from the leader's namespace.
	leaderNS, nodeNS := healthNodes(t, nodes, port)
	blockPort := strconv.Itoa(cmp.Or(port, reach.DiscardPort))
	ctx, cancel := context.WithCancel(context.Background())
	reports := make(chan report, 16)
	checker, err := reach.NewChecker(reach.Config{Interval: time.Second, Timeout: time.Second, Port: port,
		Dial: dialFrom(leaderNS), Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))},
		func(node string, up bool) {
			select {
			case reports <- report{node, up, time.Now()}:
			case <-ctx.Done():
			}
		})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var targets []reach.Target
	for _, n := range nodes {
		if mgmt, ok := n.MgmtIP(false); ok && n.Assignable {
			targets = append(targets, reach.Target{Node: n.Name, Addr: mgmt})
		}
	}
	checker.SetTargets(targets)
	checkerDone := make(chan struct{})
	go func() { checker.Run(ctx); close(checkerDone) }()
	t.Cleanup(func() { cancel(); <-checkerDone })
	for _, n := range []string{"worker1", "worker2"} {
		awaitReport(t, reports, n, true, 10*time.Second)
	}

	assignedTo(t, l.reconcile(ctx, checker.Reachable), "worker1")

	// New connections from the pod every 20 ms; the external host records
	// the SYNs with their source MAC, and the accepted connections.
	acc := listen(t, sb.ext)
	sn := sniff(t, sb.ext, acc.port())
	genCtx, stopGen := context.WithCancel(ctx)
	genDone := make(chan error, 1)
	go func() {
		genDone <- generate(genCtx, sb.pod, net.JoinHostPort(sb.ext.IP.Addr().String(), strconv.Itoa(int(acc.port()))), 20*time.Millisecond)
	}()
	defer func() {
		stopGen()
		if err := <-genDone; err != nil {
			t.Errorf("traffic generator: %v", err)
		}
	}()
	via := func(node string) func(uint16) bool {
		mac := gatewayMAC(t, node)
		return func(port uint16) bool {
			_, ok := sn.first(func(s syn) bool { return s.src.Port() == port && s.fromMAC == mac }, 0)
			return ok
		}
	}

	begin := time.Now()
	if _, err := sn.firstVia(begin, egressIP, gatewayMAC(t, "worker1"), 10*time.Second); err != nil {
		t.Fatalf("before failover: %v", err)
	}
	c, err := acc.firstFrom(begin, egressIP, via("worker1"), 10*time.Second)
	if err != nil {
		t.Fatalf("before failover: %v", err)
	}
	t.Logf("before failover: the external host accepted a connection from %s through GR_worker1", c.remote)

	// The egress node stops answering its health probe.
	blocked := time.Now()
	nodeNS["worker1"].Run(t, "iptables", "-w", "-I", "INPUT", "-p", "tcp", "--dport", blockPort, "-j", "DROP")
	down := awaitReport(t, reports, "worker1", false, 10*time.Second)
	assignedTo(t, l.reconcile(ctx, checker.Reachable), "worker2")
	synced := time.Now()
	first, err := sn.firstVia(down.at, egressIP, gatewayMAC(t, "worker2"), 10*time.Second)
	if err != nil {
		t.Fatalf("after failover: %v", err)
	}
	c, err = acc.firstFrom(down.at, egressIP, via("worker2"), 10*time.Second)
	if err != nil {
		t.Fatalf("after failover: %v", err)
	}
	detect, reprogram := down.at.Sub(blocked), first.at.Sub(down.at)
	t.Logf("failover detect=%v reprogram=%v total=%v (NB synced after %v; first connection through GR_worker2 accepted after %v)",
		detect.Round(time.Millisecond), reprogram.Round(time.Millisecond), (detect + reprogram).Round(time.Millisecond),
		synced.Sub(down.at).Round(time.Millisecond), c.at.Sub(down.at).Round(time.Millisecond))

	// NB holds the SNAT on GR_worker2 only and the reroute to its join IP.
	if nat := sb.ovn.Nbctl("lr-nat-list", "GR_worker1"); strings.Contains(nat, egressIP.String()) {
		t.Errorf("GR_worker1 still has the egress IP's SNAT:\n%s", nat)
	}
	if nat := sb.ovn.Nbctl("lr-nat-list", "GR_worker2"); !strings.Contains(nat, egressIP.String()) {
		t.Errorf("GR_worker2 lacks the egress IP's SNAT:\n%s", nat)
	}
	if pol := sb.ovn.Nbctl("lr-policy-list", egress.ClusterRouter); !strings.Contains(pol, "reroute                100.64.0.4") {
		t.Errorf("no reroute to GR_worker2's join IP:\n%s", pol)
	}

	// worker1 answers again: the valid assignment on worker2 is kept.
	nodeNS["worker1"].Run(t, "iptables", "-w", "-D", "INPUT", "-p", "tcp", "--dport", blockPort, "-j", "DROP")
	awaitReport(t, reports, "worker1", true, 10*time.Second)
	assignedTo(t, l.reconcile(ctx, checker.Reachable), "worker2")
}
