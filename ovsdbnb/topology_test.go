package ovsdbnb_test

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// seedTopology is the cluster of OVN-Kubernetes' EgressIP example: three nodes, 10.244.0.0/16 pods,
// 100.64.0.0/16 join network, 172.18.0.0/16 external network.
var seedTopology = ovsdbnb.Topology{
	ClusterSubnet: "10.244.0.0/16", JoinRouterIP: "100.64.0.1/16",
	Nodes: []ovsdbnb.Node{
		{Name: "ovn-control-plane", Subnet: "10.244.0.0/24", JoinIP: "100.64.0.2/16", ExternalIP: "172.18.0.4/16", Gateway: "172.18.0.1"},
		{Name: "ovn-worker", Subnet: "10.244.1.0/24", JoinIP: "100.64.0.3/16", ExternalIP: "172.18.0.2/16", Gateway: "172.18.0.1"},
		{Name: "ovn-worker2", Subnet: "10.244.2.0/24", JoinIP: "100.64.0.4/16", ExternalIP: "172.18.0.3/16", Gateway: "172.18.0.1"},
	},
}

// Address set ids as OVN-Kubernetes builds them.
const (
	eipPodsID  = "default-network-controller:EgressIP:egressip-served-pods:v4:default"
	esvcPodsID = "default-network-controller:EgressService:egresssvc-served-pods:v4"
	nodeIPsID  = "default-network-controller:ClusterNodeIPs:node-ips:v4"
)

// seedState is the NB rows of OVN-Kubernetes' EgressIP example: the cluster-wide policies (1004, 102)
// with their address sets, the EgressIP's reroute (100) and SNATs, and a
// Service for the load balancer trace.
func seedState() map[ovsdbnb.Owner]ovsdbnb.State {
	// The external_ids of OVN-Kubernetes' EgressIP policies (their id:
	// priority, name, ip-family, network) and NATs (name, ip-family).
	ids := func(name, prio string) map[string]string {
		return map[string]string{ovsdbnb.KeyOwnerController: ovsdbnb.DefaultController, ovsdbnb.KeyOwnerType: "EgressIP",
			ovsdbnb.KeyName: name, ovsdbnb.KeyPriority: prio, ovsdbnb.KeyIPFamily: "ip4", ovsdbnb.KeyNetwork: "default",
			ovsdbnb.KeyID: ovsdbnb.DefaultController + ":EgressIP:" + prio + ":" + name + ":ip4:default"}
	}
	natIDs := map[string]string{ovsdbnb.KeyOwnerController: ovsdbnb.DefaultController, ovsdbnb.KeyOwnerType: "EgressIP",
		ovsdbnb.KeyName: "egressip-prod_default/web-1", ovsdbnb.KeyIPFamily: "ip4",
		ovsdbnb.KeyID: ovsdbnb.DefaultController + ":EgressIP:egressip-prod_default/web-1:ip4"}
	nodeIPs := map[string]string{"ovn-control-plane": "172.18.0.4", "ovn-worker": "172.18.0.2", "ovn-worker2": "172.18.0.3"}
	mgmt := map[string]string{"ovn-control-plane": "10.244.0.2", "ovn-worker": "10.244.1.2", "ovn-worker2": "10.244.2.2"}
	cluster := ovsdbnb.State{AddressSets: []ovsdbnb.AddressSet{
		{Addresses: []string{"10.244.1.3"}, ExternalIDs: map[string]string{ovsdbnb.KeyID: eipPodsID}},
		{ExternalIDs: map[string]string{ovsdbnb.KeyID: esvcPodsID}},
		{Addresses: []string{"172.18.0.2", "172.18.0.3", "172.18.0.4"}, ExternalIDs: map[string]string{ovsdbnb.KeyID: nodeIPsID}},
	}}
	for _, n := range []string{"ovn-control-plane", "ovn-worker", "ovn-worker2"} {
		cluster.Policies = append(cluster.Policies, ovsdbnb.RouterPolicy{Router: ovsdbnb.ClusterRouter, Priority: 1004,
			Match:  `inport == "rtos-` + n + `" && ip4.dst == ` + nodeIPs[n] + ` /* ` + n + ` */`,
			Action: "reroute", Nexthops: []string{mgmt[n]}}) // no external_ids, as OVN-Kubernetes
	}
	cluster.Policies = append(cluster.Policies,
		ovsdbnb.RouterPolicy{Router: ovsdbnb.ClusterRouter, Priority: 102, Action: "allow",
			Match:       "(ip4.src == $" + ovsdbnb.AddressSetName(eipPodsID) + " || ip4.src == $" + ovsdbnb.AddressSetName(esvcPodsID) + ") && ip4.dst == $" + ovsdbnb.AddressSetName(nodeIPsID),
			Options:     map[string]string{"pkt_mark": "1008"},
			ExternalIDs: ids("EIP-No-Reroute-Pod-To-Node", "102")},
		ovsdbnb.RouterPolicy{Router: ovsdbnb.ClusterRouter, Priority: 102, Action: "allow",
			Match: "ip4.src == 10.244.0.0/16 && ip4.dst == 10.244.0.0/16", ExternalIDs: ids("EIP-No-Reroute-Pod-To-Pod", "102")},
		ovsdbnb.RouterPolicy{Router: ovsdbnb.ClusterRouter, Priority: 102, Action: "allow",
			Match: "ip4.src == 10.244.0.0/16 && ip4.dst == 100.64.0.0/16", ExternalIDs: ids("EIP-No-Reroute-Pod-To-Join", "102")},
	)
	eipIDs := ids("egressip-prod_default/web-1", "100")
	egress := ovsdbnb.State{
		Policies: []ovsdbnb.RouterPolicy{{Router: ovsdbnb.ClusterRouter, Priority: 100, Match: "ip4.src == 10.244.1.3",
			Action: "reroute", Nexthops: []string{"100.64.0.3", "100.64.0.4"}, ExternalIDs: eipIDs}},
		NATs: []ovsdbnb.NAT{
			{Router: "GR_ovn-worker", Type: "snat", ExternalIP: "172.18.0.33", LogicalIP: "10.244.1.3", LogicalPort: "k8s-ovn-worker",
				Options: map[string]string{"stateless": "false"}, ExternalIDs: natIDs},
			{Router: "GR_ovn-worker2", Type: "snat", ExternalIP: "172.18.0.44", LogicalIP: "10.244.1.3", LogicalPort: "k8s-ovn-worker2",
				Options: map[string]string{"stateless": "false"}, ExternalIDs: natIDs},
		},
	}
	web := ovsdbnb.State{
		Groups: []ovsdbnb.LoadBalancerGroup{{Name: "clusterLBGroup",
			Switches: []string{"ovn-control-plane", "ovn-worker", "ovn-worker2"},
			Routers:  []string{"GR_ovn-control-plane", "GR_ovn-worker", "GR_ovn-worker2"}}},
		LoadBalancers: []ovsdbnb.LoadBalancer{{Name: "Service_default/web_TCP_cluster", Protocol: "tcp",
			VIPs:        map[string]string{"10.96.0.10:80": "10.244.2.5:8080"},
			Options:     map[string]string{"reject": "true", "event": "false", "skip_snat": "false", "neighbor_responder": "none"},
			ExternalIDs: map[string]string{ovsdbnb.KeyKind: "Service", ovsdbnb.KeyOwner: "default/web"},
			Groups:      []string{"clusterLBGroup"}}},
	}
	return map[ovsdbnb.Owner]ovsdbnb.State{
		{Type: "ClusterPolicies", Name: "default"}: cluster,
		{Type: "EgressIP", Name: "egressip-prod"}:  egress,
		{Type: "Service", Name: "default/web"}:     web,
	}
}

