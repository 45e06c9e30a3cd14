package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// The coexistence test: a NB holding the whole row set OVN-Kubernetes (at
// the commit ovsdbnb names) writes for a three-node cluster with
// EgressIPs and Services, written the way OVN-Kubernetes writes it (names,
// external_ids, options, attachments: each shape below names the ovn-k
// file it comes from), not by ovnedge's functions. The daemon's first
// leader pass over the same Kubernetes objects must insert and delete
// nothing and leave every row as OVN-Kubernetes wrote it (only
// ovnedge.io/* external_ids added); with the legacy EgressIP scheme
// ({name: <EgressIP>} external_ids, 102 policies without any) the rows are
// migrated in place, to what OVN-Kubernetes' external_ids syncer writes.

// coexistCluster is the cluster as Kubernetes objects: three nodes
// (ovn-worker has a second host address, 10.89.0.2), an EgressIP with two
// egress IPs serving the app=web pods of namespace prod, a ClusterIP, a
// NodePort (ETP=Cluster: template load balancers), a NodePort backed by
// a host-network endpoint on ovn-worker2 (per-node ClusterIP load
// balancers, a per-chassis target template on the gateway routers), a
// LoadBalancer with ETP=Local and a ClusterIP Service with an ExternalIP.
var coexistCluster = map[string]string{
	"nodes.yaml": coexistNode("ovn-worker", 1, `"172.18.0.2/24","10.89.0.2/24"`, false) + "---\n" +
		coexistNode("ovn-worker2", 2, `"172.18.0.3/24"`, true) + "---\n" +
		coexistNode("ovn-worker3", 3, `"172.18.0.4/24"`, true),
	"workloads.yaml": `apiVersion: v1
kind: Namespace
metadata:
  name: prod
  labels: {env: prod}
` + coexistPod("web-0", "web", "ovn-worker", "10.244.1.3") + coexistPod("web-1", "web", "ovn-worker3", "10.244.3.4") +
		coexistPod("db-0", "db", "ovn-worker2", "10.244.2.5") + coexistPod("shop-0", "shop", "ovn-worker", "10.244.1.5"),
	"egressip.yaml": `apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata:
  name: egress-prod
spec:
  egressIPs: ["172.18.0.44", "172.18.0.45"]
  namespaceSelector:
    matchLabels: {env: prod}
  podSelector:
    matchLabels: {app: web}
status:
  items:
  - {node: ovn-worker2, egressIP: 172.18.0.44}
  - {node: ovn-worker3, egressIP: 172.18.0.45}
`,
	"services.yaml": `apiVersion: v1
kind: Service
metadata: {name: web, namespace: prod}
spec:
  type: NodePort
  clusterIP: 10.96.0.10
  clusterIPs: [10.96.0.10]
  ports:
  - {name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: prod}
spec:
  type: ClusterIP
  clusterIP: 10.96.0.20
  clusterIPs: [10.96.0.20]
  ports:
  - {name: pg, protocol: TCP, port: 5432, targetPort: 5432}
---
apiVersion: v1
kind: Service
metadata: {name: shop, namespace: prod}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  clusterIP: 10.96.0.30
  clusterIPs: [10.96.0.30]
  ports:
  - {name: https, protocol: TCP, port: 443, targetPort: 8443, nodePort: 30443}
status:
  loadBalancer:
    ingress:
    - ip: 172.18.0.200
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: prod}
spec:
  type: ClusterIP
  clusterIP: 10.96.0.11
  clusterIPs: [10.96.0.11]
  externalIPs: [172.18.0.201]
  ports:
  - {name: https, protocol: TCP, port: 443, targetPort: 8443}
---
apiVersion: v1
kind: Service
metadata: {name: metrics, namespace: prod}
spec:
  type: NodePort
  clusterIP: 10.96.0.40
  clusterIPs: [10.96.0.40]
  ports:
  - {name: metrics, protocol: TCP, port: 9100, targetPort: 9100, nodePort: 30910}
` + coexistSlice("metrics", "metrics", 9100, "172.18.0.3/ovn-worker2") +
		coexistSlice("web", "http", 8080, "10.244.1.3/ovn-worker", "10.244.3.4/ovn-worker3") +
		coexistSlice("db", "pg", 5432, "10.244.2.5/ovn-worker2") +
		coexistSlice("shop", "https", 8443, "10.244.1.5/ovn-worker") +
		coexistSlice("api", "https", 8443, "10.244.1.3/ovn-worker"),
}

