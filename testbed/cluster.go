package testbed

import (
	"cmp"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The cluster's fixed address plan, dual-stack. Node i (1-based) gets the
// pod subnets 10.244.<i>.0/24 and fd00:10:244:<i>::/64 (router port .1/::1,
// management port .2/::2, pods from .3/::3), the join addresses
// 100.64.0.<i+2> and fd98::<i+2>, the external addresses 172.18.0.<i+1>
// and fd00:18::<i+1> (shared by the host's breth0 and GR_<node>, as
// OVN-Kubernetes' shared gateway mode does) and the underlay (geneve)
// address 192.168.100.<i>. The IPv6 plan is OVN-Kubernetes' kind defaults
// (pods fd00:10:244::/48, join fd98::/64).
const (
	ClusterSubnet6         = "fd00:10:244::/48"
	ClusterJoin6           = "fd98::/64"
	ClusterJoinRtr6        = "fd98::1"
	ClusterExtPrefix6      = 64
	ClusterGatewayIP6      = "fd00:18::1"
	ClusterClientIP6       = "fd00:18::100"
	ClusterRemoteNet6      = "fd00:250::/64"
	ClusterRemoteRouterIP6 = "fd00:250::1"
	ClusterRemoteClientIP6 = "fd00:250::10"

	ClusterSubnet    = "10.244.0.0/16"
	ClusterJoin      = "100.64.0.0/16"
	ClusterJoinRtr   = "100.64.0.1"
	ClusterExtPrefix = 24
	// ClusterGatewayIP is the router namespace's address on the external
	// segment: every node's and gateway router's default route.
	ClusterGatewayIP = "172.18.0.1"
	// ClusterClientIP is the external client's address on the segment.
	ClusterClientIP = "172.18.0.100"
	// ClusterRemoteNet is the network behind the router namespace, where
	// routed clients live; ClusterRemoteClientIP is one of them.
	ClusterRemoteNet      = "192.168.250.0/24"
	ClusterRemoteRouterIP = "192.168.250.1"
	ClusterRemoteClientIP = "192.168.250.10"
	// ClusterPhysnet is the localnet network name mapped to breth0.
	ClusterPhysnet = "physnet"
	// ClusterBridge is every node's external bridge.
	ClusterBridge = "breth0"
	// ClusterUplink is the bridge port of every node's "NIC".
	ClusterUplink = "eth1"
)

// ClusterOptions shape StartCluster; zero fields take the defaults noted.
type ClusterOptions struct {
	// Nodes is the number of nodes (default 3, at most 200).
	Nodes int
	// Names are the node names (default ovn-worker, ovn-worker2, ...,
	// as kind names OVN-Kubernetes' nodes).
	Names []string
}

// Cluster is a multi-node OVN-Kubernetes-shaped cluster in network
// namespaces, made by StartCluster: one OVN central (NB, SB, northd) and
// per node a real chassis (ovsdb-server, ovs-vswitchd on the userspace
// datapath, ovn-controller) with breth0 on a shared external L2 segment
// and geneve tunnels over an underlay segment; the logical topology
// ovnkube-master would create (ovn_cluster_router, join, node switches,
// GR_<node> bound to its chassis, ext_<node> with a localnet port to
// breth0, management ports ovn-k8s-mp0); an external client on the
// segment and a router namespace with a routed client behind it.
// ovnedge (or the test) programs everything else: no br-ex flow and no
// load balancer, policy or NAT beyond the topology is created here.
type Cluster struct {
	OVN *OVN
	// Nodes in order; Node(name) finds one.
	Nodes []*ClusterNode
	// Segment is the external L2 switch (a Linux bridge "br0" in its own
	// namespace, with no address of its own).
	Segment *Netns
	// Client is a host on the external segment (ClusterClientIP), Router
	// the segment's gateway (ClusterGatewayIP) which routes to
	// RemoteClient (ClusterRemoteClientIP) on ClusterRemoteNet.
	Client, Router, RemoteClient *Netns
	// Underlay is the geneve segment's switch namespace.
	Underlay *Netns
	// HostSegment and HostClient are the second host network's switch and
	// host (ClusterHostClientIP), nil until AddHostNetwork.
	HostSegment, HostClient *Netns

	t       T                 // the T the cluster was started with
	cur     atomic.Pointer[T] // the T failures go to now (Use)
	mu      sync.Mutex
	pods    map[string]*Pod
	subnets map[string]*kubeOVNSubnet // AddKubeOVNSubnets
	uplink  int
}

// T is the T the cluster's methods report failures to: the one given to
// Use, or the one StartCluster was given.
func (c *Cluster) T() T {
	if t := c.cur.Load(); t != nil {
		return *t
	}
	return c.t
}

// Use makes the cluster's methods report failures to t (a subtest of the
// test that owns a shared cluster; give it a T whose Cleanup registers
// with the owner, so what the subtest starts lives as long as the
// cluster) until the returned func is called. Subtests using it must not
// run in parallel.
func (c *Cluster) Use(t T) (restore func()) {
	prev := c.cur.Swap(&t)
	return func() { c.cur.Store(prev) }
}

// ClusterNode is one node of a Cluster: a chassis in its own network
// namespace NS, whose host stack holds breth0 (the node IP) and the
// management port ovn-k8s-mp0.
type ClusterNode struct {
	// Name is the node name, also the chassis name (system-id).
	Name string
	// Index is the node's 1-based number in the address plan.
	Index int
	// NS is the node's network namespace ("the host").
	NS *Netns
	// Dir holds the node's databases, sockets and logs; DB is its
	// Open_vSwitch database, RunDir ovs-vswitchd's OVS_RUNDIR.
	Dir, DB, RunDir string
	// IP and IP6 are the node IPs (on breth0 and on GR_<node>'s
	// external port), MAC breth0's MAC (also GR_<node>'s external port's).
	IP, IP6 netip.Addr
	MAC     string
	// Subnet and Subnet6 are the node's pod subnets; MgmtIP(6) the
	// management port's addresses in them; JoinIP(6) GR_<node>'s
	// addresses on the join switch; UnderlayIP the tunnel endpoint.
	Subnet, Subnet6            netip.Prefix
	MgmtIP, JoinIP, UnderlayIP netip.Addr
	MgmtIP6, JoinIP6           netip.Addr
	// Patch is breth0's patch port to br-int (made by ovn-controller).
	Patch string
	// HostIP and HostMAC are the node's address and MAC on the second
	// host network (ClusterHostLink), unset until AddHostNetwork.
	HostIP  netip.Addr
	HostMAC string

	c                    *Cluster
	ovsdb, vswitchd, ctl *daemon
	nextPod              int
}

// Pod is a pod of a Cluster: a network namespace whose eth0 is a port of
// its node's br-int bound to the logical switch port <namespace>_<name>
// on the node switch, or <name>.<namespace> on a Kube-OVN subnet.
type Pod struct {
	*Netns
	Namespace, Name, Node string
	// IP6 is not valid on a Kube-OVN subnet or the underlay (IPv4 only).
	IP, IP6 netip.Addr
	MAC     string
	// Switch is the pod's logical switch (the node's, or a Kube-OVN
	// subnet's), Gateway eth0's default gateway; both unset for an
	// underlay pod.
	Switch  string
	Gateway netip.Addr
	port    string // the veth end on br-int
	lsp     string // the logical switch port, when not <namespace>_<name>
}

// LSP is the pod's logical switch port name: <namespace>_<name>, as
// OVN-Kubernetes names it, or <name>.<namespace> (Kube-OVN's) for a pod
// on a Kube-OVN subnet or the underlay.
func (p *Pod) LSP() string {
	if p.lsp != "" {
		return p.lsp
	}
	return p.Namespace + "_" + p.Name
}

// clusterBins are the binaries StartCluster needs.
var clusterBins = append(append([]string{}, ovsBins...), "ovn-controller", "ovn-nbctl", "ovn-sbctl", "ethtool", "ping")

// StartCluster builds the cluster of o (see Cluster) and returns once
// every chassis is registered, the topology is in the NB, every chassis
// has installed it (ovn-nbctl --wait=hv) and the tunnels carried a first
// packet. Everything is removed when the test ends; daemons are stopped
// by the PID this package started.
func StartCluster(t T, o ClusterOptions) *Cluster {
	t.Helper()
	Require(t, clusterBins...)
	begin := time.Now()
	n := cmp.Or(o.Nodes, len(o.Names), 3)
	if n < 1 || n > 200 {
		t.Fatalf("testbed: StartCluster: %d nodes, want 1-200", n)
	}
	c := &Cluster{OVN: StartOVN(t), t: t, pods: map[string]*Pod{}, subnets: map[string]*kubeOVNSubnet{}}
	c.Segment = NewNetns(t, "ovcs")
	c.Segment.Run(t, "ip", "link", "add", "br0", "type", "bridge")
	c.Segment.Run(t, "ip", "link", "set", "br0", "up")
	c.Underlay = NewNetns(t, "ovcu")
	c.Underlay.Run(t, "ip", "link", "add", "br0", "type", "bridge")
	c.Underlay.Run(t, "ip", "link", "set", "br0", "up")

	c.Router = newHost(t, "ovcr")
	c.segmentHost(c.Router, "eth0", ClusterGatewayIP, ClusterGatewayIP6)
	c.Router.Run(t, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	c.RemoteClient = newHost(t, "ovcc")
	Link(t, c.Router, "eth1", []string{ClusterRemoteRouterIP + "/24", ClusterRemoteRouterIP6 + "/64"},
		c.RemoteClient, "eth0", []string{ClusterRemoteClientIP + "/24", ClusterRemoteClientIP6 + "/64"})
	c.RemoteClient.Run(t, "ip", "route", "add", "default", "via", ClusterRemoteRouterIP)
	c.RemoteClient.Run(t, "ip", "-6", "route", "add", "default", "via", ClusterRemoteRouterIP6)
	for _, ns := range []*Netns{c.Router, c.RemoteClient} {
		ns.Run(t, "ethtool", "-K", "eth0", "tx", "off")
	}
	c.Client = newHost(t, "ovcx")
	c.segmentHost(c.Client, "eth0", ClusterClientIP, ClusterClientIP6)
	c.Client.Run(t, "ip", "route", "add", "default", "via", ClusterGatewayIP)
	c.Client.Run(t, "ip", "-6", "route", "add", "default", "via", ClusterGatewayIP6)

	for i := 1; i <= n; i++ {
		name := "ovn-worker"
		if i > 1 {
			name += strconv.Itoa(i)
		}
		if i <= len(o.Names) {
			name = o.Names[i-1]
		}
		c.Nodes = append(c.Nodes, c.startNode(i, name))
	}
	c.topology()
	for _, nd := range c.Nodes {
		nd.waitPatch()
		nd.plugManagementPort()
	}
	c.WaitHV(30 * time.Second)
	c.warmTunnels()
	t.Logf("testbed: cluster of %d nodes up in %v (NB %s)", n, time.Since(begin).Round(time.Millisecond), c.OVN.NB)
	return c
}

// newHost is a namespace for a cluster host: IPv6 addresses are usable
// at once (no duplicate address detection).
func newHost(t T, prefix string) *Netns {
	t.Helper()
	n := NewNetns(t, prefix)
	n.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	return n
}

// segmentHost plugs ns into the external segment with addr and addr6 on
// ifname.
func (c *Cluster) segmentHost(ns *Netns, ifname, addr, addr6 string) {
	c.T().Helper()
	peer := c.nextUplink()
	mustRun(c.T(), nil, "ip", "-n", ns.Name, "link", "add", ifname, "type", "veth", "peer", "name", peer, "netns", c.Segment.Name)
	c.Segment.Run(c.T(), "ip", "link", "set", peer, "master", "br0", "up")
	c.Segment.Run(c.T(), "ethtool", "-K", peer, "tx", "off")
	ns.Run(c.T(), "ip", "addr", "add", addr+"/"+strconv.Itoa(ClusterExtPrefix), "dev", ifname)
	ns.Run(c.T(), "ip", "addr", "add", addr6+"/"+strconv.Itoa(ClusterExtPrefix6), "dev", ifname, "nodad")
	ns.Run(c.T(), "ip", "link", "set", ifname, "up")
	ns.Run(c.T(), "ethtool", "-K", ifname, "tx", "off")
}

func (c *Cluster) nextUplink() string {
	c.uplink++
	return "p" + strconv.Itoa(c.uplink)
}

// Node returns the node called name, failing the test if there is none.
func (c *Cluster) Node(name string) *ClusterNode {
	c.T().Helper()
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	c.T().Fatalf("testbed: no cluster node %q", name)
	return nil
}

// startNode starts node i's chassis.
func (c *Cluster) startNode(i int, name string) *ClusterNode {
	t := c.T()
	t.Helper()
	dir := newDir(t)
	nd := &ClusterNode{Name: name, Index: i, c: c, Dir: dir, RunDir: dir,
		DB:         "unix:" + filepath.Join(dir, "db.sock"),
		NS:         newHost(t, fmt.Sprintf("ovc%d-", i)),
		IP:         netip.AddrFrom4([4]byte{172, 18, 0, byte(i + 1)}),
		MAC:        fmt.Sprintf("02:00:ac:12:00:%02x", i+1),
		Subnet:     netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24),
		MgmtIP:     netip.AddrFrom4([4]byte{10, 244, byte(i), 2}),
		JoinIP:     netip.AddrFrom4([4]byte{100, 64, 0, byte(i + 2)}),
		UnderlayIP: netip.AddrFrom4([4]byte{192, 168, 100, byte(i)}),
		IP6:        netip.MustParseAddr(fmt.Sprintf("fd00:18::%x", i+1)),
		Subnet6:    netip.MustParsePrefix(fmt.Sprintf("fd00:10:244:%x::/64", i)),
		MgmtIP6:    netip.MustParseAddr(fmt.Sprintf("fd00:10:244:%x::2", i)),
		JoinIP6:    netip.MustParseAddr(fmt.Sprintf("fd98::%x", i+2)),
		Patch:      fmt.Sprintf("patch-%s_%s-to-br-int", ClusterBridge, name),
		nextPod:    3,
	}
	nd.ovsdb = startOVSDB(t, dir, "ovsdb-server", vswitchSchema, filepath.Join(dir, "db.sock"))
	nd.Vsctl("--no-wait", "init")
	// No userspace TSO: it breaks TCP over geneve in OVS 3.1; the
	// non-OVS veth ends have tx offload off instead.
	nd.startVswitchd()
	t.Cleanup(func() { stopVswitchd(t, nd.vswitchd, nd.Dir) })

	ns := nd.NS.Name
	// Underlay: the tunnel endpoint sits on br-phy's LOCAL port.
	ul := c.nextUplink()
	mustRun(t, nil, "ip", "-n", ns, "link", "add", "ul", "type", "veth", "peer", "name", ul, "netns", c.Underlay.Name)
	c.Underlay.Run(t, "ip", "link", "set", ul, "master", "br0", "up")
	mustRun(t, nil, "ip", "-n", ns, "link", "set", "ul", "arp", "off", "up")
	// External segment: breth0's uplink.
	up := c.nextUplink()
	mustRun(t, nil, "ip", "-n", ns, "link", "add", ClusterUplink, "type", "veth", "peer", "name", up, "netns", c.Segment.Name)
	c.Segment.Run(t, "ip", "link", "set", up, "master", "br0", "up")
	c.Segment.Run(t, "ethtool", "-K", up, "tx", "off")
	mustRun(t, nil, "ip", "-n", ns, "link", "set", ClusterUplink, "arp", "off", "up")

	nd.Vsctl("add-br", "br-phy", "--", "set", "Bridge", "br-phy", "datapath_type=netdev",
		"--", "add-port", "br-phy", "ul",
		"--", "add-br", ClusterBridge, "--", "set", "Bridge", ClusterBridge, "datapath_type=netdev",
		"other_config:hwaddr="+nd.MAC,
		"--", "add-port", ClusterBridge, ClusterUplink, "--", "set", "Interface", ClusterUplink, "ofport_request=1")
	nd.configureHost()
	go nd.keepTunnelRoute(nd.vswitchd)

	nd.Vsctl("set", "Open_vSwitch", ".",
		"external_ids:system-id="+name,
		"external_ids:hostname="+name,
		"external_ids:ovn-remote="+c.OVN.SB,
		"external_ids:ovn-encap-type=geneve",
		"external_ids:ovn-encap-ip="+nd.UnderlayIP.String(),
		"external_ids:ovn-bridge-datapath-type=netdev",
		"external_ids:ovn-bridge-mappings="+ClusterPhysnet+":"+ClusterBridge)
	nd.startController()
	return nd
}

// configureHost puts the node's addresses on the bridges' LOCAL ports
// (taps that ovs-vswitchd makes, and makes anew when it restarts) and its
// default route.
func (n *ClusterNode) configureHost() {
	t := n.c.T()
	t.Helper()
	n.NS.Run(t, "ip", "addr", "replace", netip.PrefixFrom(n.UnderlayIP, 24).String(), "dev", "br-phy")
	n.NS.Run(t, "ip", "link", "set", "br-phy", "up")
	// The userspace datapath routes tunnel packets itself, by packet mark
	// too: OVN-Kubernetes' reroute to a host-network egress node marks
	// them 1009 (the kernel datapath would use the main table, as here).
	// ovs-vswitchd learns br-phy's new address from a netlink
	// notification: until then it refuses the route ("Error while
	// inserting route"), for a while on a loaded machine.
	if err := n.addTunnelRoute(); err != nil {
		t.Fatalf("testbed: node %s: %v%s", n.Name, err, tails(logPaths(n.Dir, "ovs-vswitchd")))
	}
	n.NS.Run(t, "ip", "addr", "replace", netip.PrefixFrom(n.IP, ClusterExtPrefix).String(), "dev", ClusterBridge)
	n.NS.Run(t, "ip", "link", "set", ClusterBridge, "up")
	n.NS.Run(t, "ip", "route", "replace", "default", "via", ClusterGatewayIP)
	n.NS.Run(t, "ip", "addr", "replace", netip.PrefixFrom(n.IP6, ClusterExtPrefix6).String(), "dev", ClusterBridge, "nodad")
	n.NS.Run(t, "ip", "-6", "route", "replace", "default", "via", ClusterGatewayIP6)
}

// addTunnelRoute adds the userspace datapath's route for tunnel packets
// marked 1009 (see configureHost), retrying for up to 10 s while
// ovs-vswitchd has not yet learnt br-phy's address.
func (n *ClusterNode) addTunnelRoute() error {
	argv := []string{"ovs-appctl", "-t", filepath.Join(n.Dir, "ovs-vswitchd.ctl"), "ovs/route/add",
		netip.PrefixFrom(n.UnderlayIP, 24).Masked().String(), "br-phy", "pkt_mark=1009"}
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err = run(argv...); err == nil {
			return nil
		}
	}
	return fmt.Errorf("tunnel route: %w", err)
}

