package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of EgressIP.
const GroupName = "k8s.ovn.org"

// Kind names and the plural resource name.
const (
	Kind     = "EgressIP"
	ListKind = "EgressIPList"
	Plural   = "egressips"
)

// SchemeGroupVersion is k8s.ovn.org/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

// Resource is the egressips resource, for client-go's dynamic client.
var Resource = SchemeGroupVersion.WithResource(Plural)

var (
	// SchemeBuilder registers the EgressIP kinds.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds EgressIP and EgressIPList to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &EgressIP{}, &EgressIPList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
