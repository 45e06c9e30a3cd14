package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestRun applies the example's rows to a real NB holding the topology and
// checks the reroute and the SNAT; a second run sends nothing.
func TestRun(t *testing.T) {
	ovn := testbed.StartOVN(t)
	ctx := context.Background()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{ovn.NB}})
	if err != nil {
		t.Fatal(err)
	}
	err = ovsdbnb.EnsureTopology(ctx, c, ovsdbnb.Topology{ClusterSubnet: "10.244.0.0/16", JoinRouterIP: "100.64.0.1/16",
		Nodes: []ovsdbnb.Node{
			{Name: "ovn-worker", Subnet: "10.244.1.0/24", JoinIP: "100.64.0.3/16", ExternalIP: "172.18.0.2/24"},
			{Name: "ovn-worker2", Subnet: "10.244.2.0/24", JoinIP: "100.64.0.4/16", ExternalIP: "172.18.0.3/24"},
		}})
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Run(ctx, ovn.NB, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "EgressIP status: map[egress-prod:[{ovn-worker2 172.18.0.44}]]") ||
		!strings.Contains(out.String(), "NB schema has no QoS mark action (OVN < 24.03): ClusterPolicies/egressip-reply-traffic left out") {
		t.Errorf("output:\n%s", out.String())
	}
	if p := ovn.Nbctl("lr-policy-list", "ovn_cluster_router"); !strings.Contains(p, "reroute                100.64.0.4") {
		t.Errorf("policies:\n%s", p)
	}
	if n := ovn.Nbctl("lr-nat-list", "GR_ovn-worker2"); !strings.Contains(n, "172.18.0.44") {
		t.Errorf("NATs:\n%s", n)
	}
	out.Reset()
	if err := Run(ctx, ovn.NB, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "applied: 0 inserts, 0 updates, 0 mutates, 0 deletes") {
		t.Errorf("second run:\n%s", out.String())
	}
}
