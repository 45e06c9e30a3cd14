package kubeovn

import (
	"fmt"
	"net"
	"slices"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
)

// The custom resources read, for client-go's dynamic client.
var (
	// SubnetResource is Kube-OVN's cluster-scoped Subnet
	// (deploy/crds/kubeovn.io_subnets.yaml).
	SubnetResource = schema.GroupVersionResource{Group: "kubeovn.io", Version: "v1", Resource: "subnets"}
	// NADResource is Multus' namespaced NetworkAttachmentDefinition
	// (deploy/crds/k8s.cni.cncf.io_network-attachment-definitions.yaml).
	NADResource = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
)

// Subnet is the part of a kubeovn.io/v1 Subnet ovnedge reads; the JSON
// names are Kube-OVN's (pkg/apis/kubeovn/v1/subnet.go).
type Subnet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SubnetSpec   `json:"spec"`
	Status            SubnetStatus `json:"status,omitempty"`
}

// SubnetStatus holds the status fields used.
type SubnetStatus struct {
	// U2OInterconnectionMAC is the MAC of the VPC router's port on an
	// underlay subnet with u2oInterconnection (underlay VIP traffic is
	// steered to it).
	U2OInterconnectionMAC string `json:"u2oInterconnectionMAC,omitempty"`
}

// SubnetSpec holds the fields used.
type SubnetSpec struct {
	// Protocol is IPv4, IPv6 or Dual (Kube-OVN derives it from CIDRBlock).
	Protocol string `json:"protocol,omitempty"`
	// CIDRBlock is one CIDR, or an IPv4 and an IPv6 one comma-separated.
	CIDRBlock string `json:"cidrBlock,omitempty"`
	// Gateway is one address per CIDR block, comma-separated.
	Gateway string `json:"gateway,omitempty"`
	// ExcludeIps are addresses (A or A..B) pods never get at random.
	ExcludeIps []string `json:"excludeIps,omitempty"`
	// Provider is "ovn" (or "<x>.ovn") for an OVN logical switch, else
	// "<nad>.<namespace>" of the attachment it addresses.
	Provider string `json:"provider,omitempty"`
	// Vlan names the kubeovn.io Vlan of an underlay subnet.
	Vlan string `json:"vlan,omitempty"`
	// EnableExternalLBAddress lets LoadBalancer VIPs (MetalLB's) lie in
	// the CIDR.
	EnableExternalLBAddress bool `json:"enableExternalLBAddress,omitempty"`
	// NatOutgoing masquerades traffic leaving the cluster.
	NatOutgoing bool `json:"natOutgoing"`
}

// SubnetFromUnstructured converts an object of the dynamic client.
func SubnetFromUnstructured(u *unstructured.Unstructured) (*Subnet, error) {
	var s Subnet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
		return nil, fmt.Errorf("subnet %s: %w", u.GetName(), err)
	}
	return &s, nil
}

// NADFromUnstructured converts an object of the dynamic client.
func NADFromUnstructured(u *unstructured.Unstructured) (*nadv1.NetworkAttachmentDefinition, error) {
	var n nadv1.NetworkAttachmentDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err != nil {
		return nil, fmt.Errorf("network attachment definition %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &n, nil
}

// NADs returns what Deployment needs of NetworkAttachmentDefinitions.
func NADs(list []*nadv1.NetworkAttachmentDefinition) []NAD {
	out := make([]NAD, 0, len(list))
	for _, n := range list {
		out = append(out, NAD{Namespace: n.Namespace, Name: n.Name, ResourceName: n.Annotations[AnnotationResourceName]})
	}
	return out
}

// Pools returns the subnet's ipam pools, named after it: its CIDR blocks
// minus excludeIps and the gateway (see ipam.NewSubnetPools).
func (s *Subnet) Pools() ([]*ipam.Pool, error) {
	if s.Spec.CIDRBlock == "" {
		return nil, fmt.Errorf("subnet %s has no cidrBlock", s.Name)
	}
	return ipam.NewSubnetPools(s.Name, s.Spec.CIDRBlock, s.Spec.Gateway, s.Spec.ExcludeIps)
}

// Underlay returns the subnet as package lbsvc's underlay subnets (one per
// CIDR block): its pools, enableExternalLBAddress, its logical switch
// (the Subnet's name) and the router port MAC of its status. A
// malformed u2oInterconnectionMAC is an error.
func (s *Subnet) Underlay() ([]lbsvc.UnderlaySubnet, error) {
	pools, err := s.Pools()
	if err != nil {
		return nil, err
	}
	var mac net.HardwareAddr
	if v := s.Status.U2OInterconnectionMAC; v != "" {
		if mac, err = net.ParseMAC(v); err != nil || len(mac) != 6 {
			return nil, fmt.Errorf("subnet %s: status.u2oInterconnectionMAC %q is not a MAC address", s.Name, v)
		}
	}
	out := make([]lbsvc.UnderlaySubnet, 0, len(pools))
	for _, p := range pools {
		out = append(out, lbsvc.UnderlaySubnet{Subnet: p, EnableExternalLBAddress: s.Spec.EnableExternalLBAddress,
			Switch: s.Name, RouterMAC: mac})
	}
	return out, nil
}

// ExternalLBPools are the pools of the subnet's external LoadBalancer
// addresses: the excludeIps of its CIDR blocks (MetalLB's pool in seed
// 003), for an enableExternalLBAddress subnet only.
func (s *Subnet) ExternalLBPools() ([]*ipam.Pool, error) {
	if !s.Spec.EnableExternalLBAddress {
		return nil, nil
	}
	pools, err := s.Pools()
	if err != nil {
		return nil, err
	}
	out := make([]*ipam.Pool, 0, len(pools))
	for _, p := range pools {
		out = append(out, p.Complement())
	}
	return out, nil
}

// ProviderSubnet returns the subnet a Selected Service's address comes
// from: the one its <provider>.kubernetes.io/logical_switch annotation
// names, else the only one whose spec.provider is the Service's provider
// (by name, the first of several). It says why there is none.
func ProviderSubnet(svc *corev1.Service, subnets []*Subnet) (*Subnet, error) {
	provider := svc.Annotations[AnnotationAttachmentProvider]
	if name := svc.Annotations[LogicalSwitchAnnotation(provider)]; name != "" {
		i := slices.IndexFunc(subnets, func(s *Subnet) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("subnet %q of annotation %s does not exist", name, LogicalSwitchAnnotation(provider))
		}
		if p := subnets[i].Spec.Provider; p != provider {
			return nil, fmt.Errorf("subnet %q is of provider %q, not %q", name, p, provider)
		}
		return subnets[i], nil
	}
	var match []*Subnet
	for _, s := range subnets {
		if s.Spec.Provider == provider {
			match = append(match, s)
		}
	}
	if len(match) == 0 {
		return nil, fmt.Errorf("no subnet has provider %q", provider)
	}
	slices.SortFunc(match, func(a, b *Subnet) int { return strings.Compare(a.Name, b.Name) })
	return match[0], nil
}