func coexistNode(name string, i int, hostCIDRs string, egress bool) string {
	labels := ""
	if egress {
		labels = "\n  labels:\n    k8s.ovn.org/egress-assignable: \"\""
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %[1]s%[4]s
  annotations:
    k8s.ovn.org/node-subnets: '{"default":["10.244.%[2]d.0/24"]}'
    k8s.ovn.org/node-primary-ifaddr: '{"ipv4":"172.18.0.%[5]d/24"}'
    k8s.ovn.org/host-cidrs: '[%[3]s]'
    k8s.ovn.org/l3-gateway-config: '{"default":{"mode":"shared","mac-address":"02:42:ac:12:00:0%[5]d","ip-addresses":["172.18.0.%[5]d/24"],"next-hops":["172.18.0.1"],"node-port-enable":"true"}}'
    k8s.ovn.org/node-gateway-router-lrp-ifaddr: '{"ipv4":"100.64.0.%[6]d/16"}'
    k8s.ovn.org/node-chassis-id: chassis-%[2]d
status:
  conditions: [{type: Ready, status: "True"}]
  addresses: [{type: InternalIP, address: 172.18.0.%[5]d}]
`, name, i, hostCIDRs, labels, i+1, i+2)
}

func coexistPod(name, app, node, ip string) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: prod, labels: {app: %s}}
spec:
  nodeName: %s
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
status:
  phase: Running
  podIP: %s
  podIPs: [{ip: %s}]
`, name, app, node, ip, ip)
}

// coexistSlice is an EndpointSlice of Service svc; eps are "ip/node".
func coexistSlice(svc, port string, target int, eps ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: %s-1, namespace: prod, labels: {kubernetes.io/service-name: %s}}\naddressType: IPv4\nendpoints:\n", svc, svc)
	for _, e := range eps {
		ip, node, _ := strings.Cut(e, "/")
		fmt.Fprintf(&b, "- {addresses: [%s], conditions: {ready: true}, nodeName: %s}\n", ip, node)
	}
	fmt.Fprintf(&b, "ports:\n- {name: %s, protocol: TCP, port: %d}\n", port, target)
	return b.String()
}

// ovnkHash is OVN-Kubernetes' address set name (address_set.go
// hashedAddressSet, util.HashForOVN): "a" + decimal FNV-1a 64 of the
// k8s.ovn.org/id.
func ovnkHash(id string) string {
	h := fnv.New64a()
	h.Write([]byte(id))
	return "a" + strconv.FormatUint(h.Sum64(), 10)
}

// ovnkIDs is DbObjectIDs.GetExternalIDs (libovsdb/ops/db_object_ids.go):
// owner controller and type, each key of the ObjectIDsType
// (db_object_types.go) and k8s.ovn.org/id = controller:type:values in
// the type's key order. kv alternates key and value in that order.
func ovnkIDs(ownerType string, kv ...string) map[string]string {
	const ctrl = "default-network-controller"
	m := map[string]string{"k8s.ovn.org/owner-controller": ctrl, "k8s.ovn.org/owner-type": ownerType}
	id := []string{ctrl, ownerType}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
		id = append(id, kv[i+1])
	}
	m["k8s.ovn.org/id"] = strings.Join(id, ":")
	return m
}

// ovnkRow is one row of the fixture: the nbctl create arguments, where
// it is attached, and for the legacy scheme the external_ids it had then
// (nil: as today).
type ovnkRow struct {
	table  string
	cols   []string
	ids    map[string]string
	legacy map[string]string
	attach []string // "Table:name:column"
}

