package egress

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// Router and row constants of OVN-Kubernetes' EgressIP controller
// (go-controller/pkg/ovn/egressip.go).
const (
	ClusterRouter = "ovn_cluster_router"
	// PriorityNodeReroute reroutes pod -> own host traffic to the
	// management port, PriorityNoReroute keeps east-west traffic off the
	// egress IPs, PriorityReroute sends a served pod to its egress nodes.
	PriorityNodeReroute = 1004
	PriorityNoReroute   = 102
	PriorityReroute     = 100
	// NodeIPMark marks pod -> node-IP traffic (br-ex SNATs it to the node
	// IP); SecondaryHostMark marks traffic sent to a management port for a
	// secondary host network egress IP.
	NodeIPMark        = 1008
	SecondaryHostMark = 1009
	// ReplyMark is the packet mark the node switches' QoS rule (priority
	// PriorityReplyQoS) sets on the replies of the served pods' connections
	// (ct.trk && ct.rpl); the 102 policy "pkt.mark == 42" then keeps them
	// off the egress nodes (a reply to a NodePort or ETP=local Service must
	// leave where the request came in).
	ReplyMark        = 42
	PriorityReplyQoS = 103
)

// Owner types of the rows egress computes. The reroute policies and SNATs
// of an EgressIP belong to Owner{OwnerEgressIP, <name>}, the cluster-wide
// 102 policies and address sets to Owner{OwnerClusterPolicies,
// "egressip"}, the node switches' reply-traffic QoS rules to ReplyQoSOwner,
// a node's 1004 policy to Owner{OwnerNode, <node>}.
const (
	OwnerEgressIP        = "EgressIP"
	OwnerClusterPolicies = "ClusterPolicies"
	OwnerNode            = "Node"
	clusterOwnerName     = "egressip"
)

// ClusterOwner owns the cluster-wide 102 policies and address sets.
var ClusterOwner = ovsdbnb.Owner{Type: OwnerClusterPolicies, Name: clusterOwnerName}

// ReplyQoSOwner owns the reply-traffic QoS rules. They are an owner of
// their own: a node switch not created yet, or a NB whose schema has no
// QoS "mark" action (OVN older than 24.03), fails them alone and not the
// 102 policies and address sets (the daemon leaves them out on such a NB,
// see ovsdbnb.Client.SupportsKey).
var ReplyQoSOwner = ovsdbnb.Owner{Type: OwnerClusterPolicies, Name: "egressip-reply-traffic"}

// OVN-Kubernetes' names of the no-reroute policies, the reply-traffic QoS
// rule and the address sets.
const (
	noReroutePodToPod  = "EIP-No-Reroute-Pod-To-Pod"
	noReroutePodToJoin = "EIP-No-Reroute-Pod-To-Join"
	noReroutePodToNode = "EIP-No-Reroute-Pod-To-Node"
	noRerouteReply     = "EIP-No-Reroute-reply-traffic"
	replyTrafficMark   = "EgressIP-Mark-Reply-Traffic"
	svcReplyMark       = "EgressSVC-Mark-Reply-Traffic"
	servedPodsSet      = "egressip-served-pods"
	egressSvcPodsSet   = "egresssvc-served-pods"
	nodeIPsSet         = "node-ips"
	ownerTypeNodeIPs   = "ClusterNodeIPs"
	ownerTypeEgressSvc = "EgressService"
)

// objectIDs is one of OVN-Kubernetes' ObjectIDsTypes
// (go-controller/pkg/libovsdb/ops/db_object_types.go): the owner type, and
// the external_ids keys whose values, in this order after the controller
// and the owner type, make up k8s.ovn.org/id. OVN-Kubernetes finds its
// rows by that id.
type objectIDs struct {
	ownerType string
	keys      []string
}

var (
	// lrpEgressIP is LogicalRouterPolicyEgressIP. OVN-Kubernetes also
	// builds the reply-traffic QoS rule's ids with it (not with its
	// QoSRuleEgressIP type).
	lrpEgressIP = objectIDs{OwnerEgressIP, []string{ovsdbnb.KeyPriority, ovsdbnb.KeyName, ovsdbnb.KeyIPFamily, ovsdbnb.KeyNetwork}}
	// natEgressIP is NATEgressIP: no network key.
	natEgressIP = objectIDs{OwnerEgressIP, []string{ovsdbnb.KeyName, ovsdbnb.KeyIPFamily}}
	// asEgressIP, asClusterNodeIPs and asEgressService are
	// AddressSetEgressIP, AddressSetClusterNodeIPs and
	// AddressSetEgressService; their ip-family is "v4" or "v6".
	asEgressIP       = objectIDs{OwnerEgressIP, []string{ovsdbnb.KeyName, ovsdbnb.KeyIPFamily, ovsdbnb.KeyNetwork}}
	asClusterNodeIPs = objectIDs{ownerTypeNodeIPs, []string{ovsdbnb.KeyName, ovsdbnb.KeyIPFamily}}
	asEgressService  = objectIDs{ownerTypeEgressSvc, []string{ovsdbnb.KeyName, ovsdbnb.KeyIPFamily}}
)

