// Package lbsvc turns Services and EndpointSlices into OVN load balancers
// (ClusterIP, ExternalIPs, LoadBalancer ingress, externalTrafficPolicy),
// the br-ex ARP/NDP bypass of every VIP, the opt-in L2 announcement of
// VIPs, and the MetalLB underlay mode. Like package egress it computes
// desired state only, as pure functions; the caller applies it with
// ovsdbnb (Sync), ovsflow (a Program per bridge) and arp (a Controller per
// node).
//
// # Load balancers (reference §3)
//
// [Build] returns one ovsdbnb owner per Service ([ServiceOwner]), the
// node IP template variables ([NodeIPTemplatesOwner]) and OVN-Kubernetes'
// three Load_Balancer_Groups ([GroupState]). The rows are the ones
// OVN-Kubernetes' services controller writes (lb_config.go,
// loadbalancer.go, svc_template_var.go at the commit ovsdbnb names; its
// unit-test vectors are table cases here):
//
//   - per Service and protocol a cluster-wide Service_<ns>/<name>_<PROTO>_cluster
//     in clusterLBGroup with the ClusterIPs and, for
//     externalTrafficPolicy=Cluster, the ExternalIPs and ingress IPs;
//   - NodePorts without ETP=Local or an affinity timeout: template load
//     balancers, one per protocol and family for the whole cluster
//     (..._node_switch_template_IPv4 in clusterSwitchLBGroup,
//     ..._node_router_template_IPv4 in clusterRouterLBGroup, merged into
//     one "..._merged" in both when equal), VIPs ^NODEIP_IPv4_<i>:<port>
//     that each chassis expands to its i-th host address (in the order of
//     their text, as OVN-Kubernetes' GetNodeHostAddrs lists them), backends the
//     cluster's or a per-chassis variable ([TemplateName]) when they differ
//     per node;
//   - per node and protocol (other NodePorts, ETP=Local VIPs, ITP=Local or
//     host-network endpoints): node_router_<node> and node_switch_<node>,
//     one node_router+switch_<node> when equal, node_local_router_<node>
//     (skip_snat) for ETP=Local VIPs with local endpoints (without one the
//     VIP rejects on node_router), the ETP=Local masquerade VIP (.3 of the
//     masquerade subnet) on the switch; equal load balancers of different
//     nodes merged ("_merged"); NodePort VIPs are every host address
//     (k8s.ovn.org/host-cidrs) of the node, both families;
//   - options reject=true, event=false, skip_snat, neighbor_responder=none,
//     hairpin_snat_ip (the masquerade subnets' .5, default
//     "169.254.169.5 fd69::5"), affinity_timeout or, for 86400 s,
//     selection_fields=ip_src,ip_dst; template ones template=true and
//     address-family.
//
// Endpoints are the ready ones (or nil condition), else the serving and
// terminating ones; FQDN slices are ignored; IPv4, IPv6 and dual-stack.
// [ServiceState] recomputes one Service, so a changed endpoint costs one
// owner's Sync. Bad addresses and protocols become events
// ([event.Event]); the other Services are unaffected.
//
// Deliberate deviations from OVN-Kubernetes:
//
//   - ovnedge writes one central NB for every node (ovn-k's interconnect
//     mode writes each zone's own node only); per-node and template rows
//     are the union of what each zone would write.
//   - A node without a chassis ([Node].Chassis empty, no
//     k8s.ovn.org/node-chassis-id) gets per-node NodePort load balancers;
//     ovn-k serves template NodePorts there only once the node has one.
//   - Options.PerNodeLBs (`--lb-templates=false`) keeps per-node NodePort
//     load balancers on an OVN with templates, as ovn-k's
//     --enable-svc-template-support=false does. Like ovn-k
//     (configureSvcTemplateSupport), the daemon also falls back to them,
//     with one warning, on an NB whose schema has no Chassis_Template_Var
//     (ovsdbnb.SupportsTemplates). ovsdbnb's models are those of OVN
//     23.03's schema, so in practice an NB that old is refused when
//     dialled, before the check.
//   - Unidling is not done: options reject=true, event=false always.
//     OVN-Kubernetes, with --ovn-empty-lb-events (off by default), gives
//     the load balancers of a Service annotated k8s.ovn.org/idled-at, or
//     k8s.ovn.org/unidled-at within its grace period, reject=false and
//     event=true (lb_config.go lbOpts, Test_idledServices), sets
//     NB_Global options:controller_event=true, and turns the Southbound
//     Controller_Event rows of type empty_lb_backends into NeedPods events
//     on the Service (controller/unidling) for the unidler to scale it
//     up. Porting only the options would drop the first packets of an
//     idled Service without anything waking it, so none of it is ported.
//   - The NodePort proof is packets, not ovn-trace: ovn-trace (23.03) of
//     a NodePort from the external network stops at lr_in_unsnat, whose
//     ct_snat on the gateway router's own address (lb_force_snat_ip=
//     router_ip, as ovn-k sets it) it does not follow, for per-node load
//     balancers as for template ones; and it has no notion of a chassis,
//     so it could not expand ^NODEIP_IPv4_<i> anyway. internal/e2e
//     TestNodePortTemplates proves template NodePorts with real TCP
//     connections from the external client to every node's address on the
//     three-chassis cluster; lbsvc TestNBTrace traces the ingress and
//     ETP=Local VIPs, which ovn-trace does follow.
//   - Router and switch names are OVN-Kubernetes' default network's
//     (GR_<node>, <node>); user-defined networks are not handled.
//
// # br-ex bypass and L2 mode (reference §1.1, §6)
//
// [BypassFlows] gives each node's bridge the ARP/NDP bypass of every VIP
// (brex.ARPBypass) by owner. Where ovnedge also programs the shared
// gateway's Service flows (OVN-Kubernetes' node agent does not),
// [NodeGatewayFlows] gives the same owners the full set instead
// (brex.ServiceFlows: NodePorts and VIPs from the uplink to OVN and
// back, the bypass, and for externalTrafficPolicy=Local with a
// host-network endpoint on the node the DNAT to the host), built per
// Service by [GatewayService] from the Service, its EndpointSlices and the
// node. VIP reachability is left to the
// administrator, as upstream, unless the opt-in L2 mode is on: [L2VIPs]
// feeds every node's arp.Controller, which answers each VIP from exactly
// one healthy node (for externalTrafficPolicy=Local one with a ready
// endpoint); [VIPOwners] names that node, e.g. to put the VIP on its host
// stack instead.
//
// # MetalLB underlay mode (seed 003, reference §5)
//
// An [UnderlaySubnet] with EnableExternalLBAddress (Kube-OVN's
// enableExternalLBAddress) lets addresses of its CIDR be VIPs; they must
// be in its excludeIps so that pod IPAM never hands them out (else a
// warning event). Such a VIP ([Options.UnderlayVIP]) is served on the
// subnet's logical switch only, never by OVN-Kubernetes' gateway routers:
// one load balancer per Service, protocol and switch,
// "Service_<ns>/<name>_<PROTO>_underlay_<switch>", attached to the switch.
// [SteeringFlows] are the provider-bridge flows Kube-OVN's daemon installs
// for it, one per VIP and port: from the underlay NIC, the VIP's traffic
// gets the MAC of the router port on the switch (the Subnet's
// status.u2oInterconnectionMAC) and goes through the patch port of the
// switch's localnet port (patch-localnet.<switch>-to-br-int) into OVN,
// whatever MAC the announcing node's ARP answer gave the client.
//
// How this works on stock OVN 23.03, without Kube-OVN's OVN patches:
//
//   - Local preference. Kube-OVN's --enable-ovn-lb-prefer-local sets
//     options:prefer_local_backend and ip_port_mappings on its load
//     balancers, which its patched OVN reads to pick a backend on the
//     chassis the packet entered; stock OVN ignores both. ovnedge instead
//     makes the VIP of an externalTrafficPolicy=Local Service (with
//     [Options].PreferLocal) a template load balancer (options
//     template=true, OVN 22.12+) whose backends are a chassis template
//     variable: on each node's chassis (Chassis_Template_Var) its own
//     ready endpoints, or every endpoint where it has none (the "prefer"
//     of prefer_local_backend). A switch's load balancer runs on the
//     chassis where the packet enters the switch, the one that received
//     it from the NIC, so the VIP is DNATed there to a pod of that node:
//     no SNAT, the client's address reaches the pod. IPv4 only: a
//     template VIP key cannot hold an IPv6 literal (an event says so, and
//     such a VIP gets every endpoint). Without PreferLocal, or for
//     externalTrafficPolicy=Cluster, the VIP has every endpoint as
//     backends, as in Kube-OVN without the flag.
//   - Delivery after the DNAT. Kube-OVN steers to 00:00:00:01:00:01 when
//     the subnet has no U2O interconnection and relies on its OVN's
//     ls_dnat_mod_dl_dst to rewrite the destination MAC to the chosen
//     backend's after the DNAT. Stock OVN never rewrites it on a switch,
//     so ovnedge steers to the router port's MAC only (Kube-OVN's choice
//     when U2O interconnection is on): the switch DNATs, forwards to the
//     router, which routes the packet back to the pod with the pod's MAC.
//     A subnet without u2oInterconnectionMAC gets no steering flows and a
//     Warning event ([ReasonUnderlayNoRouterMAC]).
//   - Replies. The pod answers the client directly (same subnet) through
//     the localnet port of the same chassis; the egress pipeline's
//     conntrack of that port undoes the DNAT (a switch with a load
//     balancer sends its localnet traffic through conntrack). This holds
//     for a backend on the entering node only: a backend elsewhere (no
//     PreferLocal, externalTrafficPolicy=Cluster, or a node without local
//     endpoints) answers through its own node's localnet port, whose
//     conntrack never saw the DNAT, so the client gets the reply from
//     the pod's address. Only the local case is proven with packets
//     (internal/e2e TestUnderlayMetalLB, TestUnderlayStandalone).
//   - --ls-ct-skip-dst-lport-ips ([Options].LSCtSkipDstLportIPs, on by
//     default in Kube-OVN): Kube-OVN's OVN then skips conntrack on a
//     logical switch for traffic to a logical port's IP, so underlay VIPs
//     miss the load balancer; seed 003 sets it false. Stock OVN has no
//     such skip and ovnedge never asks for one: the field records the
//     setting, and true together with an underlay subnet that enables
//     external LB addresses yields a warning event on each affected
//     Service.
//
// Deviations from Kube-OVN: the subnet of a VIP is found by CIDR
// containment, not through the ovn.kubernetes.io/
// service_external_ip_from_subnet annotation Kube-OVN's controller
// writes (ovnedge writes none; in its standalone mode the annotation
// chooses the Subnet a Service's address comes from); each flow carries
// its Service's cookie (Kube-OVN: one cookie for all); the flows may
// match the subnets' VLAN (Steering.VLAN); MetalLB's ServiceL2Status is
// not read (every chassis has its own backends, announced or not).
//
// # Subpackages
//
// Package lbsvc/ipam allocates LoadBalancer addresses from pools (and
// rebuilds its bookkeeping from Service statuses after a restart);
// lbsvc/kubeovn builds Kube-OVN's lb-svc-<service> Deployment for
// Services annotated ovn.kubernetes.io/attachmentprovider; lbsvc/agent is
// that Deployment's in-pod agent, `ovnedge lbsvc-agent`.
package lbsvc
