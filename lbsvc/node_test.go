package lbsvc_test

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// One node, three views: egress.ParseNode's, the load balancers'
// (lbsvc.ParseNode = lbsvc.NodeFrom of the parsed node) and the
// topology's (ovnknode.Node.TopologyNode).
func TestNodeConversions(t *testing.T) {
	a := netip.MustParseAddr
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Annotations: map[string]string{
		ovnknode.AnnotationNodeSubnets:     `{"default":["10.244.1.0/24"]}`,
		ovnknode.AnnotationPrimaryIfAddr:   `{"ipv4":"172.18.0.2/16"}`,
		ovnknode.AnnotationHostCIDRs:       `["10.10.10.2/24","172.18.0.2/16"]`,
		ovnknode.AnnotationGatewayJoinAddr: `{"ipv4":"100.64.0.2/16"}`,
		ovnknode.AnnotationChassisID:       "chassis-w1",
	}}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}}}
	parsed, err := ovnknode.Parse(n)
	if err != nil {
		t.Fatal(err)
	}
	want := lbsvc.Node{Name: "w1", Chassis: "chassis-w1", IPs: []netip.Addr{a("10.10.10.2"), a("172.18.0.2")}} // sorted as text, as OVN-Kubernetes' GetNodeHostAddrs
	if got := lbsvc.NodeFrom(parsed, "chassis-w1"); !reflect.DeepEqual(got, want) {
		t.Errorf("NodeFrom = %+v, want %+v", got, want)
	}
	if got := lbsvc.ParseNode(n); !reflect.DeepEqual(got, want) {
		t.Errorf("ParseNode = %+v, want %+v", got, want)
	}
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w2"}, Status: n.Status}
	if got := lbsvc.ParseNode(bare); !reflect.DeepEqual(got, lbsvc.Node{Name: "w2", IPs: []netip.Addr{a("192.0.2.1")}}) {
		t.Errorf("ParseNode without annotations = %+v, want its InternalIP", got)
	}
	tn, err := ovsdbnb.NodeTopology(parsed, netip.MustParsePrefix("100.64.0.0/16"), "172.18.0.1")
	wantTN := ovsdbnb.Node{Name: "w1", Subnet: "10.244.1.0/24", JoinIP: "100.64.0.2/16", ExternalIP: "172.18.0.2/16", Gateway: "172.18.0.1"}
	if err != nil || tn != wantTN {
		t.Errorf("TopologyNode = %+v, %v, want %+v", tn, err, wantTN)
	}
	if _, err := ovsdbnb.NodeTopology(ovnknode.Node{Name: "w3"}, netip.MustParsePrefix("100.64.0.0/16"), ""); err == nil {
		t.Error("TopologyNode of a node without a subnet: no error")
	}
}
