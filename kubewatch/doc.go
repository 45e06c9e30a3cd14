// Package kubewatch runs client-go shared informers for the kinds
// ovnedge's desired state reads and turns them into its inputs: a
// desired.Snapshot of every cached object, and desired.Changes, the
// objects changed since they were last taken, for an incremental
// desired.Index. Every change also asks the Watcher's queues for a
// reconcile (RunLoop runs one): reconciles are level-triggered, so a burst
// of events is one pass.
//
//	w := kubewatch.NewWatcher(typed, dynamic, log, kubewatch.WatchSubnets())
//	q := w.Queue("cluster")
//	if err := w.Start(ctx); err != nil { ... }
//	go kubewatch.RunLoop(ctx, q, "cluster", log, func(ctx context.Context) error {
//		s, err := w.SnapshotFor(w.TakeChanges())
//		...
//		cs, err := index.Apply(s.Changed)
//		...
//	}, nil)
//
// The informers keep what ovnedge reads: managedFields are dropped,
// Nodes lose their image lists, and a Pod is kept as its egress.PodInfo
// (identity, shared label set, node, addresses, whether it runs on the
// pod network), about 200 bytes where a trimmed corev1.Pod took 1.5 KiB:
// a 150,000-pod cluster's cache holds no containers, conditions or
// annotations. The transform is idempotent, as a streaming list (client-go's
// WatchList, on by default against Kubernetes 1.34+) needs. A kind's list is
// kept between Snapshots until one of its objects changes.
//
// A node instance's Watcher (PodsOnDemand) has no Pod watch of its own:
// WatchPods starts one per namespace and label selector its
// host-interface egress IPs serve (desired.HostEgressPodWatches) and
// stops those no longer needed, so a node without such egress IPs caches
// no pod, however many the cluster runs. With ForNode it also keeps only the key and version
// (a stub) of what no node has work for: ClusterIP Services without
// external IPs or ingress, their EndpointSlices, and the EgressIPs that
// give the node no IP; of other nodes' endpoints it keeps one per node
// and state (TrimForNode). Snapshot lists no stub, and a node's desired
// state is the same as from the whole objects.
package kubewatch
