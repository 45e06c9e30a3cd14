// Package testbed runs real Open vSwitch and OVN daemons for tests.
//
// StartOVS gives a test its own ovsdb-server and ovs-vswitchd (userspace
// datapath, datapath_type=netdev) with one bridge, an uplink veth whose
// peer sits in an "external host" network namespace, and optionally a
// patch port to br-int. StartOVN gives a test OVN NB and SB
// ovsdb-servers and ovn-northd. Everything lives in a fresh directory
// under /tmp and fresh network namespaces, so parallel tests do not clash,
// and is torn down by t.Cleanup: daemons are stopped by the PID of the
// child process this package started (never by name), namespaces are
// deleted, and the directory is removed unless the test failed, in which
// case its path and the tails of the daemons' logs are logged.
//
// On top of these: StartNBCluster runs a 3-member RAFT NB cluster on
// loopback (Leader, Kill, WaitLeader); StartChassis runs ovn-controller on
// a bridge's userspace OVS with br-ex mapped as physnet, AddPod plugs a
// "pod" network namespace into br-int and NewExternal makes an external
// host on br-ex's segment; NewNetns, Link and Netns.Do give tests hosts on
// an L2 segment. StartCluster builds an N-node OVN-Kubernetes-shaped
// cluster; AddKubeOVNSubnets adds Kube-OVN's default VPC to it (the router
// ovn-cluster, subnet switches, pods on them) and AttachSegment gives a
// pod a macvlan-like second interface on the external segment. They take
// the small T interface, so a program (make
// demo) can run them too. StartKubeAPI runs etcd and a kube-apiserver
// (built by scripts/kube-apiserver.sh) for end-to-end tests;
// StartKubeCluster adds kube-controller-manager and kube-scheduler to it,
// and KubeCluster.AddNode (AddClusterNode) runs a real node in a network
// namespace: containerd, kubelet and kube-proxy in a mount namespace of
// the node's own, where /var/run/openvswitch is that node's OVS (make
// real-node-deps builds and caches what they need).
//
// The daemons run as child processes of the test binary (no --detach), so
// they are reaped by the test and killing them by PID cannot hit an
// unrelated process.
//
// The helpers need root and the OVS/OVN binaries (see Require): without
// them tests are skipped, or fail when CI=true.
//
// The helpers call t.Fatalf on failure and must therefore be used from the
// test's own goroutine.
package testbed
