package helm

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/testbed"
)

// arpBypass: without L2 announce nobody answers ARP for the ExternalIP
// (the node pods' bypass flows keep OVN's gateway routers from answering,
// on every node) until the admin puts it on a node's host stack
// (OVN-Kubernetes' guidance); then that node alone answers and the client,
// with no route to the VIP, reaches the Service through it. The route via
// the first node is back at the end.
func (h *harness) arpBypass(t *testing.T) {
	vipS := vip.String()
	h.eventually(t, wait, "the ARP bypass flow of "+vipS+" on every node", func() error {
		for _, n := range h.cl.Nodes {
			if out := n.Ofctl("dump-flows", testbed.ClusterBridge); !strings.Contains(out, "arp_tpa="+vipS) {
				return fmt.Errorf("%s: no bypass flow", n.Name)
			}
		}
		return nil
	})
	h.cl.Client.Run(t, "ip", "route", "del", vipS+"/32")
	t.Cleanup(func() {
		_, _ = h.cl.Client.RunErr("ip", "route", "replace", vipS+"/32", "via", h.cl.Nodes[0].IP.String())
	})
	owners := func() []string {
		_, _ = h.cl.Client.RunErr("ip", "neigh", "flush", "dev", "eth0")
		w, err := e2e.StartARPWatch(h.cl.Client, "eth0", vip, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		w.Stop()
		return w.Owners()
	}
	if o := owners(); len(o) != 0 {
		t.Fatalf("ARP for %s answered by %v with no host holding it", vip, o)
	}
	n := h.cl.Nodes[len(h.cl.Nodes)-1]
	n.NS.Run(t, "ip", "addr", "add", vipS+"/32", "dev", "lo")
	defer func() { _, _ = n.NS.RunErr("ip", "addr", "del", vipS+"/32", "dev", "lo") }()
	if o := owners(); len(o) != 1 || !strings.EqualFold(o[0], n.MAC) {
		t.Fatalf("ARP for %s answered by %v, want %s's host alone (%s)", vip, o, n.Name, n.MAC)
	}
	var line string
	h.eventually(t, 30*time.Second, "a connection to "+vipS+":80 without a route", func() (err error) {
		line, err = e2e.Reply(h.cl.Client, vipS+":80", 1000, 3*time.Second)
		return err
	})
	if !strings.HasPrefix(line, backendName+" ") {
		t.Errorf("%s:80 answered %q, want %s", vip, line, backendName)
	}
	t.Logf("ARP bypass: nobody answered ARP for %s until it was on %s's lo; then %s alone, and %s answered the client", vip, n.Name, n.Name, backendName)
}

// ndpBypass is arpBypass over IPv6 neighbour discovery for the IPv6
// LoadBalancer address vip6 (its Service's backends the kubelet-run
// netservers): nobody answers a solicitation for it until it is on a
// node's breth0 (Linux answers solicitations only for the receiving
// interface's addresses), then that node alone, and the client connects
// through it.
func (h *harness) ndpBypass(t *testing.T, vip6 string) {
	h.eventually(t, wait, "the NDP bypass flow of "+vip6+" on every node", func() error {
		for _, n := range h.cl.Nodes {
			if out := n.Ofctl("dump-flows", testbed.ClusterBridge); !strings.Contains(out, "nd_target="+vip6) {
				return fmt.Errorf("%s: no bypass flow", n.Name)
			}
		}
		return nil
	})
	_, _ = h.cl.Client.RunErr("ip", "-6", "route", "del", vip6+"/128")
	if o := h.ndpOwners(vip6); len(o) != 0 {
		t.Fatalf("NS for %s answered by %v with no host holding it", vip6, o)
	}
	n := h.cl.Nodes[len(h.cl.Nodes)-1]
	n.NS.Run(t, "ip", "addr", "add", vip6+"/128", "dev", testbed.ClusterBridge, "nodad")
	defer func() { _, _ = n.NS.RunErr("ip", "addr", "del", vip6+"/128", "dev", testbed.ClusterBridge) }()
	if o := h.ndpOwners(vip6); len(o) != 1 || !strings.EqualFold(o[0], n.MAC) {
		t.Fatalf("NS for %s answered by %v, want %s's host alone (%s)", vip6, o, n.Name, n.MAC)
	}
	var line string
	h.eventually(t, 30*time.Second, "a connection to "+vip6+" without a route", func() (err error) {
		line, err = e2e.Reply(h.cl.Client, net.JoinHostPort(vip6, "80"), 1000, 3*time.Second)
		return err
	})
	t.Logf("NDP bypass: nobody answered NS for %s until it was on %s's breth0; then %s alone, and %q answered", vip6, n.Name, n.Name, line)
}

// ndpOwners are the MACs answering the client's neighbour solicitations
// for ip.
func (h *harness) ndpOwners(ip string) []string {
	_, _ = h.cl.Client.RunErr("ip", "-6", "neigh", "flush", "dev", "eth0")
	out, _ := h.cl.Client.RunErr("ndisc6", "-m", "-n", "-r", "1", "-w", "700", ip, "eth0")
	var macs []string
	for l := range strings.SplitSeq(out, "\n") {
		if _, mac, ok := strings.Cut(l, "Target link-layer address:"); ok {
			if mac = strings.ToLower(strings.TrimSpace(mac)); !slices.Contains(macs, mac) {
				macs = append(macs, mac)
			}
		}
	}
	return macs
}
