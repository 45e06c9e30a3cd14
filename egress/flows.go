package egress

import (
	"fmt"

	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// NodeFlows returns the br-ex egress configuration of a node (the
// shared gateway's EgressIP flows): its pod subnets, the cluster subnets and its primary address,
// with the bridge's uplink and patch port names. brex.EgressFlows turns
// it into the 109/105/104/100 flows.
func NodeFlows(c Cluster, n *ovnknode.Node, uplink, patch string) (brex.Egress, error) {
	if len(c.ClusterSubnets) == 0 {
		return brex.Egress{}, fmt.Errorf("egress flows of node %s: no cluster subnet", n.Name)
	}
	e := brex.Egress{Uplink: uplink, Patch: patch, ClusterSubnets: c.ClusterSubnets}
	for _, s := range n.Subnets {
		e.NodeSubnets = append(e.NodeSubnets, s.Masked())
	}
	for _, p := range n.Primary {
		e.NodeIPs = append(e.NodeIPs, p.Addr())
	}
	if _, err := brex.EgressFlows(e); err != nil {
		return brex.Egress{}, fmt.Errorf("egress flows of node %s: %w", n.Name, err)
	}
	return e, nil
}
