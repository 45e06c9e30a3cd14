// Package clustermodel is a small random Kubernetes cluster for property
// tests of the desired state: its objects are edited at random, replaced
// (never changed in place) as an informer's store does, and every edit is
// noted in Ch, the desired.Changes an incremental Index takes.
package clustermodel

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Model is a small random cluster a property test edits: its objects by
// informer key, replaced (never changed in place) on every edit, as an
// informer's store does.
type Model struct {
	r           *rand.Rand
	nodes       map[string]*corev1.Node
	namespaces  map[string]*corev1.Namespace
	pods        map[string]*corev1.Pod
	infos       map[string]*egress.PodInfo // the pods as the caches hold them
	svcs        map[string]*corev1.Service
	slices      map[string]*discoveryv1.EndpointSlice
	eips        map[string]*unstructured.Unstructured
	esvcs       map[string]*unstructured.Unstructured
	seq         int
	Ch          *desired.Changes
	start       time.Time
	nodesN      int
	namespacesN int
}

// New is a cluster of random objects drawn from seed: nodes, namespaces,
// pods, Services (each with an EndpointSlice) and EgressIPs; its Ch holds
// them all, added.
func New(seed uint64, nodes, namespaces, pods, svcs, eips int) *Model {
	m := &Model{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), nodes: map[string]*corev1.Node{},
		namespaces: map[string]*corev1.Namespace{}, pods: map[string]*corev1.Pod{}, infos: map[string]*egress.PodInfo{}, svcs: map[string]*corev1.Service{},
		slices: map[string]*discoveryv1.EndpointSlice{}, eips: map[string]*unstructured.Unstructured{},
		esvcs: map[string]*unstructured.Unstructured{},
		start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nodesN: nodes, namespacesN: namespaces}
	m.Reset()
	for i := range nodes {
		m.PutNode(m.Node(i, true, true, 0))
	}
	for i := range namespaces {
		m.putNamespace(m.namespace(i))
	}
	for range pods {
		m.putPod(m.newPod())
	}
	for range svcs {
		svc := m.newService()
		m.putService(svc)
		m.putSlice(m.newSlice(svc.Namespace, svc.Name))
	}
	for range eips {
		m.PutEIP(m.newEIP())
	}
	return m
}

// Reset empties Ch: the changes are taken.
func (m *Model) Reset() {
	m.Ch = &desired.Changes{Nodes: map[string]*corev1.Node{}, Namespaces: map[string]*corev1.Namespace{}, Pods: map[string]*egress.PodInfo{},
		Services: map[string]*corev1.Service{}, EndpointSlices: map[string]*discoveryv1.EndpointSlice{},
		EgressIPs: map[string]*unstructured.Unstructured{}, EgressServices: map[string]*unstructured.Unstructured{}}
}

// Snapshot lists every object, in random order as a store lists them.
func (m *Model) Snapshot() desired.Snapshot {
	var s desired.Snapshot
	// Listed in random order, as a store lists them.
	s.Nodes = shuffled(m.r, m.nodes)
	s.Namespaces = shuffled(m.r, m.namespaces)
	s.Pods = shuffled(m.r, m.infos)
	s.Services = shuffled(m.r, m.svcs)
	s.EndpointSlices = shuffled(m.r, m.slices)
	s.EgressIPs = shuffled(m.r, m.eips)
	s.EgressServices = shuffled(m.r, m.esvcs)
	return s
}

