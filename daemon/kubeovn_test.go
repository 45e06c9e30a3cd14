package daemon

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/kubewatch"
	"github.com/ovnedge/ovnedge/manifests"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestKubeOVNSeedManifests loads Kube-OVN's underlay LoadBalancer and
// LoadBalancer Service examples as Kube-OVN's documentation writes them:
// the manifests mode holds every object (no "unsupported kind"), the
// watcher yields the Subnets and the NetworkAttachmentDefinition typed,
// and `ovnedge render` accepts the directory.
func TestKubeOVNSeedManifests(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src := manifests.NewSource("testdata/kubeovn", log)
	if err := src.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	w := kubewatch.NewWatcher(src.Clientset, src.Dynamic, log, kubewatch.WatchKubeOVN())
	s, _ := snapshot(t, w)
	if len(s.Subnets) != 2 || len(s.NADs) != 1 || len(s.Services) != 2 {
		t.Fatalf("%d subnets, %d NADs, %d services", len(s.Subnets), len(s.NADs), len(s.Services))
	}
	attach, underlay := s.Subnets[0], s.Subnets[1]
	if attach.Name != "attach-subnet" || attach.Spec.Provider != "lb-svc-attachment.kube-system" || attach.Spec.CIDRBlock != "172.18.0.0/16" ||
		attach.Spec.Gateway != "172.18.0.1" || !slices.Equal(attach.Spec.ExcludeIps, []string{"172.18.0.0..172.18.0.10"}) || attach.Spec.Protocol != "IPv4" {
		t.Errorf("attach-subnet %+v", attach.Spec)
	}
	if underlay.Name != "underlay-subnet" || !underlay.Spec.EnableExternalLBAddress || underlay.Spec.NatOutgoing || underlay.Spec.Provider != "ovn" ||
		len(underlay.Spec.ExcludeIps) != 3 {
		t.Errorf("underlay-subnet %+v", underlay.Spec)
	}
	if n := s.NADs[0]; n.Namespace != "kube-system" || n.Name != "lb-svc-attachment" || !strings.Contains(n.Spec.Config, `"macvlan"`) {
		t.Errorf("NAD %s/%s %q", n.Namespace, n.Name, n.Spec.Config)
	}
	pools, err := attach.Pools()
	if err != nil || len(pools) != 1 || pools[0].Usable(pools[0].Gateway) == nil {
		t.Errorf("pools %v, %v", pools, err)
	}

	var out, errOut strings.Builder
	if code := Main(context.Background(), []string{"render", "--manifests", "testdata/kubeovn", "--what", "nb"}, &out, &errOut); code != 0 {
		t.Fatalf("render: exit %d:\n%s", code, errOut.String())
	}
	if strings.Contains(errOut.String(), "unsupported kind") {
		t.Errorf("render: %s", errOut.String())
	}
}

// TestLBSvcFromManifests runs the leader's work with --enable-lb-svc on
// the Kube-OVN examples: test-service gets its static address from
// attach-subnet and its lb-svc Deployment is created through the client
// (the manifests' in-memory API here, a real one in daemon/e2e); a second
// pass changes nothing.
func TestLBSvcFromManifests(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, _, err := ParseConfig("test", []string{"--manifests", "testdata/kubeovn", "--enable-lb-svc", "--lb-svc-image", "img"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Connect(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	w := kubewatch.NewWatcher(c.Typed, c.Dynamic, log, c.watchOptions(cfg)...)
	s, ctx := snapshot(t, w)
	// The manifests give no ClusterIP; the API server would.
	for i, svc := range s.Services {
		if svc.Name == "test-service" {
			svc = svc.DeepCopy()
			svc.Spec.ClusterIP = "10.96.0.10"
			if svc, err = c.Typed.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			s.Services[i] = svc
		}
	}
	rec, stop := NewRecorder(c.Typed, false, log)
	defer stop()
	d := NewDataplane(cfg, c, rec, NewMetrics(), log)
	defer d.Close()
	if err := d.Cluster(ctx, s); err != nil {
		t.Fatalf("Cluster: %v", err)
	}
	dp, err := c.Typed.AppsV1().Deployments("default").Get(ctx, "lb-svc-test-service", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lb-svc Deployment: %v", err)
	}
	if img := dp.Spec.Template.Spec.Containers[0].Image; img != "img" ||
		dp.Spec.Template.Annotations["lb-svc-attachment.kube-system.kubernetes.io/ip_address"] != "172.18.0.18" {
		t.Errorf("deployment image %q, pod annotations %v", img, dp.Spec.Template.Annotations)
	}
	svc, err := c.Typed.CoreV1().Services("default").Get(ctx, "test-service", metav1.GetOptions{})
	if err != nil || len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != "172.18.0.18" {
		t.Fatalf("test-service status %+v, %v", svc.Status, err)
	}

	// The next snapshot holds both: nothing more to do.
	s.Services = []*corev1.Service{svc}
	s.LBSvcDeployments = []*appsv1.Deployment{dp}
	cs, err := desired.ComputeCluster(s, d.cluster.params, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if create, update, del := cs.LBSvc.Changes(s.LBSvcDeployments); len(cs.Ingress)+len(create)+len(update)+len(del) != 0 {
		t.Errorf("second pass: ingress %v, %d creates, %d updates, %d deletes", cs.Ingress, len(create), len(update), len(del))
	}
	// A real API server (1.30 and later) reads the status back with
	// ipMode VIP: still nothing to write (it was written on every pass).
	vip := svc.DeepCopy()
	vip.Status.LoadBalancer.Ingress[0].IPMode = ptr.To(corev1.LoadBalancerIPModeVIP)
	s.Services = []*corev1.Service{vip}
	if cs, err := desired.ComputeCluster(s, d.cluster.params, nil, nil); err != nil || len(cs.Ingress) != 0 {
		t.Errorf("status with ipMode VIP: ingress to write %v, %v", cs.Ingress, err)
	}
	// Without --enable-lb-svc nothing of the kind is computed.
	off := d.cluster.params
	off.LBSvc = false
	if cs, _ := desired.ComputeCluster(s, off, nil, nil); cs.LBSvc != nil {
		t.Errorf("lb-svc plan without --enable-lb-svc")
	}
}

// snapshot starts w until the test ends and returns its first Snapshot
// and the context it runs in.
func snapshot(t *testing.T, w *kubewatch.Watcher) (desired.Snapshot, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s, ctx
}