func nbMap(m map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, strconv.Quote(k)+"="+strconv.Quote(m[k]))
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// ovnkFixture is the rows OVN-Kubernetes writes for coexistCluster, with
// the reply-traffic QoS rule when the schema has the mark action.
func ovnkFixture(qosMark bool) []ovnkRow {
	var rows []ovnkRow
	lrpEIP := func(prio, name, fam string) map[string]string {
		// LogicalRouterPolicyEgressIP: priority, name, ip-family, network.
		return ovnkIDs("EgressIP", "priority", prio, "k8s.ovn.org/name", name, "ip-family", fam, "network", "default")
	}
	policy := func(prio int, match, action string, nexthops []string, options, ids, legacy map[string]string) {
		cols := []string{"priority=" + strconv.Itoa(prio), "match=" + strconv.Quote(match), "action=" + action}
		if len(nexthops) > 0 {
			var q []string
			for _, n := range nexthops {
				q = append(q, strconv.Quote(n))
			}
			cols = append(cols, "nexthops=["+strings.Join(q, ",")+"]")
		}
		if options != nil {
			cols = append(cols, "options="+nbMap(options))
		}
		rows = append(rows, ovnkRow{table: "Logical_Router_Policy", cols: cols, ids: ids, legacy: legacy,
			attach: []string{"Logical_Router:ovn_cluster_router:policies"}})
	}
	nodes := []struct {
		name, chassis string
		hostIPs       []string // sets.List of host-cidrs: sorted as text
		mgmt          string
	}{
		{"ovn-worker", "chassis-1", []string{"10.89.0.2", "172.18.0.2"}, "10.244.1.2"},
		{"ovn-worker2", "chassis-2", []string{"172.18.0.3"}, "10.244.2.2"},
		{"ovn-worker3", "chassis-3", []string{"172.18.0.4"}, "10.244.3.2"},
	}

	// Address sets (address_set.go buildAddressSet: the id with the
	// ip-family "v4", name its hash): egressip-served-pods
	// (AddressSetEgressIP, egressip.go), egresssvc-served-pods
	// (AddressSetEgressService, egressservice_zone_service.go), node-ips
	// (AddressSetClusterNodeIPs, addressset_manager.go: every host-cidrs
	// address).
	served := ovnkIDs("EgressIP", "k8s.ovn.org/name", "egressip-served-pods", "ip-family", "v4", "network", "default")
	svcPods := ovnkIDs("EgressService", "k8s.ovn.org/name", "egresssvc-served-pods", "ip-family", "v4")
	nodeIPs := ovnkIDs("ClusterNodeIPs", "k8s.ovn.org/name", "node-ips", "ip-family", "v4")
	for _, as := range []struct {
		ids   map[string]string
		addrs []string
	}{
		{served, []string{"10.244.1.3", "10.244.3.4"}},
		{svcPods, nil},
		{nodeIPs, []string{"10.89.0.2", "172.18.0.2", "172.18.0.3", "172.18.0.4"}},
	} {
		cols := []string{"name=" + ovnkHash(as.ids["k8s.ovn.org/id"])}
		if len(as.addrs) > 0 {
			var q []string
			for _, a := range as.addrs {
				q = append(q, strconv.Quote(a))
			}
			cols = append(cols, "addresses=["+strings.Join(q, ",")+"]")
		}
		rows = append(rows, ovnkRow{table: "Address_Set", cols: cols, ids: as.ids})
	}

	// 1004 per node and host address (gatewayrouter/policybasedroutes.go
	// AddSameNodeIPPolicy, generateNodeIPMatch): no external_ids on the
	// default network.
	for _, n := range nodes {
		for _, ip := range n.hostIPs {
			policy(1004, fmt.Sprintf(`inport == "rtos-%s" && ip4.dst == %s /* %s */`, n.name, ip, n.name), "reroute",
				[]string{n.mgmt}, nil, nil, nil)
		}
	}
	// 102 no-reroute policies (egressip_ops.go
	// createDefaultNoReroutePodPoliciesOps, ...ServicePoliciesOps,
	// ...ReplyTrafficPolicyOps; egressip.go
	// ensureDefaultNoRerouteNodePolicies). The legacy ones had no
	// external_ids (external_ids_syncer/logical_router_policy), the
	// reply-traffic one did not exist then.
	policy(102, "ip4.src == 10.244.0.0/16 && ip4.dst == 10.244.0.0/16", "allow", nil, nil,
		lrpEIP("102", "EIP-No-Reroute-Pod-To-Pod", "ip4"), map[string]string{})
	policy(102, "ip4.src == 10.244.0.0/16 && ip4.dst == 100.64.0.0/16", "allow", nil, nil,
		lrpEIP("102", "EIP-No-Reroute-Pod-To-Join", "ip4"), map[string]string{})
	policy(102, fmt.Sprintf("(ip4.src == $%s || ip4.src == $%s) && ip4.dst == $%s", ovnkHash(served["k8s.ovn.org/id"]),
		ovnkHash(svcPods["k8s.ovn.org/id"]), ovnkHash(nodeIPs["k8s.ovn.org/id"])), "allow", nil,
		map[string]string{"pkt_mark": "1008"}, lrpEIP("102", "EIP-No-Reroute-Pod-To-Node", "ip4"), map[string]string{})
	policy(102, "pkt.mark == 42", "allow", nil, nil, lrpEIP("102", "EIP-No-Reroute-reply-traffic", "ip"), nil)
	// 100 reroutes per served pod to the egress nodes' gateway router
	// join IPs (egressip.go createReroutePolicyOps,
	// getEgressIPLRPReRouteDbIDs: name "<EgressIP>_<ns>/<pod>"); legacy
	// {name: <EgressIP>}.
	for _, p := range []struct{ pod, ip string }{{"web-0", "10.244.1.3"}, {"web-1", "10.244.3.4"}} {
		policy(100, "ip4.src == "+p.ip, "reroute", []string{"100.64.0.4", "100.64.0.5"}, nil,
			lrpEIP("100", "egress-prod_prod/"+p.pod, "ip4"), map[string]string{"name": "egress-prod"})
		// The SNATs on each egress node's gateway router (egressip.go
		// createNATRuleOps, libovsdb/ops/router.go buildNAT: stateless=false
		// and the gateway's ephemeral port range).
		for _, eg := range []struct{ node, eip string }{{"ovn-worker2", "172.18.0.44"}, {"ovn-worker3", "172.18.0.45"}} {
			rows = append(rows, ovnkRow{table: "NAT",
				cols: []string{"type=snat", "external_ip=" + strconv.Quote(eg.eip), "logical_ip=" + strconv.Quote(p.ip),
					"logical_port=" + strconv.Quote("k8s-"+eg.node), `options={stateless="false"}`, `external_port_range="32768-60999"`},
				ids:    ovnkIDs("EgressIP", "k8s.ovn.org/name", "egress-prod_prod/"+p.pod, "ip-family", "ip4"),
				legacy: map[string]string{"name": "egress-prod"},
				attach: []string{"Logical_Router:GR_" + eg.node + ":nat"}})
		}
	}
	// The gateway routers' own SNAT of the cluster subnet (gateway.go):
	// not ovnedge's, left alone.
	for i, n := range nodes {
		rows = append(rows, ovnkRow{table: "NAT",
			cols:   []string{"type=snat", "external_ip=" + strconv.Quote(fmt.Sprintf("172.18.0.%d", i+2)), `logical_ip="10.244.0.0/16"`, `options={stateless="false"}`},
			attach: []string{"Logical_Router:GR_" + n.name + ":nat"}})
	}
	// The reply-traffic QoS rule held by every node switch (egressip.go
	// createDefaultReRouteQoSRuleOps, getEgressIPQoSRuleDbIDs).
	if qosMark {
		var attach []string
		for _, n := range nodes {
			attach = append(attach, "Logical_Switch:"+n.name+":qos_rules")
		}
		rows = append(rows, ovnkRow{table: "QoS",
			cols: []string{"priority=103", "direction=from-lport",
				"match=" + strconv.Quote(fmt.Sprintf("ip4.src == $%s && ct.trk && ct.rpl", ovnkHash(served["k8s.ovn.org/id"]))),
				"action=mark:42"},
			ids: lrpEIP("103", "EgressIP-Mark-Reply-Traffic", "ip4"), attach: attach})
	}

	// Load balancers (controller/services: lb_config.go, loadbalancer.go
	// buildLB, services_controller_test.go's servicesOptions and
	// loadBalancerExternalIDs).
	opts := func(extra ...string) map[string]string {
		o := map[string]string{"event": "false", "reject": "true", "skip_snat": "false",
			"neighbor_responder": "none", "hairpin_snat_ip": "169.254.169.5 fd69::5"}
		for i := 0; i < len(extra); i += 2 {
			o[extra[i]] = extra[i+1]
		}
		return o
	}
	lb := func(name, owner string, vips, options map[string]string, attach ...string) {
		rows = append(rows, ovnkRow{table: "Load_Balancer",
			cols: []string{"name=" + strconv.Quote(name), "protocol=tcp", "vips=" + nbMap(vips), "options=" + nbMap(options)},
			ids:  map[string]string{"k8s.ovn.org/kind": "Service", "k8s.ovn.org/owner": owner}, attach: attach})
	}
	cluster := "Load_Balancer_Group:clusterLBGroup:load_balancer"
	// buildClusterLBs: one per Service and protocol in clusterLBGroup.
	lb("Service_prod/web_TCP_cluster", "prod/web", map[string]string{"10.96.0.10:80": "10.244.1.3:8080,10.244.3.4:8080"}, opts(), cluster)
	lb("Service_prod/db_TCP_cluster", "prod/db", map[string]string{"10.96.0.20:5432": "10.244.2.5:5432"}, opts(), cluster)
	lb("Service_prod/shop_TCP_cluster", "prod/shop", map[string]string{"10.96.0.30:443": "10.244.1.5:8443"}, opts(), cluster)
	lb("Service_prod/api_TCP_cluster", "prod/api", map[string]string{"10.96.0.11:443": "10.244.1.3:8443",
		"172.18.0.201:443": "10.244.1.3:8443"}, opts(), cluster)
	// buildTemplateLBs: the NodePort's switch and router template load
	// balancers have equal rules (no per-node targets), so mergeLBs folds
	// them into one "_merged" in both groups; one VIP per NODEIP variable
	// (ovn-worker has two host addresses).
	lb("Service_prod/web_TCP_node_switch_template_IPv4_merged", "prod/web", map[string]string{
		"^NODEIP_IPv4_0:30080": "10.244.1.3:8080,10.244.3.4:8080", "^NODEIP_IPv4_1:30080": "10.244.1.3:8080,10.244.3.4:8080"},
		opts("template", "true", "address-family", "ipv4"),
		"Load_Balancer_Group:clusterSwitchLBGroup:load_balancer", "Load_Balancer_Group:clusterRouterLBGroup:load_balancer")
	// buildPerNodeLBs for the ETP=Local LoadBalancer: on the node with the
	// endpoint, node_local_router (skip_snat) for the NodePorts and the
	// ingress IP, node_switch with the ETP=Local masquerade VIP
	// 169.254.169.3 (once per NodePort VIP, so its targets repeat: buildVipMap);
	// elsewhere node_router rejects (no targets) and node_switch has the
	// masquerade VIP without targets.
	shop := "10.244.1.5:8443"
	lb("Service_prod/shop_TCP_node_local_router_ovn-worker", "prod/shop", map[string]string{
		"10.89.0.2:30443": shop, "172.18.0.2:30443": shop, "172.18.0.200:443": shop},
		opts("skip_snat", "true"), "Logical_Router:GR_ovn-worker:load_balancer")
	lb("Service_prod/shop_TCP_node_switch_ovn-worker", "prod/shop", map[string]string{
		"169.254.169.3:30443": shop + "," + shop, "10.89.0.2:30443": shop, "172.18.0.2:30443": shop, "172.18.0.200:443": shop},
		opts(), "Logical_Switch:ovn-worker:load_balancer")
	for _, n := range nodes[1:] {
		ip := n.hostIPs[0]
		lb("Service_prod/shop_TCP_node_router_"+n.name, "prod/shop", map[string]string{ip + ":30443": "", "172.18.0.200:443": ""},
			opts(), "Logical_Router:GR_"+n.name+":load_balancer")
		lb("Service_prod/shop_TCP_node_switch_"+n.name, "prod/shop", map[string]string{
			"169.254.169.3:30443": "", ip + ":30443": shop, "172.18.0.200:443": shop},
			opts(), "Logical_Switch:"+n.name+":load_balancer")
	}
	// The NodePort backed by the host-network endpoint 172.18.0.3 (on
	// ovn-worker2): buildServiceLBConfigs makes its ClusterIP per node
	// (hasHostEndpoints); on ovn-worker2's gateway router the endpoint is
	// the host masquerade IP 169.254.169.2 (makeNodeRouterTargetIPs), so
	// the router's ClusterIP load balancer differs there, and
	// buildTemplateLBs gives the router template load balancer a target
	// template (makeLBTargetTemplateName, makeTemplateName) set per
	// chassis, the switch one the shared target. buildPerNodeLBs then
	// coalesces equal router and switch rules into node_router+switch and
	// mergeLBs folds the equal ones of ovn-worker, ovn-worker2's switch
	// and ovn-worker3 into the first ("_merged").
	host, masq := "172.18.0.3:9100", "169.254.169.2:9100"
	tmpl := "Service__prod_metrics__TCP__30910__node__router__template__IPv4"
	lb("Service_prod/metrics_TCP_node_switch_template_IPv4", "prod/metrics", map[string]string{
		"^NODEIP_IPv4_0:30910": host, "^NODEIP_IPv4_1:30910": host},
		opts("template", "true", "address-family", "ipv4"), "Load_Balancer_Group:clusterSwitchLBGroup:load_balancer")
	lb("Service_prod/metrics_TCP_node_router_template_IPv4", "prod/metrics", map[string]string{
		"^NODEIP_IPv4_0:30910": "^" + tmpl, "^NODEIP_IPv4_1:30910": "^" + tmpl},
		opts("template", "true", "address-family", "ipv4"), "Load_Balancer_Group:clusterRouterLBGroup:load_balancer")
	lb("Service_prod/metrics_TCP_node_router+switch_ovn-worker_merged", "prod/metrics", map[string]string{"10.96.0.40:9100": host}, opts(),
		"Logical_Router:GR_ovn-worker:load_balancer", "Logical_Switch:ovn-worker:load_balancer",
		"Logical_Switch:ovn-worker2:load_balancer", "Logical_Router:GR_ovn-worker3:load_balancer", "Logical_Switch:ovn-worker3:load_balancer")
	lb("Service_prod/metrics_TCP_node_router_ovn-worker2", "prod/metrics", map[string]string{"10.96.0.40:9100": masq}, opts(),
		"Logical_Router:GR_ovn-worker2:load_balancer")
	// The node IP template variables (svc_template_var.go
	// NodeIPsTemplates.AddIP over each node's host addresses;
	// services_controller_test.go nodeIPTemplate: no external_ids) and the
	// router target template of the host-network NodePort.
	for _, n := range nodes {
		vars := map[string]string{}
		for i, ip := range n.hostIPs {
			vars[fmt.Sprintf("NODEIP_IPv4_%d", i)] = ip
		}
		vars[tmpl] = host
		if n.name == "ovn-worker2" {
			vars[tmpl] = masq
		}
		rows = append(rows, ovnkRow{table: "Chassis_Template_Var", cols: []string{"chassis=" + n.chassis, "variables=" + nbMap(vars)}})
	}
	return rows
}

