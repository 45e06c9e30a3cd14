// Package ovnknodetest builds Kubernetes Nodes carrying OVN-Kubernetes'
// annotations, as ovnkube-node writes them, for tests of what reads them
// (ovnknode.Parse and the packages built on it).
package ovnknodetest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/ovnknode"
)

// Node is a ready node with OVN-Kubernetes' annotations: pod subnet
// subnet, primary address ifaddr (also its only host-cidr), gateway router
// join address join (CIDR forms, IPv4), egress-assignable or not, and the
// extra annotations given as key, value pairs.
func Node(name, subnet, ifaddr, join string, assignable bool, extra ...string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{
			ovnknode.AnnotationNodeSubnets:     fmt.Sprintf(`{"default":[%q]}`, subnet),
			ovnknode.AnnotationPrimaryIfAddr:   fmt.Sprintf(`{"ipv4":%q}`, ifaddr),
			ovnknode.AnnotationGatewayJoinAddr: fmt.Sprintf(`{"ipv4":%q}`, join),
			ovnknode.AnnotationHostCIDRs:       fmt.Sprintf(`[%q]`, ifaddr),
		}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	if assignable {
		n.Labels[ovnknode.LabelEgressAssignable] = ""
	}
	for i := 0; i+1 < len(extra); i += 2 {
		n.Annotations[extra[i]] = extra[i+1]
	}
	return n
}
