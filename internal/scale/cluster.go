package scale

import (
	"fmt"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// The proportions of OpenShift's tested maximums (150,000 pods, 2,000
// nodes, 10,000 Services) and of the 1,000 EgressIPs, which every
// Shape keeps.
const (
	// MaxPods is the full size.
	MaxPods = 150_000
	// PodsPerNode: pod i runs on node i/PodsPerNode.
	PodsPerNode = 75
	// PodsPerNamespace: pod i is in namespace i/PodsPerNamespace.
	PodsPerNamespace = 150
	// PodsPerService: Service j's endpoints are pods
	// PodsPerService*j + 3k, k < EndpointsPerService.
	PodsPerService      = 15
	EndpointsPerService = 5
	// EgressNodeEvery: node n is egress-assignable when n%EgressNodeEvery
	// is 0.
	EgressNodeEvery = 10
	// MinNodes keeps two egress-assignable nodes at the smallest sizes, so
	// an egress IP has somewhere to move to when its node goes NotReady.
	MinNodes = EgressNodeEvery + 1
	// ServedEvery: pod i is selected by an EgressIP when i%ServedEvery is
	// 0 (label eip=a when i%(2*ServedEvery) is 0, else eip=b).
	ServedEvery = 10
	// BackendPort is the endpoints' port; Services listen on 80.
	BackendPort = 8080
)

// Labels of the generated objects.
const (
	// LabelGroup pairs namespaces: namespaces 2m and 2m+1 carry group=m,
	// which EgressIPs 2m and 2m+1 select.
	LabelGroup = "scale.ovnedge.io/group"
	// LabelEIP on a pod is "a" (selected by the group's even EgressIP)
	// or "b" (its odd one).
	LabelEIP = "scale.ovnedge.io/eip"
	// LabelApp is a pod's Service, and the Service's selector.
	LabelApp = "app"
)

// Addressing of the generated cluster: --cluster-subnets, the join
// subnet, the nodes' external network and the Service network (the
// apiserver's --service-cluster-ip-range, testbed.StartKubeAPI's).
const (
	ClusterSubnet = "10.128.0.0/12" // /24 per node: 4,096 nodes
	HostPrefix    = 24
	JoinSubnet    = "100.64.0.0/16"
	JoinRouterIP  = "100.64.0.1/16"
)

// Shape is the number of objects of a generated cluster of Pods pods.
// The objects of a smaller Shape are those of a larger one with the lower
// indexes, so a cluster grows from one size to the next by creating the
// objects in between.
type Shape struct {
	Pods, Nodes, Namespaces, Services, EgressIPs int
}

// ShapeFor returns the Shape of a cluster of pods pods: at MaxPods,
// 2,000 nodes, 1,000 namespaces, 10,000 Services (50,000 endpoints) and
// 1,000 EgressIPs serving 15,000 pods.
func ShapeFor(pods int) Shape {
	ns := ceilDiv(pods, PodsPerNamespace)
	return Shape{Pods: pods, Nodes: max(MinNodes, ceilDiv(pods, PodsPerNode)), Namespaces: ns,
		Services: pods / PodsPerService, EgressIPs: 2 * ceilDiv(ns, 2)}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Served returns the pods EgressIPs select, by index.
func (s Shape) Served() []int {
	var out []int
	for i := 0; i < s.Pods; i += ServedEvery {
		out = append(out, i)
	}
	return out
}

// NodeName, NamespaceName, PodName, ServiceName and EgressIPName name the
// objects by index.
func NodeName(n int) string      { return "node-" + strconv.Itoa(n) }
func NamespaceName(n int) string { return "ns-" + strconv.Itoa(n) }
func PodName(i int) string       { return "pod-" + strconv.Itoa(i) }
func ServiceName(j int) string   { return "svc-" + strconv.Itoa(j) }
func EgressIPName(k int) string  { return "eip-" + strconv.Itoa(k) }

// PodNamespace is the namespace of pod i; ServiceNamespace of Service j.
func PodNamespace(i int) string     { return NamespaceName(i / PodsPerNamespace) }
func ServiceNamespace(j int) string { return PodNamespace(j * PodsPerService) }

// NodeSubnet is node n's pod subnet, the n-th /24 of ClusterSubnet.
func NodeSubnet(n int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + n/256), byte(n % 256), 0}), HostPrefix)
}

