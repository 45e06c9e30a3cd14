package desired

import (
	"fmt"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
)

// Snapshot is every object the desired state is computed from, as the
// informers' caches hold them. The objects are shared with the caches,
// and a Watcher's lists of them with its other Snapshots: read them,
// never modify them.
type Snapshot struct {
	Nodes      []*corev1.Node
	Namespaces []*corev1.Namespace
	// Pods are in compact form (egress.NewPodInfo, egress.PodInfos).
	Pods           []*egress.PodInfo
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	EgressIPs      []*unstructured.Unstructured
	// EgressServices are k8s.ovn.org/v1 EgressServices, when watched.
	EgressServices []*unstructured.Unstructured
	// Subnets and NADs are Kube-OVN's Subnets and Multus'
	// NetworkAttachmentDefinitions, when watched
	// (WatchKubeOVN); objects that do not convert are logged and left out.
	Subnets []*kubeovn.Subnet
	NADs    []*nadv1.NetworkAttachmentDefinition
	// LBSvcDeployments are the lb-svc Deployments ovnedge manages (label
	// app.kubernetes.io/managed-by=ovnedge) and LBSvcConfig Kube-OVN's
	// kube-system/ovn-vpc-nat-config ConfigMap (nil when missing), when
	// the Watcher watches them (WatchLBSvc).
	LBSvcDeployments []*appsv1.Deployment
	LBSvcConfig      *corev1.ConfigMap
	// BGPPeers and BFDProfiles are MetalLB's objects of the BGP peers,
	// when watched (WatchBGPPeers).
	BGPPeers, BFDProfiles []*unstructured.Unstructured
	// Changed, when not nil, are the objects changed since the previous
	// Snapshot the cluster loop took (a daemon Watcher's TakeChanges): the leader
	// recomputes only what they reach. nil: everything.
	Changed *Changes
	// ListPods, when not nil, lists the Pods, which a Snapshot with
	// Changed leaves out (the incremental path does not read them): see
	// WithPods.
	ListPods func() ([]*egress.PodInfo, error)
}

// WithPods returns s with its Pods listed, when they were left out.
func (s Snapshot) WithPods() (Snapshot, error) {
	if s.ListPods == nil {
		return s, nil
	}
	pods, err := s.ListPods()
	if err != nil {
		return s, fmt.Errorf("list pods: %w", err)
	}
	s.Pods, s.ListPods = pods, nil
	return s, nil
}
