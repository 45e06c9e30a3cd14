// Package kubeovn is Kube-OVN's LoadBalancer Service mode in the default
// VPC (seed 004, reference §4) as a pure function: a Service of type
// LoadBalancer annotated ovn.kubernetes.io/attachmentprovider=<nad>.<ns>
// gets the Deployment lb-svc-<service> (1 replica, strategy Recreate)
// whose pod is attached through the NetworkAttachmentDefinition <ns>/<nad>
// (a macvlan second interface net1, addressed by the subnet named in the
// optional <provider>.kubernetes.io/logical_switch annotation, with the
// Service's spec.loadBalancerIP as static address when set) and runs the
// in-pod agent (package lbsvc/agent, `ovnedge lbsvc-agent`) instead of
// Kube-OVN's exec'd shell script.
//
// [Deployment] never does I/O: the caller passes the NetworkAttachment-
// Definitions that exist, creates or updates the returned Deployment in
// the Service's namespace (or deletes lb-svc-<service> when it returns
// nil) and records the events, which say why a Service gets no
// Deployment: a provider that is not "<name>.<namespace>", or a
// NetworkAttachmentDefinition that does not exist. Other Services are
// never affected. [PoolNames] gives the ipam pools the Service's
// LoadBalancer address comes from.
//
// [Subnet] is the part of a kubeovn.io/v1 Subnet ovnedge reads (the CRD
// for clusters without Kube-OVN is deploy/crds/kubeovn.io_subnets.yaml);
// [Subnet.Pools] makes its ipam pools and [ProviderSubnet] finds the
// subnet of a Service's provider. NetworkAttachmentDefinitions are the
// network-plumbing-wg client module's type; [NADs] reduces them to what
// [Deployment] needs.
package kubeovn