// NodeIP is node n's address on the external network 172.18.0.0/16.
func NodeIP(n int) netip.Addr {
	return netip.AddrFrom4([4]byte{172, 18, byte(n / 250), byte(n%250 + 2)})
}

// NodeJoinIP is GR_<node n>'s address on the join switch.
func NodeJoinIP(n int) netip.Addr {
	return netip.AddrFrom4([4]byte{100, 64, byte((n + 2) / 256), byte((n + 2) % 256)})
}

// PodIP is pod i's address in its node's subnet.
func PodIP(i int) netip.Addr {
	b := NodeSubnet(i / PodsPerNode).Addr().As4()
	b[3] = byte(i%PodsPerNode + 3)
	return netip.AddrFrom4(b)
}

// EgressIPAddr is EgressIP k's egress IP, in the nodes' external network
// above their addresses.
func EgressIPAddr(k int) netip.Addr {
	return netip.AddrFrom4([4]byte{172, 18, byte(200 + k/250), byte(k%250 + 1)})
}

// LoadBalancerIP is the ingress IP of LoadBalancer Service j.
func LoadBalancerIP(j int) netip.Addr {
	return netip.AddrFrom4([4]byte{172, 19, byte(j / 250), byte(j%250 + 1)})
}

// Node returns node n with the annotations ovnkube-node writes (v4
// only) and, every EgressNodeEvery, the egress-assignable label. Its
// status (Ready, InternalIP) is NodeStatus: the apiserver drops the
// status of a create.
func Node(n int) *corev1.Node {
	name, ip := NodeName(n), NodeIP(n).String()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"kubernetes.io/hostname": name},
		Annotations: map[string]string{
			"k8s.ovn.org/node-subnets":                   fmt.Sprintf(`{"default":["%s"]}`, NodeSubnet(n)),
			"k8s.ovn.org/node-primary-ifaddr":            fmt.Sprintf(`{"ipv4":"%s/16"}`, ip),
			"k8s.ovn.org/host-cidrs":                     fmt.Sprintf(`["%s/16"]`, ip),
			"k8s.ovn.org/node-gateway-router-lrp-ifaddr": fmt.Sprintf(`{"ipv4":"%s/16"}`, NodeJoinIP(n)),
			"k8s.ovn.org/node-chassis-id":                name,
		}}}
	if n%EgressNodeEvery == 0 {
		node.Labels["k8s.ovn.org/egress-assignable"] = ""
	}
	node.Status = NodeStatus(n, true)
	return node
}

// NodeStatus is node n's status as its kubelet reports it, with the
// kubelet's list of images (NodeImages).
func NodeStatus(n int, ready bool) corev1.NodeStatus {
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	return corev1.NodeStatus{
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: NodeIP(n).String()}, {Type: corev1.NodeHostName, Address: NodeName(n)}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now()}},
		Images:     nodeImages,
	}
}

// NodeImages is how many images a node's status lists: the kubelet's
// default --node-status-max-images, which a node running a few dozen
// workloads reaches.
const NodeImages = 50

// nodeImages are the NodeImages images every node reports, each with a
// digest and a tag name, as the kubelet reports a pulled image.
var nodeImages = func() []corev1.ContainerImage {
	out := make([]corev1.ContainerImage, NodeImages)
	for i := range out {
		repo := fmt.Sprintf("registry.example.com/team-%d/service-%d", i%7, i)
		out[i] = corev1.ContainerImage{SizeBytes: int64(20+i) << 20,
			Names: []string{repo + fmt.Sprintf("@sha256:%064x", i*7919), repo + ":v1." + strconv.Itoa(i)}}
	}
	return out
}()

// Namespace returns namespace n, labelled with its group.
func Namespace(n int) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: NamespaceName(n),
		Labels: map[string]string{LabelGroup: strconv.Itoa(n / 2)}}}
}

// PodEIP is the LabelEIP value pod i is generated with ("" when no
// EgressIP selects it).
func PodEIP(i int) string {
	switch i % (2 * ServedEvery) {
	case 0:
		return "a"
	case ServedEvery:
		return "b"
	}
	return ""
}

