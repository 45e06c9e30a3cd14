package lbsvc

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// The load balancers below are built as OVN-Kubernetes' services
// controller builds them (go-controller/pkg/ovn/controller/services/
// lb_config.go, loadbalancer.go, svc_template_var.go at the commit
// ovsdbnb names): abstract per-port configurations first, then cluster-wide,
// template and per-node load balancers, and equal per-node load balancers
// merged.

// OwnerNodeIPTemplates owns the NODEIP_IPv4_<i> / NODEIP_IPv6_<i> chassis
// template variables: each chassis' host addresses, the VIPs of the
// template load balancers.
const OwnerNodeIPTemplates = "NodeIPTemplates"

// NodeIPTemplatesOwner is the owner of the node IP template variables.
var NodeIPTemplatesOwner = ovsdbnb.Owner{Type: OwnerNodeIPTemplates, Name: "default"}

// maxAffinitySeconds is Kubernetes' largest ClientIP affinity timeout;
// OVN-Kubernetes turns it into selection_fields=ip_src,ip_dst (no
// timeout) and only then lets the Service use templates.
const maxAffinitySeconds = 86400

// nodeVIP stands for "every host address of the node" (NodePorts).
const nodeVIP = "node"

// lbConfig is one Service port's abstract load balancer: the VIPs (or
// nodeVIP) and the port they answer on.
type lbConfig struct {
	vips                                   []string
	proto                                  corev1.Protocol
	inport                                 int32
	eps                                    []endpoint
	externalLocal, internalLocal, nodePort bool
}

// lbRule is one VIP and its backends, in order.
type lbRule struct {
	source  string
	targets []string
}

// lbOpts are a load balancer's options as OVN-Kubernetes' LBOpts.
type lbOpts struct {
	affinity int32
	skipSNAT bool
	template bool
	family   string // "ipv4" or "ipv6", template load balancers only
}

// ovnLB is a load balancer being built.
type ovnLB struct {
	name                      string
	proto                     corev1.Protocol
	opts                      lbOpts
	rules                     []lbRule
	switches, routers, groups []string
}

// NodeIPTemplateName is OVN-Kubernetes' name of the i-th host address
// template variable of a family: NODEIP_IPv4_0, NODEIP_IPv6_1, ...
func NodeIPTemplateName(v6 bool, i int) string {
	return "NODEIP_" + familyName(v6) + "_" + strconv.Itoa(i)
}

func familyName(v6 bool) string {
	if v6 {
		return string(corev1.IPv6Protocol)
	}
	return string(corev1.IPv4Protocol)
}

// NodeIPTemplates returns the NODEIP variables of every node with a
// chassis: its i-th address of a family is NODEIP_<family>_<i>
// (OVN-Kubernetes' NodeIPsTemplates), and the number of variables of each
// family (the most addresses of that family any node has).
func NodeIPTemplates(nodes []Node) (vars []ovsdbnb.TemplateVar, counts [2]int) {
	return nodeIPTemplates(nodes, true)
}

// nodeIPCounts is NodeIPTemplates' counts alone (a template load
// balancer's rules need no more, and naming every node's variables for
// every NodePort Service was most of their cost at 2,000 nodes).
func nodeIPCounts(nodes []Node) [2]int {
	_, counts := nodeIPTemplates(nodes, false)
	return counts
}

func nodeIPTemplates(nodes []Node, withVars bool) (vars []ovsdbnb.TemplateVar, counts [2]int) {
	if withVars {
		nodes = sortedNodes(nodes)
	}
	for _, n := range nodes {
		if n.Chassis == "" {
			continue
		}
		var i [2]int
		for _, a := range n.IPs {
			if !a.IsValid() {
				continue
			}
			f := b2i(a.Is6())
			if withVars {
				vars = append(vars, ovsdbnb.TemplateVar{Chassis: n.Chassis, Name: NodeIPTemplateName(a.Is6(), i[f]), Value: a.Unmap().String()})
			}
			i[f]++
			counts[f] = max(counts[f], i[f])
		}
	}
	return vars, counts
}

