package testbed

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestChassis plugs two pods into a logical switch whose localnet port is
// mapped to br-ex: they reach each other through br-int and the external
// host through br-ex's uplink and its Linux bridge, with ping and TCP.
func TestChassis(t *testing.T) {
	t.Parallel()
	Require(t, append(append(ovsBins, ovnBins...), chassisBins...)...) // skip here rather than in the subtest
	var dirs []string
	var procs []int
	var namespaces []string
	t.Run("sandbox", func(t *testing.T) {
		n := StartOVN(t)
		ext := NewExternal(t, "172.18.0.1/24")
		c := StartChassis(t, n, ext, ChassisOptions{Physnet: "net0", HostIP: "172.18.0.9/24"})
		if got := c.Vsctl("get", "Open_vSwitch", ".", "external_ids:ovn-bridge-mappings"); got != `"net0:br-ex"` {
			t.Errorf("bridge mappings %s", got)
		}
		n.Nbctl("ls-add", "sw0",
			"--", "lsp-add", "sw0", "ln0", "--", "lsp-set-type", "ln0", "localnet",
			"--", "lsp-set-addresses", "ln0", "unknown", "--", "lsp-set-options", "ln0", "network_name=net0",
			"--", "lsp-add", "sw0", "p1", "--", "lsp-set-addresses", "p1", "0a:58:ac:12:00:0a 172.18.0.10",
			"--", "lsp-add", "sw0", "p2", "--", "lsp-set-addresses", "p2", "0a:58:ac:12:00:0b 172.18.0.11")
		p1 := c.AddPod(PodOptions{IfaceID: "p1", MAC: "0a:58:ac:12:00:0a", IP: "172.18.0.10/24", Gateway: "172.18.0.1"})
		p2 := c.AddPod(PodOptions{IfaceID: "p2", MAC: "0a:58:ac:12:00:0b", IP: "172.18.0.11/24", Gateway: "172.18.0.1", MTU: 1300})
		c.WaitHV(30 * time.Second)
		if mtu := p2.Run(t, "cat", "/sys/class/net/eth0/mtu"); mtu != "1300" {
			t.Errorf("pod MTU %s, want 1300", mtu)
		}
		for _, target := range []string{"172.18.0.11", "172.18.0.1", "172.18.0.9"} {
			if out, err := p1.RunErr("ping", "-c1", "-W5", target); err != nil {
				t.Errorf("pod p1 cannot ping %s: %v\n%s", target, err, out)
			}
		}

		// TCP from the pod to a Go listener on the external host: the
		// listener sees the pod's own address.
		var l net.Listener
		if err := ext.Do(func() (err error) { l, err = net.Listen("tcp", "172.18.0.1:0"); return err }); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var conn net.Conn
		err := p1.Do(func() (err error) {
			conn, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(context.Background(), "tcp", l.Addr().String())
			return err
		})
		if err != nil {
			t.Fatalf("pod dial: %v", err)
		}
		payload := strings.Repeat("x", 200_000) // several segments: offloads are handled
		go func() { _, _ = io.WriteString(conn, payload); conn.Close() }()
		in, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		if got := in.RemoteAddr().(*net.TCPAddr).IP.String(); got != "172.18.0.10" {
			t.Errorf("external host sees %s, want 172.18.0.10", got)
		}
		_ = in.SetReadDeadline(time.Now().Add(10 * time.Second))
		if data, err := io.ReadAll(in); err != nil || len(data) != len(payload) {
			t.Errorf("external host read %d of %d bytes: %v", len(data), len(payload), err)
		}

		dirs = []string{n.Dir, c.Dir}
		procs = append(pids(t, n.Dir, "nb", "sb", "northd"), pids(t, c.Dir, "ovsdb-server", "ovs-vswitchd", "ovn-controller")...)
		namespaces = []string{c.NS, c.ExtNS, ext.Name, p1.Name, p2.Name}
	})
	for _, d := range dirs {
		noLeftovers(t, d, procs, namespaces...)
	}
}

func TestNetnsDo(t *testing.T) {
	t.Parallel()
	a, b := NewNetns(t, "tda"), NewNetns(t, "tdb")
	Link(t, a, "va", []string{"192.0.2.1/24"}, b, "vb", []string{"192.0.2.2/24"})
	var l net.Listener
	if err := b.Do(func() (err error) { l, err = net.Listen("tcp", "192.0.2.2:0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := net.DialTimeout("tcp", l.Addr().String(), 200*time.Millisecond); err == nil {
		t.Error("the namespace's listener is reachable from the test's own namespace")
	}
	var conn net.Conn
	if err := a.Do(func() (err error) { conn, err = net.Dial("tcp", l.Addr().String()); return err }); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := (&Netns{Name: "ovt-no-such-namespace"}).Do(func() error { return nil }); err == nil {
		t.Error("Do in a missing namespace succeeded")
	}
}

// A demo program brings up OVN central and a chassis, plugs a pod into a
// logical switch whose localnet port reaches the external host, and
// pings it; Close tears everything down.
func ExampleStartChassis() {
	p := &Program{}
	err := p.Run(func() {
		n := StartOVN(p)
		ext := NewExternal(p, "172.18.0.1/24")
		c := StartChassis(p, n, ext, ChassisOptions{})
		n.Nbctl("ls-add", "sw0",
			"--", "lsp-add", "sw0", "ln0", "--", "lsp-set-type", "ln0", "localnet",
			"--", "lsp-set-addresses", "ln0", "unknown", "--", "lsp-set-options", "ln0", "network_name=physnet",
			"--", "lsp-add", "sw0", "p1", "--", "lsp-set-addresses", "p1", "0a:58:ac:12:00:0a 172.18.0.10")
		pod := c.AddPod(PodOptions{IfaceID: "p1", MAC: "0a:58:ac:12:00:0a", IP: "172.18.0.10/24", Gateway: "172.18.0.1"})
		c.WaitHV(30 * time.Second)
		fmt.Println(pod.Run(p, "ping", "-c1", "-W5", "172.18.0.1"))
	})
	if err != nil {
		fmt.Println(err)
	}
}
