package desired

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestStatusNames: an EgressIP's status names a node when one of its
// items has that node, whatever else the object holds.
func TestStatusNames(t *testing.T) {
	eip := func(status any) *unstructured.Unstructured {
		o := map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP", "metadata": map[string]any{"name": "e"}}
		if status != nil {
			o["status"] = status
		}
		return &unstructured.Unstructured{Object: o}
	}
	items := func(nodes ...any) map[string]any {
		var out []any
		for _, n := range nodes {
			out = append(out, map[string]any{"node": n, "egressIP": "172.18.0.9"})
		}
		return map[string]any{"items": out}
	}
	for _, tc := range []struct {
		name string
		u    *unstructured.Unstructured
		want bool
	}{
		{"no status", eip(nil), false},
		{"empty", eip(map[string]any{}), false},
		{"this node", eip(items("n1")), true},
		{"another node", eip(items("n2")), false},
		{"among others", eip(items("n2", "n1")), true},
		{"not a string", eip(items(7)), false},
		{"items not a list", eip(map[string]any{"items": "n1"}), false},
		{"an item not an object", eip(map[string]any{"items": []any{"n1"}}), false},
	} {
		if got := StatusNames(tc.u, "n1"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
