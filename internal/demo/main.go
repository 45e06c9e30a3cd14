// Command demo is `make demo`: ovnedge on a real three-node
// cluster, shown the way a person would check it. With -flavor=kube-ovn
// (`make demo FLAVOR=kube-ovn`) it shows Kube-OVN's LoadBalancer Services
// instead (see RunKubeOVN).
//
// It starts the cluster of internal/e2e (three OVN chassis in network
// namespaces on a shared external segment, geneve between them, a real
// kube-apiserver and etcd, `ovnedge daemon` on every node and as the
// leader, started as deploy/ starts them), applies the objects of
// demo.yaml and three pods, and then shows real results: a request to
// each VIP from a host outside the cluster and the pod that answered, the
// source address the external host saw for the egress pod, and the gap
// of a 10 ms packet stream when the egress node's chassis is killed.
// Everything is removed on exit. It needs root, the OVS/OVN packages and
// the kube-apiserver that scripts/kube-apiserver.sh builds (make demo runs
// both).
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/testbed"
)

//go:embed demo.yaml
var demoYAML string

// Nodes of the demo.
const (
	w1, w2, w3 = "ovn-worker", "ovn-worker2", "ovn-worker3"
	egressIP   = "172.18.0.44"
	externalIP = "172.18.0.150"
)

