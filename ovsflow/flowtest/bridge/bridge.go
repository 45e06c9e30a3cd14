// Package bridge gives a test a real, throwaway Open vSwitch bridge
// (ovsdb-server and ovs-vswitchd on the userspace datapath, in a network
// namespace of its own) to install an ovsflow program on, dump it back and
// run `ofproto/trace`; see [New]. Golden comparisons live in the parent
// package flowtest, which imports nothing of this one.
//
// A bridge needs root and the openvswitch-switch package; without them the
// test is skipped with a loud reason, except under CI=true where it fails.
package bridge

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/testbed"
)

// Options shape a throwaway bridge. The zero value gives br-ex with
// uplink eth0 at ofport 1 and patch port patch-br-ex_node1-to-br-int at
// ofport 2.
type Options struct {
	Bridge, Node, Uplink      string
	UplinkOFPort, PatchOFPort int
	// TSO turns userspace TSO on, needed for TCP through the uplink veth.
	TSO bool
}

// Bridge is a real Open vSwitch bridge living as long as the test: its
// uplink is a veth whose peer eth0 (172.18.0.1/24) sits in an "external
// host" namespace, its LOCAL interface has 172.18.0.2/24.
type Bridge struct {
	// Bridge is the bridge's name.
	Bridge string
	// Uplink is the uplink port's name; Patch the patch port's to br-int.
	Uplink, Patch string
	// Dir holds the database, sockets, pidfiles and logs.
	Dir string
	// DB is the Open_vSwitch database remote, "unix:<Dir>/db.sock".
	DB string
	// RunDir is ovs-vswitchd's OVS_RUNDIR, holding <bridge>.mgmt.
	RunDir string
	// NS is the network namespace of ovs-vswitchd, its ports and the
	// bridge's LOCAL interface; ExtNS is the external host's, whose eth0
	// is the uplink's peer.
	NS, ExtNS string
	// Transport reaches the bridge through ovs-ofctl.
	Transport *ovsflow.OfctlTransport

	ovs *testbed.OVS
	t   testing.TB
}

// New starts ovsdb-server and ovs-vswitchd (userspace datapath) in a
// network namespace of their own and creates the bridge; everything is
// removed when the test ends.
func New(t testing.TB, o Options) *Bridge {
	t.Helper()
	ovs := testbed.StartOVS(t, testbed.OVSOptions{
		Bridge: o.Bridge, Node: o.Node, Uplink: o.Uplink,
		UplinkOFPort: o.UplinkOFPort, PatchOFPort: o.PatchOFPort, TSO: o.TSO,
	})
	return &Bridge{Bridge: ovs.Bridge, Uplink: ovs.Uplink, Patch: ovs.Patch, Dir: ovs.Dir, DB: ovs.DB,
		RunDir: ovs.RunDir, NS: ovs.NS, ExtNS: ovs.ExtNS,
		ovs: ovs, t: t, Transport: &ovsflow.OfctlTransport{RunDir: ovs.RunDir}}
}

// Mgmt is the bridge's OpenFlow management socket, "unix:<RunDir>/<bridge>.mgmt".
func (b *Bridge) Mgmt() string {
	b.t.Helper()
	return b.ovs.Mgmt()
}

// Vsctl runs ovs-vsctl against the bridge's database and returns its
// trimmed output; an error fails the test.
func (b *Bridge) Vsctl(args ...string) string {
	b.t.Helper()
	return b.ovs.Vsctl(args...)
}

// Ofctl runs ovs-ofctl (its arguments name the bridge); an error fails the test.
func (b *Bridge) Ofctl(args ...string) string {
	b.t.Helper()
	return b.ovs.Ofctl(args...)
}

// Appctl runs ovs-appctl against ovs-vswitchd; an error fails the test.
func (b *Bridge) Appctl(args ...string) string {
	b.t.Helper()
	return b.ovs.Appctl(args...)
}

