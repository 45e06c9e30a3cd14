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
// [Desired] is the whole of it over the cluster's Services, Subnets and
// NetworkAttachmentDefinitions: each Selected Service's address from its
// provider's Subnet with Kube-OVN's IPAM semantics (package ipam; the
// status.loadBalancer.ingress to write) and its Deployment, or a Warning
// event saying why not. [Plan.Changes] turns that into the creates,
// updates and deletes of the Deployments in the cluster: ovnedge's own
// are labelled app.kubernetes.io/managed-by=ovnedge and carry a digest of
// what was built (an update only when it changes), and those of deleted
// or deselected Services are deleted (the Service is also their
// controller owner, so the garbage collector agrees). The image comes
// from a flag or, as in Kube-OVN, from the key image of ConfigMap
// kube-system/ovn-vpc-nat-config, the node selector from its key
// nodeSelector ([OptionsFromConfigMap]).
//
// [Subnet] is the part of a kubeovn.io/v1 Subnet ovnedge reads (the CRD
// for clusters without Kube-OVN is deploy/crds/kubeovn.io_subnets.yaml);
// [Subnet.Pools] makes its ipam pools and [ProviderSubnet] finds the
// subnet of a Service's provider. For seed 003 (MetalLB on an underlay
// subnet), [Subnet.Underlay] makes it package lbsvc's underlay subnets
// (with the router port MAC of status.u2oInterconnectionMAC) and
// [Subnet.ExternalLBPools] the pools of its excludeIps, where
// ovnedge's standalone mode allocates LoadBalancer VIPs. NetworkAttachmentDefinitions are the
// network-plumbing-wg client module's type; [NADs] reduces them to what
// [Deployment] needs.
//
// The ClusterIP the lb-svc pod DNATs to is served by the load balancers
// ovnedge's leader writes (package lbsvc): on a cluster whose pods live
// on Kube-OVN subnets, --cluster-subnets must cover those subnets (else
// their endpoints count as host-network ones, served per node), and the
// subnet switches hold the cluster-wide Load_Balancer_Group, as Kube-OVN
// attaches its VPC's load balancers to every subnet. internal/e2e's
// TestKubeOVNLBSvc proves the whole path with real packets.
package kubeovn
