// Package v1 holds the Go types of the k8s.ovn.org/v1 EgressIP custom
// resource, with the group, version, kind and JSON field names
// OVN-Kubernetes uses (ovn-kubernetes/ovn-kubernetes at 8871cd9,
// go-controller/pkg/crd/egressip/v1/types.go), so the objects an
// OVN-Kubernetes cluster already has are read unchanged.
//
// The deep-copy functions are written by hand in the shape controller-gen
// produces, [AddToScheme] registers the kinds with a runtime.Scheme, and
// [FromUnstructured] / [ToUnstructured] convert to and from the
// *unstructured.Unstructured objects of client-go's dynamic client, which
// is how the daemon reads and patches EgressIPs (no generated typed client
// is needed). [Resource] is the GroupVersionResource to give that client.
//
// The CRD manifest with OpenAPI validation and printer columns is
// deploy/crds/k8s.ovn.org_egressips.yaml.
package v1
