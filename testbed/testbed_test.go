package testbed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeTB records Skipf and Fatalf instead of ending the test.
type fakeTB struct {
	testing.TB
	skipped, fatal string
}

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Skipf(format string, a ...any)  { f.skipped = fmt.Sprintf(format, a...) }
func (f *fakeTB) Fatalf(format string, a ...any) { f.fatal = fmt.Sprintf(format, a...) }

func TestRequireMissingBinary(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		f := &fakeTB{TB: t}
		Require(f, "ovt-no-such-binary")
		got := f.skipped
		if ci == "true" {
			got = f.fatal
		}
		if !strings.Contains(got, "ovt-no-such-binary") || !strings.Contains(got, "make deps") {
			t.Errorf("CI=%q: skipped %q, fatal %q; want the missing binary and `make deps` named", ci, f.skipped, f.fatal)
		}
		if (ci == "true") != (f.fatal != "") || (ci == "true") == (f.skipped != "") {
			t.Errorf("CI=%q: skipped %q, fatal %q; want a failure exactly when CI=true", ci, f.skipped, f.fatal)
		}
	}
}

// ping waits until the external host reaches the bridge's LOCAL address.
func ping(t *testing.T, s *OVS, ip string) {
	t.Helper()
	begin := time.Now()
	err := waitFor(10*time.Second, func() error {
		_, err := s.ExecErr(s.ExtNS, "ping", "-c1", "-W1", ip)
		return err
	})
	if err != nil {
		t.Fatalf("external host cannot ping %s: %v", ip, err)
	}
	t.Logf("ping %s ok after %v", ip, time.Since(begin).Round(time.Millisecond))
}

// pids reads the named daemons' pidfiles in dir.
func pids(t *testing.T, dir string, daemons ...string) []int {
	t.Helper()
	var out []int
	for _, d := range daemons {
		pid, err := readPidfile(filepath.Join(dir, d+".pid"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pid)
	}
	return out
}

// noLeftovers checks that the processes, namespaces and (unless the test
// failed) the directory are gone.
func noLeftovers(t *testing.T, dir string, procs []int, namespaces ...string) {
	t.Helper()
	for _, pid := range procs {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists (kill 0: %v)", pid, err)
		}
	}
	for _, ns := range namespaces {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s still exists (stat: %v)", ns, err)
		}
	}
	if _, err := os.Stat(dir); !t.Failed() && !errors.Is(err, os.ErrNotExist) { // failed tests keep it
		t.Errorf("directory %s still exists (stat: %v)", dir, err)
	}
}

func TestOVS(t *testing.T) {
	t.Parallel()
	s := StartOVS(t, OVSOptions{})
	if got := s.Ofport(s.Uplink); got != 1 {
		t.Errorf("uplink %s at ofport %d, want 1", s.Uplink, got)
	}
	if s.Patch != "patch-br-ex_node1-to-br-int" || s.PatchPeer != "patch-br-int-to-br-ex_node1" {
		t.Errorf("patch ports %q, %q", s.Patch, s.PatchPeer)
	}
	if got := s.Ofport(s.Patch); got != 2 {
		t.Errorf("patch port %s at ofport %d, want 2", s.Patch, got)
	}
	if got := s.Vsctl("iface-to-br", s.PatchPeer); got != "br-int" {
		t.Errorf("patch peer on bridge %q, want br-int", got)
	}
	if flows := s.Ofctl("--no-stats", "dump-flows", s.Mgmt()); !strings.Contains(flows, "actions=NORMAL") {
		t.Errorf("default flows lack NORMAL:\n%s", flows)
	}
	trace := s.Trace("in_port=1,icmp,nw_src=172.18.0.1,nw_dst=172.18.0.2")
	if !strings.Contains(trace, "NORMAL") || !strings.Contains(trace, "Datapath actions:") {
		t.Errorf("unexpected trace:\n%s", trace)
	}
	if got, want := parentOf(pids(t, s.Dir, "ovs-vswitchd")[0]), s.vswitchd.cmd.Process.Pid; got != want {
		t.Errorf("the pidfile's ovs-vswitchd is a child of %d, want the monitor %d", got, want)
	}
	ping(t, s, "172.18.0.2")

	// A crash (an assertion aborts) is survived: the monitor restarts
	// the daemon, which serves the bridge and its LOCAL port again.
	begin := time.Now()
	crashed := pids(t, s.Dir, "ovs-vswitchd")[0]
	if err := syscall.Kill(crashed, syscall.SIGABRT); err != nil {
		t.Fatal(err)
	}
	err := waitFor(readyTimeout, func() error {
		pid, err := readPidfile(filepath.Join(s.Dir, "ovs-vswitchd.pid"))
		if err != nil || pid == crashed || parentOf(pid) != s.vswitchd.cmd.Process.Pid {
			return fmt.Errorf("no restarted daemon yet (pidfile %d, %v)", pid, err)
		}
		_, err = run("ovs-ofctl", "-O", "OpenFlow13", "dump-ports-desc", s.Mgmt())
		return err
	})
	if err != nil {
		t.Fatalf("ovs-vswitchd not restarted after a crash: %v", err)
	}
	t.Logf("crash/restart of ovs-vswitchd took %v", time.Since(begin).Round(time.Millisecond))
	ping(t, s, "172.18.0.2")

	begin = time.Now()
	s.StopVswitchd()
	s.StartVswitchd()
	t.Logf("stop/start of ovs-vswitchd took %v", time.Since(begin).Round(time.Millisecond))
	ping(t, s, "172.18.0.2")

	begin = time.Now()
	s.KillVswitchd()
	s.StartVswitchd()
	t.Logf("kill/start of ovs-vswitchd took %v", time.Since(begin).Round(time.Millisecond))
	ping(t, s, "172.18.0.2")
	if got := s.Ofport(s.Patch); got != 2 {
		t.Errorf("after restart patch port %s at ofport %d, want 2", s.Patch, got)
	}
}