func shuffled[T any](r *rand.Rand, m map[string]*T) []*T {
	out := slices.Collect(maps.Values(m))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (m *Model) pick(keys []string) string { return keys[m.r.IntN(len(keys))] }

// Node is node i (node<i>): ready or not, egress-assignable or not;
// variant picks its addresses and networks.
func (m *Model) Node(i int, ready, assignable bool, variant int) *corev1.Node {
	name := fmt.Sprintf("node%d", i)
	labels := map[string]string{}
	if assignable {
		labels["k8s.ovn.org/egress-assignable"] = ""
	}
	ann := map[string]string{
		"k8s.ovn.org/node-subnets":                   fmt.Sprintf(`{"default":["10.244.%d.0/24"]}`, i),
		"k8s.ovn.org/node-primary-ifaddr":            fmt.Sprintf(`{"ipv4":"172.18.0.%d/16"}`, i+2),
		"k8s.ovn.org/node-gateway-router-lrp-ifaddr": fmt.Sprintf(`{"ipv4":"100.64.0.%d/16"}`, i+3),
		"k8s.ovn.org/node-chassis-id":                fmt.Sprintf("chassis-%d", i),
	}
	switch variant {
	case 1: // a secondary host network
		ann["k8s.ovn.org/host-cidrs"] = fmt.Sprintf(`["172.18.0.%d/16","192.168.50.%d/24"]`, i+2, i+2)
	case 2: // broken
		ann["k8s.ovn.org/node-subnets"] = "not json"
	case 3: // no annotations at all
		ann = nil
	case 4: // another join address (the nexthop of its egress IPs)
		ann["k8s.ovn.org/node-gateway-router-lrp-ifaddr"] = fmt.Sprintf(`{"ipv4":"100.64.1.%d/16"}`, i+3)
	}
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: ann},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("172.18.0.%d", i+2)}}}}
}

func (m *Model) namespace(i int) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns%d", i),
		Labels: map[string]string{"tenant": fmt.Sprint(m.r.IntN(3))}}}
}

func (m *Model) newPod() *corev1.Pod {
	m.seq++
	node := m.r.IntN(m.nodesN)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", m.r.IntN(m.namespacesN)),
		Name: fmt.Sprintf("pod%d", m.seq), Labels: map[string]string{"app": fmt.Sprint(m.r.IntN(3))}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node%d", node)}}
	m.podStatus(p, node)
	return p
}

func (m *Model) podStatus(p *corev1.Pod, node int) {
	p.Status = corev1.PodStatus{}
	if m.r.IntN(8) == 0 {
		p.Status.Phase = corev1.PodPending
		return
	}
	ip := fmt.Sprintf("10.244.%d.%d", node, 3+m.r.IntN(40)) // IPs may repeat: pods come and go
	p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
}

func (m *Model) newService() *corev1.Service {
	m.seq++
	ns := fmt.Sprintf("ns%d", m.r.IntN(m.namespacesN))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc%d", m.seq),
		CreationTimestamp: metav1.NewTime(m.start.Add(time.Duration(m.seq) * time.Second))}}
	m.serviceSpec(svc)
	return svc
}

func (m *Model) serviceSpec(svc *corev1.Service) {
	ip := fmt.Sprintf("10.96.%d.%d", m.seq/250, m.seq%250+1)
	svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: int32(80 + m.r.IntN(2)),
			TargetPort: intstr.FromInt32(8080)}}}
	svc.Status = corev1.ServiceStatus{}
	switch m.r.IntN(6) {
	case 0, 1:
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
		svc.Spec.Ports[0].NodePort = int32(30000 + m.r.IntN(200))
		if m.r.IntN(2) == 0 { // an address of its own, maybe another's too
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("172.19.0.%d", 1+m.r.IntN(6))}}
		}
	case 2:
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = int32(30000 + m.r.IntN(200))
	case 3:
		svc.Spec.ExternalIPs = []string{fmt.Sprintf("192.0.2.%d", 1+m.r.IntN(4))}
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.ExternalIPs) > 0 {
		if m.r.IntN(2) == 0 {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		} else {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}
	}
}

func (m *Model) newSlice(ns, svc string) *discoveryv1.EndpointSlice {
	m.seq++
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", svc, m.seq),
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4}
	m.sliceEndpoints(sl)
	return sl
}

