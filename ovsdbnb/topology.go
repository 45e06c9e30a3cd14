package ovsdbnb

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// Names of the OVN-Kubernetes topology.
const (
	ClusterRouter = "ovn_cluster_router"
	JoinSwitch    = "join"
	// KeyTopology marks the rows EnsureTopology creates (value
	// TopologyCreator); it refuses to touch a router or switch without it.
	KeyTopology     = "ovnedge.io/topology"
	TopologyCreator = "ovnedge"
	// Physnet is the network_name of the external switches' localnet
	// ports (ovn-bridge-mappings=physnet:br-ex).
	Physnet = "physnet"
)

// Node is one node of the OVN-Kubernetes topology.
type Node struct {
	// Name is the node name, e.g. "ovn-worker".
	Name string
	// Subnet is the node's pod subnet, e.g. "10.244.1.0/24": the switch
	// <Name> gets the router port rtos-<Name> at its first address and the
	// management port k8s-<Name> at its second.
	Subnet string
	// JoinIP is GR_<Name>'s address on the join switch, e.g. "100.64.0.3/16".
	JoinIP string
	// ExternalIP is GR_<Name>'s address on ext_<Name>, e.g. "172.18.0.2/16".
	ExternalIP string
	// Gateway is the external next hop of GR_<Name>'s default route, e.g.
	// "172.18.0.1" (no default route when empty).
	Gateway string
}

// Topology is the cluster-wide part of the topology.
type Topology struct {
	// ClusterSubnet is routed from every gateway router to
	// ovn_cluster_router, e.g. "10.244.0.0/16".
	ClusterSubnet string
	// JoinRouterIP is ovn_cluster_router's address on the join switch,
	// e.g. "100.64.0.1/16".
	JoinRouterIP string
	Nodes        []Node
}

// MAC returns the MAC OVN-Kubernetes derives from an IPv4 address:
// 0a:58 followed by the four address bytes.
func MAC(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}

// EnsureTopology creates what is missing of the OVN-Kubernetes topology
// in one transaction: ovn_cluster_router (with rtoj-ovn_cluster_router on
// the join switch), and per node the switch <node> (rtos-<node> /
// stor-<node>, management port k8s-<node>), a source-IP route of the node
// subnet to GR_<node>, GR_<node> (options:chassis=<node>, rtoj-GR_<node>
// on join, routes to the cluster subnet and the external gateway) and
// the external switch ext_<node> with rtoe-GR_<node> / etor-GR_<node>
// (options:nat-addresses=router) and the localnet port
// breth0_<node> (network_name=physnet). Routers and switches are marked
// with KeyTopology; one that exists without the mark is an error, and
// nothing is written. Existing marked rows are left as they are.
func EnsureTopology(ctx context.Context, c *Client, topo Topology) error {
	t := &topoBuilder{c: c, ctx: ctx, routers: map[string]string{}, switches: map[string]string{}}
	if err := t.build(topo); err != nil {
		return fmt.Errorf("ovsdbnb: topology: %w", err)
	}
	if len(t.ops) == 0 {
		return nil
	}
	conn := c.conn()
	results, err := c.transact(ctx, t.ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(results, t.ops)
	}
	if err != nil {
		return fmt.Errorf("ovsdbnb: topology: transact: %w", err)
	}
	return c.waitCache(ctx, conn, t.ops, results)
}

// topoBuilder collects the operations of EnsureTopology.
type topoBuilder struct {
	c        *Client
	ctx      context.Context
	ops      []ovsdb.Operation
	named    int
	routers  map[string]string // name -> (named) UUID
	switches map[string]string
	ports    map[string]bool // existing port names
	created  map[string]bool // routers and switches created here
}

var marked = map[string]string{KeyTopology: TopologyCreator}

func (t *topoBuilder) build(topo Topology) error {
	if len(topo.Nodes) == 0 {
		return errors.New("no nodes")
	}
	cluster, err := netip.ParsePrefix(topo.ClusterSubnet)
	if err != nil {
		return fmt.Errorf("cluster subnet %q: %w", topo.ClusterSubnet, err)
	}
	joinRouter, err := netip.ParsePrefix(topo.JoinRouterIP)
	if err != nil {
		return fmt.Errorf("join router IP %q: %w", topo.JoinRouterIP, err)
	}
	if err := t.load(); err != nil {
		return err
	}
	if err := t.router(ClusterRouter, nil); err != nil {
		return err
	}
	if err := t.logicalSwitch(JoinSwitch); err != nil {
		return err
	}
	t.link(ClusterRouter, "rtoj-"+ClusterRouter, joinRouter, JoinSwitch, "jtor-"+ClusterRouter, nil)
	for _, n := range topo.Nodes {
		if err := t.node(n, cluster, joinRouter.Addr()); err != nil {
			return fmt.Errorf("node %q: %w", n.Name, err)
		}
	}
	return nil
}

