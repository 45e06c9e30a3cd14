package kubewatch

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/lbsvc"
)

// TestCompactSlice: what a node instance computes from compacted
// EndpointSlices (its gateway flows' host-network targets, the L2 owners
// and the VIPs it serves in BGP mode) equals what it computes from the
// whole ones, for endpoints on the node, on others (ready, not ready,
// terminating), on none, of both families and with bad addresses; the
// slices shrink (into arrays of their own: the decoded ones are let go)
// and compacting again changes nothing.
func TestCompactSlice(t *testing.T) {
	ep := func(node string, ready, serving, terminating *bool, addrs ...string) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}}
		if node != "" {
			e.NodeName = ptr.To(node)
		}
		return e
	}
	yes, no := ptr.To(true), ptr.To(false)
	slice := func(svc string, family discoveryv1.AddressType, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: svc + "-" + string(family),
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: family, Endpoints: eps,
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port)}}}
	}
	service := func(name, vip string, local bool) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, ExternalIPs: []string{vip},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, TargetPort: intstr.FromInt32(8080)}}}}
		if local {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		return s
	}
	svcs := []*corev1.Service{service("local", "192.0.2.1", true), service("cluster", "192.0.2.2", false),
		service("terminating", "192.0.2.3", true), service("v6", "2001:db8::1", true)}
	nodes := []string{"a", "b", "c"}
	full := func() []*discoveryv1.EndpointSlice {
		return []*discoveryv1.EndpointSlice{
			slice("local", discoveryv1.AddressTypeIPv4, 8080,
				ep("a", yes, nil, nil, "172.18.0.2"), // host network on a
				ep("a", yes, nil, nil, "10.244.0.5"),
				ep("b", yes, nil, nil, "10.244.1.5"), ep("b", yes, nil, nil, "10.244.1.6"), ep("b", no, nil, nil, "10.244.1.7"),
				ep("c", no, nil, nil, "bad", "10.244.2.5"), ep("", yes, nil, nil, "10.244.9.9")),
			slice("cluster", discoveryv1.AddressTypeIPv4, 8080, ep("b", yes, nil, nil, "10.244.1.8"), ep("c", yes, nil, nil, "10.244.2.8")),
			slice("terminating", discoveryv1.AddressTypeIPv4, 8081,
				ep("b", no, yes, yes, "10.244.1.9"), ep("b", no, yes, yes, "10.244.1.10"), ep("a", no, yes, yes, "172.18.0.2")),
			slice("v6", discoveryv1.AddressTypeIPv6, 8080, ep("b", yes, nil, nil, "10.244.1.11", "fd00::b"), ep("c", yes, nil, nil, "fd00::c")),
		}
	}
	for _, node := range nodes {
		whole, compact := full(), full()
		before, after := 0, 0
		for i, s := range compact {
			before += len(s.Endpoints)
			n := len(s.Endpoints)
			compactSlice(s, node)
			if len(s.Endpoints) < n && cap(s.Endpoints) != len(s.Endpoints) {
				t.Errorf("node %s, slice %d: %d endpoints kept in the decoded array of %d", node, i, len(s.Endpoints), cap(s.Endpoints))
			}
			again := s.DeepCopy()
			compactSlice(again, node)
			if !reflect.DeepEqual(again, s) {
				t.Errorf("node %s, slice %d: compacting again changed it:\n%+v\n%+v", node, i, s.Endpoints, again.Endpoints)
			}
			after += len(s.Endpoints)
		}
		if after >= before {
			t.Errorf("node %s: %d endpoints compacted to %d", node, before, after)
		}
		self := lbsvc.Node{Name: node, IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}
		for _, svc := range svcs {
			w, _, _ := lbsvc.GatewayService(svc, lbsvc.SlicesByService(whole)["ns/"+svc.Name], self)
			c, _, _ := lbsvc.GatewayService(svc, lbsvc.SlicesByService(compact)["ns/"+svc.Name], self)
			if !reflect.DeepEqual(w, c) {
				t.Errorf("node %s, Service %s: gateway %+v from the whole slices, %+v compacted", node, svc.Name, w, c)
			}
		}
		// Every node's: the node elects its own among all.
		if w, c := lbsvc.VIPOwners(svcs, whole, nodes), lbsvc.VIPOwners(svcs, compact, nodes); !reflect.DeepEqual(w, c) {
			t.Errorf("node %s: L2 owners %v from the whole slices, %v compacted", node, w, c)
		}
		if w, c := lbsvc.ServedVIPs(svcs, whole, node), lbsvc.ServedVIPs(svcs, compact, node); !reflect.DeepEqual(w, c) {
			t.Errorf("node %s: BGP VIPs %v from the whole slices, %v compacted", node, w, c)
		}
	}
}

