package helm

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/egresssvc"
	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/testbed"
)

// keptESvc is the EgressService left in place for the uninstall step.
const keptESvc = "esvc-kept"

// applyESvc creates EgressService ns/name (any node) and waits for its
// host, labelled so; it returns the host.
func (h *harness) applyESvc(t *testing.T, ns, name string) string {
	t.Helper()
	dyn := h.dyn
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": egressv1.ServiceKind,
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": map[string]any{}}}
	if _, err := dyn.Resource(egressv1.ServiceResource).Namespace(ns).Create(h.ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var host string
	h.eventually(t, wait, "EgressService "+ns+"/"+name+" on a labelled host", func() error {
		u, err := dyn.Resource(egressv1.ServiceResource).Namespace(ns).Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if host, _, _ = unstructured.NestedString(u.Object, "status", "host"); host == "" {
			return fmt.Errorf("no host")
		}
		n, err := h.cs.CoreV1().Nodes().Get(h.ctx, host, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := n.Labels[egresssvc.Label(ns+"/"+name)]; !ok {
			return fmt.Errorf("%s not labelled", host)
		}
		return nil
	})
	return host
}

// egressService runs with the chart's egress.services=true: an
// EgressService on the ETP=Cluster Service makes every kubelet-run
// backend reach the external client from the Service's LoadBalancer IP
// through the host the leader chose (the client routes the VIP through
// it); deleted, they leave from their nodes again. It then leaves an
// EgressService on a selector-less Service for the uninstall step, which
// must take its label and its host's nftables table away.
func (h *harness) egressService(t *testing.T, svcs map[corev1.ServiceExternalTrafficPolicy]*corev1.Service, pods map[string]corev1.Pod) {
	for _, n := range h.cl.Nodes {
		n.SetForwarding(true) // as on every Kubernetes node
	}
	svc := svcs[corev1.ServiceExternalTrafficPolicyCluster]
	vip := svc.Status.LoadBalancer.Ingress[0].IP
	begin := time.Now()
	host := h.applyESvc(t, backendsNS, svc.Name)
	h.cl.Client.Run(t, "ip", "route", "replace", vip+"/32", "via", h.cl.Node(host).IP.String())
	if err := e2e.Serve(h.ctx, h.cl.Client, "external", 9002); err != nil {
		t.Fatal(err)
	}
	dst := testbed.ClusterClientIP + ":9002"
	// from waits until every backend reaches the client from src(its node).
	from := func(src func(node string) string) {
		for node, p := range pods {
			ns := h.env.KubeNode(node).PodNetns(t, p.Status.ContainerStatuses[0].ContainerID)
			want := src(node)
			h.eventually(t, wait, p.Name+" -> "+dst+" from "+want, func() error {
				line, err := e2e.Reply(ns, dst, 100, 2*time.Second)
				if _, seen, _ := strings.Cut(line, " "); err != nil || !strings.HasPrefix(seen, net.JoinHostPort(want, "")) {
					return fmt.Errorf("seen %q (%v)", seen, err)
				}
				return nil
			})
		}
	}
	from(func(string) string { return vip })
	h.measured("EgressService apply -> every backend leaving from its LoadBalancer IP", time.Since(begin))
	t.Logf("EgressService %s/%s: host %s; the backends on %d nodes reach %s from %s", backendsNS, svc.Name, host, len(pods), dst, vip)
	dyn := h.dyn
	if err := dyn.Resource(egressv1.ServiceResource).Namespace(backendsNS).Delete(h.ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	from(func(node string) string { return h.cl.Node(node).IP.String() })
	t.Logf("EgressService deleted: each backend leaves from its own node's address again")
	h.keepESvc(t)
}

// keepESvc creates LoadBalancer Service default/esvc-kept with one
// endpoint on the first node's pod subnet and its EgressService, and
// waits for the host's nftables table.
func (h *harness) keepESvc(t *testing.T) {
	n := h.cl.Nodes[0]
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svcNS, Name: keptESvc},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(backendPort)}}}}
	ip := n.Subnet.Addr()
	for range 250 {
		ip = ip.Next()
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: svcNS, Name: keptESvc + "-harness",
		Labels: map[string]string{discoveryv1.LabelServiceName: keptESvc, discoveryv1.LabelManagedBy: "ovnedge-helm-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](backendPort)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip.String()}, NodeName: ptr.To(n.Name)}}}
	if _, err := h.cs.DiscoveryV1().EndpointSlices(svcNS).Create(h.ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cs.CoreV1().Services(svcNS).Create(h.ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host := h.applyESvc(t, svcNS, keptESvc)
	h.eventually(t, wait, "the SNAT of "+ip.String()+" on "+host, func() error {
		out, err := h.cl.Node(host).NS.RunErr("nft", "list", "table", "inet", hostnet.EgressServicesTable)
		if err != nil || !strings.Contains(out, ip.String()+" : ") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	t.Logf("EgressService %s/%s kept for the uninstall: host %s SNATs %s", svcNS, keptESvc, host, ip)
}

// esvcLeft is what of the EgressServices is left on the nodes: their
// labels and nftables tables.
func (h *harness) esvcLeft() []string {
	var left []string
	for _, n := range h.cl.Nodes {
		if _, err := n.NS.RunErr("nft", "list", "table", "inet", hostnet.EgressServicesTable); err == nil {
			left = append(left, n.Name+": table "+hostnet.EgressServicesTable)
		}
		if node, err := h.cs.CoreV1().Nodes().Get(h.ctx, n.Name, metav1.GetOptions{}); err == nil {
			for k := range node.Labels {
				if strings.HasPrefix(k, egresssvc.LabelPrefix) {
					left = append(left, n.Name+": label "+k)
				}
			}
		}
	}
	return left
}
