package testbed

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netns"
)

// Netns is a network namespace of the test's own, deleted on cleanup: a
// host for ARP, routing and SNAT tests.
type Netns struct {
	// Name is the namespace's name (for `ip netns exec`).
	Name string
}

// NewNetns creates a namespace named prefix plus a random suffix, with lo
// up. It fails the test unless testbed prerequisites are met (Require).
func NewNetns(t T, prefix string) *Netns {
	t.Helper()
	Require(t, "ip")
	n := &Netns{Name: prefix + randomHex(t)}
	newNamespace(t, n.Name)
	return n
}

// Run runs argv inside the namespace and fails the test on error; it
// returns trimmed stdout.
func (n *Netns) Run(t T, argv ...string) string {
	t.Helper()
	return mustRun(t, nil, append([]string{"ip", "netns", "exec", n.Name}, argv...)...)
}

// RunErr runs argv inside the namespace and returns trimmed stdout and the
// error, which names the command and carries its output.
func (n *Netns) RunErr(argv ...string) (string, error) {
	return run(append([]string{"ip", "netns", "exec", n.Name}, argv...)...)
}

// Delete deletes the namespace now rather than at cleanup, as a pod's
// sandbox goes when the pod is deleted: its interfaces go with it (a
// veth's peer too). A process still inside keeps the namespace alive
// until it exits; stop it first.
func (n *Netns) Delete(t T) {
	t.Helper()
	mustRun(t, nil, "ip", "netns", "del", n.Name)
}

// Link connects namespaces a and b with a veth pair, ifA in a and ifB in
// b, both up, and gives each end the addresses listed (CIDR notation, may
// be empty). Deleting a namespace deletes the pair.
func Link(t T, a *Netns, ifA string, addrsA []string, b *Netns, ifB string, addrsB []string) {
	t.Helper()
	mustRun(t, nil, "ip", "-n", a.Name, "link", "add", ifA, "type", "veth", "peer", "name", ifB, "netns", b.Name)
	for _, end := range []struct {
		ns    *Netns
		name  string
		addrs []string
	}{{a, ifA, addrsA}, {b, ifB, addrsB}} {
		for _, addr := range end.addrs {
			argv := []string{"ip", "-n", end.ns.Name, "addr", "add", addr, "dev", end.name}
			if strings.Contains(addr, ":") {
				argv = append(argv, "nodad") // usable at once, no DAD wait
			}
			mustRun(t, nil, argv...)
		}
		mustRun(t, nil, "ip", "-n", end.ns.Name, "link", "set", end.name, "up")
	}
}

// Do runs f on a fresh OS thread switched into the namespace: sockets
// f opens (listeners, dialled connections, packet sockets) stay in the
// namespace and may be used from any goroutine afterwards. The thread is
// never switched back; it ends with f.
func (n *Netns) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		target, err := netns.GetFromName(n.Name)
		if err != nil {
			errc <- fmt.Errorf("netns %s: %w", n.Name, err)
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", n.Name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// Forward makes addr (host:port) inside the namespace lead to addr in
// the test's own namespace: a listener opened in the namespace whose
// connections are spliced to a connection dialled from the test process.
// A process in the namespace then reaches a loopback-only server of the
// test (the kube-apiserver) at the same address, TLS names included. It
// stops at cleanup.
func (n *Netns) Forward(t T, addr string) {
	t.Helper()
	n.ForwardTo(t, addr, addr)
}

// ForwardTo is Forward to another address: connections to listen (an
// address of the namespace) lead to target in the test's own namespace.
func (n *Netns) ForwardTo(t T, listen, target string) {
	t.Helper()
	var ln net.Listener
	if err := n.Do(func() (err error) { ln, err = net.Listen("tcp", listen); return err }); err != nil {
		t.Fatalf("testbed: forward %s in %s: %v", listen, n.Name, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
				<-done
			}()
		}
	}()
}

// Greeting connects from n to the TCP address addr and returns the first
// line the server sends (trimmed), within 2 s.
func (n *Netns) Greeting(addr string) (string, error) {
	var line string
	err := n.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		line, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	return strings.TrimSpace(line), err
}
