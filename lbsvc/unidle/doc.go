// Package unidle ports OVN-Kubernetes' unidling (--ovn-empty-lb-events,
// ovn-kubernetes/ovn-kubernetes at 8871cd9,
// go-controller/pkg/ovn/controller/unidling/): the load balancers of an
// idled Service raise an event instead of rejecting (lbsvc's
// Options.EmptyLBEvents); ovn-controller then writes an
// empty_lb_backends row into the Southbound's Controller_Event table
// when a connection reaches one, and this package turns the row into a
// Normal "NeedPods" event on the Service (what an idler such as
// OpenShift's watches to scale it up again) and deletes it.
//
//	events, err := unidle.Dial(ctx, []string{"tcp:10.0.0.2:6642"}, nil)
//	...
//	go events.Run(ctx, func(ev unidle.Event) {
//		if e, ok := unidle.NeedPods(services(), ev); ok {
//			record(e)
//		}
//	})
//
// [NeedPods] is pure: it finds the Service whose VIP and protocol the
// event names. Deviation: OVN-Kubernetes looks up ClusterIPs only, so a
// connection to an idled Service's ExternalIP or LoadBalancer IP wakes
// nothing there; here those VIPs find their Service too. The
// k8s.ovn.org/unidled-at annotation is lbsvc.UnidledAtPatch's.
package unidle