// Cluster is the cluster-wide configuration the NB rows depend on.
type Cluster struct {
	// ClusterSubnets are the pod network's subnets (required).
	ClusterSubnets []netip.Prefix
	// JoinSubnets default to 100.64.0.0/16 and fd98::/64.
	JoinSubnets []netip.Prefix
	// Controller is the owner-controller external id, default
	// ovsdbnb.DefaultController; Network the network one, default
	// "default".
	Controller, Network string
	// EgressServices adds, per family, a reply-traffic QoS rule for the
	// pods EgressServices serve (egresssvc-served-pods, named
	// EgressSVC-Mark-Reply-Traffic; ovnedge's own): the replies of their
	// connections with a kept client address (externalTrafficPolicy=Local)
	// must not follow the EgressService's 101 reroute either.
	EgressServices bool
}

func (c Cluster) withDefaults() Cluster {
	if len(c.JoinSubnets) == 0 {
		c.JoinSubnets = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("fd98::/64")}
	}
	c.Controller = cmp.Or(c.Controller, ovsdbnb.DefaultController)
	c.Network = cmp.Or(c.Network, ovnknode.DefaultNetwork)
	return c
}

// Served is an EgressIP with its assignment and the pods it serves.
type Served struct {
	Name   string
	Status []egressv1.EgressIPStatusItem
	Pods   []Pod
}

// HostAssignment is an egress IP a node hosts on a non-OVN host network
// for some pods; egress/hostnet turns it into an address, ip rules and
// SNAT rules on the link that holds Network.
type HostAssignment struct {
	Node     string
	EgressIP netip.Addr
	// Network is the node's host network containing EgressIP.
	Network netip.Prefix
	// EgressIPName is the EgressIP object; PodIPs the served pods' IPs of
	// EgressIP's family, sorted.
	EgressIPName string
	PodIPs       []netip.Addr
}

// Desired is the whole desired dataplane of the EgressIPs.
type Desired struct {
	NB   map[ovsdbnb.Owner]ovsdbnb.State
	Host []HostAssignment
}

// Compute returns the desired NB rows and host assignments for the nodes
// and the served EgressIPs: ClusterState plus EgressIPState of each. It
// fails only on a bad Cluster.
func Compute(c Cluster, nodes []ovnknode.Node, served []Served) (Desired, error) {
	byName := nodeIndex(nodes)
	var all []Pod
	d := Desired{NB: map[ovsdbnb.Owner]ovsdbnb.State{}}
	for _, s := range served {
		st, host := EgressIPState(c, s, byName)
		d.NB[ovsdbnb.Owner{Type: OwnerEgressIP, Name: s.Name}] = st
		d.Host = append(d.Host, host...)
		if len(s.Status) > 0 {
			all = append(all, s.Pods...)
		}
	}
	cl, err := ClusterState(c, nodes, all)
	if err != nil {
		return Desired{}, err
	}
	for o, st := range cl {
		d.NB[o] = st
	}
	return d, nil
}

// nodeIndex maps node names to nodes.
func nodeIndex(nodes []ovnknode.Node) map[string]*ovnknode.Node {
	m := make(map[string]*ovnknode.Node, len(nodes))
	for i := range nodes {
		m[nodes[i].Name] = &nodes[i]
	}
	return m
}

