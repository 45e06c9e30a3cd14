// Package readiness tracks whether an ovnedge instance does its own work
// (Tracker: its informers synced, its node's last pass and, while it
// leads, the cluster's last pass succeeded) and reports it on the
// instance's own Pod (PodReporter: the ovnedge.io/Reconciled condition and
// Ready/NotReady events), the way a kubelet's readiness probe and `kubectl
// describe pod` show it.
//
//	p := readiness.NewPodReporter(cs, recorder, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"), log)
//	go p.Run(ctx)
//	t := readiness.NewTracker(true, func(s readiness.State, changed bool) { p.Report(s) })
//	t.SetSynced()
//	t.NodeDone(err) // after each node pass
package readiness
