package desired_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// TestGatewayChassis: a gateway router's chassis is its node's
// OVN-Kubernetes chassis-id, else Kube-OVN's chassis annotation, else the
// node's name; routers that are no gateway router are left out.
func TestGatewayChassis(t *testing.T) {
	node := func(name string, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	}
	s := desired.Snapshot{Nodes: []*corev1.Node{
		node("ovnk", map[string]string{ovnknode.AnnotationChassisID: "c-ovnk"}),
		node("kovn", map[string]string{ovnknode.AnnotationKubeOVNChassis: "c-kovn"}),
		node("bare", nil),
	}}
	got := desired.GatewayChassis(s, []string{"GR_ovnk", "ovn_cluster_router", "GR_kovn", "GR_bare", "GR_gone"})
	if want := []string{"c-ovnk", "c-kovn", "bare", "gone"}; !slices.Equal(got, want) {
		t.Errorf("GatewayChassis = %q, want %q", got, want)
	}
}
