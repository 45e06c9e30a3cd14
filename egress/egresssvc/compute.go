package egresssvc

import (
	"net/netip"
	"slices"

	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// Desired is the leader's part of the EgressServices: their hosts, the
// hosts' labels, the router policies by owner and the pods served.
type Desired struct {
	Result
	NB map[ovsdbnb.Owner]ovsdbnb.State
	// Served are the endpoints of the EgressServices that have a host
	// node: the address set egresssvc-served-pods (sorted).
	Served []netip.Addr
}

// Compute chooses the hosts (Hosts) and returns the rows they give.
func Compute(in Input, o Options) Desired {
	d := Desired{Result: Hosts(in, o), NB: map[ovsdbnb.Owner]ovsdbnb.State{}}
	for key, h := range d.Hosts {
		n := in.Parsed[h]
		if h == "" || n == nil {
			continue
		}
		eps := Endpoints(in.Slices(key), o.ClusterSubnets)
		d.NB[Owner(key)] = State(key, n, eps)
		d.Served = append(d.Served, eps...)
	}
	slices.SortFunc(d.Served, netip.Addr.Compare)
	d.Served = slices.Compact(d.Served)
	return d
}
