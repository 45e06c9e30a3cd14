package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestNodePortTemplates: a NodePort Service is served through OVN
// template load balancers (one per Service, protocol and family, in
// clusterSwitchLBGroup and clusterRouterLBGroup, VIP ^NODEIP_IPv4_0) with
// every chassis' NODEIP_IPv4_0 its node address, and it answers on every
// node's address from the external client, as real packets.
func TestNodePortTemplates(t *testing.T) {
	e := shared.With(t)
	s := createService(t, e, service("shop", "np-tpl", "web", corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyCluster))
	np := s.Spec.Ports[0].NodePort
	name := "Service_shop/np-tpl_TCP_node_switch_template_IPv4_merged"
	e.Eventually(30*time.Second, "the template load balancer", func() error {
		out := e.OVN.Nbctl("--bare", "--columns=vips,options", "find", "Load_Balancer", "name="+name)
		if !strings.Contains(out, fmt.Sprintf("^NODEIP_IPv4_0:%d", np)) || !strings.Contains(out, "template=true") {
			return fmt.Errorf("load balancer %s: %q", name, out)
		}
		return nil
	})
	// Beside the template one, a gateway router load balancer on the nodes
	// hosting a backend only (lbsvc's localGatewayLBs): web-1 on
	// ovn-worker2, web-2 on ovn-worker3 (once the Service's EndpointSlice,
	// written after the Service, is in).
	var out string
	e.Eventually(30*time.Second, "the gateway router load balancers of the backends' nodes", func() error {
		out = e.OVN.Nbctl("--bare", "--columns=name", "find", "Load_Balancer", "external_ids:k8s.ovn.org/owner=shop/np-tpl")
		for node, want := range map[string]bool{w1: false, w2: true, w3: true} {
			if got := strings.Contains(out, "_TCP_nodeport_router_"+node+"\n") || strings.HasSuffix(out, "_TCP_nodeport_router_"+node); got != want {
				return fmt.Errorf("gateway router load balancer of %s: %v, want %v, among\n%s", node, got, want, out)
			}
		}
		return nil
	})
	if strings.Contains(out, "node_switch_ovn") {
		t.Errorf("per-node switch load balancers beside the template one:\n%s", out)
	}
	vars := e.OVN.Nbctl("--columns=chassis,variables", "list", "Chassis_Template_Var")
	for _, n := range e.Nodes {
		if !strings.Contains(vars, fmt.Sprintf(`NODEIP_IPv4_0="%s"`, n.IP)) {
			t.Errorf("no NODEIP_IPv4_0 of %s (%s) in\n%s", n.Name, n.IP, vars)
		}
	}
	for _, n := range e.Nodes {
		addr := fmt.Sprintf("%s:%d", n.IP, np)
		pod, client := answers(t, e, e.Client, addr)
		t.Logf("template NodePort %s: answered by %s, which saw %s", addr, pod, client)
		if !strings.HasPrefix(pod, "web-") {
			t.Errorf("%s answered by %q", addr, pod)
		}
		// Every connection, not the first to succeed: on ovn-worker2
		// and ovn-worker3 about half of them go to the node's own
		// backend, which the template alone reset.
		for i := range 6 {
			if _, err := Reply(e.Client, addr, payload, 5*time.Second); err != nil {
				t.Errorf("%s: connection %d after the first answered: %v", addr, i+2, err)
				break
			}
		}
	}
}
