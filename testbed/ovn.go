package testbed

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Schemas of the OVN databases.
const (
	nbSchema = "/usr/share/ovn/ovn-nb.ovsschema"
	sbSchema = "/usr/share/ovn/ovn-sb.ovsschema"
)

// ovnBins are the binaries StartOVN needs.
var ovnBins = []string{"ovsdb-tool", "ovsdb-server", "ovsdb-client", "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovn-trace"}

// listeningRE finds the port of a ptcp:0 or pssl:0 remote in an
// ovsdb-server log.
var listeningRE = regexp.MustCompile(`listening on port (\d+)`)

// ListeningPort waits until the ovsdb-server logging to log has bound the
// port of its ptcp:0 or pssl:0 remote, and returns it. Letting the server
// pick the port leaves no window in which another process can take it.
func ListeningPort(t T, log string) string {
	t.Helper()
	port, err := logPort(log, func(err error) error { return err })
	if err != nil {
		t.Fatalf("testbed: listening port: %v", err)
	}
	return port
}

// logPort waits for the port in log; check sees every failed attempt (a
// dead server can end the wait at once).
func logPort(log string, check func(error) error) (string, error) {
	var port string
	err := waitFor(readyTimeout, func() error {
		data, err := os.ReadFile(log)
		if err != nil {
			return check(err)
		}
		m := listeningRE.FindSubmatch(data)
		if m == nil {
			return check(fmt.Errorf("no %q in %s", listeningRE, log))
		}
		port = string(m[1])
		return nil
	})
	return port, err
}

// OVN is a running OVN central, made by StartOVN: NB and SB
// ovsdb-servers and ovn-northd. Its methods fail the test on error and
// return the command's trimmed stdout.
type OVN struct {
	// Dir holds the databases, sockets, pidfiles and logs.
	Dir string
	// NB is the northbound database remote, "unix:<Dir>/nb.sock".
	NB string
	// SB is the southbound database remote, "unix:<Dir>/sb.sock".
	SB string
	// NBTCP is the northbound database on loopback, "tcp:127.0.0.1:PORT";
	// SBTCP the southbound's.
	NBTCP, SBTCP string

	t        T
	nb       *daemon // the NB ovsdb-server
	nbSchema string
}

// OVNOptions tune StartOVNWith.
type OVNOptions struct {
	// QoSMark serves the NB with the installed schema whose QoS action
	// column is that of OVN 24.03's schema (keys "dscp" and "mark",
	// values 0-4294967295), so OVN-Kubernetes' EgressIP reply-traffic QoS
	// row (action mark=42) can be written. The installed ovn-northd
	// (23.03) does not know "mark": it logs that it cannot parse such a
	// row's action and leaves the row out of its logical flows; every
	// other row works as usual.
	QoSMark bool
}

// StartOVN starts the NB and SB ovsdb-servers and ovn-northd, and returns
// once northd has synced an (empty) NB database into SB. Everything is
// removed when the test ends.
func StartOVN(t T) *OVN {
	t.Helper()
	return StartOVNWith(t, OVNOptions{})
}

// StartOVNWith is StartOVN with options.
func StartOVNWith(t T, opts OVNOptions) *OVN {
	t.Helper()
	Require(t, ovnBins...)
	begin := time.Now()
	dir := newDir(t)
	n := &OVN{Dir: dir, t: t,
		NB: "unix:" + filepath.Join(dir, "nb.sock"), SB: "unix:" + filepath.Join(dir, "sb.sock")}
	schema := nbSchema
	if opts.QoSMark {
		schema = filepath.Join(dir, "nb-qos-mark.ovsschema")
		if err := writeQoSMarkSchema(schema); err != nil {
			t.Fatalf("testbed: %v", err)
		}
	}
	nb := startOVSDB(t, dir, "nb", schema, filepath.Join(dir, "nb.sock"), "ptcp:0:127.0.0.1")
	sb := startOVSDB(t, dir, "sb", sbSchema, filepath.Join(dir, "sb.sock"), "ptcp:0:127.0.0.1")
	port, err := logPort(nb.log, nb.check)
	if err != nil {
		t.Fatalf("testbed: NB TCP port: %v", err)
	}
	n.NBTCP = "tcp:127.0.0.1:" + port
	if port, err = logPort(sb.log, sb.check); err != nil {
		t.Fatalf("testbed: SB TCP port: %v", err)
	}
	n.SBTCP = "tcp:127.0.0.1:" + port
	n.nb, n.nbSchema = nb, schema

	file := filepath.Join(dir, "northd")
	northd := startDaemon(t, "ovn-northd", file+".log", []string{"OVN_RUNDIR=" + dir},
		"ovn-northd", "--ovnnb-db="+n.NB, "--ovnsb-db="+n.SB,
		"--pidfile="+file+".pid", "--log-file="+file+".log", "--unixctl="+file+".ctl",
		"--no-chdir", "-vconsole:off")
	stopOnCleanup(t, northd)
	n.Nbctl("--wait=sb", "--timeout=10", "sync")
	t.Logf("testbed: OVN central up in %v (dir %s, NB also on %s, SB on %s)",
		time.Since(begin).Round(time.Millisecond), dir, n.NBTCP, n.SBTCP)
	return n
}

