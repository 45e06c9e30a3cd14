// Package embed is a CNI embedding ovnedge through its public API only, as
// a separate Go module (its own go.mod, with a replace of ovnedge to
// ../..): it decides EgressIP nodes from nodes built by hand, computes the
// load balancers of a Service given as plain values, prints the NB rows
// and the br-ex ARP bypass flows, and hands back ovnedge's events. It
// imports nothing under internal/ and no host I/O package, so it builds
// for any GOOS (CI runs `GOOS=darwin go build ./...` here).
package embed

import (
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// Plan is what the CNI programs.
type Plan struct {
	// EgressNodes maps each egress IP to the node that hosts it.
	EgressNodes map[string]string
	// NB is the desired Northbound rows, one JSON object per line.
	NB []byte
	// Flows is the ARP bypass flows of the Service's VIPs on br-ex.
	Flows []byte
	// Events are ovnedge's events about the inputs, for the CNI to record.
	Events []event.Event
}

// Build computes the plan of one EgressIP and one LoadBalancer Service on
// two nodes built by hand (no annotations, zero Capacity: unlimited).
func Build(egressIPs []string, svc lbsvc.Service) (Plan, error) {
	nodes := []ovnknode.Node{
		{Name: "node1", Primary: []netip.Prefix{netip.MustParsePrefix("172.18.0.2/16")}, Assignable: true, Ready: true},
		{Name: "node2", Primary: []netip.Prefix{netip.MustParsePrefix("172.18.0.3/16")}, Assignable: true, Ready: true},
	}
	for i := range nodes {
		nodes[i].HostCIDRs = nodes[i].Primary
	}
	eip := &egressv1.EgressIP{ObjectMeta: metav1.ObjectMeta{Name: "prod"}, Spec: egressv1.EgressIPSpec{EgressIPs: egressIPs}}
	res := egress.Assign([]*egressv1.EgressIP{eip}, nodes, nil, nil)
	plan := Plan{EgressNodes: map[string]string{}, Events: res.Events}
	for _, it := range res.Status[eip.Name] {
		plan.EgressNodes[it.EgressIP] = it.Node
	}

	var lbNodes []lbsvc.Node
	for _, n := range nodes {
		lbNodes = append(lbNodes, lbsvc.NodeFrom(n, ""))
	}
	states, events := lbsvc.BuildServices([]lbsvc.Service{svc}, lbNodes, lbsvc.Options{})
	plan.Events = append(plan.Events, events...)
	nb, err := ovsdbnb.Render(states)
	if err != nil {
		return plan, err
	}
	plan.NB = nb

	var ports []int32
	for _, p := range svc.Ports {
		ports = append(ports, p.Port)
	}
	flows, err := brex.ARPBypass(brex.Bypass{Uplink: "eth0"}, brex.Service{
		Namespace: svc.Namespace, Name: svc.Name, VIPs: append(svc.ExternalIPs, svc.LoadBalancerIPs...), Ports: ports,
	})
	if err != nil {
		return plan, err
	}
	var p ovsflow.Program
	if err := p.Set(brex.Service{Namespace: svc.Namespace, Name: svc.Name}.Owner(), flows); err != nil {
		return plan, err
	}
	if plan.Flows, err = p.Render(ovsflow.PortMap{"eth0": 1}); err != nil {
		return plan, fmt.Errorf("render flows: %w", err)
	}
	return plan, nil
}
