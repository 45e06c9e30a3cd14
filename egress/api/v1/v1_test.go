package v1_test

import (
	"context"
	"reflect"
	"testing"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/fake"
)

func seedEIP() *egressv1.EgressIP {
	return &egressv1.EgressIP{
		ObjectMeta: metav1.ObjectMeta{Name: "egressip-prod", Labels: map[string]string{"a": "b"}},
		Spec: egressv1.EgressIPSpec{
			EgressIPs: []string{"172.18.0.33", "172.18.0.44"},
			NamespaceSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "environment", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"development"}},
			}},
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
		Status: egressv1.EgressIPStatus{Items: []egressv1.EgressIPStatusItem{{Node: "ovn-worker", EgressIP: "172.18.0.33"}}},
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	in := seedEIP()
	out := in.DeepCopyObject().(*egressv1.EgressIP)
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("copy differs:\n%#v\n%#v", in, out)
	}
	out.Spec.EgressIPs[0] = "x"
	out.Spec.NamespaceSelector.MatchExpressions[0].Values[0] = "x"
	out.Spec.PodSelector.MatchLabels["app"] = "x"
	out.Status.Items[0].Node = "x"
	out.Labels["a"] = "x"
	if !reflect.DeepEqual(in, seedEIP()) {
		t.Errorf("changing the copy changed the original: %#v", in)
	}
	list := &egressv1.EgressIPList{Items: []egressv1.EgressIP{*seedEIP()}}
	lc := list.DeepCopyObject().(*egressv1.EgressIPList)
	lc.Items[0].Spec.EgressIPs[1] = "x"
	if list.Items[0].Spec.EgressIPs[1] != "172.18.0.44" {
		t.Error("changing the list copy changed the original")
	}
	var nilEIP *egressv1.EgressIP
	if nilEIP.DeepCopy() != nil || nilEIP.DeepCopyObject() != nil {
		t.Error("nil copy is not nil")
	}
}

func TestScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := egressv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []runtime.Object{&egressv1.EgressIP{}, &egressv1.EgressIPList{}} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil || len(gvks) != 1 || gvks[0].GroupVersion() != egressv1.SchemeGroupVersion {
			t.Errorf("ObjectKinds(%T) = %v, %v", obj, gvks, err)
		}
	}
}

func TestUnstructuredRoundTripThroughDynamicClient(t *testing.T) {
	u, err := egressv1.ToUnstructured(seedEIP())
	if err != nil {
		t.Fatal(err)
	}
	// The daemon's dynamic client knows no EgressIP Go type: unstructured only.
	client := fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{egressv1.Resource: egressv1.ListKind}, u)
	ctx := context.Background()
	got, err := client.Resource(egressv1.Resource).Get(ctx, "egressip-prod", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := egressv1.FromUnstructured(got)
	if err != nil {
		t.Fatal(err)
	}
	want := seedEIP()
	want.APIVersion, want.Kind = "k8s.ovn.org/v1", "EgressIP"
	e.ResourceVersion = ""
	if !reflect.DeepEqual(e, want) {
		t.Errorf("round trip:\n got %#v\nwant %#v", e, want)
	}
	l, err := client.Resource(egressv1.Resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := egressv1.ListFromUnstructured(l)
	if err != nil || len(all) != 1 || all[0].Name != "egressip-prod" {
		t.Errorf("list = %v, %v", all, err)
	}
}

func TestFromUnstructuredErrors(t *testing.T) {
	for name, obj := range map[string]map[string]any{
		"wrong kind": {"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}},
		"bad field": {"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP", "metadata": map[string]any{"name": "e"},
			"spec": map[string]any{"egressIPs": "1.2.3.4"}},
	} {
		if _, err := egressv1.FromUnstructured(&unstructured.Unstructured{Object: obj}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := egressv1.FromUnstructured(nil); err == nil {
		t.Error("nil: no error")
	}
	if _, err := egressv1.ToUnstructured(nil); err == nil {
		t.Error("nil: no error")
	}
}
