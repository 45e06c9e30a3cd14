// Package kubeovn is Kube-OVN's LoadBalancer Service mode in the default VPC
// (kubeovn/kube-ovn at 1533681, pkg/controller/service_lb.go; the user guide
// is kubeovn/docs, docs/guide/loadbalancer-service.en.md) as a pure
// function. A Service of type LoadBalancer annotated
// ovn.kubernetes.io/attachmentprovider=<nad>.<ns> gets the Deployment
// lb-svc-<service> (1 replica, strategy Recreate) whose pod is attached
// through the NetworkAttachmentDefinition <ns>/<nad> (a second interface
// net1, addressed from the subnet named in the optional
// <provider>.kubernetes.io/logical_switch annotation, with
// spec.loadBalancerIP as static address when set) and runs `ovnedge
// lbsvc-agent` (package lbsvc/agent) instead of Kube-OVN's exec'd script.
//
// [Desired] is the whole of it over the cluster's Services, Subnets and
// NetworkAttachmentDefinitions: each selected Service's address from its
// provider's Subnet with Kube-OVN's IPAM semantics (package ipam) and its
// Deployment, or a Warning event saying why not. [Plan.Changes] turns that
// into creates, updates and deletes of the Deployments: ovnedge's own are
// labelled app.kubernetes.io/managed-by=ovnedge, owned by their Service and
// carry a digest of what was built (updated only when it changes).
// [Deployment] builds one Deployment; [OptionsFromConfigMap] reads the
// image and node selector from ConfigMap kube-system/ovn-vpc-nat-config,
// as Kube-OVN does.
//
// [Subnet] is the part of a kubeovn.io/v1 Subnet ovnedge reads; for
// LoadBalancer VIPs on an underlay subnet (Kube-OVN's MetalLB integration,
// kubeovn/docs docs/advance/with-metallb.en.md), [Subnet.Underlay] makes
// package lbsvc's underlay subnets and [Subnet.ExternalLBPools] the pools of
// its excludeIps, where ovnedge's standalone mode allocates VIPs.
//
// The ClusterIP the lb-svc pod DNATs to is served by the load balancers
// ovnedge's leader writes: --cluster-subnets must cover the Kube-OVN
// subnets the pods live on. internal/e2e's TestKubeOVNLBSvc proves the
// whole path with real packets.
package kubeovn