// keepTunnelRoute puts the tunnel route back each time the monitor d
// restarts a crashed ovs-vswitchd (the route lives in the daemon's memory
// only; a node's own network scripts would do the same), until d exits.
// Bridges, taps and their addresses outlive the crash (the taps are
// persistent).
func (n *ClusterNode) keepTunnelRoute(d *daemon) {
	pidfile := filepath.Join(n.Dir, "ovs-vswitchd.pid")
	last, _ := readPidfile(pidfile)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-d.done:
			return
		case <-tick.C:
		}
		pid, err := readPidfile(pidfile)
		if err != nil || pid == last || !d.alive() {
			continue
		}
		if err := n.addTunnelRoute(); err != nil {
			fmt.Fprintf(os.Stderr, "testbed: node %s: ovs-vswitchd restarted by its monitor: %v\n", n.Name, err)
			continue
		}
		last = pid
	}
}

// Vsctl runs ovs-vsctl against the node's database.
func (n *ClusterNode) Vsctl(args ...string) string {
	n.c.T().Helper()
	argv := append([]string{"ovs-vsctl", "--db=" + n.DB, "--timeout=30"}, args...)
	return mustRun(n.c.T(), logPaths(n.Dir, "ovsdb-server", "ovs-vswitchd"), argv...)
}

