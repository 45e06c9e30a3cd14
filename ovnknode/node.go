package ovnknode

import (
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Node annotations and the label of OVN-Kubernetes
// (go-controller/pkg/util/node_annotations.go).
const (
	AnnotationNodeSubnets     = "k8s.ovn.org/node-subnets"
	AnnotationPrimaryIfAddr   = "k8s.ovn.org/node-primary-ifaddr"
	AnnotationHostCIDRs       = "k8s.ovn.org/host-cidrs"
	AnnotationGatewayJoinAddr = "k8s.ovn.org/node-gateway-router-lrp-ifaddr"
	// AnnotationCloudEgressConfig is the cloud provider's egress capacity
	// and network of a node; bare-metal nodes do not have it.
	AnnotationCloudEgressConfig = "cloud.network.openshift.io/egress-ipconfig"
	// LabelEgressAssignable marks the nodes that may host egress IPs.
	LabelEgressAssignable = "k8s.ovn.org/egress-assignable"
	// AnnotationHostEgress is ovnedge's own: what the node's instance
	// reports of its egress IPs on host interfaces (HostReport, JSON),
	// written by the node, read by the leader.
	AnnotationHostEgress = "ovnedge.io/egress-host-ips"
	// DefaultNetwork is the network key of node-subnets.
	DefaultNetwork = "default"
)

// Limit is a maximum number of egress IPs. The zero value is no limit;
// Max(0) is a limit of zero (a cloud node without room).
type Limit struct {
	// N is the maximum when Limited is set.
	N       int
	Limited bool
}

// Max returns the limit of n egress IPs.
func Max(n int) Limit { return Limit{N: n, Limited: true} }

// Allows reports whether a node holding have egress IPs has room for one
// more under l.
func (l Limit) Allows(have int) bool { return !l.Limited || have < l.N }

// String is "unlimited" or the maximum.
func (l Limit) String() string {
	if !l.Limited {
		return "unlimited"
	}
	return strconv.Itoa(l.N)
}

// Capacity is how many egress IPs a node can host: per family and in
// total. The zero value is unlimited (a bare-metal node, or one built by
// hand); the cloud config sets limits.
type Capacity struct {
	IPv4, IPv6, Total Limit
}

// Node is what egress needs to know of a Kubernetes node, parsed from its
// annotations, label and Ready condition by ParseNode.
type Node struct {
	Name string
	// Subnets are the node's pod subnets (node-subnets, network
	// "default"); its management port IP is the .2 (::2) of each.
	Subnets []netip.Prefix
	// Primary are the node's addresses on the OVN-managed primary network
	// (node-primary-ifaddr), at most one per family.
	Primary []netip.Prefix
	// HostCIDRs are all the node's host addresses (host-cidrs); those
	// outside Primary are secondary host networks. Without the annotation
	// it is Primary.
	HostCIDRs []netip.Prefix
	// GatewayJoin are the join-subnet addresses of GR_<node>
	// (node-gateway-router-lrp-ifaddr).
	GatewayJoin []netip.Addr
	// Assignable is the egress-assignable label; Ready the Ready
	// condition.
	Assignable, Ready bool
	// Cloud is the egress network of a cloud node (its egress IPs must be
	// in it), invalid on bare metal; Capacity its limits.
	Cloud    []netip.Prefix
	Capacity Capacity
	// Host is what the node reports of its egress IPs on host interfaces
	// (AnnotationHostEgress), Reported whether it reports at all, and
	// Version the Node object's resourceVersion (HostHold tells a report
	// written after a release by it).
	Host     HostReport
	Reported bool
	Version  string
}

// HostReport is a node's report of its egress IPs on host interfaces:
// those it hosts now (addresses on its links), and those it was asked to
// host and cannot, with the reason (hostnet's requirement, e.g.
// "LinkDown: ..."). The leader assigns no refused IP to the node.
type HostReport struct {
	Hosted  []netip.Addr          `json:"hosted,omitempty"`
	Refused map[netip.Addr]string `json:"refused,omitempty"`
}

// Refuses reports whether the node said it cannot host ip.
func (n *Node) Refuses(ip netip.Addr) bool {
	_, ok := n.Host.Refused[ip]
	return ok
}

// Empty reports whether r says nothing.
func (r HostReport) Empty() bool { return len(r.Hosted) == 0 && len(r.Refused) == 0 }

// String is the annotation value of r: JSON, hosted sorted.
func (r HostReport) String() string {
	r.Hosted = slices.Clone(r.Hosted)
	slices.SortFunc(r.Hosted, netip.Addr.Compare)
	b, _ := json.Marshal(r) // addresses and strings: cannot fail
	return string(b)
}

// Parse reads a node's annotations. A missing or malformed annotation
// is an error naming the node and the annotation: the caller skips that
// node (see Assign's broken parameter) and handles every other node as
// usual.
func Parse(n *corev1.Node) (Node, error) {
	if n == nil {
		return Node{}, fmt.Errorf("parse node: nil node")
	}
	out := Node{Name: n.Name}
	if n.Name == "" {
		return Node{}, fmt.Errorf("parse node: no name")
	}
	_, out.Assignable = n.Labels[LabelEgressAssignable]
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Ready = c.Status == corev1.ConditionTrue
		}
	}
	a := n.Annotations
	var err error
	if out.Subnets, err = parseNodeSubnets(a[AnnotationNodeSubnets]); err != nil {
		return Node{}, annotationError(n.Name, AnnotationNodeSubnets, err)
	}
	if out.Primary, err = parseFamilyPrefixes(a[AnnotationPrimaryIfAddr]); err != nil {
		return Node{}, annotationError(n.Name, AnnotationPrimaryIfAddr, err)
	}
	join, err := parseFamilyPrefixes(a[AnnotationGatewayJoinAddr])
	if err != nil {
		return Node{}, annotationError(n.Name, AnnotationGatewayJoinAddr, err)
	}
	for _, p := range join {
		out.GatewayJoin = append(out.GatewayJoin, p.Addr())
	}
	out.HostCIDRs = out.Primary
	if v, ok := a[AnnotationHostCIDRs]; ok {
		if out.HostCIDRs, err = parseHostCIDRs(v); err != nil {
			return Node{}, annotationError(n.Name, AnnotationHostCIDRs, err)
		}
	}
	if v, ok := a[AnnotationHostEgress]; ok {
		if err := json.Unmarshal([]byte(v), &out.Host); err != nil {
			return Node{}, annotationError(n.Name, AnnotationHostEgress, fmt.Errorf("%q: %w", v, err))
		}
		out.Reported = true
	}
	out.Version = n.ResourceVersion
	if v, ok := a[AnnotationCloudEgressConfig]; ok {
		if out.Cloud, out.Capacity, err = parseCloudConfig(v); err != nil {
			return Node{}, annotationError(n.Name, AnnotationCloudEgressConfig, err)
		}
	}
	return out, nil
}

