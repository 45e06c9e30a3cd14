// Command demo is `make demo`: ovnedge on a real three-node cluster,
// installed with helm and shown the way a person would check it. With
// -flavor=kube-ovn (`make demo FLAVOR=kube-ovn`) it shows Kube-OVN's
// LoadBalancer Services instead (see RunKubeOVN).
//
// Run starts three OVN chassis in network namespaces (a shared external
// segment, geneve between them) that are real Kubernetes nodes
// (containerd, kubelet, kube-proxy; pods on OVN through examples/ovncni)
// of a real control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler), builds the ovnedge image (scripts/image.sh), imports it
// into every node and runs `helm install` of deploy/helm/ovnedge with the
// fast egress failover on (internal/e2e/helmenv); it prints the release's
// pods. It applies demo.yaml and three kubelet-run pods, then shows real
// results: a request to each VIP from a host outside the cluster and the
// pod that answered, the source address the external host saw for the
// egress pod, and the gap of a 10 ms packet stream when the egress node
// dies (its kubelet, chassis and ovnedge containers killed). Everything is
// removed on exit. It needs root, the OVS/OVN packages and what `make
// real-node-deps` builds (make demo runs it).
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

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
	// ServiceSource is what it saw for the EgressService's pod.
	ServiceSource string
	// Gap is the egress stream's loss window after the kill.
	Gap time.Duration
	// Holder is the node of the Lease's holder when the egress node was
	// killed.
	Holder string
	// Ranges are "<addr> <result>" for each source ranges attempt: the
	// external client's answered, the routed client's VIP dropped, its
	// NodePort answered.
	Ranges []string
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
