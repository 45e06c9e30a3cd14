package ovsdbnb

import (
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// LoadBalancerInserts returns the insert operations Sync sends for the
// load balancers of desired into an NB that has none of them (rows
// stamped with their owner, derived UUIDs), in owner order: the
// benchmarks' raw transact sends the same rows without the client.
func LoadBalancerInserts(desired map[Owner]State) []ovsdb.Operation {
	owners := make([]Owner, 0, len(desired))
	for o := range desired {
		owners = append(owners, o)
	}
	sortOwners(owners)
	var ops []ovsdb.Operation
	for _, o := range owners {
		for _, lb := range desired[o].LoadBalancers {
			op := insertOp(nbdb.LoadBalancerTable, "", lbRow(lb).stamp(o))
			op.UUID = rowUUID(nbdb.LoadBalancerTable, o, "load balancer "+lb.Name)
			ops = append(ops, op)
		}
	}
	return ops
}