// Ofctl runs ovs-ofctl -O OpenFlow13 args... against the bridge named
// first in args ("breth0" becomes its management socket).
func (n *ClusterNode) Ofctl(cmd, bridge string, args ...string) string {
	n.c.T().Helper()
	argv := append([]string{"ovs-ofctl", "-O", "OpenFlow13", cmd, n.Mgmt(bridge)}, args...)
	return mustRun(n.c.T(), logPaths(n.Dir, "ovs-vswitchd"), argv...)
}

// Mgmt is a bridge's OpenFlow socket on this node.
func (n *ClusterNode) Mgmt(bridge string) string {
	return "unix:" + filepath.Join(n.RunDir, bridge+".mgmt")
}

func (n *ClusterNode) startVswitchd() {
	d, err := startVswitchd(n.c.T(), n.Dir, n.RunDir, n.NS.Name, n.DB)
	if err != nil {
		n.c.T().Fatalf("testbed: node %s: start ovs-vswitchd: %v", n.Name, err)
	}
	n.vswitchd = d
}

func (n *ClusterNode) startController() {
	file := filepath.Join(n.Dir, "ovn-controller")
	n.ctl = startDaemon(n.c.T(), "ovn-controller", file+".log",
		[]string{"OVS_RUNDIR=" + n.RunDir, "OVN_RUNDIR=" + n.Dir},
		"ip", "netns", "exec", n.NS.Name, "ovn-controller", n.DB,
		"--pidfile="+file+".pid", "--log-file="+file+".log", "--no-chdir", "-vconsole:off")
	stopOnCleanup(n.c.T(), n.ctl)
	err := waitFor(readyTimeout, func() error {
		if out, err := run("ovn-sbctl", "--db="+n.c.OVN.SB, "--bare", "--columns=name", "find", "Chassis", "name="+n.Name); err != nil || out != n.Name {
			return n.ctl.check(fmt.Errorf("chassis %s not in SB (%q, %v)", n.Name, out, err))
		}
		if _, err := run("ovs-vsctl", "--db="+n.DB, "br-exists", "br-int"); err != nil {
			return n.ctl.check(fmt.Errorf("no br-int yet: %w", err))
		}
		return nil
	})
	if err != nil {
		n.c.T().Fatalf("testbed: chassis %s not registered: %v%s", n.Name, err, tails(logPaths(n.Dir, "ovn-controller")))
	}
}

