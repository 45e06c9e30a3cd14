package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/ovnedge/ovnedge/daemon"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/egresssvc"
	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/internal/e2e/helmenv"
	"github.com/ovnedge/ovnedge/testbed"
)

// demoValues are the chart values the demo sets beyond the cluster's
// (helmenv.Cluster.Values): the fast egress failover and an LB IPAM pool.
const demoValues = `egress:
  fastFailover: true
  services: true
loadBalancer:
  pools: {demo: 172.18.0.200/29}
`

// Run brings the cluster up, installs ovnedge with helm, applies the demo
// and writes the report to out.
func Run(ctx context.Context, t testbed.T, out io.Writer) Report {
	t.Helper()
	begin := time.Now()
	c := installed(ctx, t, out)
	fmt.Fprintf(out, "Cluster up and ovnedge installed in %v: nodes %s (%s), %s (%s), %s (%s); external client %s.\n\n",
		time.Since(begin).Round(100*time.Millisecond), w1, c.OVN.Node(w1).IP, w2, c.OVN.Node(w2).IP, w3, c.OVN.Node(w3).IP, testbed.ClusterClientIP)

	fmt.Fprintln(out, "Applied:")
	if err := e2e.NewApplier(c.Kube.Config).Apply(ctx, demoYAML, nil); err != nil {
		t.Fatalf("demo.yaml: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(summary), "\n") {
		fmt.Fprintln(out, "  "+line)
	}
	pods := map[string]*corev1.Pod{}
	for _, p := range []struct{ name, node, app string }{{"web-1", w2, "web"}, {"web-2", w3, "web"}, {"client-1", w1, "client"}} {
		pods[p.name] = c.RunPod(ctx, t, "prod", p.name, p.node, map[string]string{"app": p.app})
	}
	fmt.Fprintf(out, "  pods prod/web-1 on %s (%s), prod/web-2 on %s (%s) (app=web, port 8080), prod/client-1 on %s (%s):\n",
		w2, pods["web-1"].Status.PodIP, w3, pods["web-2"].Status.PodIP, w1, pods["client-1"].Status.PodIP)
	fmt.Fprintln(out, "  kubelet-run, on OVN through examples/ovncni; their EndpointSlices by kube-controller-manager")
	fmt.Fprintln(out)

	var r Report
	r.Answers = requests(ctx, t, c, out)
	r.Ranges = sourceRanges(ctx, t, c, out)
	egressService(ctx, t, c, pods["web-1"], out, &r)
	egress(ctx, t, c, pods["client-1"], out, &r)
	fmt.Fprintf(out, "\nDone in %v; everything is removed now.\n", time.Since(begin).Round(100*time.Millisecond))
	return r
}

// installed starts the cluster and installs the chart with helm, and
// shows how and the release's pods.
func installed(ctx context.Context, t testbed.T, out io.Writer) *helmenv.Cluster {
	t.Helper()
	root, err := e2e.RepoRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	testbed.Require(t, helmenv.ToolPath("helm", helmenv.HelmVersion), "go", "git", "ctr")
	fmt.Fprintln(out, "Starting OVN central, 3 OVN chassis that are real Kubernetes nodes (containerd, kubelet, kube-proxy; pods on")
	fmt.Fprintln(out, "OVN through examples/ovncni), etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and building the")
	fmt.Fprintln(out, "ovnedge image (scripts/image.sh)...")
	kc := testbed.StartKubeCluster(t)
	type built struct {
		archive, tag string
		err          error
	}
	image, dir := make(chan built, 1), helmenv.TempDir(t)
	go func() {
		archive, tag, err := helmenv.BuildImage(root, dir)
		image <- built{archive, tag, err}
	}()
	t.Cleanup(func() { image <- <-image }) // the build ends before dir goes
	c := helmenv.Start(t, kc, root, 3, nil)
	for _, n := range []string{w2, w3} {
		patch := []byte(`{"metadata":{"labels":{"k8s.ovn.org/egress-assignable":""}}}`)
		if _, err := kc.Client.CoreV1().Nodes().Patch(ctx, n, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("%v", err)
		}
	}
	img := <-image
	image <- img
	if img.err != nil {
		t.Fatalf("%v", img.err)
	}
	values := c.Values(t, img.tag, 2, demoValues)
	helmOut, took, err := c.Install(t, helmenv.NewHelm(kc, helmenv.TempDir(t)), img.archive, values)
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, helmOut)
	}
	fmt.Fprintf(out, "\nInstalled with helm in %v: the image %s:%s imported into each node's containerd, then\n",
		took.Round(100*time.Millisecond), helmenv.ImageRepo, img.tag)
	fmt.Fprintf(out, "  helm install %s deploy/helm/ovnedge --namespace %s --values values.yaml --wait\n", helmenv.Release, helmenv.Namespace)
	fmt.Fprintln(out, "  values: the testbed's NB, subnets and breth0; leader.hostNetwork=true, leader.replicas=2;")
	fmt.Fprintln(out, "  egress.fastFailover=true; egress.services=true; loadBalancer.pools={demo: 172.18.0.200/29}")
	// helm's --wait counts a DaemonSet or Deployment ready with
	// maxUnavailable pods not (yet) Ready.
	begin := time.Now()
	wait(t, 60*time.Second, func() error { return allReady(ctx, kc) })
	fmt.Fprintf(out, "  every pod Ready %v later (helm's --wait allows maxUnavailable pods not Ready):\n", time.Since(begin).Round(100*time.Millisecond))
	showPods(ctx, t, kc, out)
	return c
}

