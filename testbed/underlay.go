package testbed

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// The Kube-OVN underlay of Kube-OVN's MetalLB underlay guide (kubeovn/docs,
// docs/advance/with-metallb.en.md), as AddUnderlay builds it: subnet
// underlay-subnet (10.180.204.0/24, gateway .1) on VLAN 341 of provider
// network "provider", whose bridge on every node is br-provider with the
// NIC underlay0 and the host's VLAN interface underlay0.341 (MetalLB's
// interface in the guide); the U2O interconnection port of router
// ovn-cluster on the subnet (.254); the external client at .100 on the
// VLAN.
const (
	UnderlaySwitch    = "underlay-subnet"
	UnderlayCIDR      = "10.180.204.0/24"
	UnderlayGateway   = "10.180.204.1"
	UnderlayVLAN      = 341
	UnderlayProvider  = "provider"
	UnderlayBridge    = "br-provider"
	UnderlayNIC       = "underlay0"
	UnderlayInterface = "underlay0.341"
	UnderlayRouter    = "ovn-cluster"
	UnderlayRouterIP  = "10.180.204.254"
	UnderlayRouterMAC = "0a:58:0a:b4:cc:fe"
	UnderlayClientIP  = "10.180.204.100"
)

// Underlay is a Kube-OVN underlay network of a Cluster (AddUnderlay).
type Underlay struct {
	c *Cluster
	// Segment is the physical switch: an OVS bridge br0 whose trunk
	// ports are the nodes' NICs and whose access port of VLAN 341 is the
	// client's.
	Segment *OVS
	// Client is the external client on the VLAN (UnderlayClientIP on its
	// eth0), ClientMAC its MAC.
	Client    *Netns
	ClientMAC string
	// Localnet is the underlay switch's localnet port; Patch is the name
	// of the patch port ovn-controller makes for it on br-provider.
	Localnet, Patch string
	nextPod         int
}

// AddUnderlay adds that underlay to the cluster, as Kube-OVN's
// controller and daemon build it for a Subnet with a Vlan on a
// ProviderNetwork: on every node the provider bridge br-provider
// (userspace datapath) holding the NIC underlay0 (a veth into the VLAN
// trunk) and the host's internal port underlay0.341 (access port of VLAN
// 341), mapped as network "provider"; in the NB the logical switch
// underlay-subnet with the localnet port localnet.underlay-subnet (tag
// 341) and router ovn-cluster's U2O interconnection port on it; the
// client on the VLAN. Pods come with AddPod. Nothing else is programmed:
// no flow on br-provider (the bridge's default NORMAL flow only) and no
// load balancer.
func (c *Cluster) AddUnderlay() *Underlay {
	t := c.T()
	t.Helper()
	u := &Underlay{c: c, Localnet: "localnet." + UnderlaySwitch, nextPod: 11}
	u.Patch = "patch-" + u.Localnet + "-to-br-int"
	// The physical switch is an OVS bridge (this kernel has neither VLAN
	// links nor VLAN-filtering Linux bridges): the client on an access
	// port of the VLAN, the nodes' NICs on trunk ports.
	u.Segment = StartOVS(t, OVSOptions{Bridge: "br0", NoPatch: true, Uplink: "client",
		HostIP: "192.0.2.1/32", ExtIP: UnderlayClientIP + "/24"})
	u.Segment.Vsctl("set", "Port", "client", "tag="+strconv.Itoa(UnderlayVLAN))
	u.Client = &Netns{Name: u.Segment.ExtNS}
	u.Client.Run(t, "ethtool", "-K", "eth0", "tx", "off")
	u.ClientMAC = strings.TrimSpace(u.Client.Run(t, "cat", "/sys/class/net/eth0/address"))
	for _, n := range c.Nodes {
		ns := n.NS.Name
		peer := c.nextUplink()
		mustRun(t, nil, "ip", "-n", ns, "link", "add", UnderlayNIC, "type", "veth", "peer", "name", peer, "netns", u.Segment.NS)
		mustRun(t, nil, "ip", "-n", u.Segment.NS, "link", "set", peer, "arp", "off", "up")
		u.Segment.Vsctl("add-port", "br0", peer)
		mustRun(t, nil, "ip", "-n", ns, "link", "set", UnderlayNIC, "arp", "off", "up")
		mappings := strings.Trim(n.Vsctl("get", "Open_vSwitch", ".", "external_ids:ovn-bridge-mappings"), `"`)
		n.Vsctl("add-br", UnderlayBridge, "--", "set", "Bridge", UnderlayBridge, "datapath_type=netdev",
			"--", "add-port", UnderlayBridge, UnderlayNIC, "--", "set", "Interface", UnderlayNIC, "ofport_request=1",
			"--", "add-port", UnderlayBridge, UnderlayInterface, "tag="+strconv.Itoa(UnderlayVLAN),
			"--", "set", "Interface", UnderlayInterface, "type=internal",
			"--", "set", "Open_vSwitch", ".", "external_ids:ovn-bridge-mappings="+mappings+","+UnderlayProvider+":"+UnderlayBridge)
		u.Up(n.Name)
	}

	lrp, lsp := UnderlayRouter+"-"+UnderlaySwitch, UnderlaySwitch+"-"+UnderlayRouter
	c.nbctl("--may-exist", "lr-add", UnderlayRouter,
		"--", "ls-add", UnderlaySwitch,
		"--", "set", "Logical_Switch", UnderlaySwitch, "other_config:subnet="+UnderlayCIDR,
		"other_config:exclude_ips="+UnderlayGateway,
		"--", "lsp-add", UnderlaySwitch, u.Localnet, "--", "lsp-set-type", u.Localnet, "localnet",
		"--", "lsp-set-addresses", u.Localnet, "unknown",
		"--", "lsp-set-options", u.Localnet, "network_name="+UnderlayProvider,
		"--", "set", "Logical_Switch_Port", u.Localnet, "tag="+strconv.Itoa(UnderlayVLAN),
		"--", "lrp-add", UnderlayRouter, lrp, UnderlayRouterMAC, UnderlayRouterIP+"/24",
		"--", "lsp-add", UnderlaySwitch, lsp, "--", "lsp-set-type", lsp, "router",
		"--", "lsp-set-addresses", lsp, "router",
		"--", "lsp-set-options", lsp, "router-port="+lrp)
	c.WaitHV(30 * time.Second)
	return u
}

