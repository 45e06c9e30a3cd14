package testbed

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// cmdTimeout bounds every command the helpers run.
	cmdTimeout = 2 * time.Minute
	// readyTimeout bounds waiting for a daemon or a port to come up.
	readyTimeout = 20 * time.Second
	// stopTimeout is how long a daemon gets to exit before SIGKILL.
	stopTimeout = 3 * time.Second
	// pollInterval is how often readiness is polled.
	pollInterval = 20 * time.Millisecond
	// logTailLines is how many log lines failures and cleanup report.
	logTailLines = 30
)

// T is what the testbed needs from its caller: *testing.T and
// *testing.B satisfy it, and so does a program (such as `make demo`) that
// runs the testbed outside `go test`.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
	Failed() bool
}

// Require skips the test unless it runs as root (euid 0) and every binary
// in bins is on PATH. With CI=true in the environment a missing
// prerequisite fails the test instead, so CI cannot silently skip.
func Require(t T, bins ...string) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (euid 0)")
	}
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return
	}
	what := strings.Join(missing, ", ")
	if os.Getenv("CI") == "true" {
		t.Fatalf("FAIL (CI=true): testbed prerequisites missing: %s; CI must run as root with them installed (`make deps`)", what)
	} else {
		t.Skipf("SKIP (not CI): testbed prerequisites missing: %s; run as root and install with `make deps`", what)
	}
}