// NodeIPTemplatesState is the node IP template variables' owner state.
func NodeIPTemplatesState(nodes []Node) ovsdbnb.State {
	vars, _ := NodeIPTemplates(nodes)
	return ovsdbnb.State{TemplateVars: vars}
}

var invalidTemplateChars = regexp.MustCompile(`[/\-$@]`)

// TemplateName is OVN-Kubernetes' makeTemplateName: "_" doubled, then
// "/", "-", "$" and "@" replaced by "_".
func TemplateName(name string) string {
	return invalidTemplateChars.ReplaceAllString(strings.ReplaceAll(name, "_", "__"), "_")
}

func lbName(svc *corev1.Service, proto corev1.Protocol, scope string) string {
	return "Service_" + svc.Namespace + "/" + svc.Name + "_" + string(proto) + "_" + scope
}

// sessionAffinity is the ClientIP timeout, 0 without affinity.
func sessionAffinity(svc *corev1.Service) int32 {
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return 0
	}
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		return *c.ClientIP.TimeoutSeconds
	}
	return corev1.DefaultClientIPServiceAffinitySeconds
}

func serviceState(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, nodes []Node, opts Options) (ovsdbnb.State, []event.Event) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return ovsdbnb.State{}, nil
	}
	ips, events := parseIPs(svc)
	events = append(events, underlayEvents(svc, ips.external, opts)...)
	etpLocal := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	itpLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	affinity := sessionAffinity(svc)
	needsTimeout := affinity != 0 && affinity != maxAffinitySeconds
	// ExternalIPs and ingress IPs of an ETP=Local Service are per node;
	// the rest are cluster VIPs. Underlay VIPs are on their underlay
	// switch only (underlayLBs).
	var local, vips []string
	var underlay []netip.Addr
	for _, a := range ips.cluster {
		vips = append(vips, a.String())
	}
	for _, vip := range ips.external {
		switch {
		case inUnderlay(vip, opts):
			underlay = append(underlay, vip)
		case etpLocal:
			local = append(local, vip.String())
		default:
			vips = append(vips, vip.String())
		}
	}
	var perNode, templates, cluster []lbConfig
	for _, sp := range svc.Spec.Ports {
		proto := cmpProto(sp.Protocol)
		if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP && proto != corev1.ProtocolSCTP {
			events = append(events, event.Warningf(serviceRef(svc), "UnsupportedProtocol", "port %d: protocol %q skipped", sp.Port, proto))
			continue
		}
		if sp.Port <= 0 || sp.Port > 65535 {
			continue // rejected by the API server; never a VIP
		}
		pe := portEndpoints(sp, eps)
		if sp.NodePort != 0 {
			c := lbConfig{vips: []string{nodeVIP}, proto: proto, inport: sp.NodePort, eps: pe, externalLocal: etpLocal, nodePort: true}
			if opts.PerNodeLBs || etpLocal || needsTimeout {
				perNode = append(perNode, c)
			} else {
				templates = append(templates, c)
			}
		}
		if len(local) > 0 {
			perNode = append(perNode, lbConfig{vips: local, proto: proto, inport: sp.Port, eps: pe, externalLocal: true})
		}
		c := lbConfig{vips: vips, proto: proto, inport: sp.Port, eps: pe, internalLocal: itpLocal}
		if hostEndpoints(pe, opts) || itpLocal {
			perNode = append(perNode, c)
		} else {
			cluster = append(cluster, c)
		}
	}
	var lbs []ovnLB
	lbs = append(lbs, clusterLBs(svc, cluster, opts)...)
	tlbs, vars := templateLBs(svc, templates, nodes, opts)
	lbs = append(lbs, tlbs...)
	unodes := nodes
	if opts.UnderlayNodes != nil {
		unodes = opts.UnderlayNodes
	}
	ulbs, uvars, uevents := underlayLBs(svc, eps, unodes, underlay, opts)
	lbs = append(lbs, ulbs...)
	vars = append(vars, uvars...)
	events = append(events, uevents...)
	lbs = append(lbs, perNodeLBs(svc, perNode, nodes, opts)...)
	// Nodes without a chassis have no template variables: their
	// NodePorts get per-node load balancers (a deviation: OVN-Kubernetes
	// serves none there until the node has a chassis).
	var unchassied []Node
	for _, n := range nodes {
		if n.Chassis == "" {
			unchassied = append(unchassied, n)
		}
	}
	if len(templates) > 0 && len(unchassied) > 0 {
		lbs = append(lbs, perNodeLBs(svc, templates, unchassied, opts)...)
	}
	lbs = append(lbs, localGatewayLBs(svc, templates, nodes, opts)...)

	var st ovsdbnb.State
	for _, lb := range lbs {
		row := lb.row(svc, opts)
		if len(row.VIPs) > 0 {
			st.LoadBalancers = append(st.LoadBalancers, row)
		}
	}
	slices.SortFunc(st.LoadBalancers, func(a, b ovsdbnb.LoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	st.TemplateVars = vars
	if opts.SourceRanges {
		fws, evs := Firewalls(svc)
		events = append(events, evs...)
		st.ACLs = sourceRangeACLs(svc, fws, nodes)
	}
	return st, events
}

func cmpProto(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// hostEndpoints reports whether an endpoint is outside the pod networks.
func hostEndpoints(eps []endpoint, opts Options) bool {
	if len(opts.ClusterSubnets) == 0 {
		return false
	}
	for _, e := range eps {
		if !slices.ContainsFunc(opts.ClusterSubnets, func(p netip.Prefix) bool { return p.Contains(e.addr) }) {
			return true
		}
	}
	return false
}

var protoOrder = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}

func byProto(cfgs []lbConfig) map[corev1.Protocol][]lbConfig {
	out := map[corev1.Protocol][]lbConfig{}
	for _, c := range cfgs {
		out[c.proto] = append(out[c.proto], c)
	}
	return out
}

// backends are the targets of family v6 among eps that keep keeps
// (the ready ones, else the serving and terminating ones).
func backends(eps []endpoint, v6 bool, keep func(endpoint) bool) []string {
	s := selectBackends(eps, v6, keep)
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

func isV6(vip string) bool {
	a, err := netip.ParseAddr(vip)
	return err == nil && a.Is6()
}

// clusterLBs is OVN-Kubernetes' buildClusterLBs: one load balancer per
// protocol in the cluster group.
func clusterLBs(svc *corev1.Service, cfgs []lbConfig, opts Options) []ovnLB {
	cbp := byProto(cfgs)
	var out []ovnLB
	for _, proto := range protoOrder {
		cs, ok := cbp[proto]
		if !ok {
			continue
		}
		lb := ovnLB{name: lbName(svc, proto, "cluster"), proto: proto, opts: lbOpts{affinity: sessionAffinity(svc)}, groups: []string{opts.group()}}
		for _, c := range cs {
			t := [2][]string{backends(c.eps, false, anyNode), backends(c.eps, true, anyNode)}
			for _, vip := range c.vips {
				lb.rules = append(lb.rules, lbRule{source: joinHostPort(vip, c.inport), targets: t[b2i(isV6(vip))]})
			}
		}
		out = append(out, lb)
	}
	return out
}

func joinHostPort(ip string, port int32) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]:" + strconv.Itoa(int(port))
	}
	return ip + ":" + strconv.Itoa(int(port))
}

