package v1_test

import (
	"fmt"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// An EgressIP as the dynamic client returns it, converted to the typed form.
func ExampleFromUnstructured() {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.ovn.org/v1",
		"kind":       "EgressIP",
		"metadata":   map[string]any{"name": "egressip-prod"},
		"spec": map[string]any{
			"egressIPs":         []any{"172.18.0.33", "172.18.0.44"},
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"env": "prod"}},
		},
	}}
	e, err := egressv1.FromUnstructured(u)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.Name, e.Spec.EgressIPs, e.Spec.NamespaceSelector.MatchLabels)
	// Output: egressip-prod [172.18.0.33 172.18.0.44] map[env:prod]
}
