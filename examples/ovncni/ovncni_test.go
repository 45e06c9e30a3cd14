package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/ovnedge/ovnedge/testbed"
)

func TestParseConfig(t *testing.T) {
	const full = `{"cniVersion":"1.0.0","name":"ovn","type":"ovncni","nbAddress":"tcp:10.89.0.1:6641",
		"ovsdb":"unix:/tmp/db.sock","bridge":"br-pods","logicalSwitch":"ovn-worker","mtu":1500,
		"ipam":{"type":"host-local"}}`
	tests := []struct {
		name, conf string
		want       netConf // the fields checked; zero when an error is wanted
		err        string
	}{
		{name: "full", conf: full, want: netConf{NBAddress: "tcp:10.89.0.1:6641", OVSDB: "unix:/tmp/db.sock",
			Bridge: "br-pods", LogicalSwitch: "ovn-worker", MTU: 1500}},
		{name: "defaults", conf: `{"nbAddress":"unix:/run/ovn/ovnnb_db.sock","logicalSwitch":"ovn-worker","ipam":{"type":"host-local"}}`,
			want: netConf{NBAddress: "unix:/run/ovn/ovnnb_db.sock", OVSDB: defaultOVSDB, Bridge: defaultBridge,
				LogicalSwitch: "ovn-worker", MTU: defaultMTU}},
		{name: "RAFT endpoints", conf: `{"nbAddress":"tcp:10.0.0.1:6641, tcp:10.0.0.2:6641","logicalSwitch":"s","ipam":{"type":"static"}}`,
			want: netConf{NBAddress: "tcp:10.0.0.1:6641, tcp:10.0.0.2:6641", OVSDB: defaultOVSDB, Bridge: defaultBridge,
				LogicalSwitch: "s", MTU: defaultMTU}},
		{name: "no nbAddress", conf: `{"logicalSwitch":"s","ipam":{"type":"host-local"}}`, err: `"nbAddress" is required`},
		{name: "no logicalSwitch", conf: `{"nbAddress":"tcp:1.2.3.4:6641","ipam":{"type":"host-local"}}`, err: `"logicalSwitch" is required`},
		{name: "no ipam", conf: `{"nbAddress":"tcp:1.2.3.4:6641","logicalSwitch":"s"}`, err: `"ipam" with a "type" is required`},
		{name: "ssl endpoint", conf: `{"nbAddress":"ssl:1.2.3.4:6641","logicalSwitch":"s","ipam":{"type":"host-local"}}`,
			err: `endpoint "ssl:1.2.3.4:6641": want tcp:HOST:PORT or unix:PATH`},
		{name: "bad mtu", conf: `{"nbAddress":"tcp:1.2.3.4:6641","logicalSwitch":"s","mtu":-1,"ipam":{"type":"host-local"}}`,
			err: `"mtu" -1 out of range`},
		{name: "not JSON", conf: `{"nbAddress":`, err: "parse network config"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig([]byte(tc.conf))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.NBAddress != tc.want.NBAddress || got.OVSDB != tc.want.OVSDB || got.Bridge != tc.want.Bridge ||
				got.LogicalSwitch != tc.want.LogicalSwitch || got.MTU != tc.want.MTU {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestLSPName(t *testing.T) {
	const id = "0123456789abcdef0123"
	tests := []struct {
		name, args, want, err string
	}{
		{name: "pod", args: "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0", want: "default_web-0"},
		{name: "runtime's args", args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=dns;K8S_POD_UID=u;K8S_POD_INFRA_CONTAINER_ID=" + id,
			want: "kube-system_dns"},
		{name: "no args", args: "", want: id},
		{name: "no name", args: "K8S_POD_NAMESPACE=default", want: id},
		{name: "no namespace", args: "K8S_POD_NAME=web-0", want: id},
		{name: "unknown key", args: "K8S_POD_NAME=web-0;OTHER=1", err: "CNI_ARGS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parsePodArgs(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := lspName(p, id); got != tc.want {
				t.Errorf("lspName = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHostVethName(t *testing.T) {
	for id, want := range map[string]string{
		"0123456789abcdef0123456789abcdef": "ovn0123456789ab",
		"abc":                              "ovnabc",
	} {
		if got := hostVethName(id); got != want {
			t.Errorf("hostVethName(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestPodMAC(t *testing.T) {
	ipc := func(cidr string) *current.IPConfig {
		ip, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		return &current.IPConfig{Address: net.IPNet{IP: ip, Mask: n.Mask}}
	}
	tests := []struct {
		name      string
		ips       []*current.IPConfig
		mac, addr string // addr: the port's addresses entry
	}{
		// ovn-kubernetes' own test case of util.IPAddrToHWAddr.
		{name: "IPv4", ips: []*current.IPConfig{ipc("10.1.2.3/24")}, mac: "0a:58:0a:01:02:03",
			addr: "0a:58:0a:01:02:03 10.1.2.3"},
		{name: "dual-stack, IPv6 first", ips: []*current.IPConfig{ipc("fd00:10:244:1::80/64"), ipc("10.244.1.128/24")},
			mac: "0a:58:0a:f4:01:80", addr: "0a:58:0a:f4:01:80 fd00:10:244:1::80 10.244.1.128"},
		// sha256("fd00:10:244:1::80") starts 6f3564a9.
		{name: "IPv6 only", ips: []*current.IPConfig{ipc("fd00:10:244:1::80/64")}, mac: "0a:58:6f:35:64:a9",
			addr: "0a:58:6f:35:64:a9 fd00:10:244:1::80"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mac, err := podMAC(tc.ips)
			if err != nil {
				t.Fatal(err)
			}
			if mac.String() != tc.mac {
				t.Errorf("MAC %s, want %s", mac, tc.mac)
			}
			if got := lspAddresses(mac, tc.ips); got != tc.addr {
				t.Errorf("addresses %q, want %q", got, tc.addr)
			}
		})
	}
	if _, err := podMAC(nil); err == nil {
		t.Error("podMAC(nil): no error")
	}
}

// hostLocal is the IPAM plugin the real test delegates to.
const hostLocal = "/usr/lib/cni/host-local"

// plugin runs the built plugin in a node's network namespace.
type plugin struct {
	bin, nodeNS, conf string
}

// run runs command for containerID with CNI_NETNS netns; it returns
// stdout and, when the plugin fails, an error carrying its output.
// CNI_ARGS start with IgnoreUnknown=1, as containerd's and CRI-O's do:
// host-local rejects the K8S_POD_* keys otherwise.
func (p plugin) run(command, containerID, netns string) (string, error) {
	cmd := exec.Command("ip", "netns", "exec", p.nodeNS, p.bin)
	cmd.Env = append(os.Environ(), "CNI_COMMAND="+command, "CNI_CONTAINERID="+containerID, "CNI_NETNS="+netns,
		"CNI_IFNAME=eth0", "CNI_PATH="+filepath.Dir(hostLocal), "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=x;K8S_POD_NAME=y")
	cmd.Stdin = strings.NewReader(p.conf)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %w\nstdout: %s\nstderr: %s", command, err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// buildPlugin builds this package into a temporary directory.
func buildPlugin(t *testing.T) string {
	t.Helper()
	begin := time.Now()
	bin := filepath.Join(t.TempDir(), "ovncni")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built the plugin in %v", time.Since(begin).Round(time.Millisecond))
	return bin
}

// TestPlugIntoOVN runs the built plugin as a runtime would, on a real
// OVN chassis: ADD gives the pod an address, a port on br-int and a bound
// logical switch port, and the pod reaches the node's management port
// and, by TCP over geneve, a pod on the other node; DEL (three times, the last after the pod's namespace is
// gone) removes it all. An ADD onto a missing switch rolls back.
func TestPlugIntoOVN(t *testing.T) {
	testbed.Require(t, "ovs-vsctl", "ip", "ping", "ethtool", hostLocal)
	cluster := testbed.StartCluster(t, testbed.ClusterOptions{Nodes: 2})
	node := cluster.Nodes[0]
	// A pod on the other node, plugged by the testbed, serving TCP.
	peer := cluster.AddPod(cluster.Nodes[1].Name, "x", "peer", testbed.ClusterPodOptions{})
	peerAddr := serveGreeting(t, peer.Netns, peer.IP)
	dataDir := t.TempDir()
	b := node.Subnet.Addr().As4()
	b[3] = 128
	podIP := netip.AddrFrom4(b)
	conf := func(sw string) string {
		return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"ovn","type":"ovncni","nbAddress":%q,"ovsdb":%q,
			"logicalSwitch":%q,"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q,"rangeStart":%q,
			"rangeEnd":%q,"gateway":%q}]],"routes":[{"dst":"0.0.0.0/0"}]}}`,
			cluster.OVN.NB, node.DB, sw, dataDir, node.Subnet, podIP, podIP.Next(), node.Subnet.Addr().Next())
	}
	p := plugin{bin: buildPlugin(t), nodeNS: node.NS.Name, conf: conf(node.Name)}
	pod := testbed.NewNetns(t, "ocnip")
	netns := "/run/netns/" + pod.Name
	const id, lsp = "c0ffee0123456789abcdef", "x_y"
	host := hostVethName(id)

	begin := time.Now()
	out, err := p.run("ADD", id, netns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ADD took %v (the port up in NB included)", time.Since(begin).Round(time.Millisecond))
	checkResult(t, out, podIP, netns)
	checkPlugged(t, cluster, node, pod, host, lsp, podIP)
	// TCP over geneve to the other node: with TX checksum offload on, the
	// pod's segments would leave with unfilled checksums and be dropped.
	if got, err := pod.Greeting(peerAddr); err != nil || got != "hello" {
		t.Errorf("TCP from the pod to %s on %s: %q, %v", peerAddr, cluster.Nodes[1].Name, got, err)
	}

	for i, nsPath := range []string{netns, netns, netns} {
		if i == 2 {
			pod.Delete(t) // as the runtime does before a late DEL
		}
		begin := time.Now()
		if _, err := p.run("DEL", id, nsPath); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
		t.Logf("DEL #%d took %v", i+1, time.Since(begin).Round(time.Millisecond))
		checkGone(t, cluster, node, host, lsp, filepath.Join(dataDir, "ovn", podIP.String()))
	}

	// ADD onto a switch NB does not have: the error says so and nothing
	// stays behind, the address included.
	p.conf = conf("no-such-switch")
	pod2 := testbed.NewNetns(t, "ocnip")
	const id2 = "deadbeef0123456789"
	out, err = p.run("ADD", id2, "/run/netns/"+pod2.Name)
	if err == nil || !strings.Contains(out, `no logical switch \"no-such-switch\"`) {
		t.Fatalf("ADD onto a missing switch: %v (stdout %s)", err, out)
	}
	checkGone(t, cluster, node, hostVethName(id2), lsp, filepath.Join(dataDir, "ovn", podIP.String()))
	if links := pod2.Run(t, "ip", "-o", "link", "show"); strings.Contains(links, "eth0") {
		t.Errorf("eth0 left in the pod after a failed ADD:\n%s", links)
	}
}

// checkResult checks ADD's result: the address, the routes and the pod
// interface with its MAC.
func checkResult(t *testing.T, out string, podIP netip.Addr, netns string) {
	t.Helper()
	var res current.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("result %q: %v", out, err)
	}
	if len(res.IPs) != 1 || res.IPs[0].Address.IP.String() != podIP.String() || res.IPs[0].Interface == nil {
		t.Fatalf("result IPs %s, want %s on the pod interface", out, podIP)
	}
	iface := res.Interfaces[*res.IPs[0].Interface]
	wantMAC := fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", podIP.As4()[0], podIP.As4()[1], podIP.As4()[2], podIP.As4()[3])
	if iface.Name != "eth0" || iface.Sandbox != netns || iface.Mac != wantMAC {
		t.Errorf("pod interface %+v, want eth0 in %s with MAC %s", *iface, netns, wantMAC)
	}
	if len(res.Routes) != 1 || res.Routes[0].Dst.String() != "0.0.0.0/0" {
		t.Errorf("routes %s", out)
	}
}

// checkPlugged checks the bridge port, the logical switch port (bound),
// the pod's interface and that the pod reaches the node's management
// port over OVN.
func checkPlugged(t *testing.T, cluster *testbed.Cluster, node *testbed.ClusterNode, pod *testbed.Netns, host, lsp string, podIP netip.Addr) {
	t.Helper()
	if got := node.Vsctl("get", "Interface", host, "external_ids:iface-id"); strings.Trim(got, `"`) != lsp {
		t.Errorf("%s iface-id %s, want %s", host, got, lsp)
	}
	mac := fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", podIP.As4()[0], podIP.As4()[1], podIP.As4()[2], podIP.As4()[3])
	want := fmt.Sprintf(`["%s %s"]`, mac, podIP)
	row := cluster.OVN.Nbctl("--columns=up,addresses,port_security,external_ids", "list", "Logical_Switch_Port", lsp)
	for _, w := range []string{"up                  : true", "addresses           : " + want,
		"port_security       : " + want, `external_ids        : {namespace=x, pod="true"}`} {
		if !strings.Contains(row, w) {
			t.Errorf("LSP %s lacks %q:\n%s", lsp, w, row)
		}
	}
	if ports := cluster.OVN.Nbctl("lsp-list", node.Name); !strings.Contains(ports, "("+lsp+")") {
		t.Errorf("switch %s ports lack %s:\n%s", node.Name, lsp, ports)
	}
	if link := pod.Run(t, "ip", "-o", "link", "show", "eth0"); !strings.Contains(link, "mtu 1400") || !strings.Contains(link, mac) {
		t.Errorf("pod eth0: %s", link)
	}
	if k := pod.Run(t, "ethtool", "-k", "eth0"); !strings.Contains(k, "tx-checksumming: off") {
		t.Errorf("pod eth0 still offloads TX checksums:\n%s", k)
	}
	begin := time.Now()
	testbed.Eventually(t, 10*time.Second, func() error {
		_, err := pod.RunErr("ping", "-c1", "-W1", node.MgmtIP.String())
		return err
	})
	t.Logf("pod pinged the management port %s in %v", node.MgmtIP, time.Since(begin).Round(time.Millisecond))
}

// serveGreeting serves a one-line TCP greeting on addr inside ns until
// the test ends, and returns the address it listens on.
func serveGreeting(t *testing.T, ns *testbed.Netns, addr netip.Addr) string {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello\n"))
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

// checkGone checks that the bridge port, the logical switch port and the
// address (host-local's reservation file) are gone.
func checkGone(t *testing.T, cluster *testbed.Cluster, node *testbed.ClusterNode, host, lsp, reservation string) {
	t.Helper()
	if out := node.Vsctl("--bare", "--columns=name", "find", "Interface", "name="+host); out != "" {
		t.Errorf("OVS port %s still there", host)
	}
	if out := cluster.OVN.Nbctl("--bare", "--columns=name", "find", "Logical_Switch_Port", "name="+lsp); out != "" {
		t.Errorf("LSP %s still there", lsp)
	}
	if _, err := os.Stat(reservation); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("address still reserved (%s): %v", reservation, err)
	}
}
