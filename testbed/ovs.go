package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// vswitchSchema is the Open_vSwitch database schema.
const vswitchSchema = "/usr/share/openvswitch/vswitch.ovsschema"

// ovsBins are the binaries StartOVS needs.
var ovsBins = []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl", "ip"}

// OVSOptions shape the switch StartOVS builds; zero fields take the
// defaults noted.
type OVSOptions struct {
	// Bridge names the bridge (default "br-ex").
	Bridge string
	// Node is the node name in the patch port's name (default "node1").
	Node string
	// Uplink is the OVS-side name of the uplink veth (default "eth0").
	Uplink string
	// UplinkOFPort is the ofport requested for the uplink (default 1).
	UplinkOFPort int
	// PatchOFPort is the ofport requested for the patch port (default 2).
	PatchOFPort int
	// NoPatch leaves out br-int and the patch ports.
	NoPatch bool
	// TSO sets other_config:userspace-tso-enable=true before ovs-vswitchd
	// starts; TCP through the uplink veth needs it.
	TSO bool
	// HostIP is the address, in CIDR form, put on the bridge's LOCAL
	// interface (default "172.18.0.2/24").
	HostIP string
	// ExtIP is the address, in CIDR form, of the external host's eth0
	// (default "172.18.0.1/24").
	ExtIP string
}

// withDefaults fills in the zero fields.
func (o OVSOptions) withDefaults() OVSOptions {
	set := func(s *string, def string) {
		if *s == "" {
			*s = def
		}
	}
	set(&o.Bridge, "br-ex")
	set(&o.Node, "node1")
	set(&o.Uplink, "eth0")
	set(&o.HostIP, "172.18.0.2/24")
	set(&o.ExtIP, "172.18.0.1/24")
	if o.UplinkOFPort == 0 {
		o.UplinkOFPort = 1
	}
	if o.PatchOFPort == 0 {
		o.PatchOFPort = 2
	}
	return o
}

// OVS is a running ovsdb-server and ovs-vswitchd (userspace datapath)
// with one bridge, made by StartOVS. Its methods fail the test on error
// and return the command's trimmed stdout.
type OVS struct {
	// Dir holds the database, sockets, pidfiles and logs.
	Dir string
	// DB is the database remote, "unix:<Dir>/db.sock".
	DB string
	// RunDir is ovs-vswitchd's OVS_RUNDIR, holding <bridge>.mgmt; it is Dir.
	RunDir string
	// NS is the network namespace ovs-vswitchd, its ports and the
	// bridge's LOCAL interface live in.
	NS string
	// ExtNS is the external host's namespace; its eth0 is the uplink's peer.
	ExtNS string
	// Bridge is the bridge's name.
	Bridge string
	// Uplink is the uplink port's name.
	Uplink string
	// Patch is the bridge's patch port to br-int ("" with NoPatch).
	Patch string
	// PatchPeer is Patch's peer on br-int ("" with NoPatch).
	PatchPeer string

	t        T
	opts     OVSOptions
	vswitchd *daemon // the current ovs-vswitchd; nil before the first start
}