// writeOVNK writes the fixture: the three load
// balancer groups attached as OVN-Kubernetes attaches them
// (base_network_controller.go initLoadBalancerGroups; node switches get
// clusterLBGroup and clusterSwitchLBGroup, gateway.go gives gateway
// routers clusterLBGroup and clusterRouterLBGroup), then every row.
func writeOVNK(t *testing.T, ovn *testbed.OVN, rows []ovnkRow, nodes []string, legacy bool) {
	t.Helper()
	args := []string{"--id=@g0", "create", "Load_Balancer_Group", "name=clusterLBGroup",
		"--", "--id=@g1", "create", "Load_Balancer_Group", "name=clusterSwitchLBGroup",
		"--", "--id=@g2", "create", "Load_Balancer_Group", "name=clusterRouterLBGroup"}
	for _, n := range nodes {
		args = append(args, "--", "add", "Logical_Switch", n, "load_balancer_group", "@g0", "@g1",
			"--", "add", "Logical_Router", "GR_"+n, "load_balancer_group", "@g0", "@g2")
	}
	uuids := strings.Fields(ovn.Nbctl(args...))
	if len(uuids) != 3 {
		t.Fatalf("load balancer groups: %v", uuids)
	}
	groups := map[string]string{"clusterLBGroup": uuids[0], "clusterSwitchLBGroup": uuids[1], "clusterRouterLBGroup": uuids[2]}
	args = nil
	for i, r := range rows {
		if r.table == "QoS" {
			writeQoS(t, ovn, r)
			continue
		}
		id := "@r" + strconv.Itoa(i)
		ids := r.ids
		if legacy && r.legacy != nil {
			ids = r.legacy
		}
		cols := slices.Clone(r.cols)
		if len(ids) > 0 {
			cols = append(cols, "external_ids="+nbMap(ids))
		}
		if args != nil {
			args = append(args, "--")
		}
		args = append(args, "--id="+id, "create", r.table)
		args = append(args, cols...)
		for _, a := range r.attach {
			parts := strings.SplitN(a, ":", 3)
			if parts[0] == "Load_Balancer_Group" {
				parts[1] = groups[parts[1]]
			}
			args = append(args, "--", "add", parts[0], parts[1], parts[2], id)
		}
	}
	ovn.Nbctl(args...)
}