// Pod returns pod i, bound to its node, with its status (Running, Ready,
// its IP) in Status: the apiserver drops the status of a create.
func Pod(i int) *corev1.Pod {
	labels := map[string]string{LabelApp: ServiceName(i / PodsPerService)}
	if e := PodEIP(i); e != "" {
		labels[LabelEIP] = e
	}
	node := i / PodsPerNode
	ip := PodIP(i).String()
	now := metav1.Now()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: PodNamespace(i), Name: PodName(i), Labels: labels},
		Spec: corev1.PodSpec{NodeName: NodeName(node), Containers: []corev1.Container{{Name: "app", Image: "scale",
			Ports: []corev1.ContainerPort{{ContainerPort: BackendPort, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			HostIP: NodeIP(node).String(), StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}},
	}
}

// ServiceType is Service j's type: one in 20 NodePort, one in 20
// LoadBalancer, the rest ClusterIP.
func ServiceType(j int) corev1.ServiceType {
	switch j % 20 {
	case 0:
		return corev1.ServiceTypeNodePort
	case 10:
		return corev1.ServiceTypeLoadBalancer
	}
	return corev1.ServiceTypeClusterIP
}

// Service returns Service j (port 80 to BackendPort, selecting its pods;
// the apiserver allocates its ClusterIP and NodePort). A LoadBalancer
// Service's ingress (LoadBalancerIP), as a cloud controller would write
// it, is in Status.
func Service(j int) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ServiceNamespace(j), Name: ServiceName(j)},
		Spec: corev1.ServiceSpec{Type: ServiceType(j), Selector: map[string]string{LabelApp: ServiceName(j)},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(BackendPort)}}}}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: LoadBalancerIP(j).String()}}
	}
	return s
}

// Endpoints returns the pod indexes of Service j's endpoints.
func Endpoints(j int) []int {
	out := make([]int, EndpointsPerService)
	for k := range out {
		out[k] = PodsPerService*j + 3*k
	}
	return out
}

// EndpointSlice returns Service j's EndpointSlice holding the pods
// (indexes) given, ready, as the endpoint controller writes it.
func EndpointSlice(j int, pods []int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ServiceNamespace(j), Name: ServiceName(j) + "-scale",
			Labels: map[string]string{discoveryv1.LabelServiceName: ServiceName(j)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](BackendPort)}},
	}
	for _, i := range pods {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{PodIP(i).String()},
			NodeName: ptr.To(NodeName(i / PodsPerNode)), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: PodNamespace(i), Name: PodName(i)}})
	}
	return s
}

// EgressIP returns EgressIP k: one egress IP, the namespaces of group
// k/2, the pods labelled eip=a (k even) or eip=b (k odd).
func EgressIP(k int) *unstructured.Unstructured {
	eip := "a"
	if k%2 == 1 {
		eip = "b"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
		"metadata": map[string]any{"name": EgressIPName(k)},
		"spec": map[string]any{
			"egressIPs":         []any{EgressIPAddr(k).String()},
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{LabelGroup: strconv.Itoa(k / 2)}},
			"podSelector":       map[string]any{"matchLabels": map[string]any{LabelEIP: eip}},
		},
	}}
}

// EgressIPOf returns the EgressIP that selects pod i with label eip ("a"
// or "b").
func EgressIPOf(i int, eip string) int {
	k := 2 * ((i / PodsPerNamespace) / 2)
	if eip == "b" {
		k++
	}
	return k
}

// Topology is the NB topology ovnkube-master would have created for the
// Shape's nodes (ovsdbnb.EnsureTopology).
func (s Shape) Topology() ovsdbnb.Topology {
	t := ovsdbnb.Topology{ClusterSubnet: ClusterSubnet, JoinRouterIP: JoinRouterIP}
	for n := range s.Nodes {
		t.Nodes = append(t.Nodes, ovsdbnb.Node{Name: NodeName(n), Subnet: NodeSubnet(n).String(),
			JoinIP: NodeJoinIP(n).String() + "/16", ExternalIP: NodeIP(n).String() + "/16"})
	}
	return t
}
