package testbed

import (
	"cmp"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"
)

// External is an "external host": a network namespace whose Linux bridge
// holds the host's address. It is the L2 segment every chassis's br-ex
// uplink joins (a Linux bridge, so that several chassis can share it),
// made by NewExternal.
type External struct {
	*Netns
	// Bridge is the Linux bridge's name, "br0".
	Bridge string
	// IP is the host's address on Bridge.
	IP netip.Prefix

	uplinks int // uplinks attached so far, for their names
}

// NewExternal creates the external host with address ip (CIDR form, e.g.
// "172.18.0.1/24") on a Linux bridge br0 with transmit offloads off (TCP
// to the userspace datapath needs it). It is deleted on cleanup.
func NewExternal(t T, ip string) *External {
	t.Helper()
	Require(t, "ip", "ethtool")
	p, err := netip.ParsePrefix(ip)
	if err != nil {
		t.Fatalf("testbed: external host address: %v", err)
	}
	e := &External{Netns: NewNetns(t, "ovtx"), Bridge: "br0", IP: p}
	e.Run(t, "ip", "link", "add", e.Bridge, "type", "bridge")
	e.Run(t, "ip", "addr", "add", ip, "dev", e.Bridge)
	e.Run(t, "ip", "link", "set", e.Bridge, "up")
	e.Run(t, "ethtool", "-K", e.Bridge, "tx", "off")
	return e
}

// ChassisOptions shape StartChassis; zero fields take the defaults noted.
type ChassisOptions struct {
	// Name is the chassis name, external_ids:system-id (default
	// "chassis1"); gateway routers are bound to it by
	// options:chassis=<Name>.
	Name string
	// Physnet is the network_name of the localnet ports mapped to br-ex
	// (default "physnet").
	Physnet string
	// HostIP is the node's own address, in CIDR form, on br-ex's LOCAL
	// interface (default "172.18.0.250/24"); keep it apart from the
	// gateway routers' addresses.
	HostIP string
}

// Chassis is an OVN chassis made by StartChassis: ovsdb-server and
// ovs-vswitchd (userspace datapath, userspace TSO on) with br-ex, whose
// uplink is a port of the External host's bridge, and ovn-controller,
// which created br-int. One chassis can host every gateway router of a
// test: bind each with options:chassis=<Name>.
type Chassis struct {
	// OVS is the switch; OVS.ExtNS is unused (the uplink's peer moved to
	// External), OVS.NS holds ovs-vswitchd, ovn-controller and the pods'
	// veth ends.
	*OVS
	// Name is the chassis name.
	Name string
	// OVN is the central the chassis registered with.
	OVN *OVN
	// External is the host on br-ex's segment.
	External *External

	controller *daemon
}

// chassisBins are the binaries StartChassis needs beyond StartOVS's.
var chassisBins = []string{"ovn-controller", "ovn-sbctl", "ethtool"}