// writeQoS writes a QoS row with ovsdb-client: ovn-nbctl checks rows
// against the schema it was built with (23.03's, without the mark action)
// instead of the server's.
func writeQoS(t *testing.T, ovn *testbed.OVN, r ovnkRow) {
	t.Helper()
	row := map[string]any{}
	for _, c := range r.cols {
		k, v, _ := strings.Cut(c, "=")
		switch k {
		case "priority":
			n, _ := strconv.Atoi(v)
			row[k] = n
		case "match":
			row[k], _ = strconv.Unquote(v)
		case "action":
			key, val, _ := strings.Cut(v, ":")
			n, _ := strconv.Atoi(val)
			row[k] = []any{"map", [][]any{{key, n}}}
		default:
			row[k] = v
		}
	}
	var ids [][2]string
	for _, k := range slices.Sorted(maps.Keys(r.ids)) {
		ids = append(ids, [2]string{k, r.ids[k]})
	}
	row["external_ids"] = []any{"map", ids}
	ops := []any{"OVN_Northbound", map[string]any{"op": "insert", "table": "QoS", "row": row, "uuid-name": "q"}}
	for _, a := range r.attach {
		parts := strings.SplitN(a, ":", 3)
		ops = append(ops, map[string]any{"op": "mutate", "table": parts[0], "where": [][]any{{"name", "==", parts[1]}},
			"mutations": [][]any{{parts[2], "insert", []any{"set", [][]any{{"named-uuid", "q"}}}}}})
	}
	b, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ovsdb-client", "transact", ovn.NB, string(b)).CombinedOutput()
	if err != nil || strings.Contains(string(out), "error") {
		t.Fatalf("ovsdb-client transact %s: %v\n%s", b, err, out)
	}
}

