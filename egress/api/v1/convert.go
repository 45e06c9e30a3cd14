package v1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromUnstructured converts an object of the dynamic client into an
// EgressIP. It fails on another group/version/kind and on fields of the
// wrong type, naming the object.
func FromUnstructured(u *unstructured.Unstructured) (*EgressIP, error) {
	if u == nil {
		return nil, fmt.Errorf("egressip from unstructured: nil object")
	}
	if gvk := u.GroupVersionKind(); gvk != SchemeGroupVersion.WithKind(Kind) {
		return nil, fmt.Errorf("egressip from unstructured %q: kind is %q, want %s", u.GetName(), gvk, SchemeGroupVersion.WithKind(Kind))
	}
	out := new(EgressIP)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
		return nil, fmt.Errorf("egressip from unstructured %q: %w", u.GetName(), err)
	}
	return out, nil
}

// ListFromUnstructured converts the list the dynamic client returns.
func ListFromUnstructured(l *unstructured.UnstructuredList) ([]*EgressIP, error) {
	if l == nil {
		return nil, nil
	}
	out := make([]*EgressIP, 0, len(l.Items))
	for i := range l.Items {
		e, err := FromUnstructured(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// ToUnstructured converts an EgressIP for the dynamic client, with its
// apiVersion and kind set.
func ToUnstructured(e *EgressIP) (*unstructured.Unstructured, error) {
	if e == nil {
		return nil, fmt.Errorf("egressip to unstructured: nil object")
	}
	c := e.DeepCopy()
	c.SetGroupVersionKind(SchemeGroupVersion.WithKind(Kind))
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return nil, fmt.Errorf("egressip to unstructured %q: %w", e.Name, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}
