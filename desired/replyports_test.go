package desired

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/egress"
)

// TestServedLocalPorts: only externally reachable ETP=Local Services'
// endpoints that an EgressIP or an EgressService serves get a reply-port
// rule.
func TestServedLocalPorts(t *testing.T) {
	svc := func(name string, typ corev1.ServiceType, etp corev1.ServiceExternalTrafficPolicy, ext ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
			Spec: corev1.ServiceSpec{Type: typ, ExternalTrafficPolicy: etp, ExternalIPs: ext}}
	}
	slice := func(svc string, port int32, ips ...string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: svc + "-x",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: ips}},
			Ports:     []discoveryv1.EndpointPort{{Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolUDP)}}}
	}
	served := map[netip.Addr]bool{netip.MustParseAddr("10.244.1.4"): true}
	got := servedLocalPorts(served,
		[]*corev1.Service{
			svc("local-lb", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal),
			svc("local-ext", corev1.ServiceTypeClusterIP, corev1.ServiceExternalTrafficPolicyLocal, "172.18.0.9"),
			svc("cluster-lb", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyCluster),
			svc("internal", corev1.ServiceTypeClusterIP, ""),
		},
		[]*discoveryv1.EndpointSlice{
			slice("local-lb", 53, "10.244.1.4", "10.244.2.9"), // 10.244.2.9 is served by no EgressIP
			slice("local-ext", 8080, "10.244.1.4"),
			slice("cluster-lb", 80, "10.244.1.4"),
			slice("internal", 81, "10.244.1.4"),
		})
	want := []egress.ServedPort{
		{IP: netip.MustParseAddr("10.244.1.4"), Protocol: "udp", Port: 53},
		{IP: netip.MustParseAddr("10.244.1.4"), Protocol: "udp", Port: 8080},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