// load reads the existing routers and switches from the cache, and the
// names of the existing logical ports from the server (the client does
// not monitor ports).
func (t *topoBuilder) load() error {
	var lrs []nbdb.LogicalRouter
	var lss []nbdb.LogicalSwitch
	for _, l := range []any{&lrs, &lss} {
		if err := t.c.nb.List(t.ctx, l); err != nil {
			return fmt.Errorf("read cache: %w", err)
		}
	}
	t.ports, t.created = map[string]bool{}, map[string]bool{}
	for _, lr := range lrs {
		if lr.ExternalIDs[KeyTopology] != TopologyCreator {
			t.routers[lr.Name] = ""
		} else {
			t.routers[lr.Name] = lr.UUID
		}
	}
	for _, ls := range lss {
		if ls.ExternalIDs[KeyTopology] != TopologyCreator {
			t.switches[ls.Name] = ""
		} else {
			t.switches[ls.Name] = ls.UUID
		}
	}
	ops := []ovsdb.Operation{
		{Op: ovsdb.OperationSelect, Table: nbdb.LogicalRouterPortTable, Columns: []string{"name"}, Where: []ovsdb.Condition{}},
		{Op: ovsdb.OperationSelect, Table: nbdb.LogicalSwitchPortTable, Columns: []string{"name"}, Where: []ovsdb.Condition{}},
	}
	results, err := t.c.nb.Transact(t.ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(results, ops)
	}
	if err != nil {
		return fmt.Errorf("read ports: %w", err)
	}
	for _, r := range results {
		for _, row := range r.Rows {
			if name, ok := row["name"].(string); ok {
				t.ports[name] = true
			}
		}
	}
	return nil
}

func (t *topoBuilder) name() string {
	t.named++
	return fmt.Sprintf("topo%d", t.named)
}

// router creates the router name unless it exists with the mark.
func (t *topoBuilder) router(name string, options map[string]string) error {
	if u, ok := t.routers[name]; ok {
		if u == "" {
			return fmt.Errorf("logical router %q exists and was not created by %s (no external_ids:%s)", name, TopologyCreator, KeyTopology)
		}
		return nil
	}
	u := t.name()
	row := ovsdb.Row{"name": name, "external_ids": stringMap(marked)}
	if len(options) > 0 {
		row["options"] = stringMap(options)
	}
	t.ops = append(t.ops, ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.LogicalRouterTable, Row: row, UUIDName: u})
	t.routers[name], t.created[name] = u, true
	return nil
}

// logicalSwitch creates the switch name unless it exists with the mark.
func (t *topoBuilder) logicalSwitch(name string) error {
	if u, ok := t.switches[name]; ok {
		if u == "" {
			return fmt.Errorf("logical switch %q exists and was not created by %s (no external_ids:%s)", name, TopologyCreator, KeyTopology)
		}
		return nil
	}
	u := t.name()
	t.ops = append(t.ops, ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.LogicalSwitchTable,
		Row: ovsdb.Row{"name": name, "external_ids": stringMap(marked)}, UUIDName: u})
	t.switches[name], t.created[name] = u, true
	return nil
}

// link connects router port rp (address addr) of router to switch port
// sp of sw; extra options go on the switch port.
func (t *topoBuilder) link(router, rp string, addr netip.Prefix, sw, sp string, spOptions map[string]string) {
	if !t.ports[rp] {
		u := t.name()
		t.ops = append(t.ops,
			ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.LogicalRouterPortTable, UUIDName: u, Row: ovsdb.Row{
				"name": rp, "mac": MAC(addr.Addr()), "networks": stringSet([]string{addr.String()}),
				"external_ids": stringMap(marked)}},
			ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable, Where: whereUUID(t.routers[router]),
				Mutations: []ovsdb.Mutation{{Column: "ports", Mutator: ovsdb.MutateOperationInsert, Value: uuidSet(u)}}})
	}
	opts := map[string]string{"router-port": rp}
	for k, v := range spOptions {
		opts[k] = v
	}
	t.switchPort(sw, sp, "router", []string{"router"}, opts)
}

// switchPort creates the switch port name on sw unless it exists.
func (t *topoBuilder) switchPort(sw, name, typ string, addresses []string, options map[string]string) {
	if t.ports[name] {
		return
	}
	u := t.name()
	row := ovsdb.Row{"name": name, "addresses": stringSet(addresses), "external_ids": stringMap(marked)}
	if typ != "" {
		row["type"] = typ
	}
	if len(options) > 0 {
		row["options"] = stringMap(options)
	}
	t.ops = append(t.ops,
		ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.LogicalSwitchPortTable, UUIDName: u, Row: row},
		ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.LogicalSwitchTable, Where: whereUUID(t.switches[sw]),
			Mutations: []ovsdb.Mutation{{Column: "ports", Mutator: ovsdb.MutateOperationInsert, Value: uuidSet(u)}}})
}

