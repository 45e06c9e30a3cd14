// Package helm proves ovnedge as users install it: the real `helm install`
// of deploy/helm/ovnedge, from the image scripts/image.sh builds (the
// same OCI archive `make image` makes), running only as containers that
// real kubelets start, on a cluster whose nodes are real OVN chassis.
//
// TestHelm brings up, once for every step:
//
//   - testbed.StartCluster: an OVN central (NB, SB, ovn-northd) and two
//     chassis (ovsdb-server, ovs-vswitchd, ovn-controller) in network
//     namespaces, breth0 on an external segment with a client host;
//   - testbed.StartKubeCluster: kube-apiserver, kube-controller-manager
//     and kube-scheduler, and AddOVNClusterNode: containerd, kubelet and
//     kube-proxy in each chassis's network namespace, where
//     /var/run/openvswitch is that chassis's OVS run directory and the
//     CNI plugin is examples/ovncni (pods on br-int and the node's
//     logical switch, as OVN-Kubernetes plugs them);
//
// builds the image (scripts/image.sh, afresh each run, while the chassis
// and nodes come up: a cache by git revision would be stale in a dirty
// tree), imports it into every node's containerd and installs the chart
// with `helm install --wait` (node DaemonSet on the host network, two
// leader replicas with leader.hostNetwork=true, one per node). It then
// checks, in order: every pod Running and Ready (readiness is the instance's first
// successful reconcile), the leader holding the kube-system/ovnedge Lease,
// each pod's ovnedge.io/Reconciled condition True; an ExternalIP Service
// getting its NB load balancer and breth0 flows and answering a real TCP
// connection from the external client; the ARP bypass (with no route to
// the ExternalIP, no node answers ARP for it until it is on a node's lo,
// then that node alone, and the client connects through it); the bridge
// drift (ovnedge's base and ExternalIP flows deleted by hand on a node's
// breth0 come back from its node pod, and the client is answered again);
// LoadBalancer Services (ETP=Cluster
// and ETP=Local, addresses from the chart's loadBalancer.pools) of a
// DaemonSet of kubelet-run pods on OVN (dual-stack: examples/ovncni with
// host-local ranges of both pod subnets), whose EndpointSlices
// kube-controller-manager writes, answering the client through each
// node's VIP route and NodePort (ETP=Local: only that node's pod, which
// sees the client's address), the same over IPv6 with two IPv6
// single-stack Services (addresses from the IPv6 pool, the controller's
// IPv6 EndpointSlices) and the NDP bypass of one of their addresses,
// then each Service's loadBalancerSourceRanges (the chart's default loadBalancer.sourceRanges) set to a range without
// the client, which the VIP then no longer answers while the NodePort
// does, to the client's address and cleared, the VIP answering again,
// then, with loadBalancer.emptyLBEvents turned on by `helm upgrade
// --reuse-values --set` (the leaders' flag and RBAC), a kubelet-run pod's
// connection to an idled Service's ClusterIP becoming a NeedPods event and
// the idled-at annotation's removal a k8s.ovn.org/unidled-at annotation,
// then, with loadBalancer.l2Announce turned
// on by `helm upgrade --reuse-values --set` and no route on the client,
// exactly one node answering ARP for each VIP (for ETP=Local one with a
// backend) and serving it, then, with the chart's bgp values turned on
// the same way and Debian's FRR as the external segment's router
// (e2e.StartFRR), every node pod's BGP session and BFD up at FRR, both
// VIPs routed through every node and answered for the routed client
// behind the router (ETP=Local by the pod on the node its path enters,
// which sees the client's address); with bgp.shutdown=auto (graceful
// restart 30 s), the node pod on the client's path deleted (the kubelet's
// SIGTERM, the DaemonSet's new pod) keeping its route at FRR and every
// connection through it answered, and the same node cordoned, its node
// pod deleted, its route withdrawn at once; every route withdrawn when
// BGP is turned off; then the same peering from MetalLB's objects
// (bgp.peerCRDs: a BGPPeer and its BFDProfile in metallb-system, the
// chart's CRDs), its routes withdrawn when the BGPPeer is deleted; the pods' ports and endpoints leaving the NB when the
// DaemonSet is deleted; the kubelet restarting a killed
// node instance, which becomes Ready again without touching the
// Service's flows or NB rows; the Lease handed off an egress node (the
// holder moved onto the second node by deleting its pod elsewhere, then
// that node labelled egress-assignable: its leader must hand the Lease
// to the replica on the first node, leader.avoidEgressNodes; timed);
// `helm upgrade --reuse-values --set
// image.tag=<new> --wait` to the same image under a second tag (`ctr
// images tag` on every node: no rebuild, pullPolicy Never), which rolls
// the DaemonSet and the Deployment (every pod replaced, of the new tag,
// Ready and Reconciled; the times measured) while the external client
// opens a connection to the ExternalIP every 20 ms and keeps a second
// one echoing every 20 ms (none may fail), and a kubelet-run pod sends a
// UDP packet every 10 ms to the client through an EgressIP (k8s.ovn.org/v1,
// its one egress-assignable node the second one; the loss window measured,
// aim < 1 s) — no owned flow re-added or changed and no NB load
// balancer, router policy, NAT or address set changed or re-inserted;
// the EgressIP's IP changed to an IPv6 one, from which the dual-stack
// sender pod then reaches the client over IPv6, and back;
// a chassis-kill failover (both nodes egress-assignable): the node the
// EgressIP's status names dies as a machine would, its kubelet killed
// by PID (testbed's KubeNode.KillKubelet: nothing restarts or reports
// its pods), its chassis killed (ClusterNode.Kill) and the kubelet-run
// ovnedge containers on it killed by PID (the node pod, and the leader
// pod there, which the hand-over above keeps from holding the Lease), while the sender pod on the
// other node streams UDP every 10 ms: the status must name the
// surviving node, the stream arrive from the egress IP again, and the
// leader's reachability check (its "egress node reachability" log line,
// read from the container log files) must have moved the IP while the
// dead kubelet's Node was still Ready (before the node-monitor grace
// period); the loss window, the time to the status moving, to the
// leader's line and, if the dead node's leader held it, to the Lease's
// takeover are measured; the node is then restored (the chassis
// restarted, the kubelet restarted, KubeNode.RestartKubelet, which
// restarts the killed containers) until every ovnedge pod is Ready and
// Reconciled again;
// the fast failover matrix of internal/e2e (egress.fastFailover turned on
// by `helm upgrade --set`: heartbeats every 100 ms): with the EgressIP on
// the second node, its uplink down, its uplink down while its
// ovn-controller is paused (a stale NAT the node pod must fence), its
// node pod's ovnedge killed (the kubelet restarts it), and the Lease
// holder's ovnedge killed (no release: the Lease is taken again once it
// expires), each while the sender streams UDP every 10 ms and the client
// asks ARP for the egress IP every 10 ms: the stream must come back from
// the egress IP, on the sender's node but after the kills (the leader's
// leaves it where it was, and no NB row or flow changes), and no two
// nodes answer ARP at once (loss windows measured);
// the L2 takeover (loadBalancer.l2Announce on, with the node pods'
// heartbeats): one node answers ARP for an ExternalIP with a backend on
// each node; that machine is killed as in Failover, the other node must
// answer instead (never both at once) and carry the client's next
// connection, and the node is restored;
// an EgressIP on a host interface (every node's second host network,
// testbed's AddHostNetwork, in its Node's k8s.ovn.org/host-cidrs): only
// the egress node's pod starts a pod watch, a kubelet-run pod on the
// other node (where the Lease's holder runs) reaches the host on that
// network from the egress IP, and the egress node's machine is killed as
// in Failover: the IP must move to the surviving node and the stream
// arrive from it again, with never two nodes answering ARP for it, and
// the node is restored;
// the leader dying with the egress node (every node egress-assignable, so
// the Lease's holder cannot keep off them: it is moved onto the node of
// the Upgrade step's EgressIP, and that machine killed): the IP moves
// once the surviving replica holds the Lease, the loss window bounded by
// the Lease's duration (measured), and the node is restored;
// and `helm uninstall --wait`, whose pre-delete hook Job has every
// instance remove what it wrote (NB load balancers, flows with ovnedge's
// cookies, the Lease) before the pods go.
//
// Where the harness still stands in for real components:
//
//   - ovnkube-master/ovnkube-node: StartCluster creates the OVN topology
//     (routers, switches, gateway routers, management ports, breth0) and
//     the test patches the annotations ovnkube-node would write
//     (e2e.NodeAnnotations) onto the Nodes the kubelets registered;
//   - the OVN central's Service: the NB and the SB listen on the test's
//     loopback; each node namespace reaches them at
//     testbed.KubeAPIAddress:<port> through forwarders of the test process
//     (Netns.ForwardTo), which are ovn.nbAddress and ovn.sbAddress;
//   - the ExternalIP Service's backend (used through the upgrade and
//     failover steps) is a testbed pod (a network namespace on a node's
//     br-int, serving TCP from the test process), so that Service has no
//     selector and the test writes its EndpointSlice; the LoadBalancer
//     Services' backends are kubelet-run pods and their EndpointSlices
//     kube-controller-manager's;
//   - the packets of the EgressIP's pod, a kubelet-run pod on OVN: the
//     test sends them from the pod's network namespace (attached with
//     KubeNode.PodNetns), not a program in the pod;
//   - the external router: the client reaches the ExternalIP through a
//     static route via a node (OVN-Kubernetes' documented setup); in the
//     BGP step FRR in the router namespace is a real router, started by
//     the test rather than by its own machine's init;
//   - kube-proxy runs on the nodes (the testbed needs it for the
//     `kubernetes` Service the pods' in-cluster clients use), which an
//     OVN-Kubernetes cluster would not: the traffic check therefore also
//     requires that ovnedge's breth0 flow for the ExternalIP counted the
//     packets (they go to OVN before the host's iptables see them).
//
// TestHelmOneNode runs the same steps but Failover on a one-node cluster
// (single-node OpenShift, a one-node kind): one node pod and one leader
// replica, the gateway router, every backend, the EgressIP's pod and its
// egress node on the one chassis; its upgrade replaces the only leader.
// The image is built once for both tests.
//
// It needs root, the OVS/OVN binaries, `make real-node-deps` (Kubernetes
// binaries, the pause image) and the pinned helm and crane of
// scripts/tool.sh; without them it is skipped, or fails with CI=true.
package helm