// run runs argv and returns its trimmed stdout. The error names the
// command and carries its output.
func run(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := strings.TrimSpace(stdout.String())
	if err != nil {
		return out, fmt.Errorf("%s: %w\nstdout: %s\nstderr: %s",
			strings.Join(argv, " "), err, out, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// mustRun is run that fails the test, adding the tails of logs.
func mustRun(t T, logs []string, argv ...string) string {
	t.Helper()
	out, err := run(argv...)
	if err != nil {
		t.Fatalf("%v%s", err, tails(logs))
	}
	return out
}

// tails renders the last lines of each log file for an error message.
func tails(logs []string) string {
	var b strings.Builder
	for _, l := range logs {
		fmt.Fprintf(&b, "\n--- last %d lines of %s ---\n%s", logTailLines, l, tail(l, logTailLines))
	}
	return b.String()
}

// logPaths returns the paths of the named daemons' logs in dir.
func logPaths(dir string, daemons ...string) []string {
	var paths []string
	for _, d := range daemons {
		paths = append(paths, filepath.Join(dir, d+".log"))
	}
	return paths
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// giveUp wraps an error after which waitFor stops polling at once.
type giveUp struct{ error }

// waitFor polls cond until it returns nil or timeout passes, and returns
// cond's last error in that case. A giveUp error ends the wait early.
func waitFor(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		var g giveUp
		if errors.As(err, &g) {
			return g.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still failing after %v: %w", timeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// Eventually polls cond every 20 ms until it returns nil, and fails t
// with cond's last error when timeout passes first.
func Eventually(t T, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := waitFor(timeout, cond); err != nil {
		t.Fatalf("%v", err)
	}
}

// newDir creates a short directory under /tmp (unix socket paths must
// stay below 108 bytes). Its cleanup, which runs after the daemons' as it
// is registered first, removes it, or keeps it when the test failed and
// logs its path and the tails of its *.log files.
func newDir(t T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "ovt")
	if err != nil {
		t.Fatalf("testbed: create temp dir: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			t.Logf("testbed: test failed, keeping %s%s", dir, tails(logs))
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("testbed: remove %s: %v", dir, err)
		}
	})
	return dir
}

// netnsDir holds the named network namespaces of `ip netns`.
const netnsDir = "/var/run/netns"

// newNamespace creates the network namespace name with lo up and
// registers its deletion.
func newNamespace(t T, name string) {
	t.Helper()
	mustRun(t, nil, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(netnsDir, name)); errors.Is(err, os.ErrNotExist) {
			return // deleted early (Netns.Delete)
		}
		if _, err := run("ip", "netns", "del", name); err != nil {
			t.Errorf("testbed: %v", err)
		}
	})
	mustRun(t, nil, "ip", "-n", name, "link", "set", "lo", "up")
}

// randomHex returns 8 random hex digits.
func randomHex(t T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("testbed: random name: %v", err)
	}
	return hex.EncodeToString(b)
}

// daemon is a long-running child process of the test binary.
type daemon struct {
	name string // for messages, e.g. "ovs-vswitchd"
	log  string // log file; also receives the process's stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// startDaemon starts argv (with env added to the environment) as a child
// process whose stdout and stderr are appended to log, and reaps it in
// the background.
func startDaemon(t T, name, log string, env []string, argv ...string) *daemon {
	t.Helper()
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("testbed: start %s: %v", name, err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("testbed: start %s: %v", name, err)
	}
	d := &daemon{name: name, log: log, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is of no interest, only that it is reaped
		close(d.done)
	}()
	return d
}

// alive reports whether the process has not exited yet.
func (d *daemon) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// exited waits up to timeout for the process to exit.
func (d *daemon) exited(timeout time.Duration) bool {
	select {
	case <-d.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// kill sends SIGKILL and waits until the process is reaped.
func (d *daemon) kill() error {
	if err := d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s (pid %d): %w", d.name, d.cmd.Process.Pid, err)
	}
	if !d.exited(readyTimeout) {
		return fmt.Errorf("%s (pid %d) still alive %v after SIGKILL", d.name, d.cmd.Process.Pid, readyTimeout)
	}
	return nil
}

// terminate sends SIGTERM, then SIGKILL if the process is still alive
// after stopTimeout.
func (d *daemon) terminate() error {
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("terminate %s (pid %d): %w", d.name, d.cmd.Process.Pid, err)
	}
	if d.exited(stopTimeout) {
		return nil
	}
	return d.kill()
}

// check returns err, or a giveUp error if the daemon has exited, for
// waitFor conditions that cannot become true without the daemon.
func (d *daemon) check(err error) error {
	if d.alive() {
		return err
	}
	return giveUp{fmt.Errorf("%s (pid %d) exited: %w%s", d.name, d.cmd.Process.Pid, err, tails([]string{d.log}))}
}

// waitSocket waits until the unix socket at path accepts connections,
// failing early if the daemon exits.
func (d *daemon) waitSocket(path string) error {
	return waitFor(readyTimeout, func() error {
		c, err := net.Dial("unix", path)
		if err == nil {
			return c.Close()
		}
		return d.check(err)
	})
}

// stopOnCleanup registers d's termination with t.Cleanup.
func stopOnCleanup(t T, d *daemon) {
	t.Cleanup(func() {
		if err := d.terminate(); err != nil {
			t.Errorf("testbed: %v", err)
		}
	})
}

// startOVSDB creates <dir>/<name>.db from schema and serves it with an
// ovsdb-server listening on the unix socket sock and on extra remotes;
// pidfile, log and unixctl socket are <dir>/<name>.{pid,log,ctl}. It
// returns once sock accepts connections.
func startOVSDB(t T, dir, name, schema, sock string, remotes ...string) *daemon {
	t.Helper()
	mustRun(t, nil, "ovsdb-tool", "create", filepath.Join(dir, name)+".db", schema)
	return serveOVSDB(t, dir, name, sock, remotes...)
}

// serveOVSDB serves the existing database <dir>/<name>.db as startOVSDB
// does (a restart after a crash keeps the database).
func serveOVSDB(t T, dir, name, sock string, remotes ...string) *daemon {
	t.Helper()
	file := filepath.Join(dir, name)
	argv := []string{"ovsdb-server", file + ".db", "--remote=punix:" + sock,
		"--pidfile=" + file + ".pid", "--log-file=" + file + ".log", "--unixctl=" + file + ".ctl",
		"--no-chdir", "-vconsole:off"}
	for _, r := range remotes {
		argv = append(argv, "--remote="+r)
	}
	d := startDaemon(t, name, file+".log", nil, argv...)
	stopOnCleanup(t, d)
	if err := d.waitSocket(sock); err != nil {
		t.Fatalf("testbed: start %s: %v", name, err)
	}
	return d
}

// YAMLFiles is path itself, or the *.yaml files in it when it is a
// directory (the way kubectl apply -f reads a path).
func YAMLFiles(path string) []string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		files, _ := filepath.Glob(filepath.Join(path, "*.yaml"))
		return files
	}
	return []string{path}
}

// readPidfile returns the pid an OVS daemon wrote to path.
func readPidfile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("pidfile %s: %w", path, err)
	}
	return pid, nil
}

// parentOf returns pid's parent pid, or 0 if pid is gone.
func parentOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, _ := strconv.Atoi(strings.TrimSpace(v))
			return ppid
		}
	}
	return 0
}
