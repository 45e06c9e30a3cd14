package testbed

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// serveAddr makes ns answer every TCP connection on port with the
// client's address.
func serveAddr(t *testing.T, ns *Netns, name string, port int) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port)); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr())
			_ = c.Close()
		}
	}()
}

// TestUnderlay builds the underlay of Kube-OVN's MetalLB underlay guide on two
// nodes: the client on the
// VLAN reaches underlay pods of both nodes directly (localnet, VLAN 341
// tag), and a VIP of the subnet through the mechanism ovnedge programs: a
// template load balancer on the underlay switch whose backends are each
// chassis' local pods (Chassis_Template_Var) and, on the node the VIP is
// announced from, a br-provider flow sending the VIP's traffic to the
// router port's MAC through the patch port. Only the entering node's pod
// answers, whichever node the VIP is announced from, and it sees the
// client's own address.
func TestUnderlay(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Nodes: 2})
	u := c.AddUnderlay()
	a := u.AddPod("ovn-worker", "default", "a", netip.Addr{})
	b := u.AddPod("ovn-worker2", "default", "b", netip.Addr{})
	if a.IP.String() != "10.180.204.11" || b.IP.String() != "10.180.204.12" || a.LSP() != "a.default" {
		t.Fatalf("pods %s %s %s", a.IP, b.IP, a.LSP())
	}
	for _, p := range []*Pod{a, b} {
		if out, err := u.Client.RunErr("ping", "-c2", "-i0.2", "-W2", p.IP.String()); err != nil {
			t.Errorf("client -> %s: %v\n%s", p.IP, err, out)
		}
		serveAddr(t, p.Netns, p.Name, 80)
	}

	const vip = "10.180.204.252"
	c.nbctl("--", "--id=@lb", "create", "Load_Balancer", "name=underlay", "protocol=tcp",
		`vips={"`+vip+`:80"="^BACKENDS"}`, "options:template=true", "options:address-family=ipv4",
		"--", "add", "Logical_Switch", UnderlaySwitch, "load_balancer", "@lb",
		"--", "create", "Chassis_Template_Var", "chassis=ovn-worker", `variables={BACKENDS="`+a.IP.String()+`:80"}`,
		"--", "create", "Chassis_Template_Var", "chassis=ovn-worker2", `variables={BACKENDS="`+b.IP.String()+`:80"}`)
	c.WaitHV(30 * time.Second)
	for _, p := range []*Pod{a, b} {
		n := c.Node(p.Node)
		n.Ofctl("add-flow", UnderlayBridge, "priority=10000,in_port="+UnderlayNIC+",tcp,nw_dst="+vip+",tp_dst=80 actions=mod_dl_dst:"+
			UnderlayRouterMAC+",output:"+n.Vsctl("get", "Interface", u.Patch, "ofport"))
		u.Client.Run(t, "ip", "neigh", "replace", vip, "lladdr", u.MAC(p.Node), "dev", "eth0")
		for range 3 {
			line, err := u.Client.Greeting(vip + ":80")
			if err != nil {
				t.Fatalf("client -> %s:80 via %s: %v\n%s\n%s", vip, p.Node, err, n.Ofctl("dump-flows", UnderlayBridge), c.OVN.Sbctl("lflow-list", UnderlaySwitch))
			}
			if !strings.HasPrefix(line, p.Name+" "+UnderlayClientIP+":") {
				t.Fatalf("answer %q via %s, want pod %s seeing %s", line, p.Node, p.Name, UnderlayClientIP)
			}
		}
	}
}
