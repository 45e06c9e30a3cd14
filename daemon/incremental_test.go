package daemon

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// model is a small random cluster the property test edits: its objects by
// informer key, replaced (never changed in place) on every edit, as an
// informer's store does.
type model struct {
	r           *rand.Rand
	nodes       map[string]*corev1.Node
	namespaces  map[string]*corev1.Namespace
	pods        map[string]*corev1.Pod
	svcs        map[string]*corev1.Service
	slices      map[string]*discoveryv1.EndpointSlice
	eips        map[string]*unstructured.Unstructured
	seq         int
	ch          *Changes
	start       time.Time
	nodesN      int
	namespacesN int
}

func newModel(seed uint64, nodes, namespaces, pods, svcs, eips int) *model {
	m := &model{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), nodes: map[string]*corev1.Node{},
		namespaces: map[string]*corev1.Namespace{}, pods: map[string]*corev1.Pod{}, svcs: map[string]*corev1.Service{},
		slices: map[string]*discoveryv1.EndpointSlice{}, eips: map[string]*unstructured.Unstructured{},
		start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nodesN: nodes, namespacesN: namespaces}
	m.reset()
	for i := range nodes {
		m.putNode(m.node(i, true, true, 0))
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
		m.putEIP(m.newEIP())
	}
	return m
}

func (m *model) reset() {
	m.ch = &Changes{Nodes: map[string]*corev1.Node{}, Namespaces: map[string]*corev1.Namespace{}, Pods: map[string]*corev1.Pod{},
		Services: map[string]*corev1.Service{}, EndpointSlices: map[string]*discoveryv1.EndpointSlice{},
		EgressIPs: map[string]*unstructured.Unstructured{}}
}

func (m *model) snapshot() Snapshot {
	var s Snapshot
	// Listed in random order, as a store lists them.
	s.Nodes = shuffled(m.r, m.nodes)
	s.Namespaces = shuffled(m.r, m.namespaces)
	s.Pods = shuffled(m.r, m.pods)
	s.Services = shuffled(m.r, m.svcs)
	s.EndpointSlices = shuffled(m.r, m.slices)
	s.EgressIPs = shuffled(m.r, m.eips)
	return s
}

func shuffled[T any](r *rand.Rand, m map[string]*T) []*T {
	out := slices.Collect(maps.Values(m))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (m *model) pick(keys []string) string { return keys[m.r.IntN(len(keys))] }

func (m *model) node(i int, ready, assignable bool, variant int) *corev1.Node {
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

func (m *model) namespace(i int) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns%d", i),
		Labels: map[string]string{"tenant": fmt.Sprint(m.r.IntN(3))}}}
}

func (m *model) newPod() *corev1.Pod {
	m.seq++
	node := m.r.IntN(m.nodesN)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", m.r.IntN(m.namespacesN)),
		Name: fmt.Sprintf("pod%d", m.seq), Labels: map[string]string{"app": fmt.Sprint(m.r.IntN(3))}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node%d", node)}}
	m.podStatus(p, node)
	return p
}

func (m *model) podStatus(p *corev1.Pod, node int) {
	p.Status = corev1.PodStatus{}
	if m.r.IntN(8) == 0 {
		p.Status.Phase = corev1.PodPending
		return
	}
	ip := fmt.Sprintf("10.244.%d.%d", node, 3+m.r.IntN(40)) // IPs may repeat: pods come and go
	p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
}

func (m *model) newService() *corev1.Service {
	m.seq++
	ns := fmt.Sprintf("ns%d", m.r.IntN(m.namespacesN))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc%d", m.seq),
		CreationTimestamp: metav1.NewTime(m.start.Add(time.Duration(m.seq) * time.Second))}}
	m.serviceSpec(svc)
	return svc
}

func (m *model) serviceSpec(svc *corev1.Service) {
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

func (m *model) newSlice(ns, svc string) *discoveryv1.EndpointSlice {
	m.seq++
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", svc, m.seq),
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4}
	m.sliceEndpoints(sl)
	return sl
}

func (m *model) sliceEndpoints(sl *discoveryv1.EndpointSlice) {
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

func (m *model) newEIP() *unstructured.Unstructured {
	m.seq++
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
		"metadata": map[string]any{"name": fmt.Sprintf("eip%d", m.seq),
			"creationTimestamp": m.start.Add(time.Duration(m.seq) * time.Second).Format(time.RFC3339)}}}
	m.eipSpec(u)
	return u
}

