package e2e

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/testbed"
)

// macRE finds the replying MACs in arping's output.
var macRE = regexp.MustCompile(`\[([0-9a-fA-F:]{17})\]`)

// arpReplies sends count ARP requests for ip from the external client
// and returns the distinct MACs that answered.
func arpReplies(e *Env, ip netip.Addr, count int) []string { return arpRepliesOn(e.Client, ip, count) }

// arpRepliesOn sends count ARP requests for ip from ns's eth0 and returns
// the distinct MACs that answered.
func arpRepliesOn(ns *testbed.Netns, ip netip.Addr, count int) []string {
	out, _ := ns.RunErr("arping", "-c", fmt.Sprint(count), "-w", fmt.Sprint(count+1), "-I", "eth0", ip.String())
	var macs []string
	for _, m := range macRE.FindAllStringSubmatch(out, -1) {
		if mac := strings.ToLower(m[1]); !slices.Contains(macs, mac) {
			macs = append(macs, mac)
		}
	}
	return macs
}

// nodeOfMAC names the node whose breth0 (or second host interface) has
// mac.
func nodeOfMAC(e *Env, mac string) string {
	for _, n := range e.Nodes {
		if strings.EqualFold(n.MAC, mac) || (n.HostMAC != "" && strings.EqualFold(n.HostMAC, mac)) {
			return n.Name
		}
	}
	return "?" + mac
}

// TestARPBypass: without L2 announce, nobody answers ARP for a VIP (the
// bypass flows keep OVN's gateway routers from answering) until the admin
// puts the VIP on a node's host stack (OVN-Kubernetes' guidance, docs/design/external-ip-and-loadbalancer-ingress.md); then that
// node alone answers and the client reaches the Service through it.
func TestARPBypass(t *testing.T) {
	e := shared.With(t)
	vip := netip.MustParseAddr("172.18.0.170")
	createService(t, e, service("shop", "bypass", "web", corev1.ServiceTypeClusterIP, "", vip.String()))
	_, _ = e.Client.RunErr("ip", "route", "del", vip.String()+"/32") // on-link: the client ARPs for the VIP
	e.Eventually(30*time.Second, "the ARP bypass of "+vip.String()+" on every node", func() error {
		for _, n := range e.Nodes {
			if out := n.Ofctl("dump-flows", testbed.ClusterBridge); !strings.Contains(out, "arp_tpa="+vip.String()) {
				return fmt.Errorf("%s: no bypass flow", n.Name)
			}
		}
		return nil
	})
	if macs := arpReplies(e, vip, 2); len(macs) != 0 {
		t.Fatalf("ARP for %s answered by %v with no host holding it", vip, macs)
	}
	n2 := e.Node(w2)
	n2.NS.Run(t, "ip", "addr", "add", vip.String()+"/32", "dev", "lo")
	t.Cleanup(func() { _, _ = n2.NS.RunErr("ip", "addr", "del", vip.String()+"/32", "dev", "lo") })
	e.Client.Run(t, "ip", "neigh", "flush", "dev", "eth0")
	macs := arpReplies(e, vip, 3)
	if len(macs) != 1 || nodeOfMAC(e, macs[0]) != w2 {
		t.Fatalf("ARP for %s answered by %v, want %s's host alone (%s)", vip, macs, w2, n2.MAC)
	}
	pod, client := answers(t, e, e.Client, vip.String()+":80")
	t.Logf("bypass: ARP for %s answered by %s's host only; the connection was answered by %s, which saw %s", vip, w2, pod, client)
	if !strings.HasPrefix(pod, "web-") {
		t.Errorf("answered by %q", pod)
	}
}

// TestL2Announce: with --enable-l2-announce exactly one node answers ARP
// for a VIP; when that node's chassis dies (and the node is NotReady),
// another node takes the VIP over and the client's next connection
// succeeds through it.
func TestL2Announce(t *testing.T) {
	e := shared.With(t)
	e.RestartNodes("--enable-l2-announce")
	t.Cleanup(func() { shared.With(t).RestartNodes() })
	vip := netip.MustParseAddr("172.18.0.171")
	createService(t, e, service("shop", "l2", "web", corev1.ServiceTypeClusterIP, "", vip.String()))
	_, _ = e.Client.RunErr("ip", "route", "del", vip.String()+"/32")
	var owner string
	e.Eventually(30*time.Second, "one node answering ARP for "+vip.String(), func() error {
		macs := arpReplies(e, vip, 2)
		if len(macs) != 1 {
			return fmt.Errorf("answered by %v", macs)
		}
		owner = nodeOfMAC(e, macs[0])
		return nil
	})
	for range 3 { // still exactly one, every time
		if macs := arpReplies(e, vip, 3); len(macs) != 1 || nodeOfMAC(e, macs[0]) != owner {
			t.Fatalf("ARP for %s answered by %v, want %s alone", vip, macs, owner)
		}
	}
	pod, _ := answers(t, e, e.Client, vip.String()+":80")
	t.Logf("L2: %s owns %s; a connection was answered by %s", owner, vip, pod)

	killed := time.Now()
	e.KillNode(owner)
	e.SetNodeReady(owner, false) // as the node lifecycle controller would
	t.Cleanup(func() { shared.With(t).RestoreNode(owner) })
	var next string
	e.Eventually(30*time.Second, "another node answering for "+vip.String(), func() error {
		macs := arpReplies(e, vip, 1)
		if len(macs) != 1 || nodeOfMAC(e, macs[0]) == owner {
			return fmt.Errorf("answered by %v", macs)
		}
		next = nodeOfMAC(e, macs[0])
		return nil
	})
	took := time.Since(killed)
	pod, _ = answers(t, e, e.Client, vip.String()+":80")
	t.Logf("L2 takeover: %s died, %s answers for %s after %v; the next connection was answered by %s",
		owner, next, vip, took.Round(time.Millisecond), pod)
}
