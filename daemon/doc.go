// Package daemon is ovnedge's daemon: the wiring between Kubernetes and
// the writers of the dataplanes. It watches the cluster (or a directory of
// manifests, package manifests) with client-go informers, hands every
// change to the pure desired-state package (desired: an incremental Index
// on the leader, ComputeNode on every node) and the result to the writers:
// the Northbound rows to an ovsdbnb.Writer and the statuses to the API
// server on the elected leader; the node's bridge, host, L2 and BGP to the
// writers of package dataplane on every node. It also runs the leader
// election, the egress nodes' reachability checks, events, metrics and
// health, and the configuration (flags and a gcfg/ini file, Config).
//
// Main is the `ovnedge` command line (daemon/cmd/ovnedge); a CNI that
// embeds ovnedge wires the packages it needs itself (desired, the
// writers) rather than this package. docs/manual.md is the user's
// manual; docs/architecture.md follows a Service and an EgressIP from the
// informers to the rows and flows; docs/flags.md lists every flag.
package daemon
