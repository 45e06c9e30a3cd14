// Package e2e runs ovnedge end to end against a real kube-apiserver and
// etcd (testbed.StartKubeAPI, built by scripts/kube-apiserver.sh)
// and real OVN Northbound, ovn-northd and Open vSwitch (testbed.StartOVN,
// testbed.StartOVS). It holds tests only.
//
// The tests apply the EgressIP CRD (deploy/crds) and the demo objects
// (examples/demo) with client-go, check that the daemon's informers see
// them, then build ./daemon/cmd/ovnedge and run `ovnedge daemon` as a
// subprocess: they assert the EgressIP status, the Northbound reroute
// policy, SNAT and load balancer; restart the daemon and assert nothing
// was removed or duplicated; kill the leader of two instances and assert
// the other takes over within the lease duration; and send bad input
// through the API, which must give events and no crash loop. TestChart
// server-side applies the Helm chart's rendering (deploy/helm/ovnedge) and
// runs the node and the leader with its rendered arguments.
//
// Run with `go test ./daemon/e2e` (root, OVS/OVN installed and the
// apiserver built; `make e2e` does all three). Outside CI a missing
// prerequisite skips loudly; with CI=true it fails.
package e2e
