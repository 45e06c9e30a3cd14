// Package egresssvc computes the dataplane of k8s.ovn.org/v1 EgressServices
// as OVN-Kubernetes programs it: the endpoint pods of a LoadBalancer
// Service leave the cluster from one node (status.host) with the Service's
// ingress IP as source. It is pure: no socket, no client.
//
//   - [Hosts] is the cluster manager's choice of the host node and its
//     labels (Label); [Compute] adds the Northbound rows: per endpoint a
//     101 reroute policy on ovn_cluster_router to the host's management
//     port IP ([State], owned by [Owner]), and the pods served, the
//     egresssvc-served-pods address set the 102 no-reroute policies of
//     package egress name.
//   - [HostState] is the host node's part: an SNAT of each endpoint to the
//     ingress IP of its family, and the ip rules of spec.network.
//     egress/egresssvc/svchost programs them with nftables and netlink.
//
// The peer is ovn-kubernetes/ovn-kubernetes at 8871cd9:
// go-controller/pkg/clustermanager/egressservice (its
// egressservice_cluster_test.go is TestHosts), go-controller/pkg/ovn/
// controller/egressservice (egressservices_test.go: TestState) and
// go-controller/pkg/node/controllers/egressservice (egress_service_test.go:
// TestHostState). Deliberate deviations:
//   - One Northbound for every node: every endpoint is local, so no ":ic"
//     policies and no transit-switch nexthops.
//   - The choice is a pure function of the objects: an allocation is the
//     status.host read back, kept while valid; a new one goes to the
//     eligible node serving the fewest, ties by name (upstream picks any
//     free node). A node unreachable is not eligible until it answers
//     again (upstream also waits until it is drained).
//   - externalTrafficPolicy=Local narrows the nodes to those with an
//     endpoint by node name (upstream: the kubernetes.io/hostname label).
//   - A Service that is not type LoadBalancer gets no host (upstream's
//     cluster manager checks only its ingress IPs, its repair the type).
//   - A nodeSelector that does not parse keeps the host it had and is an
//     InvalidEgressService event; no node eligible is a
//     NoEgressServiceHost event (upstream logs).
//   - No ip rules for the ETP=Local NodePort masquerade address: that
//     path is local gateway mode's, and sourceIPBy Network is refused on
//     the shared gateway (Options.SharedGateway), as upstream does.
package egresssvc