func main() {
	verbose := flag.Bool("v", false, "show the testbed's progress")
	flavor := flag.String("flavor", "ovn-kubernetes", "ovn-kubernetes (VIPs, egress IP, failover) or kube-ovn (Kube-OVN's LoadBalancer Services: lb-svc Deployment, requests through its pod)")
	flag.Parse()
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	run := func(t testbed.T) { Run(ctx, t, os.Stdout) }
	switch *flavor {
	case "ovn-kubernetes", "":
	case "kube-ovn":
		run = func(t testbed.T) { RunKubeOVN(ctx, t, os.Stdout) }
	default:
		fmt.Fprintf(os.Stderr, "demo: unknown flavor %q (ovn-kubernetes or kube-ovn)\n", *flavor)
		os.Exit(2)
	}
	p := &testbed.Program{Quiet: !*verbose}
	if err := p.Run(func() { run(p) }); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// Run brings the cluster up, applies the demo and writes the report to
// out.
func Run(ctx context.Context, t testbed.T, out io.Writer) Report {
	t.Helper()
	begin := time.Now()
	fmt.Fprintln(out, "Starting 3 OVN chassis, OVN central, etcd + kube-apiserver and ovnedge (leader + one per node)...")
	// The chart's egress.fastFailover=true: heartbeats among the nodes
	// and the leader instead of polling each node's health port.
	e := e2e.Start(t, e2e.Options{EgressNodes: []string{w2, w3},
		NodeArgs:   []string{"--egressip-fast-failover"},
		LeaderArgs: []string{"--lb-pools=demo=172.18.0.200/29", "--egressip-check-interval=1s", "--egressip-fast-failover"}})
	fmt.Fprintf(out, "Cluster up in %v: nodes %s (%s), %s (%s), %s (%s); external client %s.\n\n", time.Since(begin).Round(100*time.Millisecond),
		w1, e.Node(w1).IP, w2, e.Node(w2).IP, w3, e.Node(w3).IP, testbed.ClusterClientIP)

	fmt.Fprintln(out, "Applied:")
	e.ApplyYAML(demoYAML)
	for _, line := range strings.Split(strings.TrimSpace(summary), "\n") {
		fmt.Fprintln(out, "  "+line)
	}
	e.CreatePod(e2e.ServerPod("prod", "web-1", w2, map[string]string{"app": "web"}, 8080))
	e.CreatePod(e2e.ServerPod("prod", "web-2", w3, map[string]string{"app": "web"}, 8080))
	e.CreatePod(e2e.ServerPod("prod", "client-1", w1, map[string]string{"app": "client"}))
	fmt.Fprintf(out, "  pods prod/web-1 on %s, prod/web-2 on %s (app=web, port 8080), prod/client-1 on %s\n\n", w2, w3, w1)

	var r Report
	fmt.Fprintln(out, "Requests from the external client (each VIP routed through a node, as OVN-Kubernetes advises):")
	lbIP := e.LoadBalancerIP("prod", "web").String()
	np, err := e.CS.CoreV1().Services("prod").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	nodePort := np.Spec.Ports[0].NodePort
	for _, req := range []struct{ what, addr, via string }{
		{"LoadBalancer web (ETP=Cluster)", lbIP + ":80", w1},
		{"ExternalIP api (ETP=Local)", externalIP + ":80", w2},
		{"ExternalIP api (ETP=Local)", externalIP + ":80", w3},
		{"NodePort web", fmt.Sprintf("%s:%d", e.Node(w1).IP, nodePort), ""},
	} {
		if req.via != "" {
			vip, _, _ := strings.Cut(req.addr, ":")
			e.Client.Run(t, "ip", "route", "replace", vip+"/32", "via", e.Node(req.via).IP.String())
		}
		line := connect(t, e.Client, req.addr)
		pod, seen, _ := strings.Cut(line, " ")
		via := ""
		if req.via != "" {
			via = " via " + req.via
		}
		fmt.Fprintf(out, "  %-32s %-20s%-16s -> answered by %s, which saw the client as %s\n", req.what, req.addr, via, pod, seen)
		r.Answers = append(r.Answers, req.addr+" "+line)
	}

	fmt.Fprintln(out, "\nEgress:")
	eip := netip.MustParseAddr(egressIP)
	node := e.EgressNode("egress-prod", eip, "")
	if err := e2e.Serve(ctx, e.Client, "external-host", 9000); err != nil {
		t.Fatalf("%v", err)
	}
	client := e.WaitPod("prod", "client-1")
	var seen string
	wait(t, 30*time.Second, func() error { // the status can be written before the rows
		_, seen, _ = strings.Cut(connect(t, client.Netns, testbed.ClusterClientIP+":9000"), " ")
		if !strings.HasPrefix(seen, egressIP+":") {
			return fmt.Errorf("the external host saw %s", seen)
		}
		return nil
	})
	r.EgressSource = seen
	fmt.Fprintf(out, "  EgressIP %s is on %s; prod/client-1 (on %s) -> %s:9000: the external host saw %s\n",
		egressIP, node, w1, testbed.ClusterClientIP, seen)

	s, err := e2e.StartStream(client.Netns, e.Client, netip.AddrPortFrom(netip.MustParseAddr(testbed.ClusterClientIP), 9100), 10*time.Millisecond)
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer s.Stop()
	wait(t, 10*time.Second, func() error {
		if s.LastFrom() != eip {
			return fmt.Errorf("stream not yet from %s", eip)
		}
		return nil
	})
	killed, sentAtKill := time.Now(), s.Sent()
	e.KillNode(node)
	to := e.EgressNode("egress-prod", eip, node)
	wait(t, 30*time.Second, func() error { return s.ArrivedAfter(sentAtKill+5, eip) })
	time.Sleep(200 * time.Millisecond)
	r.Gap, _ = s.Gap(killed)
	fmt.Fprintf(out, "  killed %s's chassis (ovn-controller, ovs-vswitchd, ovsdb-server) and its ovnedge: the egress IP moved to %s\n", node, to)
	fmt.Fprintf(out, "  (fast failover: the chart's egress.fastFailover, heartbeats instead of polling each node);\n")
	fmt.Fprintf(out, "  a 10 ms UDP stream from prod/client-1 to the external host stopped for %d ms, then arrived again from %s\n",
		r.Gap.Milliseconds(), s.LastFrom())
	fmt.Fprintf(out, "\nDone in %v; everything is removed now.\n", time.Since(begin).Round(100*time.Millisecond))
	return r
}

// summary is what demo.yaml holds, for the report.
const summary = `
namespace prod (env=prod)
Service prod/web: LoadBalancer, ETP=Cluster, port 80 -> 8080 (address from ovnedge's LB IPAM pool 172.18.0.200/29)
Service prod/api: ExternalIP ` + externalIP + `, ETP=Local, port 80 -> 8080
EgressIP egress-prod: ` + egressIP + ` for namespace prod (nodes ovn-worker2 and ovn-worker3 are egress-assignable)`

// Report is what the demo measured.
type Report struct {
	// Answers are "<addr> <pod> <client>" for every request.
	Answers []string
	// EgressSource is what the external host saw as source.
	EgressSource string
	// Gap is the egress stream's loss window after the kill.
	Gap time.Duration
}

// connect makes one TCP exchange from ns to addr, retrying while the
// dataplane converges.
func connect(t testbed.T, ns *testbed.Netns, addr string) string {
	t.Helper()
	var line string
	wait(t, 30*time.Second, func() (err error) {
		line, err = e2e.Reply(ns, addr, 100_000, 3*time.Second)
		return err
	})
	return line
}

func wait(t testbed.T, timeout time.Duration, cond func() error) {
	t.Helper()
	testbed.Eventually(t, timeout, cond)
}