// waitPatch waits until ovn-controller has made breth0's patch port to
// br-int (it does once ext_<node>'s localnet port exists).
func (n *ClusterNode) waitPatch() {
	n.c.T().Helper()
	err := waitFor(readyTimeout, func() error {
		if _, err := run("ovs-vsctl", "--db="+n.DB, "get", "Interface", n.Patch, "ofport"); err != nil {
			return n.ctl.check(err)
		}
		return nil
	})
	if err != nil {
		n.c.T().Fatalf("testbed: node %s: no patch port %s: %v", n.Name, n.Patch, err)
	}
}

// plugManagementPort makes ovn-k8s-mp0, the host's port on its node
// switch (logical port k8s-<node>), with routes to the cluster and join
// subnets through it, as ovnkube-node does.
func (n *ClusterNode) plugManagementPort() {
	t := n.c.T()
	t.Helper()
	n.Vsctl("add-port", "br-int", "ovn-k8s-mp0", "--", "set", "Interface", "ovn-k8s-mp0", "type=internal",
		"mac=\""+ovnMAC(n.MgmtIP)+"\"", "external_ids:iface-id=k8s-"+n.Name)
	err := waitFor(readyTimeout, func() error {
		_, err := run("ip", "-n", n.NS.Name, "link", "show", "ovn-k8s-mp0")
		return err
	})
	if err != nil {
		t.Fatalf("testbed: node %s: ovn-k8s-mp0: %v", n.Name, err)
	}
	n.configureManagementPort()
}

