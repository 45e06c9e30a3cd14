package pod_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/lbsvc/agent"
	"github.com/ovnedge/ovnedge/lbsvc/agent/pod"
	"github.com/ovnedge/ovnedge/testbed"
)

// lbPod is the lb-svc pod and its surroundings:
//
//	ext (client, subnet gateway 172.18.0.1/24) --- net1 [pod] eth0 10.16.0.2/24 --- cluster (10.16.0.1/24, ClusterIP 10.96.0.10 on lo)
type lbPod struct {
	ext, pod, cluster *testbed.Netns
}

func newPod(t *testing.T) *lbPod {
	t.Helper()
	testbed.Require(t, "ip", "nft") // nft only to look at the rules
	p := &lbPod{ext: testbed.NewNetns(t, "lbext"), pod: testbed.NewNetns(t, "lbpod"), cluster: testbed.NewNetns(t, "lbclu")}
	testbed.Link(t, p.ext, "eth0", []string{"172.18.0.1/24"}, p.pod, "net1", nil)
	testbed.Link(t, p.cluster, "eth0", []string{"10.16.0.1/24"}, p.pod, "eth0", []string{"10.16.0.2/24"})
	p.pod.Run(t, "ip", "route", "add", "default", "via", "10.16.0.1")
	p.cluster.Run(t, "ip", "addr", "add", "10.96.0.10/32", "dev", "lo")
	// The ClusterIP's stand-in answers with the port and the client
	// address it sees.
	for _, port := range []int{80, 8443} {
		var ln net.Listener
		if err := p.cluster.Do(func() (err error) {
			ln, err = net.Listen("tcp", fmt.Sprintf("10.96.0.10:%d", port))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(c, "cluster-ip:%d from %s\n", port, c.RemoteAddr().(*net.TCPAddr).IP)
				c.Close()
			}
		}()
	}
	return p
}

// get connects from the external namespace to addr and returns the
// first line served.
func (p *lbPod) get(t *testing.T, addr string) (string, error) {
	t.Helper()
	return p.ext.Greeting(addr)
}

func (p *lbPod) apply(t *testing.T, cfg agent.Config) (pod.Status, error) {
	t.Helper()
	var st pod.Status
	err := p.pod.Do(func() (err error) {
		st, err = pod.Apply(context.Background(), cfg)
		return err
	})
	return st, err
}

