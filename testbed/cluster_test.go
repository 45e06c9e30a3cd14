package testbed

import (
	"strings"
	"testing"
	"time"
)

// TestCluster brings up three nodes and checks the overlay: a pod reaches
// a pod and the management port of other nodes over geneve, and the
// external client reaches the routed client through the router.
func TestCluster(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	if len(c.Nodes) != 3 || c.Nodes[1].Name != "ovn-worker2" {
		t.Fatalf("nodes: %v", c.Nodes)
	}
	a := c.AddPod("ovn-worker", "default", "a", ClusterPodOptions{})
	b := c.AddPod("ovn-worker3", "default", "b", ClusterPodOptions{})
	if a.IP.String() != "10.244.1.3" || b.IP.String() != "10.244.3.3" {
		t.Fatalf("pod IPs %s %s", a.IP, b.IP)
	}
	for _, dst := range []string{b.IP.String(), c.Nodes[1].MgmtIP.String()} {
		if out, err := a.RunErr("ping", "-c2", "-i0.2", "-W2", dst); err != nil || !strings.Contains(out, " 0% packet loss") {
			t.Errorf("pod a -> %s: %v\n%s", dst, err, out)
		}
	}
	if out, err := c.Client.RunErr("ping", "-c1", "-W2", ClusterRemoteClientIP); err != nil {
		t.Errorf("client -> remote client: %v\n%s", err, out)
	}
	c.DeletePod("default", "b")
	if out, err := a.RunErr("ping", "-c1", "-W1", b.IP.String()); err == nil {
		t.Errorf("deleted pod still answers:\n%s", out)
	}
}

// TestClusterNodeRestart crashes a node's ovs-vswitchd (its monitor
// restarts it; CrashVswitchd waits for the tunnel route the testbed puts
// back), then kills the node's chassis and restarts it: each time
// its pods and management port are reachable again over geneve.
func TestClusterNodeRestart(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Nodes: 2})
	a := c.AddPod("ovn-worker", "default", "a", ClusterPodOptions{})
	b := c.AddPod("ovn-worker2", "default", "b", ClusterPodOptions{})
	n := c.Node("ovn-worker2")
	reachable := func() {
		t.Helper()
		for _, dst := range []string{b.IP.String(), n.MgmtIP.String()} {
			Eventually(t, 10*time.Second, func() error {
				_, err := a.RunErr("ping", "-c1", "-W1", dst)
				return err
			})
		}
	}

	crashed := pids(t, n.Dir, "ovs-vswitchd")[0]
	n.CrashVswitchd()
	reachable()
	if pids(t, n.Dir, "ovs-vswitchd")[0] == crashed || !n.Alive() {
		t.Fatal("ovs-vswitchd not restarted by its monitor")
	}

	n.Kill()
	if n.Alive() {
		t.Fatal("alive after Kill")
	}
	if _, err := a.RunErr("ping", "-c1", "-W1", b.IP.String()); err == nil {
		t.Error("pod on a killed node answers")
	}
	n.Restart()
	reachable()
}

// TestClusterIPv6 checks the IPv6 half of the dual-stack plan: pod to pod
// over geneve, pod to a management port, client to the routed client.
func TestClusterIPv6(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Nodes: 2})
	a := c.AddPod("ovn-worker", "default", "a", ClusterPodOptions{})
	b := c.AddPod("ovn-worker2", "default", "b", ClusterPodOptions{})
	if a.IP6.String() != "fd00:10:244:1::3" || b.IP6.String() != "fd00:10:244:2::3" {
		t.Fatalf("pod IPv6 addresses %s %s", a.IP6, b.IP6)
	}
	for _, dst := range []string{b.IP6.String(), c.Nodes[1].MgmtIP6.String()} {
		if out, err := a.RunErr("ping", "-6", "-c2", "-i0.2", "-W2", dst); err != nil || !strings.Contains(out, " 0% packet loss") {
			t.Errorf("pod a -> %s: %v\n%s", dst, err, out)
		}
	}
	if out, err := c.Client.RunErr("ping", "-6", "-c1", "-W2", ClusterRemoteClientIP6); err != nil {
		t.Errorf("client -> remote client: %v\n%s", err, out)
	}
}