// configureManagementPort sets ovn-k8s-mp0's MAC, address and routes.
func (n *ClusterNode) configureManagementPort() {
	t := n.c.T()
	t.Helper()
	n.NS.Run(t, "ip", "link", "set", "ovn-k8s-mp0", "address", ovnMAC(n.MgmtIP), "mtu", "1400")
	n.NS.Run(t, "ip", "addr", "replace", netip.PrefixFrom(n.MgmtIP, n.Subnet.Bits()).String(), "dev", "ovn-k8s-mp0")
	n.NS.Run(t, "ip", "link", "set", "ovn-k8s-mp0", "up")
	rtr := n.Subnet.Addr().Next().String()
	n.NS.Run(t, "ip", "route", "replace", ClusterSubnet, "via", rtr, "dev", "ovn-k8s-mp0")
	n.NS.Run(t, "ip", "route", "replace", ClusterJoin, "via", rtr, "dev", "ovn-k8s-mp0")
	n.NS.Run(t, "ip", "addr", "replace", netip.PrefixFrom(n.MgmtIP6, n.Subnet6.Bits()).String(), "dev", "ovn-k8s-mp0", "nodad")
	rtr6 := n.Subnet6.Addr().Next().String()
	n.NS.Run(t, "ip", "-6", "route", "replace", ClusterSubnet6, "via", rtr6, "dev", "ovn-k8s-mp0")
	n.NS.Run(t, "ip", "-6", "route", "replace", ClusterJoin6, "via", rtr6, "dev", "ovn-k8s-mp0")
}

// ovnMAC is the MAC OVN-Kubernetes derives from an IPv4 address.
func ovnMAC(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}

