// Package flowtest helps test OpenFlow programs built with ovsflow, for
// ovnedge itself and for CNIs that embed it: [Golden] compares a rendered
// program with a golden file (`go test -update` rewrites it), and [NewBridge]
// gives a test a real, throwaway Open vSwitch bridge (ovsdb-server and
// ovs-vswitchd on the userspace datapath, in a network namespace of its
// own) to install a program on, dump it back and run `ofproto/trace`.
//
// A bridge needs root and the openvswitch-switch package; without them the
// test is skipped with a loud reason, except under CI=true where it fails.
package flowtest