// configTargets are a config's targets of both families, computed once
// for all nodes: filtering the endpoints again on each of 2,000 nodes for
// every NodePort Service was most of a leader's first pass at scale.
type configTargets struct {
	c   lbConfig
	fam [2]familyTargets
}

// familyTargets are a config's targets of one family: all of them, those
// on each node (with a local traffic policy), and the endpoints'
// addresses (for the host masquerade).
type familyTargets struct {
	all   []string
	local map[string][]string
	nodes map[string]bool
	addrs []netip.Addr
}

func newConfigTargets(c lbConfig) *configTargets {
	t := &configTargets{c: c}
	for f, v6 := range []bool{false, true} {
		ft := familyTargets{all: backends(c.eps, v6, anyNode)}
		byNode := map[string][]endpoint{}
		for _, e := range c.eps {
			if e.addr.Is6() == v6 {
				ft.addrs = append(ft.addrs, e.addr)
				byNode[e.node] = append(byNode[e.node], e)
			}
		}
		ft.nodes = make(map[string]bool, len(byNode))
		for node := range byNode {
			ft.nodes[node] = true
		}
		if c.externalLocal || c.internalLocal {
			ft.local = make(map[string][]string, len(byNode))
			for node, eps := range byNode {
				ft.local[node] = backends(eps, v6, anyNode)
			}
		}
		t.fam[f] = ft
	}
	return t
}