// topology writes the logical topology in one ovn-nbctl transaction, as
// ovnkube-master's gateway code (go-controller/pkg/ovn/gateway.go) makes
// it for the default network: gateway router options, the /32 route to
// each gateway router's join IP on ovn_cluster_router, the node IP SNAT
// of the cluster and join subnets, GARPs for NAT addresses but not for
// load balancer VIPs.
func (c *Cluster) topology() {
	c.T().Helper()
	args := []string{
		"lr-add", "ovn_cluster_router",
		"--", "lrp-add", "ovn_cluster_router", "rtoj-ovn_cluster_router", ovnMAC(netip.MustParseAddr(ClusterJoinRtr)), ClusterJoinRtr + "/16", ClusterJoinRtr6 + "/64",
		"--", "ls-add", "join",
		"--", "lsp-add", "join", "jtor-ovn_cluster_router", "--", "lsp-set-type", "jtor-ovn_cluster_router", "router",
		"--", "lsp-set-addresses", "jtor-ovn_cluster_router", "router",
		"--", "lsp-set-options", "jtor-ovn_cluster_router", "router-port=rtoj-ovn_cluster_router",
	}
	for _, n := range c.Nodes {
		gr, ext := "GR_"+n.Name, "ext_"+n.Name
		rtr, rtr6 := n.Subnet.Addr().Next(), n.Subnet6.Addr().Next()
		args = append(args,
			"--", "ls-add", n.Name, "--", "set", "Logical_Switch", n.Name, "other_config:subnet="+n.Subnet.String(),
			"other_config:ipv6_prefix="+n.Subnet6.Addr().String(),
			"--", "lrp-add", "ovn_cluster_router", "rtos-"+n.Name, ovnMAC(rtr), netip.PrefixFrom(rtr, n.Subnet.Bits()).String(),
			netip.PrefixFrom(rtr6, n.Subnet6.Bits()).String(),
			"--", "lsp-add", n.Name, "stor-"+n.Name, "--", "lsp-set-type", "stor-"+n.Name, "router",
			"--", "lsp-set-addresses", "stor-"+n.Name, "router",
			"--", "lsp-set-options", "stor-"+n.Name, "router-port=rtos-"+n.Name,
			"--", "lsp-add", n.Name, "k8s-"+n.Name,
			"--", "lsp-set-addresses", "k8s-"+n.Name, ovnMAC(n.MgmtIP)+" "+n.MgmtIP.String()+" "+n.MgmtIP6.String(),
			"--", "lr-add", gr,
			"--", "set", "Logical_Router", gr, "options:chassis="+n.Name, "options:lb_force_snat_ip=router_ip",
			"options:always_learn_from_arp_request=false", "options:dynamic_neigh_routers=false",
			"options:snat-ct-zone=0", "options:mac_binding_age_threshold=300",
			"--", "lrp-add", gr, "rtoj-"+gr, ovnMAC(n.JoinIP), n.JoinIP.String()+"/16", n.JoinIP6.String()+"/64",
			"--", "lsp-add", "join", "jtor-"+gr, "--", "lsp-set-type", "jtor-"+gr, "router",
			"--", "lsp-set-addresses", "jtor-"+gr, "router", "--", "lsp-set-options", "jtor-"+gr, "router-port=rtoj-"+gr,
			"--", "lrp-add", gr, "rtoe-"+gr, n.MAC, netip.PrefixFrom(n.IP, ClusterExtPrefix).String(),
			netip.PrefixFrom(n.IP6, ClusterExtPrefix6).String(),
			"--", "ls-add", ext,
			"--", "lsp-add", ext, "etor-"+gr, "--", "lsp-set-type", "etor-"+gr, "router",
			"--", "lsp-set-addresses", "etor-"+gr, "router",
			"--", "lsp-set-options", "etor-"+gr, "router-port=rtoe-"+gr, "nat-addresses=router", "exclude-lb-vips-from-garp=true",
			"--", "lsp-add", ext, ClusterBridge+"_"+n.Name, "--", "lsp-set-type", ClusterBridge+"_"+n.Name, "localnet",
			"--", "lsp-set-addresses", ClusterBridge+"_"+n.Name, "unknown",
			"--", "lsp-set-options", ClusterBridge+"_"+n.Name, "network_name="+ClusterPhysnet,
		)
		for _, f := range []struct {
			cluster, joinRtr, anyDst, gateway string
			subnet                            netip.Prefix
			join, ip                          netip.Addr
		}{
			{ClusterSubnet, ClusterJoinRtr, "0.0.0.0/0", ClusterGatewayIP, n.Subnet, n.JoinIP, n.IP},
			{ClusterSubnet6, ClusterJoinRtr6, "::/0", ClusterGatewayIP6, n.Subnet6, n.JoinIP6, n.IP6},
		} {
			args = append(args,
				"--", "lr-route-add", gr, f.cluster, f.joinRtr,
				"--", "lr-route-add", gr, f.anyDst, f.gateway, "rtoe-"+gr,
				"--", "--policy=src-ip", "lr-route-add", "ovn_cluster_router", f.subnet.String(), f.join.String(),
				// The GR's join IP by a host route: replies to a load
				// balancer's force-SNATed source must reach that GR, not
				// the pod's own (the src-ip route would win over the
				// connected join subnet).
				"--", "lr-route-add", "ovn_cluster_router", f.join.String(), f.join.String(),
				"--", "lr-nat-add", gr, "snat", f.ip.String(), f.cluster,
				"--", "lr-nat-add", gr, "snat", f.ip.String(), f.join.String(),
			)
		}
	}
	c.nbctl(args...)
}

// nbctl runs ovn-nbctl against the cluster's NB, failing c.T().
func (c *Cluster) nbctl(args ...string) string {
	t := c.T()
	t.Helper()
	return mustRun(t, logPaths(c.OVN.Dir, "nb", "northd"), append([]string{"ovn-nbctl", "--db=" + c.OVN.NB}, args...)...)
}

// WaitHV waits, up to timeout, until every chassis has installed the
// flows of the current NB contents.
func (c *Cluster) WaitHV(timeout time.Duration) {
	c.T().Helper()
	c.nbctl("--wait=hv", "--timeout="+strconv.Itoa(max(1, int(timeout.Seconds()))), "sync")
}

// warmTunnels pings every node's tunnel endpoint from every other node:
// the first packet over a new geneve tunnel is dropped (neighbor miss).
func (c *Cluster) warmTunnels() {
	for _, a := range c.Nodes {
		for _, b := range c.Nodes {
			if a != b {
				_, _ = a.NS.RunErr("ping", "-c1", "-W1", b.UnderlayIP.String())
			}
		}
	}
}

// ClusterPodOptions shape Cluster.AddPod.
type ClusterPodOptions struct {
	// IP is the pod's IPv4 address, the next free one of the node's
	// subnet when not valid; its IPv6 address has the same host part in
	// the node's IPv6 subnet.
	IP netip.Addr
	// Subnet puts the pod on a Kube-OVN subnet (AddKubeOVNSubnets)
	// instead of its node's switch: the subnet's next free address (IP
	// is ignored), IPv4 only, the logical switch port <name>.<namespace>
	// with a Kube-OVN MAC, the default route via the subnet's gateway.
	Subnet string
}

