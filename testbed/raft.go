package testbed

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// raftBins are the binaries StartNBCluster needs.
var raftBins = []string{"ovsdb-tool", "ovsdb-server", "ovs-appctl", "ovn-nbctl"}

// nbDatabase is the name of the northbound database in its schema.
const nbDatabase = "OVN_Northbound"

// NBCluster is a RAFT cluster of OVN northbound ovsdb-servers on
// loopback, made by StartNBCluster. No northd runs against it.
type NBCluster struct {
	// Dir holds the databases, sockets, pidfiles and logs of all members.
	Dir string
	// Members are the cluster's servers, in the order they joined.
	Members []*NBMember

	t T
}

// NBMember is one server of an NBCluster.
type NBMember struct {
	// Name is "nb1", "nb2", ...: the member's files are <Dir>/<Name>.*.
	Name string
	// Remote is the client remote, "tcp:127.0.0.1:PORT".
	Remote string
	// RaftAddr is the member's cluster address, "tcp:127.0.0.1:PORT".
	RaftAddr string

	listen string // the server's --remote for Remote
	d      *daemon
	ctl    string
}

// StartNBCluster creates a RAFT cluster of n NB servers on loopback
// (ovsdb-tool create-cluster, then join-cluster), starts them and returns
// once every member has joined and one is leader. Everything is stopped
// and removed when the test ends.
func StartNBCluster(t T, n int) *NBCluster {
	t.Helper()
	Require(t, raftBins...)
	if n < 1 {
		t.Fatalf("testbed: NB cluster of %d members", n)
	}
	begin := time.Now()
	dir := newDir(t)
	ports := FreePorts(t, 2*n)
	c := &NBCluster{Dir: dir, t: t}
	for i := range n {
		c.Members = append(c.Members, &NBMember{
			Name:     "nb" + strconv.Itoa(i+1),
			Remote:   "tcp:127.0.0.1:" + strconv.Itoa(ports[2*i]),
			listen:   "ptcp:" + strconv.Itoa(ports[2*i]) + ":127.0.0.1",
			RaftAddr: "tcp:127.0.0.1:" + strconv.Itoa(ports[2*i+1]),
		})
	}
	first := c.Members[0].RaftAddr
	for i, m := range c.Members {
		db := filepath.Join(dir, m.Name+".db")
		if i == 0 {
			mustRun(t, nil, "ovsdb-tool", "create-cluster", db, nbSchema, m.RaftAddr)
		} else {
			mustRun(t, nil, "ovsdb-tool", "join-cluster", db, nbDatabase, m.RaftAddr, first)
		}
		file := filepath.Join(dir, m.Name)
		sock := file + ".sock"
		m.ctl = file + ".ctl"
		m.d = startDaemon(t, m.Name, file+".log", nil, "ovsdb-server", db,
			"--remote=punix:"+sock, "--remote="+m.listen,
			"--pidfile="+file+".pid", "--log-file="+file+".log", "--unixctl="+m.ctl,
			"--no-chdir", "-vconsole:off")
		stopOnCleanup(t, m.d)
		if err := m.d.waitSocket(sock); err != nil {
			t.Fatalf("testbed: start %s: %v", m.Name, err)
		}
	}
	err := waitFor(readyTimeout, func() error {
		for _, m := range c.Members {
			st, err := m.status()
			if err != nil {
				return m.d.check(err)
			}
			if !strings.Contains(st, "Status: cluster member") {
				return fmt.Errorf("%s has not joined:\n%s", m.Name, st)
			}
		}
		if c.Leader() == nil {
			return fmt.Errorf("no leader elected")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testbed: NB cluster: %v%s", err, tails(logPaths(dir, c.names()...)))
	}
	t.Logf("testbed: %d-member NB cluster up in %v (dir %s, remotes %s)", n,
		time.Since(begin).Round(time.Millisecond), dir, strings.Join(c.Remotes(), ","))
	return c
}

// names returns the members' names.
func (c *NBCluster) names() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.Name)
	}
	return out
}

// Remotes returns the client remotes of all members.
func (c *NBCluster) Remotes() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.Remote)
	}
	return out
}

// status returns the member's `cluster/status OVN_Northbound`.
func (m *NBMember) status() (string, error) {
	return run("ovs-appctl", "-t", m.ctl, "cluster/status", nbDatabase)
}

// Alive reports whether the member's server still runs.
func (m *NBMember) Alive() bool { return m.d.alive() }

// Leader returns the running member that reports itself leader, or nil.
func (c *NBCluster) Leader() *NBMember {
	for _, m := range c.Members {
		if !m.Alive() {
			continue
		}
		if st, err := m.status(); err == nil && strings.Contains(st, "Role: leader") {
			return m
		}
	}
	return nil
}

// Member returns the member whose client remote is remote, or nil.
func (c *NBCluster) Member(remote string) *NBMember {
	for _, m := range c.Members {
		if m.Remote == remote {
			return m
		}
	}
	return nil
}

// Kill stops member m with SIGKILL, as a crash would, and waits until it
// is reaped. It may be called from any goroutine; the error names the
// member.
func (c *NBCluster) Kill(m *NBMember) error {
	if err := m.d.kill(); err != nil {
		return fmt.Errorf("testbed: kill NB member %s: %w", m.Name, err)
	}
	return nil
}

// WaitLeader waits until a running member is leader and returns it.
func (c *NBCluster) WaitLeader() *NBMember {
	c.t.Helper()
	var leader *NBMember
	err := waitFor(readyTimeout, func() error {
		if leader = c.Leader(); leader == nil {
			return fmt.Errorf("no leader among the running members")
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("testbed: NB cluster: %v%s", err, tails(logPaths(c.Dir, c.names()...)))
	}
	return leader
}

// Nbctl runs ovn-nbctl against the running members (any of them may
// answer; ovn-nbctl finds the leader itself).
func (c *NBCluster) Nbctl(args ...string) string {
	c.t.Helper()
	var remotes []string
	for _, m := range c.Members {
		if m.Alive() {
			remotes = append(remotes, m.Remote)
		}
	}
	argv := append([]string{"ovn-nbctl", "--db=" + strings.Join(remotes, ",")}, args...)
	return mustRun(c.t, logPaths(c.Dir, c.names()...), argv...)
}

// FreePorts returns n distinct loopback TCP ports that were free a
// moment ago, for a process told its port in advance (a RAFT member,
// etcd) or a server a test stops and starts again on the same port. They
// are picked below the kernel's ephemeral port range: the local
// port of every outgoing connection comes from that range, so no client
// connection of a parallel test can take one of these before the daemon
// it is meant for binds it (only another test's pick could, a 1 in
// thousands chance). When the range starts too low to leave room, the
// kernel picks.
func FreePorts(t T, n int) []int {
	t.Helper()
	low := ephemeralLow()
	var ports []int
	for len(ports) < n {
		addr := "127.0.0.1:0"
		if low > minPickedPort+1000 {
			addr = "127.0.0.1:" + strconv.Itoa(minPickedPort+rand.IntN(low-minPickedPort))
		}
		l, err := net.Listen("tcp", addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			t.Fatalf("testbed: free port: %v", err)
			return nil
		}
		defer l.Close() // held until all are picked, so they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// minPickedPort is the lowest port FreePorts picks: above the well-known
// and most registered service ports.
const minPickedPort = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read, the Linux default).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return low
}