// ParseAll parses every node; the nodes that fail are returned apart,
// keyed by name, and never stop the others.
func ParseAll(nodes []*corev1.Node) ([]Node, map[string]error) {
	out := make([]Node, 0, len(nodes))
	var broken map[string]error
	for _, n := range nodes {
		p, err := Parse(n)
		if err != nil {
			if broken == nil {
				broken = map[string]error{}
			}
			name := ""
			if n != nil {
				name = n.Name
			}
			broken[name] = err
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	return out, broken
}

// KeepLastGood returns parsed plus, for each node in broken, its last good
// parse from prev (when there is one), sorted by name. Given to Assign
// (with broken) and Compute, a node whose annotation turns bad keeps its
// egress IPs, its rows and its addresses in the conflict checks, and gets
// no new egress IP until it parses again: what is programmed is not lost.
func KeepLastGood(prev, parsed []Node, broken map[string]error) []Node {
	out := slices.Clone(parsed)
	for _, n := range prev {
		if _, ok := broken[n.Name]; ok && !slices.ContainsFunc(out, func(p Node) bool { return p.Name == n.Name }) {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func annotationError(node, key string, err error) error {
	return fmt.Errorf("node %s: annotation %s: %w", node, key, err)
}

// MgmtIP is the node's management port address of the family: the .2
// (::2) of its pod subnet.
func (n *Node) MgmtIP(v6 bool) (netip.Addr, bool) {
	for _, s := range n.Subnets {
		if s.Addr().Is6() == v6 {
			a := s.Masked().Addr().Next().Next()
			return a, s.Contains(a)
		}
	}
	return netip.Addr{}, false
}

// PrimaryIP is the node's primary network address of the family.
func (n *Node) PrimaryIP(v6 bool) (netip.Addr, bool) {
	for _, p := range n.Primary {
		if p.Addr().Is6() == v6 {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// JoinIP is the family's join address of GR_<node>.
func (n *Node) JoinIP(v6 bool) (netip.Addr, bool) {
	for _, a := range n.GatewayJoin {
		if a.Is6() == v6 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Network returns the node network an egress IP can be hosted on: the
// cloud egress network on a cloud node, else the primary network, else
// the secondary host network with the longest prefix containing ip.
// primary reports whether it is the OVN-managed primary network.
func (n *Node) Network(ip netip.Addr) (network netip.Prefix, primary, ok bool) {
	if len(n.Cloud) > 0 {
		for _, c := range n.Cloud {
			if c.Contains(ip) {
				return c.Masked(), true, true
			}
		}
		return netip.Prefix{}, false, false
	}
	for _, p := range n.Primary {
		if p.Masked().Contains(ip) {
			return p.Masked(), true, true
		}
	}
	best := netip.Prefix{}
	for _, p := range n.HostCIDRs {
		if p.Masked().Contains(ip) && (!best.IsValid() || p.Bits() > best.Bits()) {
			best = p.Masked()
		}
	}
	return best, false, best.IsValid()
}

// SecondaryNetworks are the node's secondary host networks: those of its
// host-cidrs outside the primary network, masked, sorted, each once (none
// on a cloud node, whose egress IPs are on its primary interface).
func (n *Node) SecondaryNetworks() []netip.Prefix {
	if len(n.Cloud) > 0 {
		return nil
	}
	var out []netip.Prefix
	for _, p := range n.HostCIDRs {
		m := p.Masked()
		if !slices.ContainsFunc(n.Primary, func(pr netip.Prefix) bool { return pr.Masked() == m }) && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return cmp.Or(a.Addr().Compare(b.Addr()), a.Bits()-b.Bits()) })
	return out
}

// HostIPs are the node's own addresses (an egress IP must not be one),
// each once.
func (n *Node) HostIPs() []netip.Addr {
	var out []netip.Addr
	for a := range n.HostAddrs() {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// HostAddrs yields the node's own addresses, the primary ones then the
// host CIDRs', an address as often as it is listed; nothing is
// allocated (Assign reads every node's on each run).
func (n *Node) HostAddrs() iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		for _, ps := range [...][]netip.Prefix{n.Primary, n.HostCIDRs} {
			for _, p := range ps {
				if !yield(p.Addr()) {
					return
				}
			}
		}
	}
}

// parseNodeSubnets reads {"default":["10.244.1.0/24"]} or the older
// {"default":"10.244.1.0/24"}.
func parseNodeSubnets(v string) ([]netip.Prefix, error) {
	if v == "" {
		return nil, fmt.Errorf("missing")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, fmt.Errorf("%q: %w", v, err)
	}
	raw, ok := m[DefaultNetwork]
	if !ok {
		return nil, fmt.Errorf("%q: no %q network", v, DefaultNetwork)
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, fmt.Errorf("%q: neither a CIDR nor a list of CIDRs", v)
		}
		list = []string{one}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%q: no subnet", v)
	}
	return parsePrefixes(list)
}

// parseFamilyPrefixes reads {"ipv4":"172.18.0.2/16","ipv6":"..."}.
func parseFamilyPrefixes(v string) ([]netip.Prefix, error) {
	if v == "" {
		return nil, fmt.Errorf("missing")
	}
	var m struct{ IPv4, IPv6 string }
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, fmt.Errorf("%q: %w", v, err)
	}
	var out []netip.Prefix
	for _, f := range []struct {
		s  string
		v6 bool
	}{{m.IPv4, false}, {m.IPv6, true}} {
		if f.s == "" {
			continue
		}
		p, err := netip.ParsePrefix(f.s)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", v, err)
		}
		if p.Addr().Is6() != f.v6 {
			return nil, fmt.Errorf("%q: %s is of the wrong family", v, p)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q: no address", v)
	}
	return out, nil
}

// parseHostCIDRs reads ["172.18.0.2/16", ...].
func parseHostCIDRs(v string) ([]netip.Prefix, error) {
	var list []string
	if err := json.Unmarshal([]byte(v), &list); err != nil {
		return nil, fmt.Errorf("%q: %w", v, err)
	}
	return parsePrefixes(list)
}

// parseCloudConfig reads
// [{"interface":"eni-1","ifaddr":{"ipv4":"10.0.128.0/18"},"capacity":{"ipv4":14,"ipv6":15}}]
// (capacity may be {"ip":14}, a total over both families).
func parseCloudConfig(v string) ([]netip.Prefix, Capacity, error) {
	var cfg []struct {
		IfAddr struct {
			IPv4, IPv6 string
		} `json:"ifaddr"`
		Capacity struct {
			IPv4 *int `json:"ipv4"`
			IPv6 *int `json:"ipv6"`
			IP   *int `json:"ip"`
		} `json:"capacity"`
	}
	var capacity Capacity
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		return nil, capacity, fmt.Errorf("%q: %w", v, err)
	}
	if len(cfg) != 1 {
		return nil, capacity, fmt.Errorf("%q: want one interface, have %d", v, len(cfg))
	}
	c := cfg[0]
	var nets []netip.Prefix
	for _, s := range []string{c.IfAddr.IPv4, c.IfAddr.IPv6} {
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, capacity, fmt.Errorf("%q: %w", v, err)
		}
		nets = append(nets, p.Masked())
	}
	if len(nets) == 0 {
		return nil, capacity, fmt.Errorf("%q: no ifaddr", v)
	}
	for _, f := range []struct {
		src *int
		dst *Limit
	}{{c.Capacity.IPv4, &capacity.IPv4}, {c.Capacity.IPv6, &capacity.IPv6}, {c.Capacity.IP, &capacity.Total}} {
		if f.src == nil {
			continue
		}
		if *f.src < 0 {
			return nil, capacity, fmt.Errorf("%q: negative capacity", v)
		}
		*f.dst = Max(*f.src)
	}
	return nets, capacity, nil
}

func parsePrefixes(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