func (m *model) eipSpec(u *unstructured.Unstructured) {
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

func (m *model) putNode(n *corev1.Node) { m.nodes[n.Name], m.ch.Nodes[n.Name] = n, n }
func (m *model) putNamespace(n *corev1.Namespace) {
	m.namespaces[n.Name], m.ch.Namespaces[n.Name] = n, n
}
func (m *model) putPod(p *corev1.Pod) {
	k := p.Namespace + "/" + p.Name
	m.pods[k], m.ch.Pods[k] = p, p
}
func (m *model) putService(s *corev1.Service) {
	k := s.Namespace + "/" + s.Name
	m.svcs[k], m.ch.Services[k] = s, s
}
func (m *model) putSlice(s *discoveryv1.EndpointSlice) {
	k := s.Namespace + "/" + s.Name
	m.slices[k], m.ch.EndpointSlices[k] = s, s
}
func (m *model) putEIP(u *unstructured.Unstructured) {
	m.eips[u.GetName()], m.ch.EgressIPs[u.GetName()] = u, u
}

// edit makes one random change, as the API would (the daemon's own
// status writes included), and names it.
func (m *model) edit(cs ClusterState) string {
	switch m.r.IntN(15) {
	case 0: // a pod relabelled
		if len(m.pods) > 0 {
			p := m.pods[m.pick(slices.Sorted(maps.Keys(m.pods)))].DeepCopy()
			p.Labels["app"] = fmt.Sprint(m.r.IntN(3))
			m.putPod(p)
			return "pod-relabel"
		}
	case 1: // a pod added
		m.putPod(m.newPod())
		return "pod-add"
	case 2: // a pod deleted
		if len(m.pods) > 0 {
			k := m.pick(slices.Sorted(maps.Keys(m.pods)))
			delete(m.pods, k)
			m.ch.Pods[k] = nil
			return "pod-delete"
		}
	case 3: // a pod's phase or IP changes
		if len(m.pods) > 0 {
			p := m.pods[m.pick(slices.Sorted(maps.Keys(m.pods)))].DeepCopy()
			var node int
			fmt.Sscanf(p.Spec.NodeName, "node%d", &node)
			m.podStatus(p, node)
			m.putPod(p)
			return "pod-status"
		}
	case 4: // a namespace relabelled
		ns := m.namespaces[m.pick(slices.Sorted(maps.Keys(m.namespaces)))].DeepCopy()
		ns.Labels["tenant"] = fmt.Sprint(m.r.IntN(3))
		m.putNamespace(ns)
		return "namespace-relabel"
	case 5: // an EgressIP added or deleted
		if len(m.eips) > 0 && m.r.IntN(2) == 0 {
			k := m.pick(slices.Sorted(maps.Keys(m.eips)))
			delete(m.eips, k)
			m.ch.EgressIPs[k] = nil
			return "eip-delete"
		}
		m.putEIP(m.newEIP())
		return "eip-add"
	case 6: // an EgressIP changed
		if len(m.eips) > 0 {
			u := m.eips[m.pick(slices.Sorted(maps.Keys(m.eips)))].DeepCopy()
			m.eipSpec(u)
			m.putEIP(u)
			return "eip-change"
		}
	case 7: // the leader's status written back (the assignment sticks)
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
			m.putEIP(u)
		}
		for k, ing := range cs.Ingress {
			if svc, ok := m.svcs[k]; ok {
				svc = svc.DeepCopy()
				svc.Status.LoadBalancer.Ingress = ing
				m.putService(svc)
			}
		}
		return "status-write"
	case 8: // a node ready / not ready, or only its heartbeat
		n := m.nodes[m.pick(slices.Sorted(maps.Keys(m.nodes)))].DeepCopy()
		m.seq++
		n.ResourceVersion = fmt.Sprint(m.seq)
		c := &n.Status.Conditions[0]
		if m.r.IntN(3) == 0 {
			c.LastHeartbeatTime = metav1.NewTime(m.start.Add(time.Duration(m.seq) * time.Second))
			m.putNode(n)
			return "node-heartbeat"
		}
		c.Status = map[bool]corev1.ConditionStatus{true: corev1.ConditionFalse, false: corev1.ConditionTrue}[c.Status == corev1.ConditionTrue]
		m.putNode(n)
		return "node-ready"
	case 9: // a node (un)labelled, its annotations changed or broken, added, deleted
		i := m.r.IntN(m.nodesN + 1)
		name := fmt.Sprintf("node%d", i)
		if _, ok := m.nodes[name]; ok && m.r.IntN(5) == 0 {
			delete(m.nodes, name)
			m.ch.Nodes[name] = nil
			return "node-delete"
		}
		n := m.node(i, m.r.IntN(4) != 0, m.r.IntN(3) != 0, m.r.IntN(5))
		m.seq++
		n.ResourceVersion = fmt.Sprint(m.seq)
		m.putNode(n)
		return "node-change"
	case 10, 11: // a Service added, changed, deleted
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
				m.ch.Services[k] = nil
				return "service-delete"
			}
		}
	default: // an EndpointSlice changed, added, deleted or moved to another Service
		if len(m.slices) == 0 {
			return "none"
		}
		k := m.pick(slices.Sorted(maps.Keys(m.slices)))
		switch m.r.IntN(6) {
		case 0:
			delete(m.slices, k)
			m.ch.EndpointSlices[k] = nil
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
	return "none"
}