func TestOVSParallelAndCleanup(t *testing.T) {
	t.Parallel()
	Require(t, ovsBins...) // skip here rather than in the subtests
	cases := []struct {
		name   string
		opts   OVSOptions
		hostIP string
	}{
		{"seed", OVSOptions{Bridge: "breth0", Node: "ovn-worker2", TSO: true}, "172.18.0.2"},
		{"custom", OVSOptions{Uplink: "eth1", UplinkOFPort: 7, NoPatch: true,
			HostIP: "10.9.0.2/24", ExtIP: "10.9.0.1/24"}, "10.9.0.2"},
	}
	type started struct {
		dir, ns, extNS string
		pids           []int
	}
	got := make([]started, len(cases))
	t.Run("group", func(t *testing.T) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				s := StartOVS(t, c.opts)
				if p := s.Ofport(s.Uplink); p != max(c.opts.UplinkOFPort, 1) {
					t.Errorf("uplink %s at ofport %d", s.Uplink, p)
				}
				if brs := s.Vsctl("list-br"); c.opts.NoPatch == strings.Contains(brs, "br-int") {
					t.Errorf("bridges %q with NoPatch=%v", brs, c.opts.NoPatch)
				}
				ping(t, s, c.hostIP)
				got[i] = started{s.Dir, s.NS, s.ExtNS, pids(t, s.Dir, "ovsdb-server", "ovs-vswitchd")}
				if c.opts.NoPatch {
					s.KillVswitchd() // cleanup must cope with a crashed ovs-vswitchd
				}
			})
		}
	})
	if got[0].ns == got[1].ns || got[0].dir == got[1].dir {
		t.Errorf("parallel testbeds share a namespace or directory: %+v", got)
	}
	for _, s := range got {
		noLeftovers(t, s.dir, s.pids, s.ns, s.extNS)
	}
}

func TestOVN(t *testing.T) {
	t.Parallel()
	Require(t, ovnBins...) // skip here rather than in the subtest
	var dir string
	var procs []int
	t.Run("central", func(t *testing.T) {
		n := StartOVN(t)
		dir, procs = n.Dir, pids(t, n.Dir, "nb", "sb", "northd")
		n.Nbctl("ls-add", "sw0")
		n.Nbctl("lsp-add", "sw0", "p1", "--", "lsp-set-addresses", "p1", "00:00:00:00:00:01 10.0.0.1")
		n.Nbctl("--wait=sb", "--timeout=10", "sync")
		if dps := n.Sbctl("--columns=external_ids", "list", "Datapath_Binding"); !strings.Contains(dps, "name=sw0") {
			t.Errorf("SB Datapath_Binding lacks sw0:\n%s", dps)
		}
		if out, err := n.NbctlErr("ls-add", "sw0"); err == nil {
			t.Errorf("second ls-add sw0 succeeded: %q", out)
		}
		if out, err := run("ovn-nbctl", "--db="+n.NBTCP, "ls-list"); err != nil || !strings.Contains(out, "sw0") {
			t.Errorf("NB over %s: %q, %v", n.NBTCP, out, err)
		}
		if out, err := run("ovn-sbctl", "--db="+n.SBTCP, "list", "SB_Global"); err != nil || !strings.Contains(out, "_uuid") {
			t.Errorf("SB over %s: %q, %v", n.SBTCP, out, err)
		}
		trace := n.Trace("sw0", `inport == "p1" && eth.src == 00:00:00:00:00:01 && eth.dst == ff:ff:ff:ff:ff:ff`)
		if !strings.Contains(trace, `ingress(dp="sw0", inport="p1")`) {
			t.Errorf("unexpected ovn-trace:\n%s", trace)
		}
	})
	noLeftovers(t, dir, procs)
}

func TestNetnsLink(t *testing.T) {
	t.Parallel()
	a, b := NewNetns(t, "ta"), NewNetns(t, "tb")
	Link(t, a, "va", []string{"192.0.2.1/24", "2001:db8::1/64"}, b, "vb", []string{"192.0.2.2/24"})
	a.Run(t, "ping", "-c1", "-W2", "192.0.2.2")
	if _, err := b.RunErr("ip", "link", "show", "va"); err == nil {
		t.Error("va is visible in the other namespace")
	}
}

// TestNBAppctl: the NB's control socket answers, its JSON-RPC debug log
// then records a transaction, and a command it does not know is an error.
func TestNBAppctl(t *testing.T) {
	t.Parallel()
	Require(t, "ovsdb-tool", "ovsdb-server", "ovs-appctl", "ovn-nbctl")
	n := StartNB(t)
	if _, err := n.Appctl("vlog/set", "jsonrpc:file:dbg"); err != nil {
		t.Fatal(err)
	}
	if out, err := run("ovn-nbctl", "--db="+n.Remote, "ls-add", "sw0"); err != nil {
		t.Fatalf("ls-add: %q, %v", out, err)
	}
	log, err := os.ReadFile(filepath.Join(n.Dir, "nb.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `received request, method="transact"`) {
		t.Errorf("nb.log has no transaction after vlog/set jsonrpc:file:dbg:\n%s", log)
	}
	if out, err := n.Appctl("no/such-command"); err == nil {
		t.Errorf("an unknown command succeeded: %q", out)
	}
}
