package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/testbed"
)

// flowLines are a node's breth0 flows without statistics, sorted.
func flowLines(t *testing.T, n *testbed.ClusterNode) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(n.Ofctl("dump-flows", testbed.ClusterBridge, "--no-stats"), "\n") {
		if l = strings.TrimSpace(l); strings.Contains(l, "actions=") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// TestBridgeDrift: ovnedge's flows deleted by hand on a node's breth0
// (the base flows, cookie 0xdeff105, and the Service's VIP flows,
// OVN-Kubernetes' cookie of its VIP and port) come back by themselves
// within seconds, and traffic from outside to an ExternalIP through that
// node resumes.
func TestBridgeDrift(t *testing.T) {
	e := shared.With(t)
	vip := netip.MustParseAddr("172.18.0.152")
	createService(t, e, service("shop", "drift", "web", corev1.ServiceTypeClusterIP, "", vip.String()))
	via(t, e, vip, w2)
	answers(t, e, e.Client, vip.String()+":80")
	n := e.Node(w2)
	want := flowLines(t, n)
	if !slices.ContainsFunc(want, func(l string) bool { return strings.Contains(l, "nw_dst="+vip.String()) }) {
		t.Fatalf("breth0 of %s has no flow for %s:\n%s", w2, vip, strings.Join(want, "\n"))
	}
	for round := range 3 {
		n.Ofctl("del-flows", testbed.ClusterBridge, "cookie=0xdeff105/-1")
		n.Ofctl("del-flows", testbed.ClusterBridge, fmt.Sprintf("cookie=%#x/-1", brex.ServiceCookie("shop", "drift", vip, 80)))
		start := time.Now()
		e.Eventually(5*time.Second, "the deleted flows back", func() error {
			if got := flowLines(t, n); !slices.Equal(got, want) {
				return fmt.Errorf("%d flows, want %d", len(got), len(want))
			}
			return nil
		})
		restored := time.Since(start)
		pod, _ := answers(t, e, e.Client, vip.String()+":80")
		t.Logf("round %d: flows restored within %v, traffic to %s answered by %s after %v", round, restored.Round(time.Millisecond),
			vip, pod, time.Since(start).Round(time.Millisecond))
		if !strings.HasPrefix(pod, "web-") {
			t.Errorf("answered by %q, want a web pod", pod)
		}
	}
}