// AddPod creates pod namespace/name on node: its logical switch port
// <namespace>_<name> on the node switch (addresses MAC + IP as
// OVN-Kubernetes derives them), a network namespace whose eth0 is a port
// of the node's br-int bound to it, and its default route; or, with
// o.Subnet, the same on a Kube-OVN subnet. It returns once the chassis
// has claimed the port and reports it up.
func (c *Cluster) AddPod(node, namespace, name string, o ClusterPodOptions) *Pod {
	t := c.T()
	t.Helper()
	n := c.Node(node)
	c.mu.Lock()
	_, dup := c.pods[namespace+"/"+name]
	c.mu.Unlock()
	if dup {
		t.Fatalf("testbed: pod %s/%s exists", namespace, name)
	}
	p := &Pod{Namespace: namespace, Name: name, Node: node, Netns: newHost(t, "ovcp"), port: "p" + randomHex(t)}
	var prefix int
	if o.Subnet != "" {
		s, ip, err := c.kubeOVNAddress(o.Subnet)
		if err != nil {
			t.Fatalf("testbed: pod %s/%s: %v", namespace, name, err)
		}
		p.IP, p.MAC, p.Switch, p.Gateway, prefix = ip, kubeOVNMAC(t), s.Name, s.Gateway, s.CIDR.Bits()
		p.lsp = name + "." + namespace
	} else {
		ip := o.IP
		if !ip.IsValid() {
			c.mu.Lock()
			b := n.Subnet.Addr().As4()
			b[3] = byte(n.nextPod)
			n.nextPod++
			c.mu.Unlock()
			ip = netip.AddrFrom4(b)
		}
		host := n.Subnet6.Addr().As16()
		host[15] = ip.As4()[3]
		p.IP, p.IP6, p.MAC, p.Switch, p.Gateway, prefix = ip, netip.AddrFrom16(host), ovnMAC(ip), node, n.Subnet.Addr().Next(), n.Subnet.Bits()
	}
	addrs := p.MAC + " " + p.IP.String()
	ifAddrs, gws := []string{netip.PrefixFrom(p.IP, prefix).String()}, []string{p.Gateway.String()}
	if p.IP6.IsValid() {
		addrs += " " + p.IP6.String()
		ifAddrs = append(ifAddrs, netip.PrefixFrom(p.IP6, n.Subnet6.Bits()).String())
		gws = append(gws, n.Subnet6.Addr().Next().String())
	}
	c.nbctl("lsp-add", p.Switch, p.LSP(), "--", "lsp-set-addresses", p.LSP(), addrs)
	c.plug(n, p, ifAddrs, gws)
	return p
}

// Pod returns pod namespace/name, or nil.
func (c *Cluster) Pod(namespace, name string) *Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[namespace+"/"+name]
}

// DeletePod removes the pod's port from br-int and NB. Its namespace
// goes at cleanup.
func (c *Cluster) DeletePod(namespace, name string) {
	t := c.T()
	t.Helper()
	c.mu.Lock()
	p := c.pods[namespace+"/"+name]
	delete(c.pods, namespace+"/"+name)
	c.mu.Unlock()
	if p == nil {
		return
	}
	n := c.Node(p.Node)
	if n.vswitchd.alive() {
		n.Vsctl("--if-exists", "del-port", "br-int", p.port)
	}
	c.nbctl("--if-exists", "lsp-del", p.LSP())
}

// Alive reports whether the node's chassis processes all run.
func (n *ClusterNode) Alive() bool {
	return n.ovsdb.alive() && n.vswitchd.alive() && n.ctl.alive()
}

// CrashVswitchd aborts the node's ovs-vswitchd (SIGABRT, as a failed
// assertion does) and returns once its monitor has started a new one and
// the tunnel route is back: bridges, ports and addresses stay, OpenFlow
// tables and the datapath's conntrack are gone until ovn-controller and
// ovnedge program them again.
func (n *ClusterNode) CrashVswitchd() {
	t := n.c.T()
	t.Helper()
	pidfile := filepath.Join(n.Dir, "ovs-vswitchd.pid")
	pid, err := readPidfile(pidfile)
	if err != nil || parentOf(pid) != n.vswitchd.cmd.Process.Pid {
		t.Fatalf("testbed: node %s: no ovs-vswitchd of its monitor to crash (pid %d, %v)", n.Name, pid, err)
	}
	if err := syscall.Kill(pid, syscall.SIGABRT); err != nil {
		t.Fatalf("testbed: node %s: %v", n.Name, err)
	}
	err = waitFor(readyTimeout, func() error {
		out, err := run("ovs-appctl", "-t", filepath.Join(n.Dir, "ovs-vswitchd.ctl"), "ovs/route/show")
		if now, _ := readPidfile(pidfile); err == nil && (now == pid || !strings.Contains(out, "MARK 1009")) {
			err = fmt.Errorf("ovs-vswitchd %d not replaced with its tunnel route yet", pid)
		}
		return n.vswitchd.check(err)
	})
	if err != nil {
		t.Fatalf("testbed: node %s: %v", n.Name, err)
	}
}

// Kill stops the node's chassis as a crash would: ovn-controller,
// ovs-vswitchd and ovsdb-server get SIGKILL. Its namespace, links and
// addresses stay (a dead machine's cable stays plugged in).
//
// The second host interface (AddHostNetwork), a plain kernel link that
// would outlive the chassis processes here, goes down: a dead machine's
// kernel answers no ARP.
func (n *ClusterNode) Kill() {
	n.c.T().Helper()
	kills := []func() error{n.ctl.kill, func() error { return killVswitchd(n.vswitchd, n.Dir) }, n.ovsdb.kill}
	for _, kill := range kills {
		if err := kill(); err != nil {
			n.c.T().Fatalf("testbed: node %s: %v", n.Name, err)
		}
	}
	if n.HostMAC != "" {
		n.SetHostLink(false)
	}
}

// Restart starts a killed node's chassis again, as a rebooted machine
// would: ovsdb-server on its database, ovs-vswitchd (which makes the
// bridges' LOCAL ports and the management port anew: their addresses and
// routes are put back), ovn-controller. It returns once the chassis is
// registered, has installed the NB's flows and its tunnels carried a
// first packet.
func (n *ClusterNode) Restart() {
	t := n.c.T()
	t.Helper()
	if n.Alive() {
		t.Fatalf("testbed: node %s: Restart of a running node", n.Name)
	}
	n.ovsdb = serveOVSDB(t, n.Dir, "ovsdb-server", filepath.Join(n.Dir, "db.sock"))
	n.startVswitchd()
	err := waitFor(readyTimeout, func() error {
		_, err := run("ip", "-n", n.NS.Name, "link", "show", ClusterBridge)
		if err == nil {
			_, err = run("ip", "-n", n.NS.Name, "link", "show", "ovn-k8s-mp0")
		}
		return n.vswitchd.check(err)
	})
	if err != nil {
		t.Fatalf("testbed: node %s: restart: %v", n.Name, err)
	}
	n.configureHost()
	go n.keepTunnelRoute(n.vswitchd)
	n.configureManagementPort()
	n.configureForwarding()
	if n.HostMAC != "" {
		// Rebooted: the second host interface holds its own address only.
		n.NS.Run(t, "ip", "addr", "flush", "dev", ClusterHostLink)
		n.NS.Run(t, "ip", "addr", "add", netip.PrefixFrom(n.HostIP, 24).String(), "dev", ClusterHostLink)
		n.SetHostLink(true)
	}
	n.startController()
	n.c.WaitHV(30 * time.Second)
	n.c.warmTunnels()
}

