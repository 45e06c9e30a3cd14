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
// same way. A sync that fails without saying what was committed (the
// connection lost, or the context ended with a transaction out) makes
// the next sync start its make-before-break steps from the NB's egress
// rows, not from the record of before; a stopping or former leader sends
// no transaction at all.
package daemon
