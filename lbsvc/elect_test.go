package lbsvc

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/lbsvc/ipam"
)

func TestElect(t *testing.T) {
	vip := netip.MustParseAddr("172.18.0.50")
	nodes := []string{"ovn-control-plane", "ovn-worker", "ovn-worker2"}
	owner, ok := Elect(vip, nodes)
	if !ok {
		t.Fatal("no owner among three candidates")
	}
	// Every permutation of the same candidates agrees.
	for _, perm := range [][]string{{nodes[2], nodes[1], nodes[0]}, {nodes[1], nodes[2], nodes[0]}} {
		if got, _ := Elect(vip, perm); got != owner {
			t.Errorf("Elect(%v) = %s, want %s", perm, got, owner)
		}
	}
	// Removing a node other than the owner keeps the owner.
	var rest []string
	for _, n := range nodes {
		if n != owner {
			rest = append(rest, n)
		}
	}
	if got, _ := Elect(vip, append(rest[:1:1], owner)); got != owner {
		t.Errorf("owner changed to %s when a non-owner left", got)
	}
	// Removing the owner elects another node.
	if got, _ := Elect(vip, rest); got == owner || got == "" {
		t.Errorf("Elect without the owner = %q", got)
	}
	if _, ok := Elect(vip, nil); ok {
		t.Error("Elect with no candidates reported an owner")
	}
}

// TestElections: remembered elections equal fresh ones through changes
// of the healthy nodes, of a VIP's eligible nodes and of the VIPs, for
// VIPOwners and UnderlayOwners sharing one Elections.
func TestElections(t *testing.T) {
	svc := func(name, vip string, local bool) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ExternalIPs: []string{vip},
				Ports: []corev1.ServicePort{{Port: 80}}}}
		if local {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		return s
	}
	eps := func(nodes ...string) []*discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "l",
			Labels: map[string]string{discoveryv1.LabelServiceName: "l"}}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}}}
		for i, n := range nodes {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", i+1)}, NodeName: ptr.To(n)})
		}
		return []*discoveryv1.EndpointSlice{s}
	}
	var nodes []string
	for i := range 20 {
		nodes = append(nodes, fmt.Sprintf("n%d", i))
	}
	var svcs []*corev1.Service
	for i := range 30 {
		svcs = append(svcs, svc(fmt.Sprintf("s%d", i), fmt.Sprintf("192.0.2.%d", i+1), false))
	}
	local := svc("l", "192.0.2.200", true)
	pool, err := ipam.NewPool("underlay", "192.0.2.0/25", nil) // s0-s29; l's 192.0.2.200 is outside
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Underlay: []UnderlaySubnet{{Subnet: pool, EnableExternalLBAddress: true}}}
	owner, _ := Elect(netip.MustParseAddr("192.0.2.1"), nodes)
	moved := "n3" // l's endpoints move from n3 and n4 to one without l's owner
	if o, _ := Elect(netip.MustParseAddr("192.0.2.200"), []string{"n3", "n4"}); o == "n3" {
		moved = "n4"
	}
	down := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == owner || n == "n3" })
	steps := []struct {
		name    string
		svcs    []*corev1.Service
		eps     []*discoveryv1.EndpointSlice
		healthy []string
	}{
		{"first", append(slices.Clone(svcs), local), eps("n3", "n4"), nodes},
		{"again", append(slices.Clone(svcs), local), eps("n3", "n4"), nodes},
		{"endpoint moved", append(slices.Clone(svcs), local), eps(moved), nodes},
		{"nodes down", append(slices.Clone(svcs), local), eps(moved, "n5"), down},
		{"VIPs gone", svcs[:3], nil, down},
		{"node back", append(slices.Clone(svcs), local), eps("n0"), nodes},
	}
	var e Elections
	for _, st := range steps {
		if got, want := e.VIPOwners(st.svcs, st.eps, st.healthy), VIPOwners(st.svcs, st.eps, st.healthy); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: VIPOwners %v, want %v", st.name, got, want)
		}
		if got, want := e.UnderlayOwners(st.svcs, st.eps, st.healthy, opts), UnderlayOwners(st.svcs, st.eps, st.healthy, opts); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: UnderlayOwners %v, want %v", st.name, got, want)
		}
	}
}
