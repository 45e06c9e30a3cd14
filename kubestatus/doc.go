// Package kubestatus writes what ovnedge reports back to the Kubernetes
// API server, the write side beside package kubewatch's informers: the
// EgressIPs' status (written with the object: the CRD has no status
// subresource, as in OVN-Kubernetes; a few writes in flight at once, and
// what was written overlaid on the informer's objects until the informer
// shows it), the LoadBalancer Services' ingress, the lb-svc Deployments of
// Kube-OVN's LoadBalancer Services, a node's report of its host-interface
// egress IPs (an annotation of its own Node), and the EgressServices'
// status.host and their host nodes' egress-service labels.
//
//	w := &kubestatus.Writer{Typed: cs, Dynamic: dyn, Log: slog.Default()}
//	err := w.WriteIngress(ctx, snapshot, clusterState.Ingress)
//
// Every write compares with the object the informer holds and sends
// nothing when it already says so.
package kubestatus