func TestSeed002(t *testing.T) {
	o := testbed.StartOVN(t)
	c := dial(t, o.NB)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ovsdbnb.EnsureTopology(ctx, c, seedTopology); err != nil {
		t.Fatalf("EnsureTopology: %v", err)
	}
	if err := ovsdbnb.EnsureTopology(ctx, c, seedTopology); err != nil {
		t.Fatalf("EnsureTopology again: %v", err)
	}
	sync(t, c, seedState())
	if res := sync(t, c, seedState()); res.Ops() != 0 {
		t.Errorf("second sync: %+v, want 0 ops", res)
	}

	eipAS, esvcAS, nodeAS := ovsdbnb.AddressSetName(eipPodsID), ovsdbnb.AddressSetName(esvcPodsID), ovsdbnb.AddressSetName(nodeIPsID)
	wantPolicies := `Routing Policies
1004 inport == "rtos-ovn-control-plane" && ip4.dst == 172.18.0.4 /* ovn-control-plane */ reroute 10.244.0.2
1004 inport == "rtos-ovn-worker" && ip4.dst == 172.18.0.2 /* ovn-worker */ reroute 10.244.1.2
1004 inport == "rtos-ovn-worker2" && ip4.dst == 172.18.0.3 /* ovn-worker2 */ reroute 10.244.2.2
102 (ip4.src == $` + eipAS + ` || ip4.src == $` + esvcAS + `) && ip4.dst == $` + nodeAS + ` allow pkt_mark=1008
102 ip4.src == 10.244.0.0/16 && ip4.dst == 10.244.0.0/16 allow
102 ip4.src == 10.244.0.0/16 && ip4.dst == 100.64.0.0/16 allow
100 ip4.src == 10.244.1.3 reroute 100.64.0.3, 100.64.0.4`
	if got := testbed.Blanks(o.Nbctl("lr-policy-list", ovsdbnb.ClusterRouter)); got != wantPolicies {
		t.Errorf("lr-policy-list %s:\n%s\nwant (OVN-Kubernetes' EgressIP example):\n%s", ovsdbnb.ClusterRouter, got, wantPolicies)
	}
	for gr, eip := range map[string]string{"GR_ovn-worker": "172.18.0.33", "GR_ovn-worker2": "172.18.0.44"} {
		want := "TYPE GATEWAY_PORT EXTERNAL_IP EXTERNAL_PORT LOGICAL_IP EXTERNAL_MAC LOGICAL_PORT\nsnat " + eip + " 10.244.1.3"
		if got := testbed.Blanks(o.Nbctl("lr-nat-list", gr)); got != want {
			t.Errorf("lr-nat-list %s:\n%s\nwant:\n%s", gr, got, want)
		}
	}
	if got := testbed.Blanks(o.Nbctl("lr-nat-list", "GR_ovn-control-plane")); got != "" {
		t.Errorf("lr-nat-list GR_ovn-control-plane: %q, want none", got)
	}
	// lb-list cuts names to 16 characters; the UUIDs are masked.
	wantLB := "UUID LB PROTO VIP IPs\n<uuid> Service_default/ tcp 10.96.0.10:80 10.244.2.5:8080"
	if got := uuidRE.ReplaceAllString(testbed.Blanks(o.Nbctl("lb-list")), "<uuid>"); got != wantLB {
		t.Errorf("lb-list:\n%s\nwant:\n%s", got, wantLB)
	}
	for _, sw := range []string{"ovn-control-plane", "ovn-worker", "ovn-worker2"} {
		if got := o.Nbctl("--bare", "--columns=load_balancer_group", "list", "Logical_Switch", sw); got == "" {
			t.Errorf("switch %s: clusterLBGroup not attached", sw)
		}
	}

	// A pod 10.244.1.3 on ovn-worker; the external gateway's MAC known
	// to both gateway routers so ovn-trace follows the packet out.
	o.Nbctl("lsp-add", "ovn-worker", "pod1", "--", "lsp-set-addresses", "pod1", "0a:58:0a:f4:01:03 10.244.1.3")
	o.Nbctl("--wait=sb", "--timeout=20", "sync")
	for _, gr := range []string{"GR_ovn-worker", "GR_ovn-worker2"} {
		dp := o.Sbctl("--bare", "--columns=_uuid", "find", "Datapath_Binding", "external_ids:name="+gr)
		o.Sbctl("create", "MAC_Binding", "logical_port=rtoe-"+gr, "ip=172.18.0.1", `mac="02:00:00:00:00:01"`, "datapath="+dp)
	}
	pod := `inport == "pod1" && eth.src == 0a:58:0a:f4:01:03 && eth.dst == ` + ovsdbnb.MAC(netip.MustParseAddr("10.244.1.1")) +
		` && ip4.src == 10.244.1.3 && ip.ttl == 64 && tcp && tcp.src == 40000 && `
	traces := []struct {
		name, flow string
		want       []string
	}{
		{"egress", pod + "ip4.dst == 8.8.8.8 && tcp.dst == 443",
			[]string{"ip4.src == 10.244.1.3, priority 100", "lr_in_policy_ecmp", "ct_snat(172.18.0.33)|ct_snat(172.18.0.44)", `/* output to "breth0_ovn-worker`}},
		{"service", pod + "ip4.dst == 10.96.0.10 && tcp.dst == 80",
			[]string{"ct_lb_mark(backends=10.244.2.5:8080)"}},
	}
	for _, tc := range traces {
		t.Run(tc.name, func(t *testing.T) {
			out := o.Trace("--ct=new", "ovn-worker", tc.flow)
			for _, w := range tc.want {
				if !matchAny(out, w) {
					t.Errorf("ovn-trace %s: no %q in\n%s", tc.name, w, out)
				}
			}
		})
	}
}

// uuidRE matches a row UUID.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// matchAny reports whether out contains one of the |-separated
// alternatives of w.
func matchAny(out, w string) bool {
	for _, alt := range strings.Split(w, "|") {
		if strings.Contains(out, alt) {
			return true
		}
	}
	return false
}

func TestEnsureTopologyRefusesForeign(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("lr-add", ovsdbnb.ClusterRouter)
	c := dial(t, o.NB)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := ovsdbnb.EnsureTopology(ctx, c, seedTopology)
	if err == nil || !strings.Contains(err.Error(), `logical router "ovn_cluster_router" exists and was not created by ovnedge`) {
		t.Fatalf("EnsureTopology over a foreign router: %v", err)
	}
	if got := o.Nbctl("--bare", "--columns=name", "list", "Logical_Switch"); got != "" {
		t.Errorf("switches created despite the error: %q", got)
	}
}
