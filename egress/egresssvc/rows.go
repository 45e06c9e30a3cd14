package egresssvc

import (
	"fmt"
	"net/netip"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// Rows of OVN-Kubernetes' egress service zone controller
// (go-controller/pkg/ovn/controller/egressservice).
const (
	// OwnerType owns an EgressService's router policies, named by key.
	OwnerType = "EgressService"
	// PriorityReroute is the endpoints' reroute to the host, above
	// EgressIP's 100 and below the 102 no-reroute policies.
	PriorityReroute = 101
	// KeyEgressSVC is the policies' only external id, "<namespace>/<name>".
	KeyEgressSVC = "EgressSVC"
	// Router is the cluster router.
	Router = "ovn_cluster_router"
)

// Endpoints are the IPs of the slices' endpoints that run on a node and
// on the pod network, sorted and unique: the pods whose traffic an
// EgressService reroutes (readiness is not read, as upstream).
func Endpoints(slices_ []*discoveryv1.EndpointSlice, cluster []netip.Prefix) []netip.Addr {
	var out []netip.Addr
	eachEndpoint(slices_, func(_ string, ip netip.Addr) {
		if inSubnets(ip, cluster) {
			out = append(out, ip)
		}
	})
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// State is the rows of the EgressService key served by host: one 101
// reroute policy per endpoint to the host's management port IP of its
// family (none for a family the host has no pod subnet of).
func State(key string, host *ovnknode.Node, endpoints []netip.Addr) ovsdbnb.State {
	var st ovsdbnb.State
	for _, ip := range endpoints {
		mgmt, ok := host.MgmtIP(ip.Is6())
		if !ok {
			continue
		}
		fam := "ip4"
		if ip.Is6() {
			fam = "ip6"
		}
		st.Policies = append(st.Policies, ovsdbnb.RouterPolicy{
			Router: Router, Priority: PriorityReroute, Action: "reroute",
			Match:       fmt.Sprintf("%s.src == %s", fam, ip),
			Nexthops:    []string{mgmt.String()},
			ExternalIDs: map[string]string{KeyEgressSVC: key},
		})
	}
	return st
}

// Owner is the owner of an EgressService's rows.
func Owner(key string) ovsdbnb.Owner { return ovsdbnb.Owner{Type: OwnerType, Name: key} }