// ClusterState returns the cluster-wide rows: per node the 1004 policy
// (pod -> its own host IP goes to the management port); the 102 policies
// with the served-pods and node-IPs address sets, and the 102 allow of
// reply traffic (pkt.mark == 42); per family, the QoS rule every node
// switch holds, marking the replies of the served pods' connections with
// 42 (owned by ReplyQoSOwner). servedPods are the pods of every EgressIP
// with an assignment.
func ClusterState(c Cluster, nodes []ovnknode.Node, servedPods []Pod) (map[ovsdbnb.Owner]ovsdbnb.State, error) {
	c = c.withDefaults()
	if len(c.ClusterSubnets) == 0 {
		return nil, fmt.Errorf("egress cluster state: no cluster subnet")
	}
	out := map[ovsdbnb.Owner]ovsdbnb.State{}
	var nodeIPs []netip.Addr
	for i := range nodes {
		n := &nodes[i]
		var st ovsdbnb.State
		for _, v6 := range []bool{false, true} {
			_, ok1 := n.PrimaryIP(v6)
			mgmt, ok2 := n.MgmtIP(v6)
			if !ok1 || !ok2 {
				continue
			}
			// One per host address of the family (the primary one and
			// every other k8s.ovn.org/host-cidrs address), as
			// OVN-Kubernetes' AddSameNodeIPPolicy does.
			for _, ip := range n.HostIPs() {
				if ip.Is6() != v6 {
					continue
				}
				st.Policies = append(st.Policies, ovsdbnb.RouterPolicy{
					Router:   ClusterRouter,
					Priority: PriorityNodeReroute,
					Match:    fmt.Sprintf(`inport == "rtos-%s" && %s.dst == %s /* %s */`, n.Name, ipFamily(v6), ip, n.Name),
					Action:   "reroute",
					Nexthops: []string{mgmt.String()},
					// OVN-Kubernetes gives the default network's 1004
					// policies no external_ids; it finds them by
					// priority and match.
				})
			}
		}
		nodeIPs = append(nodeIPs, n.HostIPs()...)
		if len(st.Policies) > 0 {
			out[ovsdbnb.Owner{Type: OwnerNode, Name: n.Name}] = st
		}
	}
	var podIPs []netip.Addr
	for _, p := range servedPods {
		podIPs = append(podIPs, p.IPs...)
	}
	// Every node's switch holds the reply-traffic QoS rules.
	switches := make([]string, 0, len(nodes))
	for i := range nodes {
		switches = append(switches, nodes[i].Name)
	}
	slices.Sort(switches)
	switches = slices.Compact(switches)
	var st, reply ovsdbnb.State
	for _, v6 := range []bool{false, true} {
		fam, short := ipFamily(v6), "v4"
		if v6 {
			short = "v6"
		}
		clusterSubnets := ofFamily(c.ClusterSubnets, v6)
		if len(clusterSubnets) == 0 {
			continue
		}
		noReroute := func(name, match string, options map[string]string) ovsdbnb.RouterPolicy {
			return c.noReroute(name, fam, match, options)
		}
		// Every pair of cluster subnets, as OVN-Kubernetes'
		// createDefaultNoReroutePodPoliciesOps (egressip_ops.go).
		for _, s := range clusterSubnets {
			for _, d := range clusterSubnets {
				st.Policies = append(st.Policies, noReroute(noReroutePodToPod,
					fmt.Sprintf("%s.src == %s && %s.dst == %s", fam, s, fam, d), nil))
			}
		}
		for _, s := range clusterSubnets {
			for _, j := range ofFamily(c.JoinSubnets, v6) {
				st.Policies = append(st.Policies, noReroute(noReroutePodToJoin,
					fmt.Sprintf("%s.src == %s && %s.dst == %s", fam, s, fam, j), nil))
			}
		}
		served := ovsdbnb.AddressSet{Addresses: addrStrings(podIPs, v6),
			ExternalIDs: c.ids(asEgressIP, map[string]string{ovsdbnb.KeyName: servedPodsSet, ovsdbnb.KeyIPFamily: short, ovsdbnb.KeyNetwork: c.Network})}
		svc := ovsdbnb.AddressSet{Addresses: []string{},
			ExternalIDs: c.ids(asEgressService, map[string]string{ovsdbnb.KeyName: egressSvcPodsSet, ovsdbnb.KeyIPFamily: short})}
		nodeSet := ovsdbnb.AddressSet{Addresses: addrStrings(nodeIPs, v6),
			ExternalIDs: c.ids(asClusterNodeIPs, map[string]string{ovsdbnb.KeyName: nodeIPsSet, ovsdbnb.KeyIPFamily: short})}
		st.AddressSets = append(st.AddressSets, served, svc, nodeSet)
		st.Policies = append(st.Policies, noReroute(noReroutePodToNode,
			fmt.Sprintf("(%s.src == $%s || %s.src == $%s) && %s.dst == $%s", fam, served.Name(), fam, svc.Name(), fam, nodeSet.Name()),
			map[string]string{"pkt_mark": strconv.Itoa(NodeIPMark)}))
		if len(switches) > 0 {
			reply.QoSRules = append(reply.QoSRules, c.replyQoS(replyTrafficMark, fam, served.Name(), switches))
			if c.EgressServices {
				reply.QoSRules = append(reply.QoSRules, c.replyQoS(svcReplyMark, fam, svc.Name(), switches))
			}
		}
	}
	// The replies of the served pods' connections, marked by the QoS
	// rules, are never rerouted: one policy for both families.
	st.Policies = append(st.Policies, c.noReroute(noRerouteReply, "ip", fmt.Sprintf("pkt.mark == %d", ReplyMark), nil))
	out[ClusterOwner] = st
	out[ReplyQoSOwner] = reply
	return out, nil
}