// SetUplink takes the node's breth0 uplink (its "NIC") down or up.
func (n *ClusterNode) SetUplink(up bool) {
	n.c.T().Helper()
	n.setLink(ClusterUplink, up)
}

// PauseController stops (SIGSTOP) or resumes (SIGCONT) the node's
// ovn-controller: a paused chassis keeps its last flows, as one busy
// recomputing or cut off from the Southbound database does. A paused
// controller is resumed at cleanup.
func (n *ClusterNode) PauseController(paused bool) {
	t := n.c.T()
	t.Helper()
	sig := syscall.SIGCONT
	if paused {
		sig = syscall.SIGSTOP
		t.Cleanup(func() { _ = n.ctl.cmd.Process.Signal(syscall.SIGCONT) })
	}
	if err := n.ctl.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("testbed: node %s: ovn-controller: %v", n.Name, err)
	}
}

// setLink takes the node's link name down or up.
func (n *ClusterNode) setLink(name string, up bool) {
	n.c.T().Helper()
	state := "down"
	if up {
		state = "up"
	}
	n.NS.Run(n.c.T(), "ip", "link", "set", name, state)
}

// String names the node for messages.
func (n *ClusterNode) String() string {
	return fmt.Sprintf("%s (%s, netns %s)", n.Name, n.IP, n.NS.Name)
}

// The second host network (the secondary host interface case of
// OVN-Kubernetes' EgressIP feature page): a segment of
// its own on which every node has a plain kernel link, not part of OVN,
// and a host to send to. Node i gets ClusterHostLink with 172.19.0.<i+1>
// and MAC 02:00:ac:13:00:<i+1>.
const (
	ClusterHostNet      = "172.19.0.0/24"
	ClusterHostClientIP = "172.19.0.100"
	ClusterHostLink     = "eth2"
)

// AddHostNetwork gives every node a second host interface,
// ClusterHostLink, on a segment of its own with HostClient, once (later
// calls do nothing). The nodes forward from their management port to it
// (as a Kubernetes node forwards), so pods' traffic steered there by ip
// rules leaves by it. A killed node's link goes down (the machine's NIC
// stops answering with it) and a restarted one comes back without the
// addresses the dead one had added (a reboot).
func (c *Cluster) AddHostNetwork() {
	t := c.T()
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.HostClient != nil {
		return
	}
	c.HostSegment = NewNetns(t, "ovch")
	c.HostSegment.Run(t, "ip", "link", "add", "br0", "type", "bridge")
	c.HostSegment.Run(t, "ip", "link", "set", "br0", "up")
	plug := func(ns *Netns, ifname, mac string, addr netip.Addr) {
		peer := "h" + c.nextUplink()
		mustRun(t, nil, "ip", "-n", ns.Name, "link", "add", ifname, "address", mac, "type", "veth", "peer", "name", peer, "netns", c.HostSegment.Name)
		c.HostSegment.Run(t, "ip", "link", "set", peer, "master", "br0", "up")
		ns.Run(t, "ip", "addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", ifname)
		ns.Run(t, "ip", "link", "set", ifname, "up")
	}
	c.HostClient = newHost(t, "ovch")
	plug(c.HostClient, "eth0", "02:00:ac:13:00:64", netip.MustParseAddr(ClusterHostClientIP))
	for _, n := range c.Nodes {
		n.HostIP = netip.AddrFrom4([4]byte{172, 19, 0, byte(n.Index + 1)})
		n.HostMAC = fmt.Sprintf("02:00:ac:13:00:%02x", n.Index+1)
		plug(n.NS, ClusterHostLink, n.HostMAC, n.HostIP)
		n.NS.Run(t, "sysctl", "-qw", "net.ipv4.conf."+ClusterHostLink+".forwarding=1")
		n.configureForwarding()
	}
}

// configureForwarding lets the management port forward to the second
// host network (ovs-vswitchd makes ovn-k8s-mp0 anew when it restarts).
func (n *ClusterNode) configureForwarding() {
	if n.HostMAC == "" {
		return
	}
	n.NS.Run(n.c.T(), "sysctl", "-qw", "net.ipv4.conf.ovn-k8s-mp0.forwarding=1")
}

// SetForwarding turns the node's IP forwarding on or off in both
// families (net.ipv4.ip_forward, net.ipv6.conf.all.forwarding), as a
// Kubernetes node has it on; off, the second host network's links keep
// theirs (AddHostNetwork).
func (n *ClusterNode) SetForwarding(on bool) {
	v := map[bool]string{false: "0", true: "1"}[on]
	n.NS.Run(n.c.T(), "sysctl", "-qw", "net.ipv4.ip_forward="+v, "net.ipv6.conf.all.forwarding="+v)
	if !on && n.HostMAC != "" {
		n.NS.Run(n.c.T(), "sysctl", "-qw", "net.ipv4.conf."+ClusterHostLink+".forwarding=1")
		n.configureForwarding()
	}
}

// SetHostLink takes the node's second host interface down or up.
func (n *ClusterNode) SetHostLink(up bool) {
	n.c.T().Helper()
	n.setLink(ClusterHostLink, up)
}
