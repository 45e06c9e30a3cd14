package helm

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/testbed"
)

// l2VIP is the L2Takeover step's ExternalIP, announced by ARP only (the
// client has no route to it).
var l2VIP = netip.MustParseAddr("172.18.0.152")

// l2Takeover: with loadBalancer.l2Announce on (and egress.fastFailover,
// on since FastFailover: the node pods' heartbeats tell them who is
// alive), one node answers ARP for an ExternalIP whose backends are a
// testbed pod on each node; its machine is killed (kubelet, chassis and
// ovnedge containers, as Failover does) and the other node must answer
// instead, never both at once, and the client's next connection goes
// through it. The node is then restored. MetalLB's layer2 mode does the
// same with its memberlist; internal/e2e TestL2Announce with the test
// marking the Node NotReady.
func (h *harness) l2Takeover(t *testing.T) {
	h.setValue(t, "loadBalancer.l2Announce=true")
	const name = "l2"
	h.l2Service(t, name)
	_, _ = h.cl.Client.RunErr("ip", "route", "del", l2VIP.String()+"/32")
	_, _ = h.cl.Client.RunErr("ip", "neigh", "flush", "dev", "eth0")
	w, err := e2e.StartARPWatch(h.cl.Client, "eth0", l2VIP, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var owner string
	h.eventually(t, 30*time.Second, "one node answering ARP for "+l2VIP.String(), func() error {
		if owners := w.Owners(); len(owners) != 1 {
			return fmt.Errorf("answered by %v", owners)
		}
		owner = h.nodeOfMAC(w.Owners()[0])
		return nil
	})
	h.connect(t, l2VIP.String()+":80", "before the kill")

	m := h.killMachine(t, owner, func() {})
	var next string
	h.eventually(t, 30*time.Second, "another node answering ARP for "+l2VIP.String(), func() error {
		owners := w.Owners()
		if next = h.nodeOfMAC(owners[len(owners)-1]); next == owner {
			return fmt.Errorf("answered by %s still", owner)
		}
		return nil
	})
	took := time.Since(m.at)
	h.connect(t, l2VIP.String()+":80", "after "+owner+"'s death")
	answered := time.Since(m.at)
	h.measured("L2: announcing machine killed -> the other node answers ARP", took)
	h.measured("L2: announcing machine killed -> a connection answered through the other node", answered)
	t.Logf("L2 takeover: %s (announcing %s) killed; %s answers ARP after %v, a connection after %v", owner, l2VIP, next,
		took.Round(time.Millisecond), answered.Round(time.Millisecond))

	h.restore(t, m.kn, owner)
	time.Sleep(time.Second) // ARP after the restore too: the election may move the VIP back
	w.Stop()
	named := []string{}
	for _, mac := range w.Owners() {
		named = append(named, h.nodeOfMAC(mac))
	}
	t.Logf("L2: ARP for %s answered by %v in turn (%d replies)", l2VIP, named, len(w.Replies()))
	if err := w.Simultaneous(); err != nil {
		t.Errorf("two nodes answered ARP for %s at once: %v (%v)", l2VIP, err, named)
	}
	h.deleteService(t, name)
}

// l2Service creates Service svcNS/name with ExternalIP l2VIP and, by
// hand (the pods are testbed pods: no endpoint controller sees them), its
// EndpointSlice: a pod serving port backendPort on every node.
func (h *harness) l2Service(t *testing.T, name string) {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svcNS, Name: name + "-harness",
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "ovnedge-helm-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](backendPort)}},
	}
	for _, n := range h.cl.Nodes {
		pod := h.cl.AddPod(n.Name, svcNS, name+"-"+n.Name, testbed.ClusterPodOptions{})
		if err := e2e.Serve(h.ctx, pod.Netns, name+"-"+n.Name, backendPort); err != nil {
			t.Fatal(err)
		}
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{pod.IP.String()},
			NodeName: ptr.To(n.Name), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svcNS, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ExternalIPs: []string{l2VIP.String()},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(backendPort)}}}}
	if _, err := h.cs.DiscoveryV1().EndpointSlices(svcNS).Create(h.ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cs.CoreV1().Services(svcNS).Create(h.ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deleteService deletes Service svcNS/name and its harness-made
// EndpointSlice.
func (h *harness) deleteService(t *testing.T, name string) {
	if err := h.cs.CoreV1().Services(svcNS).Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	if err := h.cs.DiscoveryV1().EndpointSlices(svcNS).Delete(h.ctx, name+"-harness", metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}

// connect waits until a connection from the client to addr is answered
// (a backend on a dead node leaves some unanswered: the harness's
// EndpointSlice keeps it).
func (h *harness) connect(t *testing.T, addr, when string) {
	var line string
	h.eventually(t, 30*time.Second, "a connection to "+addr+" "+when, func() (err error) {
		line, err = e2e.Reply(h.cl.Client, addr, 1000, 2*time.Second)
		return err
	})
	pod, _, _ := strings.Cut(line, " ")
	t.Logf("%s %s: answered by %s", addr, when, pod)
}