// nbRow is one row of an ovn-nbctl JSON dump, by column.
type nbRow map[string]json.RawMessage

// dumpNB returns the rows of the tables ovnedge writes or attaches to, by
// table and UUID, with ovnedge's own external_ids (ovnedge.io/*) left out.
func dumpNB(t *testing.T, ovn *testbed.OVN) map[string]map[string]nbRow {
	t.Helper()
	out := map[string]map[string]nbRow{}
	for _, table := range []string{"Load_Balancer", "Load_Balancer_Group", "Logical_Router_Policy", "NAT", "Address_Set",
		"QoS", "Chassis_Template_Var", "Logical_Router", "Logical_Switch"} {
		var dump struct {
			Headings []string            `json:"headings"`
			Data     [][]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(ovn.Nbctl("--format=json", "list", table)), &dump); err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		rows := map[string]nbRow{}
		for _, d := range dump.Data {
			r := nbRow{}
			for i, h := range dump.Headings {
				r[h] = d[i]
			}
			if ids, ok := r["external_ids"]; ok {
				r["external_ids"] = stripOwn(t, ids)
			}
			var u []string
			if err := json.Unmarshal(r["_uuid"], &u); err != nil || len(u) != 2 {
				t.Fatalf("dump %s: _uuid %s", table, r["_uuid"])
			}
			rows[u[1]] = r
		}
		out[table] = rows
	}
	return out
}

// stripOwn removes the ovnedge.io/* keys of an external_ids map
// (["map",[[k,v],...]]).
func stripOwn(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var m []json.RawMessage
	var pairs [][2]string
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 2 || json.Unmarshal(m[1], &pairs) != nil {
		t.Fatalf("external_ids %s", raw)
	}
	pairs = slices.DeleteFunc(pairs, func(p [2]string) bool { return strings.HasPrefix(p[0], "ovnedge.io/") })
	b, _ := json.Marshal([]any{"map", pairs})
	return b
}

func idsJSON(ids map[string]string) json.RawMessage {
	pairs := [][2]string{}
	for _, k := range slices.Sorted(maps.Keys(ids)) {
		pairs = append(pairs, [2]string{k, ids[k]})
	}
	b, _ := json.Marshal([]any{"map", pairs})
	return b
}

var coexistNodes = []string{"ovn-worker", "ovn-worker2", "ovn-worker3"}

