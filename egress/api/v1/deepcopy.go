package v1

import "k8s.io/apimachinery/pkg/runtime"

// DeepCopyInto copies in into out.
func (in *EgressIP) DeepCopyInto(out *EgressIP) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy, nil for nil.
func (in *EgressIP) DeepCopy() *EgressIP {
	if in == nil {
		return nil
	}
	out := new(EgressIP)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *EgressIP) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies in into out.
func (in *EgressIPSpec) DeepCopyInto(out *EgressIPSpec) {
	*out = *in
	if in.EgressIPs != nil {
		out.EgressIPs = make([]string, len(in.EgressIPs))
		copy(out.EgressIPs, in.EgressIPs)
	}
	in.NamespaceSelector.DeepCopyInto(&out.NamespaceSelector)
	in.PodSelector.DeepCopyInto(&out.PodSelector)
}

// DeepCopy returns a deep copy, nil for nil.
func (in *EgressIPSpec) DeepCopy() *EgressIPSpec {
	if in == nil {
		return nil
	}
	out := new(EgressIPSpec)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out.
func (in *EgressIPStatus) DeepCopyInto(out *EgressIPStatus) {
	*out = *in
	if in.Items != nil {
		out.Items = make([]EgressIPStatusItem, len(in.Items))
		copy(out.Items, in.Items)
	}
}

// DeepCopy returns a deep copy, nil for nil.
func (in *EgressIPStatus) DeepCopy() *EgressIPStatus {
	if in == nil {
		return nil
	}
	out := new(EgressIPStatus)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out.
func (in *EgressIPStatusItem) DeepCopyInto(out *EgressIPStatusItem) { *out = *in }

// DeepCopy returns a deep copy, nil for nil.
func (in *EgressIPStatusItem) DeepCopy() *EgressIPStatusItem {
	if in == nil {
		return nil
	}
	out := new(EgressIPStatusItem)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out.
func (in *EgressIPList) DeepCopyInto(out *EgressIPList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]EgressIP, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy, nil for nil.
func (in *EgressIPList) DeepCopy() *EgressIPList {
	if in == nil {
		return nil
	}
	out := new(EgressIPList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *EgressIPList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
