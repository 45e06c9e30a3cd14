package lbsvc

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnedge/ovnedge/ovnknode"
	corev1 "k8s.io/api/core/v1"
)

// AnnotationExternalIPFromSubnet is Kube-OVN's Service annotation naming
// the underlay Subnet of its LoadBalancer address; in ovnedge's standalone
// underlay mode it picks the Subnet the address is allocated from.
const AnnotationExternalIPFromSubnet = "ovn.kubernetes.io/service_external_ip_from_subnet"

// The node models: ovnknode.Node is a Kubernetes node parsed once from its
// OVN-Kubernetes annotations (egress.ParseNode); Node here is what the
// load balancers need of it, converted by NodeFrom, and ovsdbnb.Node the
// topology's, converted by ovnknode.Node.TopologyNode.

// NodeFrom is a parsed node as its load balancers see it: chassis is its
// k8s.ovn.org/node-chassis-id, and its host addresses are those of
// HostCIDRs (k8s.ovn.org/host-cidrs), each once, in the order of their
// text (OVN-Kubernetes' GetNodeHostAddrs, a sorted set of strings: so
// "10.89.0.2" is NODEIP_IPv4_0 before "172.18.0.2", and "172.18.0.10"
// comes before "172.18.0.2"), as OVN-Kubernetes serves NodePorts on them.
// Primary counts too when HostCIDRs lacks it (OVN-Kubernetes' node agent
// always lists it there).
func NodeFrom(n ovnknode.Node, chassis string) Node {
	node := Node{Name: n.Name, Chassis: chassis}
	for _, pr := range slices.Concat(n.Primary, n.HostCIDRs) {
		if !slices.Contains(node.IPs, pr.Addr()) {
			node.IPs = append(node.IPs, pr.Addr())
		}
	}
	slices.SortFunc(node.IPs, func(a, b netip.Addr) int { return strings.Compare(a.String(), b.String()) })
	return node
}

// ParseNode is a Kubernetes node as its load balancers see it: NodeFrom
// of its parsed annotations, or, when they are missing or broken, its
// InternalIP and ExternalIP addresses.
func ParseNode(n *corev1.Node) Node {
	parsed, err := ovnknode.Parse(n)
	if err != nil {
		parsed = ovnknode.Node{}
	}
	return NodeOf(n, parsed)
}

// NodeOf is node n as its load balancers see it with its annotations
// parsed as parsed (for a node whose annotations broke, their last good
// parse): NodeFrom(parsed) with n's name and chassis, or, without an
// address, n's InternalIP and ExternalIP addresses.
func NodeOf(n *corev1.Node, parsed ovnknode.Node) Node {
	parsed.Name = n.Name
	node := NodeFrom(parsed, ovnknode.Chassis(n))
	if len(node.IPs) == 0 {
		node.IPs = ovnknode.StatusIPs(n)
	}
	return node
}