// replyQoS is the QoS rule named name every node switch holds, marking
// with ReplyMark the replies of the connections of the pods of address
// set set, of the IP family fam.
func (c Cluster) replyQoS(name, fam, set string, switches []string) ovsdbnb.QoS {
	return ovsdbnb.QoS{
		Priority: PriorityReplyQoS, Direction: "from-lport",
		Match:  fmt.Sprintf("%s.src == $%s && ct.trk && ct.rpl", fam, set),
		Action: map[string]int{"mark": ReplyMark},
		ExternalIDs: c.ids(lrpEgressIP, map[string]string{ovsdbnb.KeyPriority: strconv.Itoa(PriorityReplyQoS),
			ovsdbnb.KeyName: name, ovsdbnb.KeyIPFamily: fam, ovsdbnb.KeyNetwork: c.Network}),
		Switches: switches,
	}
}

// noReroute is a 102 allow policy on the cluster router, named name, of
// the IP family fam ("ip4", "ip6" or "ip" for both).
func (c Cluster) noReroute(name, fam, match string, options map[string]string) ovsdbnb.RouterPolicy {
	return ovsdbnb.RouterPolicy{Router: ClusterRouter, Priority: PriorityNoReroute, Match: match, Action: "allow", Options: options,
		ExternalIDs: c.ids(lrpEgressIP, map[string]string{ovsdbnb.KeyPriority: strconv.Itoa(PriorityNoReroute),
			ovsdbnb.KeyName: name, ovsdbnb.KeyIPFamily: fam, ovsdbnb.KeyNetwork: c.Network})}
}

// EgressIPState returns the rows of one EgressIP: for each served pod and
// family with an assigned egress IP, a 100 reroute policy whose nexthops
// are the GR join IPs of the egress nodes (ECMP) or, for an egress IP on
// a secondary host network, the node's management IP (with
// options:pkt_mark=1009); and one SNAT per (pod IP, egress node) on
// GR_<node> for egress IPs on the primary network. Secondary host network
// egress IPs come back as HostAssignments. Status items naming an unknown
// node or an IP none of the node's networks holds are skipped.
func EgressIPState(c Cluster, s Served, nodes map[string]*ovnknode.Node) (ovsdbnb.State, []HostAssignment) {
	c = c.withDefaults()
	type hop struct {
		node      *ovnknode.Node
		eip       netip.Addr
		network   netip.Prefix
		secondary bool
	}
	var hops [2][]hop // by family
	for _, it := range s.Status {
		n := nodes[it.Node]
		a, err := netip.ParseAddr(it.EgressIP)
		if n == nil || err != nil {
			continue
		}
		a = a.Unmap()
		network, primary, ok := n.Network(a)
		if !ok {
			continue
		}
		f := family(a.Is6())
		hops[f] = append(hops[f], hop{node: n, eip: a, network: network, secondary: !primary})
	}
	var st ovsdbnb.State
	var host []HostAssignment
	for f, hs := range hops {
		v6 := f == 1
		if len(hs) == 0 {
			continue
		}
		var nexthops []netip.Addr
		secondary := false
		for _, h := range hs {
			var nh netip.Addr
			var ok bool
			if h.secondary {
				nh, ok = h.node.MgmtIP(v6)
				secondary = true
			} else {
				nh, ok = h.node.JoinIP(v6)
			}
			if ok && !slices.Contains(nexthops, nh) {
				nexthops = append(nexthops, nh)
			}
		}
		slices.SortFunc(nexthops, netip.Addr.Compare)
		var options map[string]string
		if secondary {
			options = map[string]string{"pkt_mark": strconv.Itoa(SecondaryHostMark)}
		}
		fam := ipFamily(v6)
		hostPods := make([][]netip.Addr, len(hs))
		for _, p := range s.Pods {
			for _, ip := range p.IPs {
				if ip.Is6() != v6 {
					continue
				}
				name := s.Name + "_" + p.Key()
				if len(nexthops) > 0 {
					st.Policies = append(st.Policies, ovsdbnb.RouterPolicy{
						Router: ClusterRouter, Priority: PriorityReroute, Action: "reroute",
						Match:    fmt.Sprintf("%s.src == %s", fam, ip),
						Nexthops: addrStrings(nexthops, v6),
						Options:  options,
						ExternalIDs: c.ids(lrpEgressIP, map[string]string{ovsdbnb.KeyPriority: strconv.Itoa(PriorityReroute),
							ovsdbnb.KeyName: name, ovsdbnb.KeyIPFamily: fam, ovsdbnb.KeyNetwork: c.Network}),
					})
				}
				for i, h := range hs {
					if h.secondary {
						hostPods[i] = append(hostPods[i], ip)
						continue
					}
					st.NATs = append(st.NATs, ovsdbnb.NAT{
						Router: "GR_" + h.node.Name, Type: "snat",
						ExternalIP: h.eip.String(), LogicalIP: ip.String(), LogicalPort: "k8s-" + h.node.Name,
						Options:     map[string]string{"stateless": "false"},
						ExternalIDs: c.ids(natEgressIP, map[string]string{ovsdbnb.KeyName: name, ovsdbnb.KeyIPFamily: fam}),
					})
				}
			}
		}
		for i, h := range hs {
			if h.secondary {
				ips := hostPods[i]
				slices.SortFunc(ips, netip.Addr.Compare)
				host = append(host, HostAssignment{Node: h.node.Name, EgressIP: h.eip, Network: h.network,
					EgressIPName: s.Name, PodIPs: ips})
			}
		}
	}
	slices.SortFunc(st.NATs, func(a, b ovsdbnb.NAT) int {
		return cmp.Or(cmp.Compare(a.Router, b.Router), cmp.Compare(a.LogicalIP, b.LogicalIP), cmp.Compare(a.ExternalIP, b.ExternalIP))
	})
	return st, host
}