// ReplaceNB kills the NB ovsdb-server and serves a new, empty database
// of the same schema on the same remotes (NB and NBTCP), as an operator
// who wipes the NB and creates it again does. Its clients (northd, the
// test's) reconnect to it; whatever the old database held is gone.
func (n *OVN) ReplaceNB() {
	n.t.Helper()
	n.restartNB(true)
}

// RestartNB kills the NB ovsdb-server (SIGKILL, as a crash) and serves
// the same database again on the same remotes; its clients reconnect.
func (n *OVN) RestartNB() {
	n.t.Helper()
	n.restartNB(false)
}

func (n *OVN) restartNB(wipe bool) {
	n.t.Helper()
	if err := n.nb.kill(); err != nil {
		n.t.Fatalf("testbed: restart NB: %v", err)
	}
	if wipe {
		db := filepath.Join(n.Dir, "nb.db")
		if err := os.Remove(db); err != nil {
			n.t.Fatalf("testbed: replace NB: %v", err)
		}
		mustRun(n.t, nil, "ovsdb-tool", "create", db, n.nbSchema)
	}
	n.nb = serveOVSDB(n.t, n.Dir, "nb", filepath.Join(n.Dir, "nb.sock"), "ptcp:"+strings.TrimPrefix(n.NBTCP, "tcp:127.0.0.1:")+":127.0.0.1")
}

// Nbctl runs ovn-nbctl against NB.
func (n *OVN) Nbctl(args ...string) string {
	n.t.Helper()
	argv := append([]string{"ovn-nbctl", "--db=" + n.NB}, args...)
	return mustRun(n.t, logPaths(n.Dir, "nb", "northd"), argv...)
}

// NbctlErr is Nbctl returning the error, which carries the command's
// output, instead of failing the test.
func (n *OVN) NbctlErr(args ...string) (string, error) {
	return run(append([]string{"ovn-nbctl", "--db=" + n.NB}, args...)...)
}

// Dump runs `ovsdb-client -f list dump` of the NB table, with only the
// given columns if any. Unlike ovn-nbctl, which parses values with the
// installed schema, it shows what the server holds (e.g. a QoS action
// "mark" in a StartOVNWith(QoSMark) NB).
func (n *OVN) Dump(table string, columns ...string) string {
	n.t.Helper()
	argv := append([]string{"ovsdb-client", "-f", "list", "dump", n.NB, "OVN_Northbound", table}, columns...)
	return mustRun(n.t, logPaths(n.Dir, "nb"), argv...)
}

// Sbctl runs ovn-sbctl against SB.
func (n *OVN) Sbctl(args ...string) string {
	n.t.Helper()
	argv := append([]string{"ovn-sbctl", "--db=" + n.SB}, args...)
	return mustRun(n.t, logPaths(n.Dir, "sb", "northd"), argv...)
}

// Trace runs ovn-trace against SB, e.g.
// o.Trace("--ct=new", "sw0", `inport == "p1" && eth.src == 00:00:00:00:00:01`).
func (n *OVN) Trace(args ...string) string {
	n.t.Helper()
	argv := append([]string{"ovn-trace", "--db=" + n.SB}, args...)
	return mustRun(n.t, logPaths(n.Dir, "sb", "northd"), argv...)
}

// Blanks collapses runs of blanks and drops empty lines, so ovn-nbctl
// tables compare by content, not by column widths.
func Blanks(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// writeQoSMarkSchema writes to path the installed NB schema with the QoS
// action column type of OVN 24.03's schema (see OVNOptions.QoSMark).
func writeQoSMarkSchema(path string) error {
	data, err := os.ReadFile(nbSchema)
	if err != nil {
		return fmt.Errorf("QoS mark schema: %w", err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		return fmt.Errorf("QoS mark schema: parse %s: %w", nbSchema, err)
	}
	tables, _ := schema["tables"].(map[string]any)
	qos, _ := tables["QoS"].(map[string]any)
	cols, _ := qos["columns"].(map[string]any)
	if cols == nil || cols["action"] == nil {
		return fmt.Errorf("QoS mark schema: %s has no QoS action column", nbSchema)
	}
	cols["action"] = map[string]any{"type": map[string]any{
		"key":   map[string]any{"type": "string", "enum": []any{"set", []any{"dscp", "mark"}}},
		"value": map[string]any{"type": "integer", "minInteger": 0, "maxInteger": 4294967295},
		"min":   0, "max": "unlimited"}}
	out, err := json.MarshalIndent(schema, "", " ")
	if err != nil {
		return fmt.Errorf("QoS mark schema: %w", err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("QoS mark schema: %w", err)
	}
	return nil
}
