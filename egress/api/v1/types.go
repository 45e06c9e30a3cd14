package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EgressIP is a cluster-scoped request that the pods selected by its
// selectors leave the cluster with one of its egress IPs as their source
// address.
type EgressIP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EgressIPSpec   `json:"spec"`
	Status EgressIPStatus `json:"status,omitempty"`
}

// EgressIPSpec is what the administrator asks for.
type EgressIPSpec struct {
	// EgressIPs are the requested source addresses, IPv4 and/or IPv6.
	EgressIPs []string `json:"egressIPs"`
	// NamespaceSelector selects the namespaces whose pods are served.
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`
	// PodSelector narrows the pods of those namespaces; empty selects all.
	PodSelector metav1.LabelSelector `json:"podSelector,omitempty"`
}

// EgressIPStatus is where the leader assigned the egress IPs.
type EgressIPStatus struct {
	Items []EgressIPStatusItem `json:"items"`
}

// EgressIPStatusItem says that Node hosts EgressIP.
type EgressIPStatusItem struct {
	Node     string `json:"node"`
	EgressIP string `json:"egressIP"`
}

// EgressIPList is a list of EgressIPs.
type EgressIPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []EgressIP `json:"items"`
}