// Exec runs a command in network namespace ns (NS or ExtNS); an error
// fails the test.
func (b *Bridge) Exec(ns string, args ...string) string {
	b.t.Helper()
	return b.ovs.Exec(ns, args...)
}

// ExecErr runs a command in network namespace ns and returns its error.
func (b *Bridge) ExecErr(ns string, args ...string) (string, error) {
	b.t.Helper()
	return b.ovs.ExecErr(ns, args...)
}

// Ofport returns the ofport of the port name.
func (b *Bridge) Ofport(name string) int {
	b.t.Helper()
	return b.ovs.Ofport(name)
}

// StopVswitchd stops ovs-vswitchd gracefully (the bridge's flows go with it).
func (b *Bridge) StopVswitchd() {
	b.t.Helper()
	b.ovs.StopVswitchd()
}

// KillVswitchd kills ovs-vswitchd with SIGKILL, as a crash would.
func (b *Bridge) KillVswitchd() {
	b.t.Helper()
	b.ovs.KillVswitchd()
}

// StartVswitchd starts ovs-vswitchd again after StopVswitchd or
// KillVswitchd and waits until the bridge serves its ports.
func (b *Bridge) StartVswitchd() {
	b.t.Helper()
	b.ovs.StartVswitchd()
}

// Ports returns the bridge's current ofports by port name.
func (b *Bridge) Ports() ovsflow.PortMap {
	b.t.Helper()
	ports := ovsflow.PortMap{}
	for _, name := range []string{b.Uplink, b.Patch} {
		if name != "" {
			ports[name] = uint32(b.Ofport(name))
		}
	}
	return ports
}

// Install replaces the bridge's flows with p (resolved against Ports).
func (b *Bridge) Install(p *ovsflow.Program) {
	b.t.Helper()
	a := ovsflow.NewApplier(b.Bridge, b.Transport, ovsflow.StaticPorts(b.Ports()),
		ovsflow.ApplierOptions{Logger: slog.New(slog.NewTextHandler(b.t.Output(), nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Replace(ctx, p); err != nil {
		b.t.Fatalf("install program: %v", err)
	}
}

// Dump returns the bridge's flows in the order Program.Render uses, so the
// result compares as text with a rendered program or a golden file.
func (b *Bridge) Dump() []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dump, err := b.Transport.Dump(ctx, b.Bridge)
	if err != nil {
		b.t.Fatalf("dump flows: %v", err)
	}
	sorted, err := ovsflow.SortDump(dump)
	if err != nil {
		b.t.Fatalf("dump flows: %v", err)
	}
	return sorted
}

// TraceResult is what ofproto/trace says about one packet.
type TraceResult struct {
	// Output is the full trace.
	Output string
	// Rules are the flows the packet hit, as the trace names them, e.g.
	// "arp,in_port=1,arp_tpa=172.18.0.50,arp_op=1, priority 110, cookie 0x5".
	Rules []string
	// Datapath is the final "Datapath actions:" line's actions, e.g.
	// "drop", "1" or "ct(commit,zone=64000,nat(src=172.18.0.3)),recirc(0x1)".
	Datapath string
}

// Trace runs ofproto/trace for a microflow such as
// "in_port=1,arp,arp_op=1,arp_tpa=172.18.0.50" (in_port may be a name).
func (b *Bridge) Trace(flow string) TraceResult {
	b.t.Helper()
	out := b.ovs.Trace(flow)
	r := TraceResult{Output: out}
	for _, l := range strings.Split(out, "\n") {
		if num, rule, ok := strings.Cut(strings.TrimSpace(l), ". "); ok && num != "" && strings.Trim(num, "0123456789") == "" {
			r.Rules = append(r.Rules, rule)
		}
		if rest, ok := strings.CutPrefix(l, "Datapath actions: "); ok {
			r.Datapath = strings.TrimSpace(rest)
		}
	}
	return r
}
