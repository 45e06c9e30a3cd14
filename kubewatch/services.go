package kubewatch

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Services returns the cached Services (shared with the informer: never
// modify them).
func (w *Watcher) Services() []*corev1.Service {
	var out []*corev1.Service
	for _, o := range w.factory.Core().V1().Services().Informer().GetStore().List() {
		if s, ok := o.(*corev1.Service); ok {
			out = append(out, s)
		}
	}
	return out
}

// OnServiceUpdate calls f with the old and the new Service of every
// update the informer sees (on the informer's goroutine: f must not
// block).
func (w *Watcher) OnServiceUpdate(f func(old, cur *corev1.Service)) error {
	_, err := w.factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			old, ok1 := o.(*corev1.Service)
			cur, ok2 := n.(*corev1.Service)
			if ok1 && ok2 {
				f(old, cur)
			}
		},
	})
	return err
}
