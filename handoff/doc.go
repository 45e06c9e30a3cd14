// Package handoff decides when the cluster-wide leader hands its Lease to
// another replica of its workload: a leader running on an egress-assignable
// node (k8s.ovn.org/egress-assignable) names a Ready replica on a Ready
// node that is not (Successor), so that the egress node's death does not
// hold the EgressIPs' failover up until the Lease expires. Find reads the
// leader's Pod, its workload's Pods and their Nodes from the API server and
// asks Successor; the daemon checks it while it leads and steps down for
// the successor.
//
//	to, err := handoff.Find(ctx, clientset, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"))
//	if err == nil && to != "" {
//		// release the Lease; to takes it within its retry period
//	}
//
// Backoff spaces hand-overs that did not take (the Lease came back with
// no other candidate seen holding it): 30 s, then twice as long each
// time, up to 10 minutes. Checker is what a leader runs while it leads:
// Find as Backoff allows, each new reason to keep the Lease returned once.
//
// OVN-Kubernetes' cluster manager has no such preference (its Lease is
// ovn-kubernetes-master, 137 s by default): this is ovnedge's own,
// docs/deviations.md "Leader election".
package handoff
