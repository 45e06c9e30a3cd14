package helm

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovnedge/ovnedge/internal/e2e"
)

// bgpShutdown proves the chart's bgp.shutdown=auto on the kubelet-run
// node pods, with a graceful restart time of 30 s. The node pod on the
// routed client's path to the ETP=Cluster VIP (one path: the router's
// L3 hash) is deleted: its kubelet stops it with SIGTERM and the
// DaemonSet makes another. FRR must keep the route through that node
// throughout (stale until the new pod's End-of-RIB), and the client's
// connections through it must keep being answered. The same node is then
// cordoned (kubectl drain's first step) and its node pod deleted: the
// route through it must be withdrawn at once, not after the 30 s.
func (h *harness) bgpShutdown(t *testing.T, f *e2e.FRR, svcs map[corev1.ServiceExternalTrafficPolicy]*corev1.Service, all []string) {
	h.setValue(t, "bgp.shutdown=auto,bgp.gracefulRestart=30s")
	vip := netip.MustParseAddr(svcs[corev1.ServiceExternalTrafficPolicyCluster].Status.LoadBalancer.Ingress[0].IP)
	f.WaitHops(t, vip, 60*time.Second, all...)
	through := f.Path(t, vip)

	ctx, cancel := context.WithCancel(h.ctx)
	p := probe(ctx, func() error {
		_, err := e2e.Reply(h.cl.RemoteClient, vip.String()+":80", 100, time.Second)
		return err
	})
	hops := watchHops(ctx, f, vip)
	begin := time.Now()
	h.deleteNodePod(t, through)()
	f.WaitHops(t, vip, 30*time.Second, all...)
	time.Sleep(time.Second) // connections after the new pod's End-of-RIB
	cancel()
	r, fewest := p.wait(), hops()
	t.Logf("BGP: %s's node pod deleted (SIGTERM, not leaving): ready again after %v; the route's next hops never fewer than %d of %d; %d of %d connections through it failed, longest gap %v",
		through, time.Since(begin).Round(time.Millisecond), fewest, len(all), r.failed, r.attempts, r.gap.Round(time.Millisecond))
	h.note("BGP graceful restart (node pod deleted): connections failed", fmt.Sprintf("%d of %d, longest gap %v", r.failed, r.attempts, r.gap.Round(time.Millisecond)))
	if fewest < len(all) {
		t.Errorf("the route lost a next hop while %s's node pod restarted: graceful restart should keep it", through)
	}
	if r.failed > 0 {
		t.Errorf("%d connections through %s failed during its node pod's restart: %v", r.failed, through, r.errs)
	}

	h.cordon(t, through, true)
	defer h.cordon(t, through, false)
	replaced := h.deleteNodePod(t, through)
	rest := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == through })
	took := f.WaitHops(t, vip, 10*time.Second, rest...)
	h.measured("BGP: cordoned node's pod deleted -> its route withdrawn at FRR", took)
	replaced()
	h.cordon(t, through, false)
	f.WaitHops(t, vip, 60*time.Second, all...)
	h.setValue(t, "bgp.shutdown=withdraw")
	f.WaitHops(t, vip, 60*time.Second, all...)
}

// watchHops polls the router's next hops to vip every 50 ms until ctx
// ends; the function it returns is the fewest seen.
func watchHops(ctx context.Context, f *e2e.FRR, vip netip.Addr) func() int {
	var mu sync.Mutex
	fewest := -1
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if hops, err := f.NextHops(vip); err == nil {
				mu.Lock()
				if fewest < 0 || len(hops) < fewest {
					fewest = len(hops)
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() int {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return fewest
	}
}

// deleteNodePod deletes node's node pod (its kubelet stops the container
// with SIGTERM, within the pod's grace period); the function it returns
// waits until the DaemonSet's new pod there is Ready and Reconciled.
func (h *harness) deleteNodePod(t *testing.T, node string) func() {
	pods, err := h.pods(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var old string
	for _, p := range pods {
		if p.Labels["app.kubernetes.io/component"] == "node" && p.Spec.NodeName == node {
			old = p.Name
			if err := h.cs.CoreV1().Pods(p.Namespace).Delete(h.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old == "" {
		t.Fatalf("no node pod on %s", node)
	}
	return func() {
		h.eventually(t, 90*time.Second, "a new node pod on "+node+" Ready", func() error {
			return h.everyPodReady(func(p *corev1.Pod) error {
				if p.Name == old {
					return fmt.Errorf("%s still there", old)
				}
				return nil
			})
		})
	}
}

// cordon sets node's spec.unschedulable (kubectl cordon) and, when on,
// waits until its node pod has seen it leave (its "leaving=true" line).
func (h *harness) cordon(t *testing.T, node string, on bool) {
	leaving := func() int {
		return len(strings.FieldsFunc(h.env.NodeLog(node, "leaving=true"), func(r rune) bool { return r == '\n' }))
	}
	seen := leaving()
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%v}}`, on)
	if _, err := h.cs.CoreV1().Nodes().Patch(h.ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if !on {
		return
	}
	h.eventually(t, 10*time.Second, node+"'s node pod seeing it cordoned", func() error {
		if leaving() <= seen {
			return fmt.Errorf("not logged yet")
		}
		return nil
	})
}
