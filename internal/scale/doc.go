// Package scale measures the `ovnedge` leader at OpenShift's tested
// maximums (150,000 pods, 2,000 nodes, 10,000 Services) with 1,000
// EgressIPs: BenchmarkScale, run by `make bench-scale`.
//
// A real etcd and kube-apiserver (testbed.StartKubeAPI) are filled with
// generated objects (ShapeFor, Node, Pod, Service, EndpointSlice,
// EgressIP): written straight to the apiserver by many concurrent
// requests without a client rate limit (Loader), statuses set as the
// kubelet, endpoint controller and cloud controller would, since no
// controller runs. The cluster grows size by size (a smaller Shape's
// objects are a larger one's first ones). At each size a fresh NB
// ovsdb-server (testbed.StartNB, no northd) gets the topology
// ovnkube-master would have made (ovsdbnb.EnsureTopology), and the
// ovnedge binary is started as deploy/deployment.yaml starts it, as the
// ovnedge-leader ServiceAccount under deploy/rbac.yaml (LeaderArgs), with
// the chart's default memory limit (LeaderMemLimit: 512Mi, of which the
// daemon gives the Go runtime 90%; SCALE_LEADER_MEMORY_LIMIT in bytes or
// as a quantity, "off" for none), enforced as the kubelet enforces it: in
// a memory cgroup of that limit (testbed.MemoryCgroup), whose peak,
// reclaims and OOM kills the report has. The API server serves
// streaming lists (WatchList: its etcd reports watch progress, see
// testbed.EtcdPath), as every supported cluster's does.
//
// Measured per size: loading time (not the daemon's), initial sync
// (process start -> NB converged), the daemon's RSS from /proc (and of it
// the anonymous part, which GOMEMLIMIT bounds, and the binary's
// file-backed pages, which the kernel can reclaim), its live
// heap once synced (heap-synced-<pods>.pb.gz, after a forced GC, with a
// `go tool pprof -top` summary), its CPU
// profile from --enable-pprof during the sync and during the events, and
// event -> NB latency (p50/p99) of a pod label change that moves a pod
// from one EgressIP to another, a new Service, an endpoint change and an
// egress node going NotReady. NB changes are seen by separate libovsdb
// monitors (Table), as ovn-northd would see them, and each event is timed
// to the arrival of the row change that completes it twice: from the
// event, the arrival of the write's watch event (a watch of the object by
// name, matched by the resourceVersion the write returned, as the
// daemon's informer receives it), and from just before the API write
// (the apiserver's own time included: 40 ms of a new Service at full
// size is its create). The events start once the daemon is idle: no
// reconcile, no NB change and no NB repair comparing for 3 s (the
// initial sync's echo is compared after the sync).
//
// With SCALE_BASE_BIN, the baseline's leader is synced first at every
// size, on an NB of its own and without a memory limit (as it was
// measured before), then stopped: its sync times and RSS beside this tree's
// (README.md, memory.png).
//
// After the events, a node instance (node 0, as deploy/daemonset.yaml
// starts it, as the ovnedge-node ServiceAccount: NodeArgs) runs beside
// the leader on a bridge of its own (testbed.StartOVS) until it is ready
// and its flow count has settled (MeasureNode): its time to ready, its
// flows, RSS and Go heap (and its heap profile), and the watches it
// opened on the API server by resource (the API server's
// apiserver_longrunning_requests, before and after). Then its events,
// as many rounds as the leader's: an ExternalIP Service created, and the
// endpoint on node 0 of an externalTrafficPolicy=Local Service turned
// host-network and back, each timed from the write and from its watch
// event to the first change of the VIP's flows on the bridge (OpenFlow's
// flow monitor: FlowMonitor), with a CPU profile. It runs in a memory
// cgroup of the chart's node limit (NodeMemLimit, 256Mi;
// SCALE_NODE_MEMORY_LIMIT). With SCALE_BASE_BIN (a baseline build) the
// baseline's node instance is measured first at every size, without a
// limit, side by side (node-memory.png, the ratios in README.md).
//
// Settings (environment; make bench-scale's variables in brackets):
// SCALE_MAX_PODS [SCALE_MAX, default 150000 for make, 1000 for a bare
// go test -bench] the largest size; SCALE_SIZES the sweep
// (1000,10000,50000,150000, cut at the maximum); SCALE_REPORT [a new
// bench-report/scale-<date>/] the report directory: README.md (tables,
// the aims), results.csv, samples.csv, latency-p50.png,
// latency-p99.png, memory.png, sync.png, node-memory.png
// (gonum.org/v1/plot) and the CPU
// profiles; SCALE_SYNC_TIMEOUT, SCALE_EVENT_TIMEOUT, SCALE_WORKERS;
// SCALE_LOG_LEVEL the daemon's --log-level (debug logs each pass's
// timings, and how long its first change had waited for it: queued);
// SCALE_FULL_RECOMPUTE its --full-recompute (default 10m: the audit off
// the cluster lock; shorter puts more of them among the events);
// SCALE_DAEMON_GODEBUG the daemon's GODEBUG (gctrace=1: its GC
// cycles in its log; not GODEBUG on go test, which the compiler reads).
// -benchtime Nx [SCALE_ROUNDS] is the number of rounds of the four events
// per size. docs/benchmarks.md has the results, dated.
package scale
