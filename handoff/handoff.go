package handoff

import (
	"context"
	"errors"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/ovnedge/ovnedge/ovnknode"
)

// Successor names the leader candidate that a Lease holder running on an
// egress-assignable node hands the Lease to, "" to keep it: another Ready
// Pod of the holder's workload (its labels but pod-template-hash; a
// holder without labels keeps the Lease), not
// being deleted, on a Ready node that is not egress-assignable; the first
// by name. nodes has the nodes of self and of the candidates. A leader
// that dies with an egress node holds the EgressIPs' failover up until its
// Lease expires (leaseDuration); one elsewhere moves them as soon as the
// reachability check sees the node gone.
func Successor(self *corev1.Pod, candidates []corev1.Pod, nodes map[string]*corev1.Node) string {
	if n := nodes[self.Spec.NodeName]; n == nil || !egressAssignable(n) || len(workload(self)) == 0 {
		return ""
	}
	var best string
	for i := range candidates {
		p := &candidates[i]
		if reject(self, p, nodes) == "" && (best == "" || p.Name < best) {
			best = p.Name
		}
	}
	return best
}

// reject says why p cannot take self's Lease, "" if it can.
func reject(self, p *corev1.Pod, nodes map[string]*corev1.Node) string {
	n := nodes[p.Spec.NodeName]
	switch {
	case p.Name == self.Name:
		return "itself"
	case !sameWorkload(self, p):
		return "another workload"
	case p.DeletionTimestamp != nil:
		return "being deleted"
	case !podReady(p):
		return "not Ready"
	case n == nil:
		return "node " + p.Spec.NodeName + " unknown"
	case egressAssignable(n):
		return "node " + n.Name + " egress-assignable"
	case !ovnknode.Ready(n):
		return "node " + n.Name + " not Ready"
	}
	return ""
}

func egressAssignable(n *corev1.Node) bool {
	_, ok := n.Labels[ovnknode.LabelEgressAssignable]
	return ok
}

// workload is p's labels but the ReplicaSet's pod-template-hash (a
// rollout's pods are candidates too): what its workload's Pods share.
func workload(p *corev1.Pod) map[string]string {
	w := maps.Clone(p.Labels)
	delete(w, appsv1.DefaultDeploymentUniqueLabelKey)
	return w
}

// sameWorkload says whether p has self's workload labels.
func sameWorkload(self, p *corev1.Pod) bool {
	for k, v := range workload(self) {
		if p.Labels[k] != v {
			return false
		}
	}
	return true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Find reads what Successor needs from the API server: the Pod
// namespace/name (this leader's, from POD_NAMESPACE and POD_NAME), its
// workload's Pods and their nodes. It returns "" without a Pod to read or
// off the egress-assignable nodes, and ErrNoSuccessor when Successor
// names nobody.
func Find(ctx context.Context, cs kubernetes.Interface, namespace, name string) (string, error) {
	if namespace == "" || name == "" {
		return "", nil
	}
	self, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("leader pod %s/%s: %w", namespace, name, err)
	}
	nodes := map[string]*corev1.Node{}
	node := func(name string) error {
		if _, ok := nodes[name]; ok || name == "" {
			return nil
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		nodes[name] = n
		return nil
	}
	if err := node(self.Spec.NodeName); err != nil || !egressAssignable(nodes[self.Spec.NodeName]) {
		return "", err
	}
	sel := workload(self)
	if len(sel) == 0 {
		return "", nil // no workload to find the candidates by
	}
	list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return "", fmt.Errorf("leader candidates: %w", err)
	}
	for _, p := range list.Items {
		if p.Name != self.Name && podReady(&p) {
			if err := node(p.Spec.NodeName); err != nil {
				return "", err
			}
		}
	}
	if to := Successor(self, list.Items, nodes); to != "" {
		return to, nil
	}
	return "", noSuccessor(self, list.Items, nodes)
}

// noSuccessor is ErrNoSuccessor with the reason each candidate was
// rejected.
func noSuccessor(self *corev1.Pod, candidates []corev1.Pod, nodes map[string]*corev1.Node) error {
	var why []string
	for i := range candidates {
		if r := reject(self, &candidates[i], nodes); r != "itself" {
			why = append(why, candidates[i].Name+": "+r)
		}
	}
	return fmt.Errorf("%w (its node %s is egress-assignable): %d other replicas %v", ErrNoSuccessor, self.Spec.NodeName, len(why), why)
}

// ErrNoSuccessor is Find's error when the leader runs on an
// egress-assignable node and none of its workload's other replicas can
// take the Lease; the error says why each cannot.
var ErrNoSuccessor = errors.New("no successor for the Lease")
