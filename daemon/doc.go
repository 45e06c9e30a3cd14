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
package daemon
