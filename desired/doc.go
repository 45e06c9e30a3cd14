// Package desired turns Kubernetes objects into the dataplane ovnedge
// wants, with no I/O: a Snapshot of Nodes, Namespaces, Pods, Services,
// EndpointSlices, EgressIPs (and Kube-OVN's and MetalLB's objects) in, the
// desired state out. Same objects in, same state out; it builds on any
// OS and links no socket, netlink or nftables code, so a CNI embedding
// ovnedge computes exactly what ovnedge's daemon writes.
//
//   - ComputeCluster is the leader's part: the EgressIP assignment and
//     statuses, LoadBalancer addresses (LB IPAM), the EgressServices'
//     hosts and node labels, and the Northbound rows of the EgressIPs,
//     EgressServices and load balancers by owner (ClusterState).
//   - Index is ComputeCluster kept up to date object by object: Apply
//     takes the objects that changed (Changes) and returns the state with
//     the owners whose rows may differ (ClusterState.Dirty), so an event
//     costs what it reaches. Built from SnapshotChanges it equals
//     ComputeCluster (TestIncrementalMatchesFull checks that after every
//     step of long random edit sequences); Diverged compares the two, as
//     the daemon's periodic audit does.
//   - ComputeNode is one node's part: its bridge flows by owner, the VIPs
//     it answers ARP/NDP for, its egress IPs on host interfaces, what it
//     programs for the EgressServices it hosts and its BGP routes
//     (NodeState).
//   - RenderFlows renders a NodeState's flows as ovs-ofctl text
//     (`ovnedge render`).
//
// Use it with objects from anywhere: package kubewatch gives them from
// informers, package manifests from files. Pods come in compact form,
// egress.PodInfo (a leader holds one for every pod of the cluster):
//
//	s := desired.Snapshot{Nodes: nodes, Pods: egress.PodInfos(pods), Services: svcs, EgressIPs: eips}
//	cs, err := desired.ComputeCluster(s, params, nil, nil)
//	// cs.Egress and cs.LB: rows for an ovsdbnb.Writer; cs.Status: EgressIP statuses
//	ns, err := desired.ComputeNode(s, params, "node1")
//	// ns: flows for a dataplane.Flows writer, ns.Announce for dataplane.L2
//
// Bad objects are Warning events in the state (an EgressIP that does not
// parse keeps its rows, ClusterState.Keep; a node whose annotations break
// keeps its last good parse); the error is for bad Params only. What the
// Index recomputes for each kind of change is docs/architecture.md's.
package desired