// StartOVS starts ovsdb-server and, inside a fresh network namespace,
// ovs-vswitchd, and builds the bridge described by o (see OVSOptions and
// the package documentation). It returns once the OpenFlow socket serves
// the ports at their ofports and the LOCAL interface has HostIP.
// Everything is removed when the test ends.
func StartOVS(t T, o OVSOptions) *OVS {
	t.Helper()
	Require(t, ovsBins...)
	begin := time.Now()
	o = o.withDefaults()
	dir := newDir(t)
	ns := "ovt-" + randomHex(t)
	s := &OVS{Dir: dir, DB: "unix:" + filepath.Join(dir, "db.sock"), RunDir: dir,
		NS: ns, ExtNS: ns + "-x", Bridge: o.Bridge, Uplink: o.Uplink, t: t, opts: o}
	if !o.NoPatch {
		s.Patch = fmt.Sprintf("patch-%s_%s-to-br-int", o.Bridge, o.Node)
		s.PatchPeer = fmt.Sprintf("patch-br-int-to-%s_%s", o.Bridge, o.Node)
	}
	newNamespace(t, s.NS)
	newNamespace(t, s.ExtNS)

	startOVSDB(t, dir, "ovsdb-server", vswitchSchema, filepath.Join(dir, "db.sock"))
	s.Vsctl("--no-wait", "init")
	if o.TSO {
		s.Vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true")
	}
	t.Cleanup(s.stopVswitchdOnCleanup)
	s.startVswitchd()

	mustRun(t, nil, "ip", "-n", s.NS, "link", "add", s.Uplink, "type", "veth",
		"peer", "name", "eth0", "netns", s.ExtNS)
	mustRun(t, nil, "ip", "-n", s.NS, "link", "set", s.Uplink, "arp", "off", "up")
	mustRun(t, nil, "ip", "-n", s.ExtNS, "addr", "add", o.ExtIP, "dev", "eth0")
	mustRun(t, nil, "ip", "-n", s.ExtNS, "link", "set", "eth0", "up")

	args := []string{
		"add-br", s.Bridge, "--", "set", "Bridge", s.Bridge, "datapath_type=netdev",
		"--", "add-port", s.Bridge, s.Uplink,
		"--", "set", "Interface", s.Uplink, fmt.Sprintf("ofport_request=%d", o.UplinkOFPort),
	}
	if !o.NoPatch {
		args = append(args,
			"--", "add-br", "br-int", "--", "set", "Bridge", "br-int", "datapath_type=netdev",
			"--", "add-port", s.Bridge, s.Patch, "--", "set", "Interface", s.Patch, "type=patch",
			"options:peer="+s.PatchPeer, fmt.Sprintf("ofport_request=%d", o.PatchOFPort),
			"--", "add-port", "br-int", s.PatchPeer, "--", "set", "Interface", s.PatchPeer, "type=patch",
			"options:peer="+s.Patch)
	}
	s.Vsctl(args...)
	s.waitReady()
	t.Logf("testbed: OVS bridge %s up in %v (dir %s, netns %s)",
		s.Bridge, time.Since(begin).Round(time.Millisecond), dir, ns)
	return s
}

// ctl is ovs-vswitchd's unixctl socket.
func (s *OVS) ctl() string { return filepath.Join(s.Dir, "ovs-vswitchd.ctl") }

// startVswitchd starts ovs-vswitchd inside NS and waits for its unixctl
// socket.
func (s *OVS) startVswitchd() {
	s.t.Helper()
	d, err := startVswitchd(s.t, s.Dir, s.RunDir, s.NS, s.DB)
	if err != nil {
		s.t.Fatalf("testbed: start ovs-vswitchd: %v", err)
	}
	s.vswitchd = d
}

// startVswitchd starts ovs-vswitchd on db inside the namespace ns, its
// pidfile, log and unixctl socket at dir/ovs-vswitchd.{pid,log,ctl}, and
// waits for the socket. It runs under its own monitor (--monitor), as
// ovs-ctl starts it on a node: the returned process is the monitor, the
// pidfile holds the daemon, and the monitor restarts a daemon that
// crashes (SIGABRT, SIGSEGV, ...). OVS 3.1.0's userspace conntrack can
// fail an assertion (conntrack.c:1063, in conn_update_state) under NATed
// traffic; a node survives that, so the test clusters do too.
func startVswitchd(t T, dir, runDir, ns, db string) (*daemon, error) {
	t.Helper()
	file := filepath.Join(dir, "ovs-vswitchd")
	d := startDaemon(t, "ovs-vswitchd", file+".log", []string{"OVS_RUNDIR=" + runDir},
		"ip", "netns", "exec", ns, "ovs-vswitchd", db,
		"--pidfile="+file+".pid", "--log-file="+file+".log", "--unixctl="+file+".ctl",
		"--no-chdir", "--disable-system", "--monitor", "-vconsole:off")
	return d, d.waitSocket(file + ".ctl")
}