// ids returns the external_ids OVN-Kubernetes writes for an object of
// type t with the values vals (keyed by t's keys): the owner controller
// and type, the values, and k8s.ovn.org/id =
// <controller>:<owner type>:<values in t's key order>.
func (c Cluster) ids(t objectIDs, vals map[string]string) map[string]string {
	m := map[string]string{ovsdbnb.KeyOwnerController: c.Controller, ovsdbnb.KeyOwnerType: t.ownerType}
	id := []string{c.Controller, t.ownerType}
	for _, k := range t.keys {
		m[k] = vals[k]
		id = append(id, vals[k])
	}
	m[ovsdbnb.KeyID] = strings.Join(id, ":")
	return m
}

func ipFamily(v6 bool) string {
	if v6 {
		return "ip6"
	}
	return "ip4"
}

func family(v6 bool) int {
	if v6 {
		return 1
	}
	return 0
}

func ofFamily(ps []netip.Prefix, v6 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if p.Addr().Is6() == v6 {
			out = append(out, p.Masked())
		}
	}
	return out
}

// addrStrings returns the family's addresses, sorted and deduplicated.
func addrStrings(as []netip.Addr, v6 bool) []string {
	var f []netip.Addr
	for _, a := range as {
		if a.Is6() == v6 {
			f = append(f, a)
		}
	}
	slices.SortFunc(f, netip.Addr.Compare)
	f = slices.Compact(f)
	out := make([]string, len(f))
	for i, a := range f {
		out[i] = a.String()
	}
	return out
}

// WithEgressServicePods puts ips, the pods EgressServices serve (package
// egress/egresssvc), in the egresssvc-served-pods address sets of the
// cluster-wide rows of nb (ClusterState's), which the 102 policy of
// pod -> node IP traffic names. The owner's State is copied, not changed.
func WithEgressServicePods(nb map[ovsdbnb.Owner]ovsdbnb.State, ips []netip.Addr) {
	o := ClusterOwner
	st, ok := nb[o]
	if !ok {
		return
	}
	st.AddressSets = slices.Clone(st.AddressSets)
	for i, a := range st.AddressSets {
		if a.ExternalIDs[ovsdbnb.KeyName] == egressSvcPodsSet {
			a.Addresses = addrStrings(ips, a.ExternalIDs[ovsdbnb.KeyIPFamily] == "v6")
			st.AddressSets[i] = a
		}
	}
	nb[o] = st
}
