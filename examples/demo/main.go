// Command demo runs ovnedge on the manifests beside it against a real,
// local OVN/OVS sandbox and shows what it programmed: `make demo`.
//
// It starts OVN NB+SB+northd and an Open vSwitch bridge br-ex (userspace
// datapath, in network namespaces), creates the OVN-Kubernetes topology
// of the manifests' nodes (ovn_cluster_router, join, GR_<node>, ...),
// runs what `ovnedge sync --once` runs on the manifests (an EgressIP, a
// LoadBalancer Service and an ExternalIP Service), then prints the router
// policies, the gateway routers' NATs, the load balancers, the br-ex flows
// and ovn-traces of the pod's egress packet and of a VIP packet. Everything
// is removed on exit. It needs root and the OVS/OVN packages
// (scripts/install-deps.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// Options say what the demo runs on.
type Options struct {
	// Manifests is the directory of Kubernetes objects.
	Manifests string
	// Node is the node whose br-ex the sandbox's bridge is.
	Node string
	// ClusterSubnet is the pod network, Gateway the external next hop.
	ClusterSubnet, Gateway string
	// Log receives ovnedge's logs.
	Log *slog.Logger
}

func main() {
	manifests := flag.String("manifests", "examples/demo", "directory of the demo's Kubernetes objects")
	verbose := flag.Bool("v", false, "show ovnedge's logs")
	flag.Parse()
	// The sandbox must be removed however the demo ends: a closed stdout
	// (`make demo | head`) is a write error, not a SIGPIPE death, and a
	// hangup or interrupt cancels the work, then the cleanups run.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	r := &testbed.Program{}
	err := r.Run(func() {
		Run(ctx, r, os.Stdout, Options{Manifests: *manifests, Node: "ovn-worker2", ClusterSubnet: "10.244.0.0/16",
			Gateway: "172.18.0.1", Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))})
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// Run builds the sandbox on t, syncs the manifests into it and writes the
// report to out. Failures go to t.Fatalf.
func Run(ctx context.Context, t testbed.T, out io.Writer, o Options) {
	t.Helper()
	testbed.Require(t, "ovsdb-server", "ovs-vswitchd", "ovn-northd", "ovn-nbctl", "ovn-trace", "ovs-ofctl")
	s, _, err := daemon.LoadSnapshot(ctx, &daemon.Config{Manifests: o.Manifests}, o.Log)
	if err != nil {
		t.Fatalf("manifests: %v", err)
	}
	nodes, broken := ovnknode.ParseAll(s.Nodes)
	if len(broken) > 0 {
		t.Fatalf("manifests: nodes without OVN-Kubernetes annotations: %v", broken)
	}
	i := slices.IndexFunc(nodes, func(n ovnknode.Node) bool { return n.Name == o.Node })
	if i < 0 {
		t.Fatalf("manifests: no node %s", o.Node)
	}
	hostIP := nodes[i].Primary[0].String()

	ovn := testbed.StartOVN(t)
	ovs := testbed.StartOVS(t, testbed.OVSOptions{Bridge: "br-ex", Node: o.Node, HostIP: hostIP, ExtIP: o.Gateway + "/24"})
	if err := topology(ctx, ovn.NB, nodes, o); err != nil {
		t.Fatalf("topology: %v", err)
	}
	pod := podPorts(ovn, s.Pods)

	cfg, _, err := daemon.ParseConfig("demo", []string{"--manifests", o.Manifests, "--nb-address", ovn.NB,
		"--ovs-db", ovs.DB, "--ovs-rundir", ovs.RunDir, "--bridge", ovs.Bridge, "--node-name", o.Node,
		"--uplink", ovs.Uplink, "--patch-port", ovs.Patch, "--cluster-subnets", o.ClusterSubnet, "--metrics-address", ""})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if err := daemon.SyncOnce(ctx, cfg, o.Log); err != nil {
		t.Fatalf("ovnedge sync --once: %v", err)
	}
	ovn.Nbctl("--wait=sb", "sync")
	gatewayMACBindings(ovn, nodes, o.Gateway)

	section := func(title, body string) { fmt.Fprintf(out, "\n### %s\n%s\n", title, strings.TrimRight(body, "\n")) }
	fmt.Fprintf(out, "ovnedge synced %s into a sandbox: OVN NB/SB/northd, br-ex of %s (%s)\n", o.Manifests, o.Node, hostIP)
	section("ovn-nbctl lr-policy-list "+ovsdbnb.ClusterRouter, ovn.Nbctl("lr-policy-list", ovsdbnb.ClusterRouter))
	for _, n := range nodes {
		section("ovn-nbctl lr-nat-list GR_"+n.Name, ovn.Nbctl("lr-nat-list", "GR_"+n.Name))
	}
	section("ovn-nbctl lb-list", ovn.Nbctl("lb-list"))
	section("ovs-ofctl dump-flows br-ex (ovnedge's flows of "+o.Node+")", trimLines(ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt())))

	if pod != nil {
		mac := strings.Trim(ovn.Nbctl("get", "Logical_Router_Port", "rtos-"+pod.node, "mac"), `"`)
		section(fmt.Sprintf("ovn-trace: pod %s (%s) -> %s:80, rerouted to the egress node and SNATed", pod.name, pod.ip, o.Gateway),
			keyLines(ovn.Trace("--ct=new", pod.node, fmt.Sprintf(
				`inport == %q && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 40000 && tcp.dst == 80`,
				pod.port, pod.mac, mac, pod.ip, o.Gateway))))
	}
	if vip, port, ok := firstVIP(s.Services); ok {
		n := nodes[0].Name
		mac := strings.Trim(ovn.Nbctl("get", "Logical_Router_Port", "rtoe-GR_"+n, "mac"), `"`)
		section(fmt.Sprintf("ovn-trace: %s -> VIP %s:%d at GR_%s, load-balanced to the backend", o.Gateway, vip, port, n),
			keyLines(ovn.Trace("--ct=new", "ext_"+n, fmt.Sprintf(
				`inport == "breth0_%s" && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 40000 && tcp.dst == %d`,
				n, extMAC, mac, o.Gateway, vip, port))))
		section(fmt.Sprintf("ofproto/trace: an ARP request for VIP %s from the uplink goes to LOCAL (the host), not OVN", vip),
			keyLines(ovs.Trace(fmt.Sprintf("in_port=%d,arp,arp_op=1,arp_tpa=%s", ovs.Ofport(ovs.Uplink), vip))))
	}
	fmt.Fprintln(out, "\nThe sandbox is removed on exit.")
}