// TestServiceStub: a ClusterIP Service without external IPs is replaced
// by its key and version (idempotently), which the informer's key
// function reads; any Service a node has work for is kept whole.
func TestServiceStub(t *testing.T) {
	full := func(typ corev1.ServiceType) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "b"}},
			Spec: corev1.ServiceSpec{Type: typ, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
				Selector: map[string]string{"app": "x"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	withExternal := full(corev1.ServiceTypeClusterIP)
	withExternal.Spec.ExternalIPs = []string{"192.0.2.1"}
	withIngress := full(corev1.ServiceTypeClusterIP)
	withIngress.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.2"}}
	for _, c := range []struct {
		name string
		svc  *corev1.Service
		stub bool
	}{
		{"ClusterIP", full(corev1.ServiceTypeClusterIP), true},
		{"no type", full(""), true},
		{"NodePort", full(corev1.ServiceTypeNodePort), false},
		{"LoadBalancer", full(corev1.ServiceTypeLoadBalancer), false},
		{"ExternalName", full(corev1.ServiceTypeExternalName), false},
		{"ClusterIP with an external IP", withExternal, false},
		{"ClusterIP with ingress", withIngress, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := c.svc.DeepCopy()
			got := TrimForNode(c.svc, "a")
			if !c.stub {
				if got != any(c.svc) || !reflect.DeepEqual(c.svc, before) {
					t.Errorf("changed:\n%+v\n%+v", before, got)
				}
				return
			}
			want := &stub{namespace: "ns", name: "s", resourceVersion: "7"}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("stub %+v, want %+v", got, want)
			}
			if again := TrimForNode(got, "a"); again != got {
				t.Errorf("trimming again gave %+v", again)
			}
			if key, err := cache.MetaNamespaceKeyFunc(got); key != "ns/s" || err != nil {
				t.Errorf("key %q, %v", key, err)
			}
			a, err := meta.Accessor(got)
			if err != nil || a.GetResourceVersion() != "7" {
				t.Errorf("accessor: %v, %v", a, err)
			}
		})
	}
}

// TestEgressIPStub: a node instance keeps whole the EgressIPs whose
// status gives it an IP and a stub (key and version) of the others;
// objects of other kinds stay as they are.
func TestEgressIPStub(t *testing.T) {
	eip := func(kind string, nodes ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": kind,
			"metadata": map[string]any{"name": "e", "resourceVersion": "9"},
			"spec":     map[string]any{"egressIPs": []any{"172.18.0.44"}}}}
		var items []any
		for _, n := range nodes {
			items = append(items, map[string]any{"node": n, "egressIP": "172.18.0.44"})
		}
		if items != nil {
			u.Object["status"] = map[string]any{"items": items}
		}
		return u
	}
	for _, c := range []struct {
		name string
		u    *unstructured.Unstructured
		kept bool
	}{
		{"assigned to the node", eip("EgressIP", "b", "a"), true},
		{"assigned elsewhere", eip("EgressIP", "b"), false},
		{"unassigned", eip("EgressIP"), false},
		{"another kind", eip("EgressService"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := TrimForNode(c.u, "a")
			if c.kept != (got == any(c.u)) {
				t.Fatalf("kept %v, want %v: %+v", got == any(c.u), c.kept, got)
			}
			if !c.kept && !reflect.DeepEqual(got, &stub{name: "e", resourceVersion: "9"}) {
				t.Errorf("stub %+v", got)
			}
		})
	}
}