// targetsByProto are the targets of cfgs by protocol, in order.
func targetsByProto(cfgs []lbConfig) map[corev1.Protocol][]*configTargets {
	out := map[corev1.Protocol][]*configTargets{}
	for _, c := range cfgs {
		out[c.proto] = append(out[c.proto], newConfigTargets(c))
	}
	return out
}

// touches reports whether an endpoint of the config is on node n (by
// its node name or one of n's addresses).
func (t *configTargets) touches(n Node) bool {
	for f := range t.fam {
		ft := &t.fam[f]
		if ft.nodes[n.Name] || ft.onAddrOf(n) {
			return true
		}
	}
	return false
}

// onAddrOf reports whether an endpoint is on one of node n's own
// addresses (a host-network endpoint of n).
func (ft *familyTargets) onAddrOf(n Node) bool {
	return slices.ContainsFunc(n.IPs, func(a netip.Addr) bool { return slices.Contains(ft.addrs, a) })
}

// onNode are the targets on node.
func (ft *familyTargets) onNode(node string) []string {
	if t, ok := ft.local[node]; ok {
		return t
	}
	return []string{}
}

// node are the config's switch and router targets on node n, and whether
// they differ from the cluster targets (OVN-Kubernetes'
// makeNodeSwitchTargetIPs / makeNodeRouterTargetIPs): with a local
// traffic policy only the node's endpoints; on the router, an endpoint on
// one of the node's own addresses becomes the host masquerade IP. The
// slices are shared: not to be modified.
func (t *configTargets) node(n Node, v6 bool, opts Options) (sw, rt []string, swChanged, rtChanged bool) {
	ft := &t.fam[b2i(v6)]
	sw, rt = ft.all, ft.all
	if t.c.externalLocal || t.c.internalLocal {
		sw = ft.onNode(n.Name)
	}
	if t.c.externalLocal {
		rt = ft.onNode(n.Name)
	}
	replaced := false
	if ft.onAddrOf(n) {
		rt, replaced = hostMasquerade(rt, n, opts.masq(v6, 2))
	}
	return sw, rt, len(sw) != len(ft.all), len(rt) != len(ft.all) || replaced
}

// hostMasquerade replaces the targets on the node's own addresses by the
// host masquerade IP (keeping the port).
func hostMasquerade(targets []string, n Node, masq netip.Addr) ([]string, bool) {
	var out []string
	replaced := false
	for _, t := range targets {
		ap, err := netip.ParseAddrPort(t)
		if err == nil && slices.Contains(n.IPs, ap.Addr()) {
			if out == nil {
				out = slices.Clone(targets)
			}
			out[slices.Index(targets, t)] = netip.AddrPortFrom(masq, ap.Port()).String()
			replaced = true
		}
	}
	if out == nil {
		return targets, false
	}
	return out, replaced
}