// startCoexistNB starts OVN with coexistCluster's routers, switches and
// ports (not rows under test).
func startCoexistNB(t *testing.T, qosMark bool) *testbed.OVN {
	t.Helper()
	ovn := testbed.StartOVNWith(t, testbed.OVNOptions{QoSMark: qosMark})
	ctx := context.Background()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{ovn.NB}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topo := ovsdbnb.Topology{ClusterSubnet: "10.244.0.0/16", JoinRouterIP: "100.64.0.1/16"}
	for i, n := range coexistNodes {
		topo.Nodes = append(topo.Nodes, ovsdbnb.Node{Name: n, Subnet: fmt.Sprintf("10.244.%d.0/24", i+1),
			JoinIP: fmt.Sprintf("100.64.0.%d/16", i+3), ExternalIP: fmt.Sprintf("172.18.0.%d/24", i+2)})
	}
	if err := ovsdbnb.EnsureTopology(ctx, c, topo); err != nil {
		t.Fatal(err)
	}
	return ovn
}

// loadCoexist loads coexistCluster as the daemon does (--manifests).
func loadCoexist(t *testing.T, cfg *Config) (desired.Snapshot, *Clients) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range coexistCluster {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Manifests = dir
	s, clients, err := LoadSnapshot(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return s, clients
}

// TestCoexistOVNK: the daemon's first leader pass over an NB that
// OVN-Kubernetes filled for the same cluster inserts and deletes nothing
// and leaves every row (values, options, attachments) as OVN-Kubernetes
// wrote it; a second pass sends nothing. With the legacy EgressIP scheme
// the rows are migrated in place (same UUIDs) to today's external_ids.
func TestCoexistOVNK(t *testing.T) {
	for _, tc := range []struct {
		name            string
		qosMark, legacy bool
	}{
		{"current", true, false},
		{"current/no-qos-mark", false, false}, // OVN 23.03's schema: no reply-traffic QoS row
		{"legacy", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ovn := startCoexistNB(t, tc.qosMark)
			ctx := context.Background()
			fixture := ovnkFixture(tc.qosMark)
			writeOVNK(t, ovn, fixture, coexistNodes, tc.legacy)
			before := dumpNB(t, ovn)

			cfg := demoConfig(t, "--nb-address", ovn.NB)
			s, clients := loadCoexist(t, cfg)
			m := NewMetrics()
			d := NewDataplane(cfg, clients, record.NewFakeRecorder(100), m, quiet)
			defer d.Close()
			if err := d.Cluster(ctx, s); err != nil {
				t.Fatal(err)
			}
			ops := map[string]float64{}
			for _, op := range []string{"insert", "update", "mutate", "delete"} {
				ops[op] = gathered(t, m, "ovnedge_nb_operations_total", "op="+op)
			}
			t.Logf("first sync: %v", ops)
			after := dumpNB(t, ovn)
			extra := gatewayNodePortLBs(before, after)
			if ops["insert"] != float64(len(extra)) || ops["delete"] != 0 || ops["update"] != 0 {
				t.Errorf("first sync over OVN-Kubernetes' rows: %v operations, want no update or delete and %d inserts (the gateway router NodePort load balancers)",
					ops, len(extra))
			}
			if err := d.Verify(ctx, s); err != nil {
				t.Errorf("second sync: %v", err)
			}

			// Every row is as OVN-Kubernetes wrote it (today's scheme:
			// legacy rows with the external_ids its syncer gives them).
			want := before
			if tc.legacy {
				for _, r := range fixture {
					if r.legacy == nil {
						continue
					}
					patchIDs(t, want[r.table], r)
				}
			}
			after = dumpNB(t, ovn)
			for table, rows := range want {
				for u, w := range rows {
					g, ok := after[table][u]
					if !ok {
						t.Errorf("%s %s deleted", table, u)
						continue
					}
					for col, wv := range w {
						if table == "Logical_Router" && col == "load_balancer" {
							g[col] = withoutUUIDs(t, g[col], extra)
						}
						if string(g[col]) != string(wv) {
							t.Errorf("%s %s: %s = %s, want %s", table, u, col, g[col], wv)
						}
					}
				}
				for u := range after[table] {
					if _, ok := rows[u]; !ok && !(table == "Load_Balancer" && extra[u]) {
						t.Errorf("%s %s inserted", table, u)
					}
				}
			}
		})
	}
}

// gatewayNodePortLBs are the load balancers in after and not in before
// that lbsvc adds beside a template NodePort on the nodes hosting its
// backends ("..._nodeport_router_<node>", docs/deviations.md): the only
// rows the first sync over OVN-Kubernetes' may insert.
func gatewayNodePortLBs(before, after map[string]map[string]nbRow) map[string]bool {
	out := map[string]bool{}
	for u, r := range after["Load_Balancer"] {
		var name string
		if _, ok := before["Load_Balancer"][u]; !ok && json.Unmarshal(r["name"], &name) == nil && strings.Contains(name, "_nodeport_router_") {
			out[u] = true
		}
	}
	return out
}