// Up brings node's underlay0.341 up (ovs-vswitchd makes it anew when it
// restarts).
func (u *Underlay) Up(node string) {
	t := u.c.T()
	t.Helper()
	n := u.c.Node(node)
	err := waitFor(readyTimeout, func() error {
		_, err := run("ip", "-n", n.NS.Name, "link", "show", UnderlayInterface)
		return n.vswitchd.check(err)
	})
	if err != nil {
		t.Fatalf("testbed: node %s: %s: %v", node, UnderlayInterface, err)
	}
	n.NS.Run(t, "ip", "link", "set", UnderlayInterface, "up")
}

// MAC returns node's underlay0.341 MAC: the MAC a VIP announced from the
// node resolves to.
func (u *Underlay) MAC(node string) string {
	t := u.c.T()
	t.Helper()
	return strings.TrimSpace(u.c.Node(node).NS.Run(t, "cat", "/sys/class/net/"+UnderlayInterface+"/address"))
}

// AddPod creates pod namespace/name on node in the underlay subnet, as
// Kube-OVN plugs a pod annotated ovn.kubernetes.io/logical_switch: its
// logical switch port <name>.<namespace> on underlay-subnet (the next
// free address from .11 when ip is not valid), eth0 a port of the node's
// br-int, and its default route to the subnet's gateway. It returns once
// the port is up.
func (u *Underlay) AddPod(node, namespace, name string, ip netip.Addr) *Pod {
	c := u.c
	t := c.T()
	t.Helper()
	c.mu.Lock()
	if _, dup := c.pods[namespace+"/"+name]; dup {
		c.mu.Unlock()
		t.Fatalf("testbed: pod %s/%s exists", namespace, name)
	}
	if !ip.IsValid() {
		ip = netip.MustParsePrefix(UnderlayCIDR).Addr()
		for range u.nextPod {
			ip = ip.Next()
		}
		u.nextPod++
	}
	c.mu.Unlock()
	p := &Pod{Namespace: namespace, Name: name, Node: node, IP: ip, MAC: ovnMAC(ip), Netns: newHost(t, "ovcp"),
		port: "p" + randomHex(t), lsp: name + "." + namespace}
	c.nbctl("lsp-add", UnderlaySwitch, p.LSP(), "--", "lsp-set-addresses", p.LSP(), p.MAC+" "+ip.String())
	c.plug(c.Node(node), p, []string{netip.PrefixFrom(ip, 24).String()}, []string{UnderlayGateway})
	return p
}

// plug wires pod p (its logical switch port created) to node n's br-int:
// a veth whose eth0 end carries p's MAC, addrs and default routes via
// gws, then waits until the chassis reports the port up and records the
// pod.
func (c *Cluster) plug(n *ClusterNode, p *Pod, addrs, gws []string) {
	t := c.T()
	t.Helper()
	mustRun(t, nil, "ip", "-n", n.NS.Name, "link", "add", p.port, "type", "veth", "peer", "name", "eth0", "netns", p.Netns.Name)
	mustRun(t, nil, "ip", "-n", n.NS.Name, "link", "set", p.port, "up")
	n.Vsctl("add-port", "br-int", p.port, "--", "set", "Interface", p.port, "external_ids:iface-id="+p.LSP())
	p.Run(t, "ip", "link", "set", "eth0", "address", p.MAC, "mtu", "1400")
	p.Run(t, "ethtool", "-K", "eth0", "tx", "off")
	for _, a := range addrs {
		argv := []string{"ip", "addr", "add", a, "dev", "eth0"}
		if strings.Contains(a, ":") {
			argv = append(argv, "nodad")
		}
		p.Run(t, argv...)
	}
	p.Run(t, "ip", "link", "set", "eth0", "up")
	for _, gw := range gws {
		if strings.Contains(gw, ":") {
			p.Run(t, "ip", "-6", "route", "add", "default", "via", gw)
		} else {
			p.Run(t, "ip", "route", "add", "default", "via", gw)
		}
	}
	err := waitFor(readyTimeout, func() error {
		out, err := run("ovn-nbctl", "--db="+c.OVN.NB, "get", "Logical_Switch_Port", p.LSP(), "up")
		if err != nil || out != "true" {
			return n.ctl.check(fmt.Errorf("port %s not up (%q, %v)", p.LSP(), out, err))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testbed: pod %s/%s: %v%s", p.Namespace, p.Name, err, tails(logPaths(n.Dir, "ovn-controller")))
	}
	c.mu.Lock()
	c.pods[p.Namespace+"/"+p.Name] = p
	c.mu.Unlock()
}