// templateLBs is OVN-Kubernetes' buildTemplateLBs: per protocol and
// family one switch and one router template load balancer whose VIPs are
// "^NODEIP_<family>_<i>:<nodePort>" (clusterSwitchLBGroup,
// clusterRouterLBGroup), merged into one when their rules are equal. The
// backends are the cluster's, or a per-chassis template variable when they
// differ between nodes.
func templateLBs(svc *corev1.Service, cfgs []lbConfig, nodes []Node, opts Options) ([]ovnLB, []ovsdbnb.TemplateVar) {
	if len(cfgs) == 0 {
		return nil, nil
	}
	counts := nodeIPCounts(nodes)
	sorted := sortedNodes(nodes)
	cbp := byProto(cfgs)
	var out []ovnLB
	vals := map[string]map[string]string{} // template -> chassis -> value
	for _, proto := range protoOrder {
		cs, ok := cbp[proto]
		if !ok {
			continue
		}
		var swRules, rtRules [2][]lbRule
		for _, c := range cs {
			ct := newConfigTargets(c)
			for f, v6 := range []bool{false, true} {
				fam := familyName(v6)
				swT := TemplateName(lbName(svc, proto, fmt.Sprintf("%d_node_switch_template_%s", c.inport, fam)))
				rtT := TemplateName(lbName(svc, proto, fmt.Sprintf("%d_node_router_template_%s", c.inport, fam)))
				swNeeds, rtNeeds := false, false
				for _, n := range sorted {
					_, _, swc, rtc := ct.node(n, v6, opts)
					swNeeds, rtNeeds = swNeeds || swc, rtNeeds || rtc
				}
				for _, n := range sorted {
					if n.Chassis == "" || !swNeeds && !rtNeeds {
						continue
					}
					sw, rt, _, _ := ct.node(n, v6, opts)
					appendTemplate(vals, swT, n.Chassis, strings.Join(sw, ","))
					appendTemplate(vals, rtT, n.Chassis, strings.Join(rt, ","))
				}
				shared := []string{}
				if !swNeeds || !rtNeeds {
					shared = ct.fam[f].all
				}
				for i := range counts[f] {
					src := "^" + NodeIPTemplateName(v6, i) + ":" + strconv.Itoa(int(c.inport))
					if swNeeds {
						swRules[f] = append(swRules[f], lbRule{source: src, targets: []string{"^" + swT}})
					} else {
						swRules[f] = append(swRules[f], lbRule{source: src, targets: shared})
					}
					if rtNeeds {
						rtRules[f] = append(rtRules[f], lbRule{source: src, targets: []string{"^" + rtT}})
					} else {
						rtRules[f] = append(rtRules[f], lbRule{source: src, targets: shared})
					}
				}
				if !swNeeds {
					delete(vals, swT)
				}
				if !rtNeeds {
					delete(vals, rtT)
				}
			}
		}
		for f, v6 := range []bool{false, true} {
			if counts[f] == 0 {
				continue
			}
			fam := familyName(v6)
			o := lbOpts{affinity: sessionAffinity(svc), template: true, family: strings.ToLower(fam)}
			if len(swRules[f]) > 0 {
				out = append(out, ovnLB{name: lbName(svc, proto, "node_switch_template_"+fam), proto: proto, opts: o,
					rules: swRules[f], groups: []string{ClusterSwitchLBGroup}})
			}
			if len(rtRules[f]) > 0 {
				out = append(out, ovnLB{name: lbName(svc, proto, "node_router_template_"+fam), proto: proto, opts: o,
					rules: rtRules[f], groups: []string{ClusterRouterLBGroup}})
			}
		}
	}
	// Only the variables the rules refer to are written.
	used := map[string]bool{}
	for _, lb := range out {
		for _, r := range lb.rules {
			for _, t := range r.targets {
				if strings.HasPrefix(t, "^") {
					used[t[1:]] = true
				}
			}
		}
	}
	var vars []ovsdbnb.TemplateVar
	for _, name := range sortedKeys(vals) {
		if !used[name] {
			continue
		}
		for _, ch := range sortedKeys(vals[name]) {
			vars = append(vars, ovsdbnb.TemplateVar{Chassis: ch, Name: name, Value: vals[name][ch]})
		}
	}
	return mergeLBs(out), vars
}