// StartChassis starts a chassis registered with n whose br-ex uplink
// joins ext: StartOVS (br-ex on the netdev datapath, no br-int of its
// own), the uplink's peer moved onto ext's bridge, the Open_vSwitch
// external_ids ovn-controller reads (system-id, ovn-remote=<n.SB>,
// ovn-encap-type=geneve, ovn-encap-ip=127.0.0.1,
// ovn-bridge-datapath-type=netdev, ovn-bridge-mappings=<physnet>:br-ex),
// and ovn-controller inside the switch's namespace with OVS_RUNDIR and
// OVN_RUNDIR set. It returns once the chassis is in the SB Chassis table
// and br-int exists (about 1 s). Everything is removed when the test ends.
//
// One chassis per OVN central: its tunnel endpoint is 127.0.0.1, and a
// second chassis would need its own encap IP on an underlay bridge
// (StartCluster builds that), which this helper does not build.
func StartChassis(t T, n *OVN, ext *External, o ChassisOptions) *Chassis {
	t.Helper()
	Require(t, chassisBins...)
	if n == nil || ext == nil {
		t.Fatalf("testbed: StartChassis needs an OVN central and an external host (StartOVN, NewExternal)")
	}
	begin := time.Now()
	o.Name = cmp.Or(o.Name, "chassis1")
	o.Physnet = cmp.Or(o.Physnet, "physnet")
	o.HostIP = cmp.Or(o.HostIP, "172.18.0.250/24")
	s := StartOVS(t, OVSOptions{Uplink: "eth1", NoPatch: true, TSO: true, HostIP: o.HostIP})
	c := &Chassis{OVS: s, Name: o.Name, OVN: n, External: ext}

	// Move the uplink's peer (eth0 in s.ExtNS) onto the external bridge;
	// moving a link drops its addresses.
	up := "up" + strconv.Itoa(ext.uplinks)
	ext.uplinks++
	mustRun(t, nil, "ip", "-n", s.ExtNS, "link", "set", "eth0", "down")
	mustRun(t, nil, "ip", "-n", s.ExtNS, "link", "set", "eth0", "name", up, "netns", ext.Name)
	ext.Run(t, "ethtool", "-K", up, "tx", "off")
	ext.Run(t, "ip", "link", "set", up, "master", ext.Bridge, "up")

	s.Vsctl("set", "Open_vSwitch", ".",
		"external_ids:system-id="+o.Name,
		"external_ids:ovn-remote="+n.SB,
		"external_ids:ovn-encap-type=geneve",
		"external_ids:ovn-encap-ip=127.0.0.1",
		"external_ids:ovn-bridge-datapath-type=netdev",
		"external_ids:ovn-bridge-mappings="+o.Physnet+":"+s.Bridge)

	// ovn-controller has no --unixctl: OVN_RUNDIR places its control
	// socket, OVS_RUNDIR is where it finds br-int.mgmt.
	file := filepath.Join(s.Dir, "ovn-controller")
	c.controller = startDaemon(t, "ovn-controller", file+".log",
		[]string{"OVS_RUNDIR=" + s.RunDir, "OVN_RUNDIR=" + s.Dir},
		"ip", "netns", "exec", s.NS, "ovn-controller", s.DB,
		"--pidfile="+file+".pid", "--log-file="+file+".log", "--no-chdir", "-vconsole:off")
	stopOnCleanup(t, c.controller)
	err := waitFor(readyTimeout, func() error {
		if out, err := run("ovn-sbctl", "--db="+n.SB, "--bare", "--columns=name", "find", "Chassis", "name="+o.Name); err != nil || out != o.Name {
			return c.controller.check(fmt.Errorf("chassis %s not in SB (%q, %v)", o.Name, out, err))
		}
		if _, err := run("ovs-vsctl", "--db="+s.DB, "br-exists", "br-int"); err != nil {
			return c.controller.check(fmt.Errorf("no br-int yet: %w", err))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testbed: chassis %s not registered: %v%s", o.Name, err, tails([]string{file + ".log"}))
	}
	t.Logf("testbed: chassis %s up in %v (dir %s, netns %s)", o.Name, time.Since(begin).Round(time.Millisecond), s.Dir, s.NS)
	return c
}

// PodOptions describe a pod for AddPod.
type PodOptions struct {
	// IfaceID is the logical switch port the pod binds
	// (external_ids:iface-id); the port must exist in NB.
	IfaceID string
	// MAC and IP (CIDR form) are the pod's, as in the port's addresses.
	MAC, IP string
	// Gateway is the pod's default route (the node switch's router port).
	Gateway string
	// MTU defaults to 1400.
	MTU int
}

// AddPod creates a pod namespace whose eth0 is plugged into br-int with
// o's iface-id, address and default route, and returns once the chassis
// has claimed the logical port in SB. Add the logical switch port to NB
// first; the namespace is deleted on cleanup.
func (c *Chassis) AddPod(o PodOptions) *Netns {
	t := c.t
	t.Helper()
	pod := NewNetns(t, "ovtp")
	port := "p" + randomHex(t) // the veth end on br-int, 9 bytes
	mustRun(t, nil, "ip", "-n", c.NS, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", pod.Name)
	mustRun(t, nil, "ip", "-n", c.NS, "link", "set", port, "up")
	c.Vsctl("add-port", "br-int", port, "--", "set", "Interface", port, "external_ids:iface-id="+o.IfaceID)
	pod.Run(t, "ip", "link", "set", "eth0", "address", o.MAC, "mtu", strconv.Itoa(cmp.Or(o.MTU, 1400)))
	pod.Run(t, "ethtool", "-K", "eth0", "tx", "off")
	pod.Run(t, "ip", "addr", "add", o.IP, "dev", "eth0")
	pod.Run(t, "ip", "link", "set", "eth0", "up")
	pod.Run(t, "ip", "route", "add", "default", "via", o.Gateway)
	err := waitFor(readyTimeout, func() error {
		out, err := run("ovn-sbctl", "--db="+c.OVN.SB, "--bare", "--columns=chassis", "find", "Port_Binding", "logical_port="+o.IfaceID)
		if err != nil || out == "" {
			return c.controller.check(fmt.Errorf("port %s not bound (%q, %v)", o.IfaceID, out, err))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testbed: pod %s: %v%s", o.IfaceID, err, tails(logPaths(c.Dir, "ovn-controller")))
	}
	return pod
}

// WaitHV waits, up to timeout, until every chassis has installed the
// flows of the current NB contents (ovn-nbctl --wait=hv sync).
func (c *Chassis) WaitHV(timeout time.Duration) {
	c.t.Helper()
	c.OVN.Nbctl("--wait=hv", "--timeout="+strconv.Itoa(max(1, int(timeout.Seconds()))), "sync")
}