// killVswitchd sends SIGKILL to the daemon d monitors (the pid in
// dir/ovs-vswitchd.pid, if it is d's child) and waits for d, which does
// not restart a daemon killed by SIGKILL but exits itself; it kills d
// if it does not.
func killVswitchd(d *daemon, dir string) error {
	pid, err := readPidfile(filepath.Join(dir, "ovs-vswitchd.pid"))
	if err == nil && parentOf(pid) == d.cmd.Process.Pid {
		_ = syscall.Kill(pid, syscall.SIGKILL) // gone already is fine
	}
	if d.exited(readyTimeout) {
		return nil
	}
	return d.kill()
}

// waitReady waits until the OpenFlow socket lists the ports at their
// requested ofports, then configures the bridge's LOCAL interface (which
// ovs-vswitchd recreates when it restarts).
func (s *OVS) waitReady() {
	s.t.Helper()
	want := map[string]int{s.Uplink: s.opts.UplinkOFPort}
	if s.Patch != "" {
		want[s.Patch] = s.opts.PatchOFPort
	}
	err := waitFor(readyTimeout, func() error {
		out, err := run("ovs-ofctl", "-O", "OpenFlow13", "dump-ports-desc", s.Mgmt())
		if err != nil {
			return s.vswitchd.check(err)
		}
		for name, port := range want {
			// OpenFlow truncates port names to 15 bytes.
			if !strings.Contains(out, fmt.Sprintf(" %d(%s): ", port, name[:min(len(name), 15)])) {
				return fmt.Errorf("port %s is not at ofport %d:\n%s", name, port, out)
			}
		}
		return nil
	})
	if err != nil {
		s.t.Fatalf("testbed: bridge %s not ready: %v%s",
			s.Bridge, err, tails(logPaths(s.Dir, "ovsdb-server", "ovs-vswitchd")))
	}
	mustRun(s.t, nil, "ip", "-n", s.NS, "addr", "replace", s.opts.HostIP, "dev", s.Bridge)
	mustRun(s.t, nil, "ip", "-n", s.NS, "link", "set", s.Bridge, "up")
}

// stopVswitchdOnCleanup stops ovs-vswitchd (see stopVswitchd).
func (s *OVS) stopVswitchdOnCleanup() { stopVswitchd(s.t, s.vswitchd, s.Dir) }

// stopVswitchd stops the ovs-vswitchd that d monitors gracefully,
// removing its tap devices, and kills it if it is still alive after
// stopTimeout. It logs the crashes its monitor restarted it after (the
// log's EMER lines), so a test that survived one says so.
func stopVswitchd(t T, d *daemon, dir string) {
	if d == nil {
		return
	}
	logCrashes(t, filepath.Join(dir, "ovs-vswitchd.log"))
	if !d.alive() {
		return
	}
	if _, err := run("ovs-appctl", "--timeout=5", "-t", filepath.Join(dir, "ovs-vswitchd.ctl"), "exit", "--cleanup"); err != nil {
		t.Logf("testbed: graceful stop of ovs-vswitchd failed, killing it: %v", err)
	}
	if d.exited(stopTimeout) {
		return
	}
	if err := killVswitchd(d, dir); err != nil {
		t.Errorf("testbed: %v", err)
	}
}

// logCrashes logs the lines of an OVS daemon's log that tell of a crash:
// EMER (an assertion, written just before it aborts) and its monitor's
// "crashes: pid ... restarting".
func logCrashes(t T, log string) {
	data, err := os.ReadFile(log)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "|EMER|") || strings.Contains(line, "crashes: pid") {
			t.Logf("testbed: a crash in %s: %s", log, line)
		}
	}
}

// Mgmt returns the bridge's OpenFlow management socket,
// "unix:<RunDir>/<bridge>.mgmt", as a target for Ofctl.
func (s *OVS) Mgmt() string { return "unix:" + filepath.Join(s.RunDir, s.Bridge+".mgmt") }

