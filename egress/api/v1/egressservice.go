package v1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// EgressService kind, plural resource and the values of its fields
// (OVN-Kubernetes' go-controller/pkg/crd/egressservice/v1/types.go).
const (
	ServiceKind   = "EgressService"
	ServicePlural = "egressservices"
	// SourceIPLoadBalancer leaves with the Service's ingress IP (the
	// default: an empty sourceIPBy is read as this); SourceIPNetwork
	// leaves by the routes of spec.network, masqueraded as any pod.
	SourceIPLoadBalancer = "LoadBalancerIP"
	SourceIPNetwork      = "Network"
	// HostAll is status.host of a Network EgressService: every node
	// with an endpoint.
	HostAll = "ALL"
)

// ServiceResource is the egressservices resource, for the dynamic client.
var ServiceResource = SchemeGroupVersion.WithResource(ServicePlural)

// EgressService is a namespaced request, named as the LoadBalancer Service
// it applies to, that the Service's endpoint pods leave the cluster with
// the Service's ingress IP as source, from one node (status.host).
type EgressService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EgressServiceSpec   `json:"spec,omitempty"`
	Status EgressServiceStatus `json:"status,omitempty"`
}

// EgressServiceSpec is what the user asks for.
type EgressServiceSpec struct {
	// SourceIPBy is SourceIPLoadBalancer ("" too) or SourceIPNetwork.
	SourceIPBy string `json:"sourceIPBy,omitempty"`
	// NodeSelector limits the nodes that can be chosen; empty: any.
	NodeSelector metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Network is a routing table (id or name) the endpoints' traffic
	// and the replies of the Service's ingress traffic use.
	Network string `json:"network,omitempty"`
}

// EgressServiceStatus is the node chosen.
type EgressServiceStatus struct {
	// Host is the node, HostAll, or "" when none is.
	Host string `json:"host"`
}

// ServiceFromUnstructured converts an object of the dynamic client into
// an EgressService. It fails on another group/version/kind and on fields
// of the wrong type, naming the object.
func ServiceFromUnstructured(u *unstructured.Unstructured) (*EgressService, error) {
	if u == nil {
		return nil, fmt.Errorf("egressservice from unstructured: nil object")
	}
	if gvk := u.GroupVersionKind(); gvk != SchemeGroupVersion.WithKind(ServiceKind) {
		return nil, fmt.Errorf("egressservice from unstructured %s/%s: kind is %q, want %s", u.GetNamespace(), u.GetName(), gvk, SchemeGroupVersion.WithKind(ServiceKind))
	}
	out := new(EgressService)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
		return nil, fmt.Errorf("egressservice from unstructured %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}
