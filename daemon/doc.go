// Package daemon is the thin ovnedge daemon: it watches Kubernetes (or
// manifest files) with client-go informers and connects package egress and
// lbsvc, which compute desired state, to ovsflow, ovsdbnb and arp, which
// apply it. It is the only package that knows both sides.
//
// The desired state is a pure function of a Snapshot of the objects:
// ComputeCluster gives the leader's part (EgressIP assignment and status,
// LoadBalancer addresses, Northbound rows), ComputeNode one node's bridge
// flows and announced VIPs. `ovnedge render` prints them; a Dataplane
// writes them (NB through one ovsdbnb client, the bridge through an
// ovsflow Applier, statuses and events through the API) and is what Run's
// Reconcilers call. Main is the `ovnedge` command line (daemon/cmd/ovnedge).
//
// Duplicate VIPs are first come, first served whatever the source: the
// Service with the oldest creationTimestamp keeps a LoadBalancer ingress
// IP, or an ExternalIP on a protocol and port (equal timestamps: the first
// by namespace/name); a younger Service loses only that VIP, with a
// Warning event, and the sync goes on. In manifests mode the in-memory
// API sets creationTimestamp when it creates an object (unless the
// manifest has one): at start in file name order, then position in the
// file; an object added later is younger than those already loaded.
//
// Reliability: a node whose k8s.ovn.org annotations break keeps its last
// good parse for its egress IPs and load balancers (a Warning event on the
// node names the annotation), and its own node instance for its egress
// and gateway flows (Params.LastGood). The node's bridge is repaired when its
// flows are deleted or changed by someone else (ovsflow's flow monitor
// and a dump every 30s), and a restarted daemon sends nothing for
// unchanged flows but deletes those of owners gone meanwhile (ovnedge's
// cookies are marked, ovsflow.OwnedCookie). A Service whose input is bad
// at the moment of a restart loses its flows: its cookies cannot be
// computed without it. Repairs are counted in ovnedge_nb_repairs_total
// and ovnedge_nb_repaired_owners_total (by reason: changed, reconnected,
// topology, periodic) and ovnedge_flow_repairs_total (by bridge).
//
// The NB monitor cannot tell ovnedge's own writes from another writer's:
// every Sync comes back as changes of the owners it wrote. The leader's
// NB repair compares each changed owner's rows in the client cache with
// the State it last wrote (ovsdbnb.Client.Drifted, without the cluster
// lock) and drops those equal to it, the echoes; only owners that really
// drifted are synced, at most 64 under the cluster lock at a time, so a
// cluster reconcile waits for one small repair at most. The periodic full
// resync (every 5 minutes) and a reconnection compare every owner the
// same way. The cluster loop's own NB sync compares every owner with the
// NB only when nothing was synced yet or a sync was lost: a periodic one
// there fell on the next event's pass (1.4 s for a node NotReady at
// 150,000 pods). A sync that fails without saying what was committed (the
// connection lost, or the context ended with a transaction out) makes
// the next sync start its make-before-break steps from the NB's egress
// rows, not from the record of before; a stopping or former leader sends
// no transaction at all.
//
// The make-before-break steps go to the NB through
// ovsdbnb.Client.SyncSteps, in runs that end where the new egress nodes'
// chassis are waited for (--sb-address): within a run a step is sent
// behind the one before, its commit still after it: the old SNATs'
// deletion behind the reroute and, without --sb-address, the reroute
// behind the new SNATs too, all three before the first is answered.
// Each step's owners are found against what the steps before it write,
// as if they are written; an owner the server refuses is retried by the
// next pass.
//
// # The leader's incremental path
//
// ComputeCluster recomputes the whole cluster; the leader runs it only
// as the reference and safety net. Its cluster loop takes, with each
// Snapshot, the objects that changed since the last one
// (Watcher.TakeChanges: the informers' handlers note each changed
// object's key by kind, and the objects are read back from the stores
// when taken, so a burst of events on one object is one change), and a
// clusterIndex applies them:
//
//   - nodes: each node's annotations are parsed when it changes; the
//     egress node list, its events and the nodes of the load balancers
//     follow: the changed nodes' entries are replaced in copies of the
//     lists (a copy and a name map, no other node parsed, sorted or
//     compared); a node added or deleted, or any node whose annotations
//     do not parse, rebuilds them (O(nodes), no JSON but the changed
//     node's). EgressIPs whose
//     status names a node whose parse changed get their rows again. An
//     update that changes only the node's resourceVersion (a condition's
//     heartbeat) changes nothing else.
//   - namespace -> EgressIPs: a namespace's change is matched against
//     every EgressIP's namespace selector (O(EgressIPs)); those whose
//     selection of it changes start or stop serving its pods.
//   - pod -> EgressIPs: a pod's change is matched against the EgressIPs
//     selecting its namespace and those serving it; only those whose
//     served pods change get their rows again.
//   - EgressIP: parsed, its selector compiled, its namespaces and pods
//     selected again (O(namespaces + its namespaces' pods)).
//   - the assignment (egress.Assign, and HostHold) runs again over every
//     EgressIP and node, no pod, when a node or an EgressIP changed or a
//     wake (reachability, a hold running out: Changes.Reassign) came;
//     EgressIPs whose status changed get their rows again.
//   - the cluster-wide egress rows (ClusterState: the served pods'
//     address set, the node policies) are computed again when a pod joins
//     or leaves the pods of the assigned EgressIPs (reference counts), a
//     served pod's address changes, or a node's addresses do; the
//     reply-port fallback when a served address or an external
//     externalTrafficPolicy=Local Service or its slices change.
//   - Service/EndpointSlice -> its load balancers: a Service's change, or
//     a change of a slice labelled with its name (before or after), computes
//     that Service's load balancers alone (lbsvc.ServiceState). LB IPAM
//     and the VIP dedup, first come first served over every Service with
//     VIPs (LoadBalancer, or ExternalIPs), run again only when such a
//     Service changes, over those Services only; the others neither take
//     nor lose an address there.
//
// Wider recomputes: a node joining or leaving, or a change of its
// addresses (node-primary-ifaddr, host-cidrs, its chassis: what
// lbsvc.Node holds) recomputes every Service's load balancers, the
// Load_Balancer_Groups and the NodePort template variables (every
// Service's per-node rows name every node); a node's Ready condition,
// labels or capacity do not. Kube-OVN's LoadBalancer Services
// (--enable-lb-svc) and the underlay modes are not indexed: with them
// every reconcile is a full one, as is one after a change of a kind the
// index does not follow (Subnets, NADs, lb-svc Deployments, the NAT
// ConfigMap, BGP peers).
//
// The owners whose state may have changed are ClusterState.Dirty; the
// NB sync compares and sends only those (and any whose last write the
// server refused, kept in a set of their own), so an event costs O(its
// owners), not O(owners). An owner desired with no rows counts as
// written once its rows are gone. The EgressIP statuses never delay the
// NB: a pass that syncs the changed owners only writes them right after
// the NB sync (or after 100 ms of it, when the NB does not answer), so
// that the apiserver's work for them does not compete for the CPU with
// the NB transactions (on 2 cores it made a NotReady's first step three
// times slower); a full pass writes them while it syncs the NB. An
// instance without --node-name runs no node loop (which lists every
// object, the Pods too, per change). Dirty owners a failed pass did not
// sync stay dirty. The index is rebuilt from a Snapshot (the same code from empty,
// proved equal to ComputeCluster after every step of long random edit
// sequences by TestIncrementalMatchesFull) on start, on gaining the
// leadership and when a compute fails.
//
// Every --full-recompute (10 minutes), as a safety net against a missed
// change, the leader audits its index (Dataplane.Audit): it notes from
// then on what the passes apply, lists the caches and builds a second
// index from them off the cluster lock (4 s at 150,000 pods, during which
// events are handled as usual, where a full pass held them back for as
// long), takes under the lock the changes noted and a copy of its desired
// state, applies those changes to the second index and compares the two.
// Equal, the second is dropped; different, a warning names the owners
// that differ and the cluster loop recomputes everything (ovnedge_audits_total
// counts both). An object whose informer event had not been handled yet
// (an informer seconds behind its store) also shows as different:
// the full recompute is then the newer.
//
// What stays O(cluster) per event, in pointers and map lookups only: the Snapshot's listing of the caches of the
// kinds that changed since the last Snapshot (the Watcher keeps each
// kind's list until one of its objects changes; the Pods are listed for
// a full recompute only), the statuses' comparison
// (EgressIPs already found holding their status are not parsed again)
// and ovsdbnb's comparison of the shared rows' pointers (see its Cost);
// the assignment is O(EgressIPs + nodes) when it runs.
//
// The informers' Pods are trimmed to what ovnedge reads (trimPod): the
// leader of a 150,000-pod cluster holds no containers or conditions.
//
// A leader idles between events, so the Go runtime's marks see little
// allocation and its pacer moves the next trigger up to the end of the
// heap's runway: the cycle then starts inside the next pass, whose
// allocations pay most of the mark in assists (in the scale benchmark at
// 150,000 pods, 110-250 ms of a NotReady pass that takes ~27 ms). With
// --gc-ahead (the default) a cluster pass that ends with the heap past
// 85% of the way from the last cycle's live heap to its goal (runtime/
// metrics) starts a collection in the background, while the leader is
// idle (gcAhead); a leader under steady churn, whose pacer triggers at
// 70-80% of the way, does not reach it. When the runtime started a cycle
// itself during the pass, that cycle is waited out and no second one is
// started (runtime.GC would finish the first, then run a whole second
// one: seen twice in 15 minutes at 150,000 pods, each ~1 s of CPU).
package daemon