// Vsctl runs ovs-vsctl against DB. Without --no-wait it waits (up to 30 s)
// for ovs-vswitchd to apply the change.
func (s *OVS) Vsctl(args ...string) string {
	s.t.Helper()
	argv := append([]string{"ovs-vsctl", "--db=" + s.DB, "--timeout=30"}, args...)
	return mustRun(s.t, logPaths(s.Dir, "ovsdb-server", "ovs-vswitchd"), argv...)
}

// Ofctl runs ovs-ofctl -O OpenFlow13 with args, which name the target,
// typically Mgmt(): s.Ofctl("dump-flows", s.Mgmt()).
func (s *OVS) Ofctl(args ...string) string {
	s.t.Helper()
	argv := append([]string{"ovs-ofctl", "-O", "OpenFlow13"}, args...)
	return mustRun(s.t, logPaths(s.Dir, "ovs-vswitchd"), argv...)
}

// Appctl runs an ovs-appctl command against ovs-vswitchd.
func (s *OVS) Appctl(args ...string) string {
	s.t.Helper()
	argv := append([]string{"ovs-appctl", "-t", s.ctl()}, args...)
	return mustRun(s.t, logPaths(s.Dir, "ovs-vswitchd"), argv...)
}

// Trace runs ofproto/trace on the bridge for a flow such as
// "in_port=1,icmp,nw_dst=172.18.0.2" and returns the trace.
func (s *OVS) Trace(flow string) string {
	s.t.Helper()
	return s.Appctl("ofproto/trace", s.Bridge, flow)
}

// Exec runs a command inside the network namespace ns (such as NS or
// ExtNS) and returns its trimmed stdout, failing the test on error.
func (s *OVS) Exec(ns string, args ...string) string {
	s.t.Helper()
	return mustRun(s.t, nil, append([]string{"ip", "netns", "exec", ns}, args...)...)
}

// ExecErr is Exec returning the error, which carries the command's
// output, instead of failing the test.
func (s *OVS) ExecErr(ns string, args ...string) (string, error) {
	return run(append([]string{"ip", "netns", "exec", ns}, args...)...)
}

// Ofport returns the ofport ovs-vswitchd assigned to the interface name.
func (s *OVS) Ofport(name string) int {
	s.t.Helper()
	out := s.Vsctl("get", "Interface", name, "ofport")
	port, err := strconv.Atoi(out)
	if err != nil {
		s.t.Fatalf("testbed: ofport of %s: %v", name, err)
	}
	return port
}

// StopVswitchd stops ovs-vswitchd gracefully (ovs-appctl exit --cleanup)
// and waits until the process is gone.
func (s *OVS) StopVswitchd() {
	s.t.Helper()
	if !s.vswitchd.alive() {
		s.t.Fatalf("testbed: StopVswitchd: ovs-vswitchd is not running")
	}
	s.Appctl("exit", "--cleanup")
	if !s.vswitchd.exited(readyTimeout) {
		s.t.Fatalf("testbed: ovs-vswitchd (pid %d) still running %v after exit --cleanup%s",
			s.vswitchd.cmd.Process.Pid, readyTimeout, tails(logPaths(s.Dir, "ovs-vswitchd")))
	}
}

// KillVswitchd kills ovs-vswitchd with SIGKILL, as a crash would, and waits
// until the process is gone. Its pidfile, sockets and tap devices stay
// behind, as after a crash; StartVswitchd copes with them.
func (s *OVS) KillVswitchd() {
	s.t.Helper()
	if err := killVswitchd(s.vswitchd, s.Dir); err != nil {
		s.t.Fatalf("testbed: KillVswitchd: %v", err)
	}
}

// StartVswitchd starts ovs-vswitchd again after StopVswitchd or
// KillVswitchd, with the original command line, and waits as StartOVS
// does until the bridge is ready.
func (s *OVS) StartVswitchd() {
	s.t.Helper()
	if s.vswitchd.alive() {
		s.t.Fatalf("testbed: StartVswitchd: ovs-vswitchd (pid %d) is still running", s.vswitchd.cmd.Process.Pid)
	}
	s.startVswitchd()
	s.waitReady()
}
