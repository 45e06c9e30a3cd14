// Package e2e holds the end-to-end tests of the egress packages: real
// packets through a real OVN chassis (internal/testbed: OVN central,
// ovs-vswitchd on the userspace datapath, ovn-controller), with the
// dataplane computed by egress (Assign, Compute, MakeBeforeBreak), written
// by ovsdbnb (EnsureTopology, Sync) and moved by the egress/reach
// checker's verdicts.
//
// The failover test sends TCP from a pod namespace to an external host,
// which must see the egress IP as the source; then it blocks the egress
// node's health probe, and measures how long the checker takes to report
// it (detect) and how long until the first packet with the egress IP
// reaches the external host through the new egress node's gateway router
// (reprogram), recognised by that router's MAC address. It logs
//
//	failover detect=... reprogram=... total=...
//
// One chassis hosts every gateway router: for this purpose it behaves as
// one chassis per node does, and it keeps the test within a second of
// bring-up (internal/e2e runs a chassis per node). The package has no
// non-test code.
package e2e
