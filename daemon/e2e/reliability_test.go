package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// TestDaemonRestartOrphansAndBrokenNode runs `ovnedge daemon` against the
// real API server and OVN:
//   - a Service deleted while the daemon is down loses its bridge flows
//     (its ARP bypass included) and its load balancer when the daemon
//     starts again, and nothing else on the bridge changes;
//   - broken k8s.ovn.org annotations on a node keep that node's NodePort
//     load balancer as it was, with a Warning event on the node naming
//     the annotation.
func TestDaemonRestartOrphansAndBrokenNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startCluster(t)
	a := c.start(t, egressNode, nil)
	c.poll(t, "the Northbound rows of the demo", func(context.Context) error { return wantNB(c.nbRows(), podIP) })
	c.reconciled(t, a, "node")
	const apiVIP = "172.18.0.201" // prod/api's ExternalIP
	before := flows(a.ovs)
	if !strings.Contains(strings.Join(before, "\n"), "arp_tpa="+apiVIP) {
		t.Fatalf("br-ex has no ARP bypass for %s:\n%s", apiVIP, strings.Join(before, "\n"))
	}

	if err := a.Terminate(); err != nil {
		t.Fatal(err)
	}
	if err := c.cs.CoreV1().Services("prod").Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a = c.start(t, egressNode, a.ovs)
	c.reconciled(t, a, "node")
	c.poll(t, "prod/api's flows gone after the restart", func(context.Context) error {
		if f := strings.Join(flows(a.ovs), "\n"); strings.Contains(f, apiVIP) {
			return fmt.Errorf("br-ex still has flows of %s:\n%s", apiVIP, f)
		}
		return nil
	})
	kept := slices.DeleteFunc(slices.Clone(before), func(l string) bool { return strings.Contains(l, apiVIP) })
	if got := flows(a.ovs); !slices.Equal(got, kept) {
		t.Errorf("after the restart br-ex holds\n%s\nwant the flows before without prod/api's\n%s",
			strings.Join(got, "\n"), strings.Join(kept, "\n"))
	}
	c.poll(t, "prod/api's load balancer gone", func(context.Context) error {
		if rows := strings.Join(c.nbRows(), "\n"); strings.Contains(rows, apiVIP) {
			return fmt.Errorf("NB still has %s", apiVIP)
		}
		return nil
	})

	// Break the other node's annotations: its NodePort load balancer
	// stays.
	nodePortLB := func() string {
		for _, r := range c.nbRows() {
			if strings.HasPrefix(r, "Load_Balancer,") && strings.Contains(r, "172.18.0.2:30080") {
				return r
			}
		}
		return ""
	}
	lb := nodePortLB()
	if lb == "" {
		t.Fatalf("no NodePort load balancer of %s:\n%s", otherNode, strings.Join(c.nbRows(), "\n"))
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"not json"}}}`, ovnknode.AnnotationNodeSubnets)
	if _, err := c.cs.CoreV1().Nodes().Patch(ctx, otherNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c.poll(t, "a Warning event on Node "+otherNode, func(ctx context.Context) error {
		evs, err := c.cs.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == otherNode && e.Type == corev1.EventTypeWarning &&
				e.Reason == desired.ReasonInvalidNode && strings.Contains(e.Message, ovnknode.AnnotationNodeSubnets) &&
				strings.Contains(e.Message, "load balancers") {
				t.Logf("event on Node %s: %s", otherNode, e.Message)
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(evs.Items))
	})
	c.reconciled(t, a, "cluster")
	if got := nodePortLB(); got != lb {
		t.Errorf("%s's NodePort load balancer %q became %q when its annotations broke", otherNode, lb, got)
	}
	if !a.Alive() {
		t.Fatalf("the daemon died:%s", a.Log())
	}
}
