package daemon

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovnedge/ovnedge/egress"
)

// k8sPod is p as a running Pod (its manifest, an informer's object).
func k8sPod(p *egress.PodInfo) *corev1.Pod {
	lbls, err := labels.ConvertSelectorToLabelsMap(p.Labels.(fmt.Stringer).String())
	if err != nil {
		panic(err)
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: lbls},
		Spec: corev1.PodSpec{NodeName: p.Node}}
	if p.Handled {
		out.Status.Phase = corev1.PodRunning
	}
	for _, ip := range p.IPs {
		out.Status.PodIPs = append(out.Status.PodIPs, corev1.PodIP{IP: ip.String()})
	}
	if len(p.IPs) > 0 {
		out.Status.PodIP = p.IPs[0].String()
	}
	return out
}

// relabelled is p with label k set to v.
func relabelled(p *egress.PodInfo, k, v string) *egress.PodInfo {
	pod := k8sPod(p)
	pod.Labels = maps.Clone(pod.Labels)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[k] = v
	return egress.NewPodInfo(pod)
}
