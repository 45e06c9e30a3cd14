package testbed

import (
	"fmt"
	"net/netip"
	"slices"
)

// Kube-OVN's default VPC, as kube-ovn-controller names it: the logical
// router ovn-cluster and the default subnet ovn-default (its
// --default-cidr and --default-gateway).
const (
	KubeOVNRouter        = UnderlayRouter
	KubeOVNDefaultSubnet = "ovn-default"
	KubeOVNDefaultCIDR   = "10.16.0.0/16"
	KubeOVNDefaultGW     = "10.16.0.1"
)

// KubeOVNSubnet is an overlay subnet of Kube-OVN's default VPC: a logical
// switch (named as the Subnet) on the router ovn-cluster, whose router
// port holds Gateway.
type KubeOVNSubnet struct {
	Name    string
	CIDR    netip.Prefix
	Gateway netip.Addr
}

// KubeOVNDefault is the subnet ovn-default.
var KubeOVNDefault = KubeOVNSubnet{Name: KubeOVNDefaultSubnet,
	CIDR: netip.MustParsePrefix(KubeOVNDefaultCIDR), Gateway: netip.MustParseAddr(KubeOVNDefaultGW)}

// kubeOVNSubnet is a subnet the cluster made and its next pod address.
type kubeOVNSubnet struct {
	KubeOVNSubnet
	next netip.Addr
}

// AddKubeOVNSubnets adds Kube-OVN's default VPC to the cluster next to the
// OVN-Kubernetes topology, as kube-ovn-controller creates it
// (pkg/controller/vpc.go, subnet.go): the distributed router ovn-cluster
// (created once) and per subnet a logical switch of its name with the
// router port ovn-cluster-<subnet> (the gateway, MAC 00:00:00 plus a
// random tail, as Kube-OVN's util.GenerateMac) and the switch port
// <subnet>-ovn-cluster. Pods join a subnet with ClusterPodOptions.Subnet;
// east-west traffic between the subnets is routed on every chassis. No
// load balancer is attached here (ovnedge writes them; the test attaches
// its groups as Kube-OVN attaches its VPC's load balancers to every subnet
// switch).
func (c *Cluster) AddKubeOVNSubnets(subnets ...KubeOVNSubnet) {
	t := c.T()
	t.Helper()
	args := []string{"--may-exist", "lr-add", KubeOVNRouter}
	c.mu.Lock()
	for _, s := range subnets {
		if !s.CIDR.Contains(s.Gateway) || !s.Gateway.Is4() {
			c.mu.Unlock()
			t.Fatalf("testbed: Kube-OVN subnet %s: gateway %s outside %s (IPv4 only)", s.Name, s.Gateway, s.CIDR)
		}
		if c.subnets[s.Name] != nil {
			c.mu.Unlock()
			t.Fatalf("testbed: Kube-OVN subnet %s exists", s.Name)
		}
		c.subnets[s.Name] = &kubeOVNSubnet{KubeOVNSubnet: s, next: s.Gateway.Next()}
		rp, sp := KubeOVNRouter+"-"+s.Name, s.Name+"-"+KubeOVNRouter
		args = append(args,
			"--", "ls-add", s.Name,
			"--", "lrp-add", KubeOVNRouter, rp, kubeOVNMAC(t), netip.PrefixFrom(s.Gateway, s.CIDR.Bits()).String(),
			"--", "lsp-add", s.Name, sp, "--", "lsp-set-type", sp, "router",
			"--", "lsp-set-addresses", sp, "router", "--", "lsp-set-options", sp, "router-port="+rp)
	}
	c.mu.Unlock()
	c.nbctl(args...)
}

// kubeOVNMAC is a MAC as Kube-OVN's util.GenerateMac makes them:
// 00:00:00 and three random bytes.
func kubeOVNMAC(t T) string {
	h := randomHex(t)
	return fmt.Sprintf("00:00:00:%s:%s:%s", h[0:2], h[2:4], h[4:6])
}

// kubeOVNAddress returns the next free address of subnet name (skipping
// the gateway and the broadcast address) for a pod.
func (c *Cluster) kubeOVNAddress(name string) (KubeOVNSubnet, netip.Addr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.subnets[name]
	if s == nil {
		names := make([]string, 0, len(c.subnets))
		for n := range c.subnets {
			names = append(names, n)
		}
		slices.Sort(names)
		return KubeOVNSubnet{}, netip.Addr{}, fmt.Errorf("no Kube-OVN subnet %q (have %q)", name, names)
	}
	ip := s.next
	if ip == s.Gateway {
		ip = ip.Next()
	}
	if !s.CIDR.Contains(ip.Next()) { // the last address is the broadcast address
		return KubeOVNSubnet{}, netip.Addr{}, fmt.Errorf("Kube-OVN subnet %s is full", name)
	}
	s.next = ip.Next()
	return s.KubeOVNSubnet, ip, nil
}

// AttachSegment gives pod p a second interface ifname on the external
// segment, without an address: what a NetworkAttachmentDefinition of
// type macvlan in bridge mode on the node's uplink gives a pod (here a
// veth whose peer is a port of the segment's bridge, so the pod is one
// more host on the segment, with a MAC of its own). It returns the MAC.
func (c *Cluster) AttachSegment(p *Pod, ifname string) string {
	t := c.T()
	t.Helper()
	peer := c.nextUplink()
	mustRun(t, nil, "ip", "-n", p.Netns.Name, "link", "add", ifname, "type", "veth", "peer", "name", peer, "netns", c.Segment.Name)
	c.Segment.Run(t, "ip", "link", "set", peer, "master", "br0", "up")
	c.Segment.Run(t, "ethtool", "-K", peer, "tx", "off")
	p.Run(t, "ethtool", "-K", ifname, "tx", "off")
	p.Run(t, "ip", "link", "set", ifname, "up")
	return p.Run(t, "cat", "/sys/class/net/"+ifname+"/address")
}
