// Package lbsvc turns Services and EndpointSlices into OVN load balancers
// (ClusterIP, NodePorts, ExternalIPs, LoadBalancer ingress,
// externalTrafficPolicy and internalTrafficPolicy, affinity, dual-stack),
// the node bridges' Service flows, the opt-in L2 announcement of VIPs, LB
// IPAM and the Kube-OVN underlay mode. Like package egress it computes
// desired state only, as pure functions; ovsdbnb, ovsflow and arp apply it.
//
//   - Load balancers: [Build] (or [BuildServices] on plain [Service]
//     values) returns one ovsdbnb owner per Service ([ServiceOwner]), the
//     NodePort template variables ([NodeIPTemplatesOwner]) and the
//     Load_Balancer_Groups ([GroupState]); [ServiceState] recomputes one
//     Service, so an endpoint change costs one owner's Sync. The rows are
//     those of OVN-Kubernetes' services controller (ovn-kubernetes/ovn-kubernetes
//     at 8871cd9, go-controller/pkg/ovn/controller/services/lb_config.go,
//     loadbalancer.go, svc_template_var.go), whose unit-test vectors are
//     table cases here.
//   - Source ranges: with Options.SourceRanges, [Firewalls] reads
//     spec.loadBalancerSourceRanges as kube-proxy does and each Service
//     owner gets drop ACLs on every node's external and logical switch
//     (OVN-Kubernetes ignores the field; docs/deviations.md).
//   - VIPs: [Allocate] assigns LoadBalancer ingress addresses from
//     lbsvc/ipam pools; [DedupVIPs] gives every VIP to the oldest Service
//     claiming it. Bad input is an [event.Event]; other Services are
//     unaffected.
//   - Bridge flows: [BypassFlows] gives each node's bridge the ARP/NDP
//     bypass of every VIP, [NodeGatewayFlows] the shared gateway's full
//     Service flows (built per Service by [GatewayService] for
//     ovsflow/brex), [SteeringFlows] the underlay provider bridge's. A
//     [GatewayCache] builds again only the Services that changed.
//   - L2: [Elect] picks the one node answering for an address, as MetalLB's
//     layer 2 mode orders nodes; [VIPOwners] and [L2VIPs] apply it to the
//     VIPs (for externalTrafficPolicy=Local only among nodes with a ready
//     endpoint); [ServedVIPs] are the VIPs a node may announce over BGP.
//     [Elections] elects again only the VIPs whose candidates changed.
//   - Underlay: an [UnderlaySubnet] (a Kube-OVN Subnet with
//     enableExternalLBAddress) serves its VIPs on its logical switch only,
//     with local preference on stock OVN through chassis templates.
//
// The deliberate differences from OVN-Kubernetes (one central NB, per-node
// NodePorts without a chassis, a gateway router load
// balancer beside a template NodePort on the nodes hosting its backends,
// ...) and from Kube-OVN's
// underlay mode (no patched OVN) are in docs/deviations.md.
//
// Unidling: with Options.EmptyLBEvents an idled Service's load balancers
// raise events ([Idled], [Unidling], [UnidledAtPatch]); lbsvc/unidle turns
// the Southbound's events into NeedPods.
//
// Subpackages: lbsvc/ipam (address pools), lbsvc/kubeovn (Kube-OVN's
// LoadBalancer Service plan), lbsvc/agent and lbsvc/agent/pod (the agent in
// its pod), lbsvc/unidle (the Southbound's controller events).
package lbsvc
