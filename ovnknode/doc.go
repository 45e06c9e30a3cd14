// Package ovnknode is ovnedge's one model of a Kubernetes node: its
// OVN-Kubernetes annotations parsed once (Parse, ParseAll) into a Node
// that the EgressIP assignment (egress), the load balancers (lbsvc: their
// view of it, lbsvc.NodeOf) and the NB topology (ovsdbnb.NodeTopology)
// all read; the other annotations and fields read off a node (its chassis,
// status addresses, readiness, the bridge MAC of l3-gateway-config) are
// here too. It is a leaf: it imports nothing of ovnedge's.
//
//	n, err := ovnknode.Parse(node)
//	if err != nil { ... } // names the node and the annotation at fault
//	mgmt, _ := n.MgmtIP(false) // the .2 of its pod subnet
//
// The annotations are OVN-Kubernetes' as ovnkube-node writes them
// (ovn-kubernetes/ovn-kubernetes, go-controller/pkg/util/node_annotations.go
// and pkg/util/kube.go at 8871cd9): k8s.ovn.org/node-subnets (both the
// list and the older single-subnet form), node-primary-ifaddr, host-cidrs,
// node-gateway-router-lrp-ifaddr, node-chassis-id, l3-gateway-config, the
// k8s.ovn.org/egress-assignable label and the cloud egress capacity
// cloud.network.openshift.io/egress-ipconfig; ovnedge.io/egress-host-ips is
// ovnedge's own (HostReport). A missing or malformed annotation is an
// error naming the node and the annotation, never a silent default.
package ovnknode
