package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
)

// chartRBAC applies the chart's RBAC rendered with the given --set
// values (helm template, the pinned helm of scripts/tool.sh).
func chartRBAC(t *testing.T, e *Env, set string) {
	t.Helper()
	root := filepath.Join("..", "..")
	helm, err := exec.Command(filepath.Join(root, "scripts", "tool.sh"), "helm").Output()
	if err != nil {
		t.Fatalf("scripts/tool.sh helm: %v", err)
	}
	out, err := exec.Command(strings.TrimSpace(string(helm)), "template", "ovnedge", filepath.Join(root, "deploy", "helm", "ovnedge"),
		"--namespace", "kube-system", "--set", set, "--show-only", "templates/rbac.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	e.ApplyYAML(string(out))
}

// TestUnidling proves OVN-Kubernetes' unidling from the binary
// (--ovn-empty-lb-events, the leader with the chart's RBAC rendered with
// loadBalancer.emptyLBEvents=true): an idled Service without endpoints
// gets reject=false event=true load balancers; a pod's connection to its
// ClusterIP makes ovn-controller write an empty_lb_backends
// Controller_Event row, which the leader turns into a Normal NeedPods
// event on the Service and deletes; the idler removing idled-at makes
// the leader annotate k8s.ovn.org/unidled-at, and the load balancers
// keep events on for the grace period. The same through the Service's
// ExternalIP from outside (beyond OVN-Kubernetes, which looks up
// ClusterIPs only).
func TestUnidling(t *testing.T) {
	e := shared.With(t)
	chartRBAC(t, e, "loadBalancer.emptyLBEvents=true")
	t.Cleanup(func() { shared.With(t).ApplyFile(filepath.Join("..", "..", "deploy", "rbac.yaml")) })
	e.RestartLeader("--ovn-empty-lb-events=true")
	t.Cleanup(func() { shared.With(t).RestartLeader() })
	e.CreatePod(ServerPod("shop", "idle-client", w1, map[string]string{"app": "idle-client"}, 8080))
	pod := e.WaitPod("shop", "idle-client")

	for _, c := range []struct {
		name     string
		external bool
	}{{"idle", false}, {"idle-ext", true}} {
		t.Run(c.name, func(t *testing.T) {
			e := e.With(t)
			ext := "172.18.0.170"
			s := service("shop", c.name, "nobody", corev1.ServiceTypeClusterIP, "")
			if c.external {
				s.Spec.ExternalIPs = []string{ext}
			}
			s.Annotations = map[string]string{"idling.alpha.openshift.io/idled-at": time.Now().UTC().Format(time.RFC3339)}
			s = createService(t, e, s)
			lbOptions := func() string {
				return e.OVN.Nbctl("--bare", "--columns=options", "find", "Load_Balancer", "external_ids:k8s.ovn.org/owner=shop/"+c.name)
			}
			e.Eventually(Timeout, "the idled Service's load balancers raising events", func() error {
				if o := lbOptions(); !strings.Contains(o, "event=true") || !strings.Contains(o, "reject=false") {
					return fmt.Errorf("options %q", o)
				}
				return nil
			})
			begin := time.Now()
			from, addr := pod.Netns, net.JoinHostPort(s.Spec.ClusterIP, "80")
			if c.external {
				via(t, e, netip.MustParseAddr(ext), w1)
				from, addr = e.Client, net.JoinHostPort(ext, "80")
			}
			// Until the chassis has the new options, the load balancer
			// rejects without an event: connect as a client would, again.
			var msg string
			e.Eventually(Timeout, "a NeedPods event on shop/"+c.name, func() error {
				if !refused(from, addr) {
					t.Fatalf("a connection to %s of the idled Service was answered", addr)
				}
				evs, err := e.CS.CoreV1().Events("shop").List(e.Context(), metav1.ListOptions{})
				if err != nil {
					return err
				}
				for _, ev := range evs.Items {
					if ev.InvolvedObject.Name == c.name && ev.Reason == "NeedPods" {
						msg = ev.Message
						return nil
					}
				}
				return fmt.Errorf("none among %d events", len(evs.Items))
			})
			t.Logf("%s: NeedPods %q %v after the first connection to %s", c.name, msg, time.Since(begin).Round(time.Millisecond), addr)
			if msg != "The service "+c.name+" needs pods" {
				t.Errorf("NeedPods message %q", msg)
			}
			e.Eventually(Timeout, "the Controller_Event rows deleted", func() error {
				if rows := e.OVN.Sbctl("--bare", "--columns=event_info", "list", "Controller_Event"); rows != "" {
					return fmt.Errorf("rows %s", rows)
				}
				return nil
			})

			// The idler scales up and removes idled-at.
			cur, err := e.CS.CoreV1().Services("shop").Get(e.Context(), c.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			delete(cur.Annotations, "idling.alpha.openshift.io/idled-at")
			if _, err := e.CS.CoreV1().Services("shop").Update(e.Context(), cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.Eventually(Timeout, lbsvc.UnidledAtAnnotation+" on the Service", func() error {
				got, err := e.CS.CoreV1().Services("shop").Get(e.Context(), c.name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				at, err := time.Parse(time.RFC3339, got.Annotations[lbsvc.UnidledAtAnnotation])
				if err != nil || time.Since(at) > time.Minute {
					return fmt.Errorf("annotations %v", got.Annotations)
				}
				return nil
			})
			if o := lbOptions(); !strings.Contains(o, "event=true") {
				t.Errorf("in the grace period: options %q, want events", o)
			}
		})
	}
}
