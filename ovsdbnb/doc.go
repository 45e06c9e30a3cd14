// Package ovsdbnb writes the OVN Northbound database the way OVN-Kubernetes
// does: typed, owner-scoped, minimal transactions (over libovsdb) for load
// balancers and their groups, router policies, NATs, address sets, QoS
// rules and Chassis_Template_Var rows, and the topology they hang off.
//
// Desired rows are grouped by [Owner] (an EgressIP, a Service, the
// cluster-wide policies) into a [State]. [Client.Sync] makes each owner's
// rows equal to its State with the fewest operations and sends nothing the
// second time; rows without the owner's stamp, and map keys another writer
// added, are never touched, and OVN-Kubernetes' own rows of the same
// identity are taken over in place. An owner the server refuses fails
// alone ([OwnerError]). [Client.SyncSteps] writes steps that must commit in
// order (an egress IP's make-before-break move) without waiting for each
// reply. [Writer] is what a controller uses: it owns what it last wrote,
// writes stepped owners in steps, retries refused owners and repairs rows
// someone else changed, telling its own writes' echo from real drift.
//
//	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{"unix:/var/run/ovn/ovnnb_db.sock"}})
//	...
//	res, err := c.Sync(ctx, map[ovsdbnb.Owner]ovsdbnb.State{
//		{Type: "Service", Name: "default/web"}: {LoadBalancers: []ovsdbnb.LoadBalancer{lb}},
//	})
//
// [Dial] connects to one or several endpoints (unix:, tcp:, ssl:), only to
// the leader of a RAFT cluster, follows it, and monitors only the columns
// the package reads. [Render] prints desired rows, one JSON object per
// line; [EnsureTopology] creates the routers and switches OVN-Kubernetes'
// master would.
//
// The rows, their k8s.ovn.org/id external ids and the object names are
// OVN-Kubernetes' (ovn-kubernetes/ovn-kubernetes at 8871cd9,
// go-controller/pkg/libovsdb/ops/db_object_ids.go and db_object_types.go);
// two keys are this package's own, [KeyOwnedBy] and [KeyManaged]. The
// models in package nbdb are generated from OVN 23.03's NB schema by
// libovsdb's modelgen (`go generate ./ovsdbnb`). docs/architecture.md
// describes the writer's design (steps, drift repair, the cache index),
// docs/deviations.md the differences from OVN-Kubernetes.
package ovsdbnb

//go:generate go run github.com/ovn-kubernetes/libovsdb/cmd/modelgen -extended -p nbdb -o nbdb /usr/share/ovn/ovn-nb.ovsschema