// withoutUUIDs is a dumped set of UUIDs without those of drop, in
// ovn-nbctl's JSON form.
func withoutUUIDs(t *testing.T, raw json.RawMessage, drop map[string]bool) json.RawMessage {
	t.Helper()
	var set []json.RawMessage
	if err := json.Unmarshal(raw, &set); err != nil || len(set) != 2 {
		t.Fatalf("not an OVSDB value: %s", raw)
	}
	var kind string
	_ = json.Unmarshal(set[0], &kind)
	var refs [][]string
	switch kind {
	case "uuid":
		var u string
		_ = json.Unmarshal(set[1], &u)
		refs = [][]string{{"uuid", u}}
	case "set":
		if err := json.Unmarshal(set[1], &refs); err != nil {
			t.Fatalf("not a set of UUIDs: %s", raw)
		}
	default:
		return raw
	}
	refs = slices.DeleteFunc(refs, func(r []string) bool { return len(r) == 2 && drop[r[1]] })
	var v any = []any{"set", refs}
	if len(refs) == 1 {
		v = refs[0]
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// patchIDs sets, in the dumped rows of r's table, the external_ids of the
// row r wrote (found by its columns) to today's.
func patchIDs(t *testing.T, rows map[string]nbRow, r ovnkRow) {
	t.Helper()
	n := 0
	for _, row := range rows {
		if matchesCols(row, r.cols) {
			row["external_ids"] = idsJSON(r.ids)
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%s %v: %d rows in the dump", r.table, r.cols, n)
	}
}

// matchesCols reports whether a dumped row has the scalar columns cols
// ("col=value" as given to nbctl) that identify it.
func matchesCols(row nbRow, cols []string) bool {
	for _, c := range cols {
		k, v, _ := strings.Cut(c, "=")
		switch k {
		case "priority":
			if string(row[k]) != v {
				return false
			}
		case "match", "external_ip", "logical_ip":
			var got string
			want, err := strconv.Unquote(v)
			if err != nil {
				want = v
			}
			if json.Unmarshal(row[k], &got) != nil || got != want {
				return false
			}
		}
	}
	return true
}

// TestLBTemplatesFallback: on the installed NB (23.03's schema has
// Chassis_Template_Var) NodePorts get OVN-Kubernetes' template load
// balancers; on an NB whose schema lacks the table (OVN before 22.12,
// simulated by the schema the check is given) the daemon falls back to
// per-node load balancers with one warning, as OVN-Kubernetes does, and
// writes no template variables.
func TestLBTemplatesFallback(t *testing.T) {
	for _, templates := range []bool{true, false} {
		t.Run(fmt.Sprintf("templates=%v", templates), func(t *testing.T) {
			ovn := startCoexistNB(t, false)
			ctx := context.Background()
			cfg := demoConfig(t, "--nb-address", ovn.NB)
			s, clients := loadCoexist(t, cfg)
			var logs strings.Builder
			d := NewDataplane(cfg, clients, record.NewFakeRecorder(100), NewMetrics(), slog.New(slog.NewTextHandler(&logs, nil)))
			defer d.Close()
			if err := d.cluster.connectNB(ctx); err != nil {
				t.Fatal(err)
			}
			if !ovsdbnb.SupportsTemplates(d.cluster.nb.Client().Schema()) {
				t.Fatalf("the installed NB schema %s has no Chassis_Template_Var", d.cluster.nb.Client().Schema().Version)
			}
			if !templates {
				old := d.cluster.nb.Client().Schema()
				old.Tables = maps.Clone(old.Tables)
				delete(old.Tables, "Chassis_Template_Var")
				d.cluster.fitTemplates(old)
			}
			for range 2 {
				if err := d.Cluster(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Verify(ctx, s); err != nil {
				t.Errorf("resync: %v", err)
			}
			lbs := ovn.Nbctl("--bare", "--columns=name", "find", "Load_Balancer", `external_ids:"k8s.ovn.org/owner"="prod/web"`)
			vars := ovn.Nbctl("--bare", "--columns=variables", "list", "Chassis_Template_Var")
			warned := strings.Count(logs.String(), "no Chassis_Template_Var table")
			if templates {
				if !strings.Contains(lbs, "Service_prod/web_TCP_node_switch_template_IPv4_merged") || strings.Contains(lbs, "node_router+switch") ||
					!strings.Contains(vars, "NODEIP_IPv4_0") || warned != 0 {
					t.Errorf("load balancers of prod/web:\n%s\nvariables: %s\n%d warnings", lbs, vars, warned)
				}
				return
			}
			// Per node: the NodePort VIPs are each node's addresses;
			// ovn-worker2 and ovn-worker3's are alike but for them, so
			// nothing merges.
			for _, n := range coexistNodes {
				if !strings.Contains(lbs, "Service_prod/web_TCP_node_router+switch_"+n) {
					t.Errorf("no per-node load balancer on %s:\n%s", n, lbs)
				}
			}
			if strings.Contains(lbs, "template") || strings.Contains(vars, "NODEIP") || warned != 1 {
				t.Errorf("load balancers of prod/web:\n%s\nvariables: %s\n%d warnings, want 1", lbs, vars, warned)
			}
			if got := ovn.Nbctl("get", "Load_Balancer", "Service_prod/web_TCP_node_router+switch_ovn-worker", "vips"); !strings.Contains(got, `"10.89.0.2:30080"`) ||
				!strings.Contains(got, `"172.18.0.2:30080"`) {
				t.Errorf("ovn-worker's NodePort VIPs: %s", got)
			}
		})
	}
}