// localGatewayLBs are the gateway router load balancers a template
// NodePort needs beside its template ones: for every node with a chassis
// hosting one of the NodePort's router targets, one per protocol on
// GR_<node> only ("Service_<ns>/<name>_<PROTO>_nodeport_router_<node>";
// node_router_<node> may be the Service's per-node ClusterIP one), its VIPs the node's addresses and its targets those the
// template expands to there (so the two give the gateway router the same
// flows), for the families with such a target. A deviation from
// OVN-Kubernetes, which serves template NodePorts by the template load
// balancers alone: ovn-northd skips the gateway router's unSNAT stage
// (lr_in_unsnat, priority 120) for a load balancer VIP only when the VIP
// is literally one of the router's NAT external IPs, which a template VIP
// (^NODEIP_IPv4_0) never is. A NodePort packet to the node IP then goes
// through ct_snat in the router's SNAT zone before its DNAT, and when the
// chosen backend is on the same chassis the connection's later packets
// reach it DNATed but not SNATed (the pod answers them with a reset);
// ovn-northd's comment on that flow names the conntrack issue. A one-node
// cluster, where every backend is local, served no NodePort at all. A
// node without a local target keeps the template alone (its backends are
// reached through a tunnel, which works).
func localGatewayLBs(svc *corev1.Service, cfgs []lbConfig, nodes []Node, opts Options) []ovnLB {
	if len(cfgs) == 0 {
		return nil
	}
	cts := targetsByProto(cfgs)
	var out []ovnLB
	for _, n := range sortedNodes(nodes) {
		if n.Chassis == "" {
			continue // per-node load balancers already (serviceState)
		}
		for _, proto := range protoOrder {
			var rules []lbRule
			for _, ct := range cts[proto] {
				if !ct.touches(n) {
					continue
				}
				for _, a := range n.IPs {
					if !a.IsValid() {
						continue
					}
					a = a.Unmap()
					if _, rt, _, _ := ct.node(n, a.Is6(), opts); hostsTarget(ct.c, n, rt, opts) {
						rules = append(rules, lbRule{source: joinHostPort(a.String(), ct.c.inport), targets: rt})
					}
				}
			}
			if len(rules) > 0 {
				out = append(out, ovnLB{name: lbName(svc, proto, "nodeport_router_"+n.Name), proto: proto,
					opts: lbOpts{affinity: sessionAffinity(svc)}, rules: rules, routers: []string{GatewayRouter(n.Name)}})
			}
		}
	}
	return out
}

// hostsTarget reports whether one of the router targets rt of config c on
// node n is on n: an endpoint of n, or the host masquerade address an
// endpoint on one of n's own addresses became.
func hostsTarget(c lbConfig, n Node, rt []string, opts Options) bool {
	for _, e := range c.eps {
		switch {
		case slices.Contains(n.IPs, e.addr):
			if slices.Contains(rt, hostPort(opts.masq(e.addr.Is6(), 2), e.port)) {
				return true
			}
		case e.node == n.Name:
			if slices.Contains(rt, e.backend()) {
				return true
			}
		}
	}
	return false
}

