// Package ovsdbnb writes the OVN Northbound database the way OVN-Kubernetes
// does: typed, idempotent transactions (over libovsdb) for load balancers and
// their groups, logical router policies (reroute/allow), NAT rules and
// address sets. Every row it writes carries its owner in external_ids
// (OVN-Kubernetes' scheme), so one owner's rows can be diffed, replaced or
// removed alone and rows written by anyone else are never touched.
//
// Status: being built under issue 3.
package ovsdbnb

//go:generate go run github.com/ovn-kubernetes/libovsdb/cmd/modelgen -p nbdb -o nbdb /usr/share/ovn/ovn-nb.ovsschema
