package egresssvc

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// LabelPrefix starts the label a host node carries for each EgressService
// it serves: LabelPrefix + "/<namespace>-<name>", value "".
const LabelPrefix = "egress-service.k8s.ovn.org"

// Event reasons.
const (
	// ReasonInvalid: a nodeSelector that does not parse (the Service
	// keeps the host it had).
	ReasonInvalid = "InvalidEgressService"
	// ReasonUnsupported: sourceIPBy Network on the shared gateway.
	ReasonUnsupported = "EgressServiceUnsupported"
	// ReasonNoHost: no node can serve the Service.
	ReasonNoHost = "NoEgressServiceHost"
)

// Label is the node label of the EgressService key ("<namespace>/<name>").
func Label(key string) string {
	return LabelPrefix + "/" + strings.Replace(key, "/", "-", 1)
}

// Input is what the choice of hosts reads.
type Input struct {
	// EgressServices are every EgressService; their status.host is the
	// allocation kept while it stays valid.
	EgressServices []*egressv1.EgressService
	// Service and Slices look up a Service and its EndpointSlices by key.
	Service func(key string) *corev1.Service
	Slices  func(key string) []*discoveryv1.EndpointSlice
	// Nodes are the Kubernetes nodes (labels, Ready); Parsed their
	// OVN-Kubernetes annotations (a node without a parse, or without
	// a pod subnet, cannot serve).
	Nodes  []*corev1.Node
	Parsed map[string]*ovnknode.Node
	// Reachable, when not nil, says whether a node answers the egress
	// health check.
	Reachable func(node string) bool
}

// Options are the cluster settings.
type Options struct {
	// ClusterSubnets are the pod network: endpoints outside it are host
	// network endpoints, never rerouted.
	ClusterSubnets []netip.Prefix
	// SharedGateway refuses sourceIPBy Network (host "", an event), as
	// OVN-Kubernetes' shared gateway mode does.
	SharedGateway bool
}

// Result is the hosts chosen.
type Result struct {
	// Hosts is the status.host of every EgressService, by key.
	Hosts map[string]string
	// Labels are the EgressService labels (Label) each node carries;
	// a node missing has none.
	Labels map[string][]string
	Events []event.Event
}

// Key is an EgressService's (and its Service's) key.
func Key(es *egressv1.EgressService) string { return es.Namespace + "/" + es.Name }

// Hosts chooses the node of every EgressService as OVN-Kubernetes'
// cluster manager does (go-controller/pkg/clustermanager/egressservice):
// a LoadBalancer Service with an ingress IP and endpoints on the pod
// network keeps its host while that node is Ready, reachable, matches the
// nodeSelector and, for externalTrafficPolicy=Local, has an endpoint;
// otherwise it gets the eligible node serving the fewest (ties by name).
// Unlike the peer's, the choice is a pure function: the allocations are
// the status.host values given back.
func Hosts(in Input, o Options) Result {
	res := Result{Hosts: map[string]string{}, Labels: map[string][]string{}}
	ess := slices.SortedFunc(slices.Values(in.EgressServices), func(a, b *egressv1.EgressService) int { return cmp.Compare(Key(a), Key(b)) })
	byName := make(map[string]*corev1.Node, len(in.Nodes))
	for _, n := range in.Nodes {
		byName[n.Name] = n
	}
	load := map[string]int{}
	var pending []choice
	for _, es := range ess {
		c, host, done := want(in, o, es, &res)
		switch {
		case done:
			res.Hosts[Key(es)] = host
		case eligible(in, c, byName[es.Status.Host]):
			res.Hosts[Key(es)] = es.Status.Host
			load[es.Status.Host]++
		default:
			pending = append(pending, c)
		}
	}
	for _, c := range pending {
		best := ""
		for _, n := range in.Nodes {
			if eligible(in, c, n) && (best == "" || load[n.Name] < load[best] || load[n.Name] == load[best] && n.Name < best) {
				best = n.Name
			}
		}
		res.Hosts[c.key] = best
		if best == "" {
			res.Events = append(res.Events, event.Warningf(ref(c.es), ReasonNoHost, "no node can serve EgressService %s: none is Ready, reachable and matches its nodeSelector%s", c.key, c.local))
			continue
		}
		load[best]++
	}
	for key, h := range res.Hosts {
		if h != "" && h != egressv1.HostAll {
			res.Labels[h] = append(res.Labels[h], Label(key))
		}
	}
	for _, l := range res.Labels {
		slices.Sort(l)
	}
	return res
}