// annotations writes the downward-API file Kube-OVN's pod annotations
// give the lb-svc pod.
func annotations(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "annotations")
	data := `k8s.v1.cni.cncf.io/networks="kube-system/lb-svc-attachment"
lb-svc-attachment.kube-system.kubernetes.io/cidr="172.18.0.0/24"
lb-svc-attachment.kube-system.kubernetes.io/gateway="172.18.0.1"
lb-svc-attachment.kube-system.kubernetes.io/ip_address="172.18.0.18"
lb-svc-attachment.kube-system.kubernetes.io/logical_switch="attach-subnet"
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAgentInNamespaces(t *testing.T) {
	p := newPod(t)
	cfg := agent.Config{
		Provider: "lb-svc-attachment.kube-system", AnnotationsFile: annotations(t),
		ClusterIP: netip.MustParseAddr("10.96.0.10"),
		Ports:     []agent.Port{{Protocol: "tcp", Port: 80}, {Protocol: "tcp", Port: 8443}},
	}
	st, err := p.apply(t, cfg)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Logf("status: %s", st)
	if !st.Gateway.Reachable || st.Gateway.Attempts != 1 || st.PodGateway != netip.MustParseAddr("10.16.0.1") ||
		st.Address != netip.MustParsePrefix("172.18.0.18/24") || !st.AddressAdded {
		t.Errorf("first Apply: %+v", st)
	}
	for _, port := range []int{80, 8443} {
		got, err := p.get(t, fmt.Sprintf("172.18.0.18:%d", port))
		if want := fmt.Sprintf("cluster-ip:%d from 10.16.0.2", port); err != nil || got != want {
			t.Errorf("client -> LBIP:%d: %q, %v; want %q (DNAT to the ClusterIP, MASQUERADE)", port, got, err, want)
		}
	}
	rules := p.pod.Run(t, "ip", "rule", "show")
	for _, w := range []string{"iif net1 lookup 100", "iif eth0 lookup 100"} {
		if !strings.Contains(rules, w) {
			t.Errorf("no %q in ip rule:\n%s", w, rules)
		}
	}
	routes := p.pod.Run(t, "ip", "route", "show", "table", "100")
	for _, w := range []string{"172.18.0.0/24 dev net1 scope link", "default via 172.18.0.1 dev net1", "10.96.0.10 via 10.16.0.1 dev eth0"} {
		if !strings.Contains(routes, w) {
			t.Errorf("no %q in table 100 (lb-svc.sh's routes):\n%s", w, routes)
		}
	}
	if st, err := p.apply(t, cfg); err != nil || st.Changed() {
		t.Errorf("second Apply changed something: %s, %v", st, err)
	}

	// Port 8443 removed from the Service: its rule goes, 80 still works.
	cfg.Ports = cfg.Ports[:1]
	if st, err := p.apply(t, cfg); err != nil || st.RulesRemoved != 1 || st.RulesAdded != 0 {
		t.Errorf("Apply without 8443: %s, %v; want one rule removed", st, err)
	}
	if nat := p.pod.Run(t, "nft", "list", "chain", "ip", pod.Table, pod.ChainDNAT); strings.Contains(nat, "8443") {
		t.Errorf("rule of the removed port is still there:\n%s", nat)
	}
	if got, err := p.get(t, "172.18.0.18:8443"); err == nil {
		t.Errorf("removed port still reaches the ClusterIP: %q", got)
	}
	if got, err := p.get(t, "172.18.0.18:80"); err != nil || got != "cluster-ip:80 from 10.16.0.2" {
		t.Errorf("port 80 after removing 8443: %q, %v", got, err)
	}

	// A gateway that never answers: bounded attempts, a clear status,
	// and the rules stay programmed (replies now head for the silent
	// gateway, so the client waits until the right one is back).
	bad := cfg
	bad.Gateway = netip.MustParseAddr("172.18.0.254")
	bad.ARPAttempts, bad.ARPTimeout = 2, 200*time.Millisecond
	st, err = p.apply(t, bad)
	if !errors.Is(err, pod.ErrGatewayUnreachable) || st.Gateway.Attempts != 2 || st.Gateway.Reachable {
		t.Errorf("silent gateway: %+v, %v", st.Gateway, err)
	} else {
		t.Logf("silent gateway: %v", err)
	}
	if nat := p.pod.Run(t, "nft", "list", "chain", "ip", pod.Table, pod.ChainDNAT); !strings.Contains(nat, "dport 80 ") {
		t.Errorf("DNAT rule gone after the failed gateway check:\n%s", nat)
	}
	if _, err := p.apply(t, cfg); err != nil {
		t.Fatalf("Apply with the right gateway: %v", err)
	}
	if got, err := p.get(t, "172.18.0.18:80"); err != nil || got != "cluster-ip:80 from 10.16.0.2" {
		t.Errorf("port 80 with the gateway back: %q, %v", got, err)
	}
}

// Run waits for the pod's address annotations, puts back a rule deleted
// behind its back and stops with its context.
func TestRunResyncs(t *testing.T) {
	p := newPod(t)
	path := filepath.Join(t.TempDir(), "annotations")
	if err := os.WriteFile(path, []byte(`k8s.v1.cni.cncf.io/networks="kube-system/lb-svc-attachment"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{Provider: "lb-svc-attachment.kube-system", AnnotationsFile: path,
		ClusterIP: netip.MustParseAddr("10.96.0.10"), Ports: []agent.Port{{Protocol: "tcp", Port: 80}},
		Resync: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.pod.Do(func() error { return pod.Run(ctx, cfg) }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	if out, err := p.pod.RunErr("nft", "list", "table", "ip", pod.Table); err == nil {
		t.Fatalf("rules programmed before the pod had its address:\n%s", out)
	}
	full, err := os.ReadFile(annotations(t))
	if err == nil {
		err = os.WriteFile(path, full, 0o600) // the kubelet refreshes the file
	}
	if err != nil {
		t.Fatal(err)
	}
	rule := `ip daddr 172.18.0.18 tcp dport 80 dnat to 10.96.0.10:80 comment "dnat 172.18.0.18 tcp/80 to 10.96.0.10:80"`
	dnat := func() string {
		out, _ := p.pod.RunErr("nft", "list", "chain", "ip", pod.Table, pod.ChainDNAT)
		return out
	}
	waitFor("the DNAT rule", func() bool { return strings.Contains(dnat(), rule) })
	p.pod.Run(t, "nft", "flush", "chain", "ip", pod.Table, pod.ChainDNAT)
	waitFor("the DNAT rule to come back", func() bool { return strings.Contains(dnat(), rule) })
	if got, err := p.get(t, "172.18.0.18:80"); err != nil || got != "cluster-ip:80 from 10.16.0.2" {
		t.Errorf("client -> LBIP:80: %q, %v", got, err)
	}

	// The pod's address changes (a Service edit re-creates the pod with
	// another one; here the kubelet refreshes the file in place): the
	// agent moves to it and drops the old one.
	moved := strings.ReplaceAll(string(full), `ip_address="172.18.0.18"`, `ip_address="172.18.0.19"`)
	if err := os.WriteFile(path, []byte(moved), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := func() string { out, _ := p.pod.RunErr("ip", "-4", "addr", "show", "dev", "net1"); return out }
	waitFor("net1 to hold 172.18.0.19 only", func() bool {
		a := addrs()
		return strings.Contains(a, "172.18.0.19/24") && !strings.Contains(a, "172.18.0.18/")
	})
	if got, err := p.get(t, "172.18.0.19:80"); err != nil || got != "cluster-ip:80 from 10.16.0.2" {
		t.Errorf("client -> new LBIP:80: %q, %v", got, err)
	}
	if nat := dnat(); strings.Contains(nat, "172.18.0.18") {
		t.Errorf("DNAT of the old address left behind:\n%s", nat)
	}
}
