package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/lbsvc/agent/pod"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	"github.com/ovnedge/ovnedge/testbed"
)

// The Service of Kube-OVN's LoadBalancer Service example.
const (
	lbSvcNS, lbSvcName = "default", "test-service"
	lbSvcIP            = "172.18.0.18"
)

// KubeOVNReport is what the Kube-OVN flavour measured.
type KubeOVNReport struct {
	// Deployment is the lb-svc Deployment ovnedge created, Command what
	// its pod runs.
	Deployment string
	Command    []string
	// LBPodIP is the lb-svc pod's eth0 address (the backends see it:
	// the pod masquerades), Recreated its successor's.
	LBPodIP, RecreatedIP string
	// Answers are "<client> <pod> <client the pod saw>" for every
	// request, the re-created pod's last.
	Answers []string
	// Resumed is the time from the pod's deletion to the first answer
	// through its successor.
	Resumed time.Duration
}

// RunKubeOVN is `make demo FLAVOR=kube-ovn`: Kube-OVN's LoadBalancer
// Services in the default VPC on the same cluster, with a
// Kube-OVN-shaped topology (the router ovn-cluster, the subnet
// ovn-default) and the leader run with --enable-lb-svc. It applies the
// manifests of Kube-OVN's LoadBalancer Service example (kubeovn/docs,
// docs/guide/loadbalancer-service.en.md) as Kube-OVN's documentation
// writes them and two
// backends on ovn-default, shows the lb-svc Deployment ovnedge creates,
// its pod (run by the harness as kubelet: eth0 on ovn-default, net1 on
// the external segment, the Deployment's command `ovnedge lbsvc-agent`),
// requests to the LoadBalancer IP from a routed and an on-link client,
// and traffic through a re-created pod.
func RunKubeOVN(ctx context.Context, t testbed.T, out io.Writer) KubeOVNReport {
	t.Helper()
	begin := time.Now()
	fmt.Fprintln(out, "Starting 3 OVN chassis, OVN central, etcd + kube-apiserver and ovnedge (leader with --enable-lb-svc + one per node)...")
	e := e2e.Start(t, e2e.Options{LeaderArgs: []string{"--enable-lb-svc", "--lb-svc-image=ovnedge",
		"--cluster-subnets=" + e2e.KubeOVNClusterSubnets}})
	e.StartKubeOVN()
	fmt.Fprintf(out, "Cluster up in %v: nodes %s, %s, %s; Kube-OVN's router %s with subnet %s (%s, gateway %s);\n",
		time.Since(begin).Round(100*time.Millisecond), w1, w2, w3, testbed.KubeOVNRouter, testbed.KubeOVNDefaultSubnet,
		testbed.KubeOVNDefaultCIDR, testbed.KubeOVNDefaultGW)
	fmt.Fprintf(out, "external segment 172.18.0.0/24 (gateway %s, on-link client %s; routed client %s behind the gateway).\n\n",
		testbed.ClusterGatewayIP, testbed.ClusterClientIP, testbed.ClusterRemoteClientIP)

	root, err := e2e.RepoRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	e.ApplyFile(filepath.Join(root, e2e.Seed004))
	for _, b := range []struct{ name, node string }{{"dynamic-1", w2}, {"dynamic-2", w3}} {
		e.CreatePod(e2e.KubeOVNPod(lbSvcNS, b.name, b.node, map[string]string{"app": "dynamic"}, 80))
	}
	fmt.Fprintln(out, "Applied Kube-OVN's LoadBalancer Service example ("+e2e.Seed004+") and two backends:")
	fmt.Fprintln(out, "  NetworkAttachmentDefinition kube-system/lb-svc-attachment (macvlan)")
	fmt.Fprintln(out, "  Subnet attach-subnet: provider lb-svc-attachment.kube-system, 172.18.0.0/16, gateway 172.18.0.1, excludeIps 172.18.0.0..172.18.0.10")
	fmt.Fprintf(out, "  Service %s/%s: LoadBalancer, loadBalancerIP %s, port 80, ovn.kubernetes.io/attachmentprovider=lb-svc-attachment.kube-system\n",
		lbSvcNS, lbSvcName, lbSvcIP)
	fmt.Fprintf(out, "  pods %s/dynamic-1 on %s, %s/dynamic-2 on %s (app=dynamic, port 80, on %s)\n\n", lbSvcNS, w2, lbSvcNS, w3, testbed.KubeOVNDefaultSubnet)

	var r KubeOVNReport
	var dp *appsv1.Deployment
	wait(t, e2e.Timeout, func() (err error) {
		dp, err = e.CS.AppsV1().Deployments(lbSvcNS).Get(ctx, kubeovn.DeploymentPrefix+lbSvcName, metav1.GetOptions{})
		return err
	})
	svc := e.Service(lbSvcNS, lbSvcName)
	c := dp.Spec.Template.Spec.Containers[0]
	r.Deployment, r.Command = dp.Namespace+"/"+dp.Name, append(append([]string{}, c.Command...), c.Args...)
	fmt.Fprintf(out, "ovnedge (the leader) created Deployment %s (image %s, strategy %s) and wrote the Service's ingress %v; ClusterIP %s.\n",
		r.Deployment, c.Image, dp.Spec.Strategy.Type, ingressIPs(svc.Status.LoadBalancer.Ingress), svc.Spec.ClusterIP)
	fmt.Fprintf(out, "  its pod runs: %s\n", strings.Join(r.Command, " "))
	fmt.Fprintf(out, "  pod annotations: %s=%s, %s=%s\n\n", kubeovn.AnnotationNetworks, dp.Spec.Template.Annotations[kubeovn.AnnotationNetworks],
		kubeovn.IPAddressAnnotation("lb-svc-attachment.kube-system"), dp.Spec.Template.Annotations[kubeovn.IPAddressAnnotation("lb-svc-attachment.kube-system")])

	lb := e.WaitLBSvcPod(lbSvcNS, dp.Name)
	r.LBPodIP = lb.Pod.IP.String()
	fmt.Fprintf(out, "The harness (as Deployment controller, Kube-OVN and kubelet) runs pod %s on %s: eth0 %s on %s, net1 %s on the segment.\n\n",
		lb.Name, lb.Pod.Node, lb.Pod.IP, lb.Pod.Switch, lb.LBIP)

	addr := lbSvcIP + ":80"
	clients := []struct {
		name string
		ns   *testbed.Netns
	}{{"routed client " + testbed.ClusterRemoteClientIP, e.RemoteClient}, {"on-link client " + testbed.ClusterClientIP, e.Client}}
	request := func(times int) {
		for _, cl := range clients {
			for range times {
				line := connect(t, cl.ns, addr)
				pod, seen, _ := strings.Cut(line, " ")
				fmt.Fprintf(out, "  %-28s -> %s: answered by %s, which saw %s\n", cl.name, addr, pod, seen)
				r.Answers = append(r.Answers, cl.name+" "+line)
			}
		}
	}
	fmt.Fprintln(out, "Requests to the LoadBalancer IP (net1 DNATs to the ClusterIP; OVN's load balancer, written by ovnedge, picks a backend):")
	request(2)
	fmt.Fprintln(out, "\nInside the lb-svc pod, as `ovnedge lbsvc-agent` programmed it:")
	for _, cmd := range [][]string{{"ip", "rule", "show"}, {"ip", "route", "show", "table", "100"}, {"nft", "list", "table", "ip", pod.Table}} {
		fmt.Fprintf(out, "  # %s\n", strings.Join(cmd, " "))
		for _, l := range strings.Split(lb.Pod.Run(t, cmd...), "\n") {
			if cmd[0] == "ip" && cmd[1] == "rule" && !strings.Contains(l, "lookup 100") {
				continue
			}
			fmt.Fprintf(out, "  %s\n", l)
		}
	}

	fmt.Fprintf(out, "\nDeleting pod %s: its network namespace (net1 with %s) goes; a new pod comes up with a new net1.\n", lb.Name, lbSvcIP)
	if err := e.CS.CoreV1().Pods(lbSvcNS).Delete(ctx, lb.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("%v", err)
	}
	deleted := time.Now()
	again := e.WaitLBSvcPod(lbSvcNS, dp.Name, lb)
	r.RecreatedIP = again.Pod.IP.String()
	request(1)
	r.Resumed = time.Since(deleted)
	fmt.Fprintf(out, "  pod %s (eth0 %s, net1 MAC %s, was %s): traffic resumed %v after the deletion\n",
		again.Name, again.Pod.IP, again.Net1MAC, lb.Net1MAC, r.Resumed.Round(10*time.Millisecond))
	fmt.Fprintf(out, "\nDone in %v; everything is removed now.\n", time.Since(begin).Round(100*time.Millisecond))
	return r
}

func ingressIPs(in []corev1.LoadBalancerIngress) []string {
	var out []string
	for _, i := range in {
		out = append(out, i.IP)
	}
	return out
}