// choice is an EgressService that needs a node.
type choice struct {
	es  *egressv1.EgressService
	key string
	sel labels.Selector
	// only are the nodes with an endpoint, for externalTrafficPolicy=Local
	// (nil: any); local says so in the event.
	only  map[string]bool
	local string
}

// want returns what an EgressService needs: done with its host when it
// needs no node (or keeps its own on a bad selector), else the choice.
func want(in Input, o Options, es *egressv1.EgressService, res *Result) (c choice, host string, done bool) {
	key := Key(es)
	svc := in.Service(key)
	if es.Spec.SourceIPBy == egressv1.SourceIPNetwork {
		if o.SharedGateway {
			res.Events = append(res.Events, event.Warningf(ref(es), ReasonUnsupported, "sourceIPBy Network is not supported on the shared gateway"))
			return c, "", true
		}
		return c, egressv1.HostAll, true
	}
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) == 0 {
		return c, "", true
	}
	epNodes := endpointNodes(in.Slices(key), o.ClusterSubnets)
	sel, err := metav1.LabelSelectorAsSelector(&es.Spec.NodeSelector)
	if err != nil {
		res.Events = append(res.Events, event.Warningf(ref(es), ReasonInvalid, "nodeSelector: %v; the host stays %q", err, es.Status.Host))
		return c, es.Status.Host, true
	}
	if len(epNodes) == 0 {
		return c, "", true
	}
	c = choice{es: es, key: key, sel: sel}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		c.only, c.local = epNodes, " and has an endpoint"
	}
	return c, "", false
}

// eligible reports whether node n (nil: none) can serve c.
func eligible(in Input, c choice, n *corev1.Node) bool {
	if n == nil {
		return false
	}
	p := in.Parsed[n.Name]
	if p == nil || len(p.Subnets) == 0 || !ovnknode.Ready(n) || (in.Reachable != nil && !in.Reachable(n.Name)) {
		return false
	}
	return (c.only == nil || c.only[n.Name]) && c.sel.Matches(labels.Set(n.Labels))
}

// endpointNodes are the nodes with an endpoint of the slices, none when
// no endpoint is on the pod network (OVN-Kubernetes' backendNodesFor).
func endpointNodes(slices []*discoveryv1.EndpointSlice, cluster []netip.Prefix) map[string]bool {
	nodes, onPodNetwork := map[string]bool{}, false
	eachEndpoint(slices, func(node string, ip netip.Addr) {
		nodes[node] = true
		onPodNetwork = onPodNetwork || inSubnets(ip, cluster)
	})
	if !onPodNetwork {
		return nil
	}
	return nodes
}

// eachEndpoint calls f with every address of the slices' endpoints that
// run on a node (FQDN slices left out).
func eachEndpoint(slices []*discoveryv1.EndpointSlice, f func(node string, ip netip.Addr)) {
	for _, sl := range slices {
		if sl.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.NodeName == nil {
				continue
			}
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					f(*ep.NodeName, ip.Unmap())
				}
			}
		}
	}
}

func inSubnets(ip netip.Addr, subnets []netip.Prefix) bool {
	return slices.ContainsFunc(subnets, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) })
}

func ref(es *egressv1.EgressService) corev1.ObjectReference {
	return event.Ref(egressv1.SchemeGroupVersion.String(), egressv1.ServiceKind, es)
}