// route adds a static route to router.
func (t *topoBuilder) route(router, prefix, nexthop, policy, outPort string) {
	u := t.name()
	row := ovsdb.Row{"ip_prefix": prefix, "nexthop": nexthop, "external_ids": stringMap(marked)}
	if policy != "" {
		row["policy"] = policy
	}
	if outPort != "" {
		row["output_port"] = outPort
	}
	t.ops = append(t.ops,
		ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.LogicalRouterStaticRouteTable, UUIDName: u, Row: row},
		ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable, Where: whereUUID(t.routers[router]),
			Mutations: []ovsdb.Mutation{{Column: "static_routes", Mutator: ovsdb.MutateOperationInsert, Value: uuidSet(u)}}})
}

func (t *topoBuilder) node(n Node, cluster netip.Prefix, joinRouter netip.Addr) error {
	if n.Name == "" {
		return errors.New("empty name")
	}
	subnet, err := netip.ParsePrefix(n.Subnet)
	if err != nil || !subnet.Addr().Is4() {
		return fmt.Errorf("subnet %q: want an IPv4 CIDR", n.Subnet)
	}
	subnet = subnet.Masked()
	join, err := netip.ParsePrefix(n.JoinIP)
	if err != nil || !join.Addr().Is4() {
		return fmt.Errorf("join IP %q: want an IPv4 address/length", n.JoinIP)
	}
	ext, err := netip.ParsePrefix(n.ExternalIP)
	if err != nil || !ext.Addr().Is4() {
		return fmt.Errorf("external IP %q: want an IPv4 address/length", n.ExternalIP)
	}
	if n.Gateway != "" {
		if _, err := netip.ParseAddr(n.Gateway); err != nil {
			return fmt.Errorf("gateway %q: %w", n.Gateway, err)
		}
	}
	gr, extSwitch := "GR_"+n.Name, "ext_"+n.Name
	routerIP := subnet.Addr().Next()
	mgmtIP := routerIP.Next()
	for _, err := range []error{t.logicalSwitch(n.Name), t.router(gr, map[string]string{"chassis": n.Name}), t.logicalSwitch(extSwitch)} {
		if err != nil {
			return err
		}
	}
	t.link(ClusterRouter, "rtos-"+n.Name, netip.PrefixFrom(routerIP, subnet.Bits()), n.Name, "stor-"+n.Name, nil)
	t.switchPort(n.Name, "k8s-"+n.Name, "", []string{MAC(mgmtIP) + " " + mgmtIP.String()}, nil)
	t.link(gr, "rtoj-"+gr, join, JoinSwitch, "jtor-"+gr, nil)
	t.link(gr, "rtoe-"+gr, ext, extSwitch, "etor-"+gr, map[string]string{"nat-addresses": "router"})
	t.switchPort(extSwitch, "breth0_"+n.Name, "localnet", []string{"unknown"}, map[string]string{"network_name": Physnet})
	if !t.created[gr] {
		return nil // routes were added with the router
	}
	t.route(gr, cluster.String(), joinRouter.String(), "", "")
	if n.Gateway != "" {
		t.route(gr, "0.0.0.0/0", n.Gateway, "", "rtoe-"+gr)
	}
	// The node's pods leave through its own gateway router unless a
	// policy reroutes them.
	t.route(ClusterRouter, subnet.String(), join.Addr().String(), "src-ip", "")
	return nil
}

// NodeTopology is node n (the node model, ovnknode.Node) as
// EnsureTopology builds it: its first pod
// subnet, its first gateway join address in joinPrefix's length (e.g.
// 100.64.0.0/16), its first primary address, and gateway as GR_<node>'s
// default next hop ("" for none).
func NodeTopology(n ovnknode.Node, joinPrefix netip.Prefix, gateway string) (Node, error) {
	if len(n.Subnets) == 0 || len(n.GatewayJoin) == 0 || len(n.Primary) == 0 {
		return Node{}, fmt.Errorf("node %s lacks a subnet, join or primary address", n.Name)
	}
	return Node{Name: n.Name, Subnet: n.Subnets[0].String(),
		JoinIP:     netip.PrefixFrom(n.GatewayJoin[0], joinPrefix.Bits()).String(),
		ExternalIP: n.Primary[0].String(), Gateway: gateway}, nil
}
