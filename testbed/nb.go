package testbed

import (
	"path/filepath"
	"time"
)

// NB is a running OVN Northbound ovsdb-server alone (no SB, no
// ovn-northd), made by StartNB: what a benchmark of the NB's writers
// needs without northd computing logical flows beside it.
type NB struct {
	// Dir holds the database, socket, pidfile and log (nb.pid, nb.log).
	Dir string
	// Remote is "unix:<Dir>/nb.sock".
	Remote string

	d *daemon
}

// StartNB starts an ovsdb-server serving an empty OVN NB database of the
// installed schema; it is stopped, by PID, and removed when t ends.
func StartNB(t T) *NB {
	t.Helper()
	Require(t, "ovsdb-tool", "ovsdb-server")
	begin := time.Now()
	dir := newDir(t)
	sock := filepath.Join(dir, "nb.sock")
	d := startOVSDB(t, dir, "nb", nbSchema, sock)
	t.Logf("testbed: NB up in %v (%s)", time.Since(begin).Round(time.Millisecond), dir)
	return &NB{Dir: dir, Remote: "unix:" + sock, d: d}
}

// Pid returns the ovsdb-server's process ID.
func (n *NB) Pid() int { return n.d.cmd.Process.Pid }

// Appctl runs an ovs-appctl command against the ovsdb-server (its
// control socket <Dir>/nb.ctl), e.g. "vlog/set", "jsonrpc:file:dbg" to
// log every JSON-RPC message it receives and sends in <Dir>/nb.log.
func (n *NB) Appctl(args ...string) (string, error) {
	return run(append([]string{"ovs-appctl", "-t", filepath.Join(n.Dir, "nb.ctl")}, args...)...)
}