// appendTemplate appends a comma-separated value to a template's chassis
// entry; empty values are not recorded (OVN-Kubernetes'
// appendTemplateValue).
func appendTemplate(vals map[string]map[string]string, name, chassis, v string) {
	if vals[name] == nil {
		vals[name] = map[string]string{}
	}
	if v == "" {
		return
	}
	if old := vals[name][chassis]; old != "" {
		v = old + "," + v
	}
	vals[name][chassis] = v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// perNodeLBs is OVN-Kubernetes' buildPerNodeLBs: per node and protocol a
// router and a switch load balancer (one node_router+switch_<node> when
// their rules are equal), ETP=Local VIPs with local endpoints on a
// node_local_router_<node> without SNAT, the ETP=Local masquerade VIP of
// NodePorts on the switch; then equal load balancers merged.
func perNodeLBs(svc *corev1.Service, cfgs []lbConfig, nodes []Node, opts Options) []ovnLB {
	if len(cfgs) == 0 {
		return nil
	}
	cts := targetsByProto(cfgs)
	affinity := sessionAffinity(svc)
	var out []ovnLB
	for _, n := range sortedNodes(nodes) {
		for _, proto := range protoOrder {
			cs, ok := cts[proto]
			if !ok {
				continue
			}
			var routerRules, noSNAT, switchRules []lbRule
			for _, ct := range cs {
				c := ct.c
				var swAll, swLocal, rt [2][]string
				for f, v6 := range []bool{false, true} {
					swAll[f] = ct.fam[f].all
					swLocal[f], rt[f], _, _ = ct.node(n, v6, opts)
				}
				var vips []string
				for _, vip := range c.vips {
					if vip != nodeVIP {
						vips = append(vips, vip)
						continue
					}
					for _, a := range n.IPs {
						if a.IsValid() {
							vips = append(vips, a.Unmap().String())
						}
					}
				}
				for _, vip := range vips {
					f := b2i(isV6(vip))
					if c.externalLocal && c.nodePort {
						mvip := opts.masq(f == 1, 3).String()
						switchRules = append(switchRules, lbRule{source: joinHostPort(mvip, c.inport), targets: swLocal[f]})
					}
					if c.internalLocal && !slices.Contains(c.vips, nodeVIP) && isClusterIP(svc, vip) {
						switchRules = append(switchRules, lbRule{source: joinHostPort(vip, c.inport), targets: swLocal[f]})
					} else {
						switchRules = append(switchRules, lbRule{source: joinHostPort(vip, c.inport), targets: swAll[f]})
					}
					r := lbRule{source: joinHostPort(vip, c.inport), targets: rt[f]}
					if c.externalLocal && len(rt[f]) > 0 {
						noSNAT = append(noSNAT, r)
					} else {
						routerRules = append(routerRules, r)
					}
				}
			}
			o := lbOpts{affinity: affinity}
			if len(switchRules) > 0 && rulesEqual(switchRules, routerRules) {
				out = append(out, ovnLB{name: lbName(svc, proto, "node_router+switch_"+n.Name), proto: proto, opts: o,
					rules: routerRules, routers: []string{GatewayRouter(n.Name)}, switches: []string{NodeSwitch(n.Name)}})
				continue
			}
			if len(routerRules) > 0 {
				out = append(out, ovnLB{name: lbName(svc, proto, "node_router_"+n.Name), proto: proto, opts: o,
					rules: routerRules, routers: []string{GatewayRouter(n.Name)}})
			}
			if len(noSNAT) > 0 {
				ol := o
				ol.skipSNAT = true
				out = append(out, ovnLB{name: lbName(svc, proto, "node_local_router_"+n.Name), proto: proto, opts: ol,
					rules: noSNAT, routers: []string{GatewayRouter(n.Name)}})
			}
			if len(switchRules) > 0 {
				out = append(out, ovnLB{name: lbName(svc, proto, "node_switch_"+n.Name), proto: proto, opts: o,
					rules: switchRules, switches: []string{NodeSwitch(n.Name)}})
			}
		}
	}
	return mergeLBs(out)
}

// isClusterIP reports whether vip is one of the Service's ClusterIPs.
func isClusterIP(svc *corev1.Service, vip string) bool {
	return slices.Contains(svc.Spec.ClusterIPs, vip) || svc.Spec.ClusterIP == vip
}

func rulesEqual(a, b []lbRule) bool {
	return slices.EqualFunc(a, b, func(x, y lbRule) bool { return x.source == y.source && slices.Equal(x.targets, y.targets) })
}

// mergeKey is what makes two load balancers mergeable: protocol,
// options and rules (rulesKey).
type mergeKey struct {
	proto corev1.Protocol
	opts  lbOpts
	rules string
}

// rulesKey encodes rules, in order, as one string: sources and targets
// never hold ';', '=' or ','.
func rulesKey(rules []lbRule) string {
	var b strings.Builder
	for _, r := range rules {
		b.WriteString(r.source)
		b.WriteByte('=')
		for i, t := range r.targets {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(t)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// mergeLBs is OVN-Kubernetes' mergeLBs: a load balancer with the protocol,
// options and rules of an earlier one is folded into it (its switches,
// routers and groups added), whose name then ends in "_merged". Found by
// key, not by comparing every pair: per-node load balancers on 2,000
// nodes are 4,000 of them per Service.
func mergeLBs(lbs []ovnLB) []ovnLB {
	if len(lbs) <= 1 {
		return lbs
	}
	var out []ovnLB
	first := make(map[mergeKey]int, len(lbs))
	for _, lb := range lbs {
		k := mergeKey{proto: lb.proto, opts: lb.opts, rules: rulesKey(lb.rules)}
		i, ok := first[k]
		if !ok {
			first[k] = len(out)
			out = append(out, lb)
			continue
		}
		out[i].switches = append(out[i].switches, lb.switches...)
		out[i].routers = append(out[i].routers, lb.routers...)
		out[i].groups = append(out[i].groups, lb.groups...)
		if !strings.HasSuffix(out[i].name, "_merged") {
			out[i].name += "_merged"
		}
	}
	return out
}

// row is the Load_Balancer row of lb (OVN-Kubernetes' buildLB): targets
// of rules with the same VIP joined.
func (lb ovnLB) row(svc *corev1.Service, opts Options) ovsdbnb.LoadBalancer {
	idle := emptyLBEvents(svc, opts)
	o := map[string]string{
		"reject":             strconv.FormatBool(!idle),
		"event":              strconv.FormatBool(idle),
		"skip_snat":          strconv.FormatBool(lb.opts.skipSNAT),
		"neighbor_responder": "none",
		"hairpin_snat_ip":    opts.hairpin(),
	}
	var sel []string
	if lb.opts.affinity > 0 {
		if lb.opts.affinity != maxAffinitySeconds {
			o["affinity_timeout"] = strconv.Itoa(int(lb.opts.affinity))
		} else {
			sel = []string{"ip_src", "ip_dst"}
		}
	}
	if lb.opts.template {
		o["template"] = "true"
		o["address-family"] = lb.opts.family
	}
	vips := map[string]string{}
	var order []string
	targets := map[string][]string{}
	for _, r := range lb.rules {
		if _, ok := targets[r.source]; !ok {
			order = append(order, r.source)
		}
		targets[r.source] = append(targets[r.source], r.targets...)
	}
	for _, src := range order {
		vips[src] = strings.Join(targets[src], ",")
	}
	return ovsdbnb.LoadBalancer{
		Name:            lb.name,
		Protocol:        strings.ToLower(string(lb.proto)),
		VIPs:            vips,
		Options:         o,
		SelectionFields: sel,
		ExternalIDs: map[string]string{
			ovsdbnb.KeyKind:  OwnerService,
			ovsdbnb.KeyOwner: svc.Namespace + "/" + svc.Name,
		},
		Switches: lb.switches,
		Routers:  lb.routers,
		Groups:   lb.groups,
	}
}