func (m *Model) sliceEndpoints(sl *discoveryv1.EndpointSlice) {
	port, proto, name := int32(8080), corev1.ProtocolTCP, "http"
	sl.Ports = []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}}
	sl.Endpoints = nil
	pods := slices.Sorted(maps.Keys(m.pods))
	for range m.r.IntN(3) {
		if len(pods) == 0 {
			break
		}
		p := m.pods[m.pick(pods)]
		if p.Status.PodIP == "" {
			continue
		}
		ready := m.r.IntN(5) != 0
		node := p.Spec.NodeName
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &node})
	}
}

func (m *Model) newEIP() *unstructured.Unstructured {
	m.seq++
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
		"metadata": map[string]any{"name": fmt.Sprintf("eip%d", m.seq),
			"creationTimestamp": m.start.Add(time.Duration(m.seq) * time.Second).Format(time.RFC3339)}}}
	m.eipSpec(u)
	return u
}

func (m *Model) eipSpec(u *unstructured.Unstructured) {
	var ips []any
	for range 1 + m.r.IntN(2) {
		if m.r.IntN(2) == 0 {
			ips = append(ips, fmt.Sprintf("172.18.100.%d", 1+m.r.IntN(8))) // shared among EgressIPs now and then
		} else {
			ips = append(ips, fmt.Sprintf("192.168.50.%d", 100+m.r.IntN(4))) // a secondary network's
		}
	}
	spec := map[string]any{"egressIPs": ips,
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"tenant": fmt.Sprint(m.r.IntN(3))}}}
	switch m.r.IntN(6) {
	case 0, 1:
		spec["podSelector"] = map[string]any{"matchLabels": map[string]any{"app": fmt.Sprint(m.r.IntN(3))}}
	case 2:
		spec["podSelector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "NotIn", "values": []any{"0"}}}}
	case 3:
		if m.r.IntN(3) == 0 { // a bad selector
			spec["podSelector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "Near"}}}
		}
	case 4:
		if m.r.IntN(4) == 0 { // does not parse
			spec["egressIPs"] = "not a list"
		}
	}
	u.Object["spec"] = spec
}

// PutNode adds or replaces n.
func (m *Model) PutNode(n *corev1.Node) { m.nodes[n.Name], m.Ch.Nodes[n.Name] = n, n }
func (m *Model) putNamespace(n *corev1.Namespace) {
	m.namespaces[n.Name], m.Ch.Namespaces[n.Name] = n, n
}
func (m *Model) putPod(p *corev1.Pod) {
	k := p.Namespace + "/" + p.Name
	info := egress.NewPodInfo(p)
	m.pods[k], m.infos[k], m.Ch.Pods[k] = p, info, info
}
func (m *Model) putService(s *corev1.Service) {
	k := s.Namespace + "/" + s.Name
	m.svcs[k], m.Ch.Services[k] = s, s
}
func (m *Model) putSlice(s *discoveryv1.EndpointSlice) {
	k := s.Namespace + "/" + s.Name
	m.slices[k], m.Ch.EndpointSlices[k] = s, s
}

// PutEIP adds or replaces EgressIP u.
func (m *Model) PutEIP(u *unstructured.Unstructured) {
	m.eips[u.GetName()], m.Ch.EgressIPs[u.GetName()] = u, u
}

// Edit makes one random change, as the API would (the daemon's own
// status writes included), and names it.
func (m *Model) Edit(cs desired.ClusterState) string {
	switch n := m.r.IntN(16); n {
	case 0, 1, 2, 3:
		return m.editPod(n)
	case 4: // a namespace relabelled
		ns := m.namespaces[m.pick(slices.Sorted(maps.Keys(m.namespaces)))].DeepCopy()
		ns.Labels["tenant"] = fmt.Sprint(m.r.IntN(3))
		m.putNamespace(ns)
		return "namespace-relabel"
	case 5, 6:
		return m.editEIP(n)
	case 7:
		return m.writeStatus(cs)
	case 8:
		return m.nodeCondition()
	case 9:
		return m.editNode()
	case 10, 11:
		return m.editService()
	case 15:
		return m.editESvc()
	default:
		return m.editSlice()
	}
}

// editPod relabels (0), adds (1), deletes (2) a pod or changes its phase
// or IP (3).
func (m *Model) editPod(kind int) string {
	if kind == 1 {
		m.putPod(m.newPod())
		return "pod-add"
	}
	if len(m.pods) == 0 {
		return "none"
	}
	k := m.pick(slices.Sorted(maps.Keys(m.pods)))
	switch kind {
	case 0:
		p := m.pods[k].DeepCopy()
		p.Labels["app"] = fmt.Sprint(m.r.IntN(3))
		m.putPod(p)
		return "pod-relabel"
	case 2:
		delete(m.pods, k)
		delete(m.infos, k)
		m.Ch.Pods[k] = nil
		return "pod-delete"
	}
	p := m.pods[k].DeepCopy()
	var node int
	fmt.Sscanf(p.Spec.NodeName, "node%d", &node)
	m.podStatus(p, node)
	m.putPod(p)
	return "pod-status"
}

// editEIP adds or deletes (5) or changes (6) an EgressIP.
func (m *Model) editEIP(kind int) string {
	if kind == 5 {
		if len(m.eips) > 0 && m.r.IntN(2) == 0 {
			k := m.pick(slices.Sorted(maps.Keys(m.eips)))
			delete(m.eips, k)
			m.Ch.EgressIPs[k] = nil
			return "eip-delete"
		}
		m.PutEIP(m.newEIP())
		return "eip-add"
	}
	if len(m.eips) == 0 {
		return "none"
	}
	u := m.eips[m.pick(slices.Sorted(maps.Keys(m.eips)))].DeepCopy()
	m.eipSpec(u)
	m.PutEIP(u)
	return "eip-change"
}

// writeStatus writes the leader's statuses back (the assignment sticks):
// some EgressIPs' status, every Service's ingress.
func (m *Model) writeStatus(cs desired.ClusterState) string {
	for _, name := range slices.Sorted(maps.Keys(cs.Status)) {
		u, ok := m.eips[name]
		if !ok || m.r.IntN(2) == 0 {
			continue
		}
		items := []any{}
		for _, it := range cs.Status[name] {
			items = append(items, map[string]any{"node": it.Node, "egressIP": it.EgressIP})
		}
		u = u.DeepCopy()
		u.Object["status"] = map[string]any{"items": items}
		m.PutEIP(u)
	}
	for k, host := range cs.EgressServices.Hosts {
		if u, ok := m.esvcs[k]; ok && m.r.IntN(2) == 0 {
			u = u.DeepCopy()
			u.Object["status"] = map[string]any{"host": host}
			m.putESvc(u)
		}
	}
	for k, ing := range cs.Ingress {
		if svc, ok := m.svcs[k]; ok {
			svc = svc.DeepCopy()
			svc.Status.LoadBalancer.Ingress = ing
			m.putService(svc)
		}
	}
	return "status-write"
}

// nodeCondition makes a node ready or not ready, or changes only its
// heartbeat.
func (m *Model) nodeCondition() string {
	n := m.nodes[m.pick(slices.Sorted(maps.Keys(m.nodes)))].DeepCopy()
	m.seq++
	n.ResourceVersion = fmt.Sprint(m.seq)
	c := &n.Status.Conditions[0]
	if m.r.IntN(3) == 0 {
		c.LastHeartbeatTime = metav1.NewTime(m.start.Add(time.Duration(m.seq) * time.Second))
		m.PutNode(n)
		return "node-heartbeat"
	}
	c.Status = map[bool]corev1.ConditionStatus{true: corev1.ConditionFalse, false: corev1.ConditionTrue}[c.Status == corev1.ConditionTrue]
	m.PutNode(n)
	return "node-ready"
}

// editNode (un)labels a node, changes or breaks its annotations, adds or
// deletes it.
func (m *Model) editNode() string {
	i := m.r.IntN(m.nodesN + 1)
	name := fmt.Sprintf("node%d", i)
	if _, ok := m.nodes[name]; ok && m.r.IntN(5) == 0 {
		delete(m.nodes, name)
		m.Ch.Nodes[name] = nil
		return "node-delete"
	}
	n := m.Node(i, m.r.IntN(4) != 0, m.r.IntN(3) != 0, m.r.IntN(5))
	m.seq++
	n.ResourceVersion = fmt.Sprint(m.seq)
	m.PutNode(n)
	return "node-change"
}

// editService adds, changes or deletes a Service.
func (m *Model) editService() string {
	switch m.r.IntN(3) {
	case 0:
		svc := m.newService()
		m.putService(svc)
		m.putSlice(m.newSlice(svc.Namespace, svc.Name))
		return "service-add"
	case 1:
		if len(m.svcs) > 0 {
			svc := m.svcs[m.pick(slices.Sorted(maps.Keys(m.svcs)))].DeepCopy()
			m.serviceSpec(svc)
			m.putService(svc)
			return "service-change"
		}
	default:
		if len(m.svcs) > 0 {
			k := m.pick(slices.Sorted(maps.Keys(m.svcs)))
			delete(m.svcs, k)
			m.Ch.Services[k] = nil
			return "service-delete"
		}
	}
	return "none"
}

// editSlice changes, adds, deletes an EndpointSlice or moves it to
// another Service.
func (m *Model) editSlice() string {
	if len(m.slices) == 0 {
		return "none"
	}
	k := m.pick(slices.Sorted(maps.Keys(m.slices)))
	switch m.r.IntN(6) {
	case 0:
		delete(m.slices, k)
		m.Ch.EndpointSlices[k] = nil
		return "slice-delete"
	case 1:
		if len(m.svcs) > 0 {
			svc := m.svcs[m.pick(slices.Sorted(maps.Keys(m.svcs)))]
			m.putSlice(m.newSlice(svc.Namespace, svc.Name))
			return "slice-add"
		}
	case 2:
		sl := m.slices[k].DeepCopy()
		others := slices.Sorted(maps.Keys(m.svcs))
		if len(others) > 0 {
			svc := m.svcs[m.pick(others)]
			if svc.Namespace == sl.Namespace {
				sl.Labels[discoveryv1.LabelServiceName] = svc.Name
				m.putSlice(sl)
				return "slice-move"
			}
		}
	}
	sl := m.slices[k].DeepCopy()
	m.sliceEndpoints(sl)
	m.putSlice(sl)
	return "slice-endpoints"
}

func (m *Model) putESvc(u *unstructured.Unstructured) {
	k := u.GetNamespace() + "/" + u.GetName()
	m.esvcs[k], m.Ch.EgressServices[k] = u, u
}

// editESvc adds, changes or deletes the EgressService of a Service: its
// nodeSelector, sourceIPBy, or a spec that does not parse.
func (m *Model) editESvc() string {
	if len(m.svcs) == 0 {
		return "none"
	}
	k := m.pick(slices.Sorted(maps.Keys(m.svcs)))
	if _, ok := m.esvcs[k]; ok && m.r.IntN(3) == 0 {
		delete(m.esvcs, k)
		m.Ch.EgressServices[k] = nil
		return "esvc-delete"
	}
	ns, name, _ := strings.Cut(k, "/")
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": "EgressService",
		"metadata": map[string]any{"namespace": ns, "name": name}}}
	if old, ok := m.esvcs[k]; ok {
		u = old.DeepCopy()
	}
	spec := map[string]any{}
	switch m.r.IntN(6) {
	case 0, 1:
		spec["nodeSelector"] = map[string]any{"matchLabels": map[string]any{"k8s.ovn.org/egress-assignable": ""}}
	case 2:
		spec["sourceIPBy"] = "Network"
	case 3:
		spec["nodeSelector"] = "not a selector"
	}
	u.Object["spec"] = spec
	m.putESvc(u)
	return "esvc-change"
}