// topology creates the OVN-Kubernetes topology of the nodes.
func topology(ctx context.Context, nb string, nodes []ovnknode.Node, o Options) error {
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{nb}, Logger: o.Log})
	if err != nil {
		return err
	}
	defer c.Close()
	topo := ovsdbnb.Topology{ClusterSubnet: o.ClusterSubnet, JoinRouterIP: "100.64.0.1/16"}
	for _, n := range nodes {
		tn, err := ovsdbnb.NodeTopology(n, netip.MustParsePrefix("100.64.0.0/16"), o.Gateway)
		if err != nil {
			return err
		}
		topo.Nodes = append(topo.Nodes, tn)
	}
	return ovsdbnb.EnsureTopology(ctx, c, topo)
}

// podPort is a pod's logical switch port.
type podPort struct{ name, node, port, mac, ip string }

// podPorts adds a logical switch port for every running pod, as
// ovnkube-node would, and returns the first.
func podPorts(ovn *testbed.OVN, pods []*egress.PodInfo) *podPort {
	var first *podPort
	for _, p := range pods {
		if p.Node == "" || len(p.IPs) == 0 {
			continue
		}
		ip := p.IPs[0]
		pp := &podPort{name: p.Namespace + "/" + p.Name, node: p.Node, port: p.Namespace + "_" + p.Name, ip: ip.String(), mac: ovsdbnb.MAC(ip)}
		ovn.Nbctl("lsp-add", pp.node, pp.port, "--", "lsp-set-addresses", pp.port, pp.mac+" "+pp.ip)
		if first == nil {
			first = pp
		}
	}
	return first
}

// firstVIP returns the first LoadBalancer ingress IP (else external IP)
// and its port.
func firstVIP(svcs []*corev1.Service) (string, int32, bool) {
	for _, external := range []bool{false, true} {
		for _, s := range svcs {
			if len(s.Spec.Ports) == 0 {
				continue
			}
			ips := s.Spec.ExternalIPs
			if !external {
				ips = nil
				for _, ing := range s.Status.LoadBalancer.Ingress {
					ips = append(ips, ing.IP)
				}
			}
			if len(ips) > 0 {
				return ips[0], s.Spec.Ports[0].Port, true
			}
		}
	}
	return "", 0, false
}

// extMAC is the external host's MAC as the traces give it.
const extMAC = "02:00:00:00:00:01"

// gatewayMACBindings tells the gateway routers the external gateway's MAC:
// ovn-trace does not resolve it (it ignores Static_MAC_Binding), and would
// otherwise stop at an ARP request instead of showing the SNAT.
func gatewayMACBindings(ovn *testbed.OVN, nodes []ovnknode.Node, gateway string) {
	for _, n := range nodes {
		dp := ovn.Sbctl("--bare", "--columns=_uuid", "find", "Datapath_Binding", "external_ids:name=GR_"+n.Name)
		ovn.Sbctl("create", "MAC_Binding", "datapath="+dp, "logical_port=rtoe-GR_"+n.Name, "ip="+gateway, "mac=\""+extMAC+"\"")
	}
}

func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "\n")
}

// keyLines keeps the lines of a trace a reader looks for: the datapaths
// crossed and the decisions (reroute, NAT, load balancing, output).
func keyLines(trace string) string {
	var out []string
	for _, l := range strings.Split(trace, "\n") {
		lt := strings.TrimSpace(l)
		for _, k := range []string{"ingress(dp=", "egress(dp=", "lr_in_policy", "reroute", "ct_snat", "ct_lb", "snat", "output", "Datapath actions", "bridge(", "Final flow", "LOCAL"} {
			if strings.Contains(lt, k) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
