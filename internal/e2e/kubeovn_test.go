package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	"github.com/ovnedge/ovnedge/testbed"
)

// The objects of Kube-OVN's LoadBalancer Service example
// (daemon/testdata/kubeovn/seed004.yaml).
const (
	seed004LBIP  = "172.18.0.18"
	seed004Svc   = "test-service"
	seed004NS    = "default"
	lbSvcImage   = "ovnedge:e2e"
	hairpinDrop  = "kube-ovn-lb-svc-e2e"
	seed004Label = "dynamic"
)

// TestKubeOVNLBSvc proves Kube-OVN's LoadBalancer Service example over real packets on a Kube-OVN-shaped
// topology (the router ovn-cluster, the subnet ovn-default; the
// attachment network is the external segment): the leader, restarted
// with --enable-lb-svc against the real API server, creates
// lb-svc-test-service from the example's objects; the harness runs its pod
// (eth0 on ovn-default, net1 on the segment) with the Deployment's exact
// command, `ovnedge lbsvc-agent ...`. A routed client and a client on the
// attachment subnet reach 172.18.0.18:80: the pod DNATs to the ClusterIP,
// which only the OVN load balancer the leader wrote serves, and a backend
// pod on ovn-default answers, seeing the lb-svc pod's address (its
// MASQUERADE). The on-link client's replies must leave through net1 (the
// agent's table-100 route to the attachment subnet): the router drops
// segment-to-segment forwarding here. A deleted pod is re-created and
// the traffic resumes.
func TestKubeOVNLBSvc(t *testing.T) {
	e := shared.With(t)
	// ovn-default's pods are pods: --cluster-subnets covers it (else its
	// endpoints would count as host-network ones, served per node).
	e.RestartLeader("--enable-lb-svc", "--lb-svc-image="+lbSvcImage, "--cluster-subnets="+KubeOVNClusterSubnets)
	t.Cleanup(func() { shared.With(t).RestartLeader() })
	e.StartKubeOVN()
	e.ApplyFile(filepath.Join(e.root, Seed004))
	t.Cleanup(func() {
		_ = e.CS.CoreV1().Services(seed004NS).Delete(context.Background(), seed004Svc, metav1.DeleteOptions{})
		shared.With(t).Eventually(Timeout, "lb-svc pod gone with its Service", func() error {
			if n := len(shared.With(t).SyncLBSvc()); n != 0 {
				return fmt.Errorf("%d lb-svc pods", n)
			}
			return nil
		})
	})
	var backends []netip.Addr
	for i, n := range []string{w2, w3} {
		name := fmt.Sprintf("%s-%d", seed004Label, i+1)
		e.EnsurePod(KubeOVNPod(seed004NS, name, n, map[string]string{"app": seed004Label}, 80))
		backends = append(backends, e.WaitPod(seed004NS, name).IP)
	}
	slices.SortFunc(backends, netip.Addr.Compare)

	svc := e.Service(seed004NS, seed004Svc)
	var dp *appsv1.Deployment
	e.Eventually(Timeout, "Deployment lb-svc-"+seed004Svc, func() (err error) {
		dp, err = e.CS.AppsV1().Deployments(seed004NS).Get(e.ctx, kubeovn.DeploymentPrefix+seed004Svc, metav1.GetOptions{})
		return err
	})
	lb := e.WaitLBSvcPod(seed004NS, dp.Name)
	c := dp.Spec.Template.Spec.Containers[0]
	if want := slices.Concat(c.Command, c.Args); !slices.Equal(lb.Argv, want) || c.Command[0] != "ovnedge" || c.Command[1] != "lbsvc-agent" {
		t.Errorf("pod runs %q; want the Deployment's `ovnedge lbsvc-agent` command %q", lb.Argv, want)
	}
	if !slices.Contains(lb.Argv, "--cluster-ip="+svc.Spec.ClusterIP) || lb.LBIP != netip.MustParsePrefix(seed004LBIP+"/16") {
		t.Errorf("pod %s: args %q, net1 %s; want the ClusterIP %s and %s/16", lb.Name, lb.Argv, lb.LBIP, svc.Spec.ClusterIP, seed004LBIP)
	}
	t.Logf("pod %s on %s: eth0 %s on %s, net1 %s (%s) on the segment; runs %q", lb.Name, lb.Pod.Node, lb.Pod.IP, lb.Pod.Switch,
		lb.LBIP, lb.Net1MAC, lb.Argv)
	checkClusterIPLB(t, e, svc, backends)

	// The on-link client's replies must not hairpin through the router:
	// it drops what comes in from the segment for another host of the
	// segment (before routing, so no ICMP redirect shows the way either).
	drop := []string{"PREROUTING", "-i", "eth0", "-d", testbed.ClusterGatewayIP + "/24", "-m", "addrtype", "!", "--dst-type", "LOCAL",
		"-m", "comment", "--comment", hairpinDrop, "-j", "DROP"}
	e.Router.Run(t, append([]string{"iptables", "-t", "raw", "-I"}, drop...)...)
	t.Cleanup(func() { _, _ = e.Router.RunErr(append([]string{"iptables", "-t", "raw", "-D"}, drop...)...) })
	lbAddr := seed004LBIP + ":80"
	through := func(lb *LBSvcPod, what string) {
		t.Helper()
		for _, cl := range []struct {
			name string
			ns   *testbed.Netns
		}{{"routed client " + testbed.ClusterRemoteClientIP, e.RemoteClient}, {"attachment-subnet client " + testbed.ClusterClientIP, e.Client}} {
			pod, seen := answers(t, e, cl.ns, lbAddr)
			t.Logf("%s: %s -> %s: answered by %s, which saw %s", what, cl.name, lbAddr, pod, seen)
			if !strings.HasPrefix(pod, seed004Label+"-") || !strings.HasPrefix(seen, lb.Pod.IP.String()+":") {
				t.Errorf("%s: %s -> %s answered by %q seeing %q; want a %s pod seeing the lb-svc pod %s",
					what, cl.name, lbAddr, pod, seen, seed004Label, lb.Pod.IP)
			}
		}
	}
	through(lb, "pod "+lb.Name)
	routes := lb.Pod.Run(t, "ip", "route", "show", "table", "100")
	if !strings.Contains(routes, "172.18.0.0/16 dev net1") {
		t.Errorf("table 100 of the pod lacks the attachment subnet's route via net1:\n%s", routes)
	}

	// Without that route the on-link client's replies head for the
	// gateway (and are dropped); the container dies, the kubelet restarts
	// it, and the agent programs the route again.
	lb.Pod.Run(t, "ip", "route", "del", "172.18.0.0/16", "dev", "net1", "table", "100")
	if !refused(e.Client, lbAddr) {
		t.Errorf("the on-link client is served without the pod's route to the attachment subnet")
	}
	if err := lb.Agent.Kill(); err != nil {
		t.Fatal(err)
	}
	e.Eventually(Timeout, "the container restarted", func() error {
		if p := e.SyncLBSvc()[seed004NS+"/"+dp.Name]; p != lb || p.Restarts != 1 {
			return fmt.Errorf("pod %p (was %p), %d restarts", p, lb, p.Restarts)
		}
		return nil
	})
	through(lb, "restarted container of pod "+lb.Name)

	// The pod is deleted: its sandbox (net1 with the address) goes, a
	// new pod comes with a new net1 MAC, and its agent programs it from
	// scratch.
	if err := e.CS.CoreV1().Pods(seed004NS).Delete(e.ctx, lb.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	again := e.WaitLBSvcPod(seed004NS, dp.Name, lb)
	if _, err := e.CS.CoreV1().Pods(seed004NS).Get(e.ctx, lb.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("old pod %s still there (%v)", lb.Name, err)
	}
	through(again, "re-created pod "+again.Name)
	t.Logf("traffic through the re-created pod %s (net1 %s, was %s) %v after the old one was deleted",
		again.Name, again.Net1MAC, lb.Net1MAC, time.Since(deleted).Round(10*time.Millisecond))
}

// checkClusterIPLB waits for the OVN load balancer ovnedge writes for
// svc's ClusterIP with the backends, in the group the Kube-OVN subnet
// switches hold.
func checkClusterIPLB(t *testing.T, e *Env, svc *corev1.Service, backends []netip.Addr) {
	t.Helper()
	name := "Service_" + svc.Namespace + "/" + svc.Name + "_TCP_cluster"
	want := svc.Spec.ClusterIP + ":80="
	for i, b := range backends {
		if i > 0 {
			want += ","
		}
		want += b.String() + ":80"
	}
	err := poll(Timeout, func() error {
		vips, err := e.OVN.NbctlErr("--bare", "--columns=vips", "find", "Load_Balancer", fmt.Sprintf("name=%q", name))
		if err != nil {
			return err
		}
		if !strings.Contains(vips, want) {
			return fmt.Errorf("vips %q, want %q", vips, want)
		}
		t.Logf("%s: vips %s", name, vips)
		return nil
	})
	if err != nil {
		t.Fatalf("load balancer %s: %v\n%s", name, err, e.Diagnose())
	}
	group := e.OVN.Nbctl("--bare", "--columns=_uuid", "find", "Load_Balancer_Group", "name="+lbsvc.DefaultClusterLBGroup)
	if held := e.OVN.Nbctl("get", "Logical_Switch", testbed.KubeOVNDefaultSubnet, "load_balancer_group"); !strings.Contains(held, group) {
		t.Errorf("%s holds load balancer groups %s, not %s", testbed.KubeOVNDefaultSubnet, held, lbsvc.DefaultClusterLBGroup)
	}
}
