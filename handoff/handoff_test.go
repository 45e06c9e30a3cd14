package handoff

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/ovnknode"
)

// TestSuccessor: a holder on an egress-assignable node names the first
// Ready candidate of its workload on a Ready node that is not; otherwise
// it keeps the Lease.
func TestSuccessor(t *testing.T) {
	nodes := map[string]*corev1.Node{"egress1": node("egress1", true, true), "egress2": node("egress2", true, true),
		"plain": node("plain", false, true), "plain2": node("plain2", false, true), "down": node("down", false, false)}
	leader := map[string]string{"app.kubernetes.io/name": "ovnedge", "app.kubernetes.io/component": "leader"}
	pod := func(name, on string, ready bool, extra ...string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: maps.Clone(leader)}, Spec: corev1.PodSpec{NodeName: on}}
		for i := 0; i+1 < len(extra); i += 2 {
			p.Labels[extra[i]] = extra[i+1]
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		return p
	}
	deleting := pod("b", "plain", true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	unlabelled := pod("a", "egress1", true)
	unlabelled.Labels = nil
	other := pod("b", "plain", true)
	other.Labels["app.kubernetes.io/component"] = "node"
	for _, c := range []struct {
		name       string
		self       corev1.Pod
		candidates []corev1.Pod
		want       string
	}{
		{"holder off the egress nodes", pod("a", "plain", true), []corev1.Pod{pod("b", "plain2", true)}, ""},
		{"to a candidate off them", pod("a", "egress1", true), []corev1.Pod{pod("b", "plain", true)}, "b"},
		{"of another ReplicaSet (a rollout)", pod("a", "egress1", true, "pod-template-hash", "1"),
			[]corev1.Pod{pod("b", "plain", true, "pod-template-hash", "2")}, "b"},
		{"the first by name", pod("a", "egress1", true), []corev1.Pod{pod("c", "plain2", true), pod("b", "plain", true)}, "b"},
		{"not to one on an egress node", pod("a", "egress1", true), []corev1.Pod{pod("b", "egress2", true)}, ""},
		{"not to one not Ready", pod("a", "egress1", true), []corev1.Pod{pod("b", "plain", false)}, ""},
		{"not to one on a NotReady node", pod("a", "egress1", true), []corev1.Pod{pod("b", "down", true)}, ""},
		{"not to one being deleted", pod("a", "egress1", true), []corev1.Pod{deleting}, ""},
		{"not to another workload", pod("a", "egress1", true), []corev1.Pod{other}, ""},
		{"not to one on an unknown node", pod("a", "egress1", true), []corev1.Pod{pod("b", "gone", true)}, ""},
		{"not to itself", pod("a", "egress1", true), []corev1.Pod{pod("a", "egress1", true)}, ""},
		{"holder on an unknown node", pod("a", "gone", true), []corev1.Pod{pod("b", "plain", true)}, ""},
		{"holder without labels", unlabelled, []corev1.Pod{pod("b", "plain", true)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Successor(&c.self, c.candidates, nodes); got != c.want {
				t.Errorf("Successor = %q, want %q", got, c.want)
			}
		})
	}
}

// node is a Node, egress-assignable or not, Ready or not.
func node(name string, egress, ready bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if egress {
		n.Labels[ovnknode.LabelEgressAssignable] = ""
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	return n
}

// ExampleSuccessor: the leader runs on an egress node, a Ready replica on
// a plain one takes the Lease.
func ExampleSuccessor() {
	labels := map[string]string{"app.kubernetes.io/name": "ovnedge", "app.kubernetes.io/component": "leader"}
	ready := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	self := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "leader-a", Labels: labels}, Spec: corev1.PodSpec{NodeName: "worker2"}, Status: ready}
	replica := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "leader-b", Labels: labels}, Spec: corev1.PodSpec{NodeName: "worker1"}, Status: ready}
	nodes := map[string]*corev1.Node{"worker2": node("worker2", true, true), "worker1": node("worker1", false, true)}
	fmt.Println(Successor(self, []corev1.Pod{*self, replica}, nodes))
	// Output: leader-b
}

// TestNoSuccessor: Find's error says why each other replica was rejected.
func TestNoSuccessor(t *testing.T) {
	nodes := map[string]*corev1.Node{"egress1": node("egress1", true, true), "egress2": node("egress2", true, true),
		"plain": node("plain", false, true)}
	labels := map[string]string{"app.kubernetes.io/component": "leader"}
	pod := func(name, on string, ready corev1.ConditionStatus) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: on},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
	}
	self := pod("a", "egress1", corev1.ConditionTrue)
	err := noSuccessor(&self, []corev1.Pod{self, pod("b", "egress2", corev1.ConditionTrue), pod("c", "plain", corev1.ConditionFalse)}, nodes)
	want := "no successor for the Lease (its node egress1 is egress-assignable): 2 other replicas [b: node egress2 egress-assignable c: not Ready]"
	if !errors.Is(err, ErrNoSuccessor) || err.Error() != want {
		t.Errorf("noSuccessor = %v\nwant %s", err, want)
	}
}
