// Package ovsflow builds, renders, diffs and applies typed OpenFlow programs
// for an Open vSwitch bridge, such as OVN's external bridge (br-ex or
// breth0).
//
// A [Flow] is a table, a priority, a cookie, a [Match] and a list of
// [Action]s. Ports are named ([PortName]) and resolved to OpenFlow port
// numbers only when a program is applied, so a program follows an uplink
// whose ofport changes. Flows render to the canonical text
// `ovs-ofctl -O OpenFlow13 --no-stats dump-flows` prints, and [ParseFlow]
// reads that text back without losing a field the package emits.
//
// A [Program] is made of named flow sets, one per owner (a Service, the
// egress configuration, the base flows): [Program.Set] replaces one owner's
// flows and leaves the others alone; two owners emitting the same table,
// priority and match with different actions are a [ConflictError]. An
// [Applier] keeps a bridge equal to a program:
//
//	var p ovsflow.Program
//	err := p.Set("service/default/web", flows)
//	ports, err := ovsflow.DialOVSDBPorts(ctx, "unix:/var/run/openvswitch/db.sock")
//	a := ovsflow.NewApplier("br-ex", nil, ports, ovsflow.ApplierOptions{KeepForeign: true})
//	go a.Run(ctx)             // replay, ofport changes, drift repair
//	res, err := a.Apply(ctx, &p) // the difference, in one atomic bundle
//
// [Applier.Apply] sends only the owners changed since the last apply, in one
// atomic bundle. [Applier.Run] replays the program when ovs-vswitchd
// restarts, rewrites it when an ofport changes, and restores flows deleted
// or changed by someone else: reported at once by OpenFlow 1.4 flow
// monitoring ([FlowMonitor]) on the default [NativeTransport] (package
// openflow), or found by a dump every [ApplierOptions].VerifyInterval.
// [OfctlTransport] forks ovs-ofctl instead, as OVN-Kubernetes does.
//
// [ToOVS] and [FromOVS] convert a Flow to and from
// github.com/digitalocean/go-openvswitch's ovs.Flow, for CNIs built on it;
// what the other side cannot hold is a [FieldError] naming the field.
//
// The flows of OVN-Kubernetes' shared gateway (base, EgressIP, Service,
// ARP/NDP bypass and fence flows) are built by package ovsflow/brex;
// ovsflow/flowtest compares programs with golden files.
package ovsflow
