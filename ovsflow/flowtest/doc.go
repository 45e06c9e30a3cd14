// Package flowtest helps test OpenFlow programs built with ovsflow, for
// ovnedge itself and for CNIs that embed it: [Golden] compares a rendered
// program with a golden file and [Diff] shows how two flow listings
// differ. FLOWTEST_UPDATE=1 in the environment (or [Options].Update)
// rewrites golden files instead; flowtest registers no flags and imports
// nothing but the standard library.
//
// Its subpackage [github.com/ovnedge/ovnedge/ovsflow/flowtest/bridge] gives a
// test a real, throwaway Open vSwitch bridge (ovsdb-server and ovs-vswitchd
// on the userspace datapath, in a network namespace of its own) to install
// a program on, dump it back and run `ofproto/trace`.
package flowtest