// compareStates returns how the incremental state inc differs from the
// full computation's full (diverged), with the states that differ, ""
// when it does not.
func compareStates(full, inc ClusterState) string {
	v := diverged(full, inc)
	var out []string
	for _, o := range v.owners {
		state := func(cs ClusterState) string {
			if st, ok := cs.Egress[o]; ok {
				return fmt.Sprintf("egress %+v", st)
			}
			if st, ok := cs.LB[o]; ok {
				return fmt.Sprintf("load balancers %+v", st)
			}
			return "none"
		}
		out = append(out, fmt.Sprintf("%s:\n    full %s\n    inc  %s", o, state(full), state(inc)))
	}
	for _, part := range v.other {
		var f, i any
		switch part {
		case "status":
			f, i = full.Status, inc.Status
		case "ingress":
			f, i = full.Ingress, inc.Ingress
		case "keep":
			f, i = full.Keep, inc.Keep
		case "host":
			f, i = full.Host, inc.Host
		case "events":
			f, i = sortedStrings(full.Events), sortedStrings(inc.Events)
		default: // too long to show
		}
		out = append(out, fmt.Sprintf("%s:\n  full %v\n  inc  %v", part, f, i))
	}
	return strings.Join(out, "\n")
}

// TestIncrementalMatchesFull applies long random sequences of edits to a
// cluster and checks after every one that the incremental desired state
// equals a full recompute of the same objects (ComputeCluster), and that
// every owner it does not mark dirty kept its previous state.
func TestIncrementalMatchesFull(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seed  uint64
		args  []string
		steps int
	}{
		{"per-node LBs", 1, []string{"--lb-templates=false", "--lb-pools", "a=172.19.0.0/29"}, 400},
		{"templates", 2, []string{"--lb-pools", "a=172.19.0.0/29"}, 400},
		{"no pools", 3, nil, 400},
		{"per-node LBs 2", 4, []string{"--lb-templates=false", "--lb-pools", "a=172.19.0.0/30,b=172.19.0.4/30"}, 400},
		{"no egress IPs", 5, []string{"--enable-egress-ip=false", "--lb-pools", "a=172.19.0.0/29"}, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := demoParams(t, tc.args...)
			m := newModel(tc.seed, 5, 4, 30, 12, 5)
			x := newClusterIndex(p, nil, nil)
			var prev []egress.Node
			var last ClusterState
			var lastNodes struct{ at, copy []egress.Node }
			counts := map[string]int{}
			for step := range tc.steps {
				what := "initial"
				if step > 0 {
					what = m.edit(last)
				}
				counts[what]++
				ch := m.ch
				m.reset()
				inc, err := x.apply(ch)
				if err != nil {
					t.Fatalf("step %d (%s): incremental: %v", step, what, err)
				}
				full, err := ComputeCluster(m.snapshot(), p, nil, prev)
				if err != nil {
					t.Fatalf("step %d (%s): full: %v", step, what, err)
				}
				prev = full.Nodes
				if d := compareStates(full, inc); d != "" {
					t.Fatalf("seed %d step %d (%s): incremental differs from full:\n%s", tc.seed, step, what, d)
				}
				// The leader sets the reachability targets again only
				// when the nodes are another slice (sameSlice): nodes
				// that changed must come as one.
				if step > 0 && sameSlice(inc.Nodes, lastNodes.at) && !reflect.DeepEqual(inc.Nodes, lastNodes.copy) {
					t.Fatalf("seed %d step %d (%s): the nodes changed in place", tc.seed, step, what)
				}
				lastNodes.at, lastNodes.copy = inc.Nodes, slices.Clone(inc.Nodes)
				if step > 0 {
					for _, pair := range []struct {
						old, cur map[ovsdbnb.Owner]ovsdbnb.State
					}{{last.Egress, inc.Egress}, {last.LB, inc.LB}} {
						for o, st := range pair.cur {
							if old, ok := pair.old[o]; !inc.Dirty[o] && (!ok || !old.Equal(st)) {
								t.Fatalf("seed %d step %d (%s): owner %s changed but is not dirty", tc.seed, step, what, o)
							}
						}
						for o := range pair.old {
							if _, ok := pair.cur[o]; !ok && !inc.Dirty[o] {
								t.Fatalf("seed %d step %d (%s): owner %s gone but not dirty", tc.seed, step, what, o)
							}
						}
					}
				}
				last = snapshotState(inc)
			}
			t.Logf("edits: %v; wide LB recomputes: %d", counts, x.wide)
		})
	}
}

// snapshotState copies the maps of an incremental state (shared with its
// index) so the next apply does not change them.
func snapshotState(cs ClusterState) ClusterState {
	cs.Egress, cs.LB = maps.Clone(cs.Egress), maps.Clone(cs.LB)
	cs.Status, cs.Ingress = maps.Clone(cs.Status), maps.Clone(cs.Ingress)
	return cs
}

func TestCompareKeys(t *testing.T) {
	keys := [][2]string{{"a", "b"}, {"a-x", "b"}, {"a", "b-c"}, {"a.b", ""}, {"", "a"}, {"a", ""}, {"ab", "c"}, {"a", "bc"}, {"a", "b"}}
	for _, a := range keys {
		for _, b := range keys {
			want := strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1])
			if got := compareKeys(a[0], a[1], b[0], b[1]); got != want {
				t.Errorf("compareKeys(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}