// allReady is nil once every pod of the release is Ready.
func allReady(ctx context.Context, kc *testbed.KubeCluster) error {
	list, err := kc.Client.CoreV1().Pods(helmenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ovnedge"})
	if err != nil {
		return err
	}
	for _, p := range list.Items {
		for _, s := range p.Status.ContainerStatuses {
			if !s.Ready {
				return fmt.Errorf("pod %s not Ready", p.Name)
			}
		}
	}
	return nil
}

// showPods prints the release's pods as `kubectl get pods -o wide` would.
func showPods(ctx context.Context, t testbed.T, kc *testbed.KubeCluster, out io.Writer) {
	list, err := kc.Client.CoreV1().Pods(helmenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ovnedge"})
	if err != nil {
		t.Fatalf("%v", err)
	}
	fmt.Fprintf(out, "  %-36s %-6s %-8s %-12s %s\n", "NAME", "READY", "STATUS", "NODE", "IP")
	for _, p := range list.Items {
		ready := 0
		for _, s := range p.Status.ContainerStatuses {
			if s.Ready {
				ready++
			}
		}
		fmt.Fprintf(out, "  %-36s %-6s %-8s %-12s %s\n", p.Name, fmt.Sprintf("%d/%d", ready, len(p.Spec.Containers)),
			p.Status.Phase, p.Spec.NodeName, p.Status.PodIP)
	}
}

// requests connects the external client to every VIP (each routed
// through a node) and prints who answered; it returns "<addr> <pod>
// <client>" for each.
func requests(ctx context.Context, t testbed.T, c *helmenv.Cluster, out io.Writer) []string {
	t.Helper()
	fmt.Fprintln(out, "Requests from the external client (each VIP routed through a node, as OVN-Kubernetes advises):")
	var web *corev1.Service
	wait(t, 60*time.Second, func() (err error) {
		if web, err = c.Kube.Client.CoreV1().Services("prod").Get(ctx, "web", metav1.GetOptions{}); err == nil && len(web.Status.LoadBalancer.Ingress) == 0 {
			err = fmt.Errorf("no LoadBalancer address yet")
		}
		return err
	})
	lbIP, nodePort := web.Status.LoadBalancer.Ingress[0].IP, web.Spec.Ports[0].NodePort
	var answers []string
	for _, req := range []struct{ what, addr, via string }{
		{"LoadBalancer web (ETP=Cluster)", lbIP + ":80", w1},
		{"ExternalIP api (ETP=Local)", externalIP + ":80", w2},
		{"ExternalIP api (ETP=Local)", externalIP + ":80", w3},
		{"NodePort web", fmt.Sprintf("%s:%d", c.OVN.Node(w1).IP, nodePort), ""},
	} {
		via := ""
		if req.via != "" {
			vip, _, _ := strings.Cut(req.addr, ":")
			c.OVN.Client.Run(t, "ip", "route", "replace", vip+"/32", "via", c.OVN.Node(req.via).IP.String())
			via = " via " + req.via
		}
		line := connect(t, c.OVN.Client, req.addr)
		pod, seen, _ := strings.Cut(line, " ")
		fmt.Fprintf(out, "  %-32s %-20s%-16s -> answered by %s, which saw the client as %s\n", req.what, req.addr, via, pod, seen)
		answers = append(answers, req.addr+" "+line)
	}
	return answers
}

// sourceRanges restricts Service web's loadBalancerSourceRanges to the
// external client and shows who its LoadBalancer IP then answers: the
// client, not a routed client behind the router (whose NodePort still
// answers, as with kube-proxy); it clears them again. It returns what
// each attempt got.
func sourceRanges(ctx context.Context, t testbed.T, c *helmenv.Cluster, out io.Writer) []string {
	t.Helper()
	web, err := c.Kube.Client.CoreV1().Services("prod").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	lbIP := web.Status.LoadBalancer.Ingress[0].IP
	c.OVN.Router.Run(t, "ip", "route", "replace", lbIP+"/32", "via", c.OVN.Node(w1).IP.String())
	web.Spec.LoadBalancerSourceRanges = []string{testbed.ClusterClientIP + "/32"}
	if _, err := c.Kube.Client.CoreV1().Services("prod").Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("%v", err)
	}
	fmt.Fprintf(out, "\nSource ranges (OVN-Kubernetes ignores them; ovnedge enforces them as kube-proxy does):\n")
	fmt.Fprintf(out, "  Service prod/web: loadBalancerSourceRanges [%s/32]\n", testbed.ClusterClientIP)
	addr, np := lbIP+":80", fmt.Sprintf("%s:%d", c.OVN.Node(w1).IP, web.Spec.Ports[0].NodePort)
	var got []string
	for _, a := range []struct {
		who  string
		from *testbed.Netns
		addr string
		open bool
	}{
		{"the external client " + testbed.ClusterClientIP, c.OVN.Client, addr, true},
		{"a routed client " + testbed.ClusterRemoteClientIP, c.OVN.RemoteClient, addr, false},
		{"a routed client " + testbed.ClusterRemoteClientIP, c.OVN.RemoteClient, np, true},
	} {
		var line string
		wait(t, 30*time.Second, func() (err error) {
			line, err = e2e.Reply(a.from, a.addr, 1000, 2*time.Second)
			if open := err == nil; open != a.open {
				return fmt.Errorf("%s -> %s: answered %v, want %v", a.who, a.addr, open, a.open)
			}
			return nil
		})
		result := "gets nothing (dropped in OVN)"
		if a.open {
			pod, _, _ := strings.Cut(line, " ")
			result = "answered by " + pod
		}
		fmt.Fprintf(out, "  %-40s -> %-20s %s\n", a.who, a.addr, result)
		got = append(got, a.addr+" "+result)
	}
	if web, err = c.Kube.Client.CoreV1().Services("prod").Get(ctx, "web", metav1.GetOptions{}); err == nil {
		web.Spec.LoadBalancerSourceRanges = nil
		_, err = c.Kube.Client.CoreV1().Services("prod").Update(ctx, web, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	return got
}

// egressService applies EgressService prod/web and shows where its
// pods' traffic leaves from: web-1 (also selected by EgressIP
// egress-prod) reaches the external host from the Service's
// LoadBalancer IP through the host the leader chose; with the
// EgressService deleted it leaves with the egress IP again.
func egressService(ctx context.Context, t testbed.T, c *helmenv.Cluster, web1 *corev1.Pod, out io.Writer, r *Report) {
	t.Helper()
	fmt.Fprintln(out, "\nEgressService (k8s.ovn.org/v1, OVN-Kubernetes' API):")
	for _, n := range []string{w1, w2, w3} {
		c.OVN.Node(n).SetForwarding(true) // as on every Kubernetes node (kubeadm requires it)
	}
	if err := e2e.NewApplier(c.Kube.Config).Apply(ctx, esvcYAML, nil); err != nil {
		t.Fatalf("EgressService: %v", err)
	}
	dyn := dynamic.NewForConfigOrDie(c.Kube.Config)
	esvcs := dyn.Resource(egressv1.ServiceResource).Namespace("prod")
	var host string
	wait(t, 60*time.Second, func() error {
		u, err := esvcs.Get(ctx, "web", metav1.GetOptions{})
		if err == nil {
			if host, _, _ = unstructured.NestedString(u.Object, "status", "host"); host == "" {
				err = fmt.Errorf("no host yet")
			}
		}
		return err
	})
	web, err := c.Kube.Client.CoreV1().Services("prod").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	lbIP := web.Status.LoadBalancer.Ingress[0].IP
	c.OVN.Client.Run(t, "ip", "route", "replace", lbIP+"/32", "via", c.OVN.Node(host).IP.String())
	if err := e2e.Serve(ctx, c.OVN.Client, "external-host", 9001); err != nil {
		t.Fatalf("%v", err)
	}
	ns := c.KubeNode(w2).PodNetns(t, web1.Status.ContainerStatuses[0].ContainerID)
	from := func(want string) string {
		var seen string
		wait(t, 30*time.Second, func() error {
			_, seen, _ = strings.Cut(connect(t, ns, testbed.ClusterClientIP+":9001"), " ")
			if !strings.HasPrefix(seen, want+":") {
				return fmt.Errorf("the external host saw %s", seen)
			}
			return nil
		})
		return seen
	}
	r.ServiceSource = from(lbIP)
	fmt.Fprintf(out, "  EgressService prod/web (nodeSelector k8s.ovn.org/egress-assignable): status.host %s, node label %s\n", host, egresssvc.Label("prod/web"))
	fmt.Fprintf(out, "  (the external host routes %s through %s, as the VIP's announcer would tell it)\n", lbIP, host)
	fmt.Fprintf(out, "  prod/web-1 (on %s, also selected by EgressIP egress-prod) -> %s:9001: the external host saw %s,\n", w2, testbed.ClusterClientIP, r.ServiceSource)
	fmt.Fprintf(out, "  the Service's LoadBalancer IP (OVN policy 101 beats EgressIP's 100; %s SNATs it)\n", host)
	if err := esvcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("%v", err)
	}
	fmt.Fprintf(out, "  EgressService deleted: prod/web-1 -> the external host saw %s (the EgressIP)\n", from(egressIP))
}

// esvcYAML is the demo's EgressService.
const esvcYAML = `apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {namespace: prod, name: web}
spec:
  nodeSelector: {matchLabels: {k8s.ovn.org/egress-assignable: ""}}
`

// egress shows the source the external host sees for client's traffic,
// then kills the egress node as a machine dies (kubelet, chassis and the
// ovnedge containers there) under a 10 ms UDP stream and reports the gap.
func egress(ctx context.Context, t testbed.T, c *helmenv.Cluster, client *corev1.Pod, out io.Writer, r *Report) {
	t.Helper()
	fmt.Fprintln(out, "\nEgress:")
	eip := netip.MustParseAddr(egressIP)
	node := egressNode(ctx, t, c, "")
	if err := e2e.Serve(ctx, c.OVN.Client, "external-host", 9000); err != nil {
		t.Fatalf("%v", err)
	}
	ns := c.KubeNode(w1).PodNetns(t, client.Status.ContainerStatuses[0].ContainerID)
	wait(t, 30*time.Second, func() error { // the status can be written before the rows
		_, r.EgressSource, _ = strings.Cut(connect(t, ns, testbed.ClusterClientIP+":9000"), " ")
		if !strings.HasPrefix(r.EgressSource, egressIP+":") {
			return fmt.Errorf("the external host saw %s", r.EgressSource)
		}
		return nil
	})
	fmt.Fprintf(out, "  EgressIP %s is on %s; prod/client-1 (on %s) -> %s:9000: the external host saw %s\n",
		egressIP, node, w1, testbed.ClusterClientIP, r.EgressSource)

	s, err := e2e.StartStream(ns, c.OVN.Client, netip.AddrPortFrom(netip.MustParseAddr(testbed.ClusterClientIP), 9100), 10*time.Millisecond)
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
	holder := leaseHolderNode(ctx, t, c)
	r.Holder = holder
	killed, sentAtKill := time.Now(), s.Sent()
	killMachine(ctx, t, c, node)
	to := egressNode(ctx, t, c, node)
	wait(t, 30*time.Second, func() error { return s.ArrivedAfter(sentAtKill+5, eip) })
	time.Sleep(200 * time.Millisecond)
	r.Gap, _ = s.Gap(killed)
	fmt.Fprintf(out, "  killed %s as a machine dies (its kubelet, chassis and ovnedge containers): the egress IP moved to %s\n", node, to)
	fmt.Fprintf(out, "  (the chart's egress.fastFailover: heartbeats instead of polling each node);\n")
	fmt.Fprintf(out, "  a 10 ms UDP stream from prod/client-1 to the external host stopped for %d ms, then arrived again from %s\n",
		r.Gap.Milliseconds(), s.LastFrom())
	if holder != node {
		fmt.Fprintf(out, "  (the leader, the Lease's holder, ran on %s and went on: a leader on an egress-assignable node hands\n"+
			"  the Lease to a replica elsewhere, the chart's leader.avoidEgressNodes)\n", holder)
		return
	}
	l := daemon.DefaultLease("")
	lease, err := c.Kube.Client.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil || lease.Spec.AcquireTime == nil {
		t.Fatalf("Lease %s/%s after the kill: %v", l.Namespace, l.Name, err)
	}
	fmt.Fprintf(out, "  (the leader, the Lease's holder, ran on %s too: the other leader took the Lease %d ms after the kill,\n"+
		"  the Lease's %v duration, and moved the egress IP then; most of the gap is that wait)\n",
		node, lease.Spec.AcquireTime.Sub(killed).Milliseconds(), l.Duration)
}

// leaseHolderNode is the node of the leader pod holding the Lease (its
// identity starts with the pod's name).
func leaseHolderNode(ctx context.Context, t testbed.T, c *helmenv.Cluster) string {
	t.Helper()
	l := daemon.DefaultLease("")
	lease, err := c.Kube.Client.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Lease %s/%s: %v", l.Namespace, l.Name, err)
	}
	pods, err := c.Kube.Client.CoreV1().Pods(helmenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=leader"})
	if err != nil {
		t.Fatalf("%v", err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(holder, p.Name+"_") {
			return p.Spec.NodeName
		}
	}
	return "?"
}

// egressNode waits until EgressIP egress-prod's status puts egressIP on
// a node other than not ("" for any) and returns it.
func egressNode(ctx context.Context, t testbed.T, c *helmenv.Cluster, not string) string {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(c.Kube.Config)
	var node string
	t.Cleanup(func() {
		if node == "" {
			t.Logf("leader logs:\n%s", c.LeaderLog(""))
		}
	})
	wait(t, 60*time.Second, func() error {
		u, err := dyn.Resource(e2e.EgressGVR).Get(ctx, "egress-prod", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node = e2e.EgressStatusNode(u, netip.MustParseAddr(egressIP), not); node == "" {
			return fmt.Errorf("EgressIP egress-prod: status %v", u.Object["status"])
		}
		return nil
	})
	return node
}

// killMachine kills node as a machine dies: its kubelet (so nothing
// restarts), its chassis, then the ovnedge containers on it, by PID.
func killMachine(ctx context.Context, t testbed.T, c *helmenv.Cluster, node string) {
	t.Helper()
	kn := c.KubeNode(node)
	list, err := c.Kube.Client.CoreV1().Pods(helmenv.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=ovnedge", FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatalf("%v", err)
	}
	var pids []int
	for _, p := range list.Items {
		for _, s := range p.Status.ContainerStatuses {
			pid, err := kn.ContainerPID(s.ContainerID)
			if err != nil {
				t.Fatalf("%v", err)
			}
			pids = append(pids, pid)
		}
	}
	kn.KillKubelet(t)
	c.OVN.Node(node).Kill()
	for _, pid := range pids {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "ovnedge") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
