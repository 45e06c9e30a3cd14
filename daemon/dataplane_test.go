package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/manifests"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/testbed"
)

// loadDemo returns the demo manifests (with edits) as a snapshot and the
// in-memory API holding them.
func loadDemo(t *testing.T, cfg *Config, edits map[string]string) (desired.Snapshot, *Clients) {
	t.Helper()
	cfg.Manifests = demoDir(t, edits)
	s, c, err := LoadSnapshot(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// demoBridge starts a bridge for ovn-worker2 and returns it with the demo
// config (and args) whose node work runs on it.
func demoBridge(t *testing.T, args ...string) (*testbed.OVS, *Config) {
	t.Helper()
	ovs := testbed.StartOVS(t, testbed.OVSOptions{Bridge: "br-ex", Node: "ovn-worker2", HostIP: "172.18.0.3/24"})
	return ovs, demoConfig(t, append([]string{"--ovs-db", ovs.DB, "--ovs-rundir", ovs.RunDir, "--bridge", ovs.Bridge,
		"--node-name", "ovn-worker2", "--uplink", ovs.Uplink, "--patch-port", ovs.Patch}, args...)...)
}

func demoConfig(t *testing.T, args ...string) *Config {
	t.Helper()
	cfg, _, err := ParseConfig("test", append([]string{"--cluster-subnets", "10.244.0.0/16/24", "--metrics-address", ""}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func eipStatus(t *testing.T, c *Clients, name string) string {
	t.Helper()
	u, err := c.Dynamic.Resource(egressv1.Resource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	items, _, _ := unstructured.NestedSlice(u.Object, "status", "items")
	var out []string
	for _, it := range items {
		m := it.(map[string]any)
		out = append(out, m["node"].(string)+"="+m["egressIP"].(string))
	}
	return strings.Join(out, ",")
}

// TestClusterStatusConflict: a conflicting status write is an error (the
// loop retries with backoff) and the retry writes it.
func TestClusterStatusConflict(t *testing.T) {
	cfg := demoConfig(t)
	s, c := loadDemo(t, cfg, nil)
	conflicts := 1
	c.Source.(*manifests.Source).Dynamic.PrependReactor("update", "egressips", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "k8s.ovn.org", Resource: "egressips"}, "egress-prod", errors.New("stale"))
	})
	d := NewDataplane(cfg, c, record.NewFakeRecorder(100), NewMetrics(), quiet)
	defer d.Close()
	if err := d.Cluster(context.Background(), s); !apierrors.IsConflict(err) {
		t.Fatalf("first reconcile: %v, want a conflict", err)
	}
	if err := d.Cluster(context.Background(), s); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := eipStatus(t, c, "egress-prod"); got != "ovn-worker2=172.18.0.44" {
		t.Errorf("status %q", got)
	}
}

// startNB starts OVN with the demo's topology.
func startNB(t *testing.T) *testbed.OVN {
	return startNBWith(t, testbed.OVNOptions{})
}

// startNBWith is startNB with options.
func startNBWith(t *testing.T, opts testbed.OVNOptions) *testbed.OVN {
	ovn := testbed.StartOVNWith(t, opts)
	ctx := context.Background()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{ovn.NB}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := ovsdbnb.EnsureTopology(ctx, c, demoTopology); err != nil {
		t.Fatal(err)
	}
	return ovn
}

// demoTopology is the NB topology of the demo's nodes.
var demoTopology = ovsdbnb.Topology{ClusterSubnet: "10.244.0.0/16", JoinRouterIP: "100.64.0.1/16",
	Nodes: []ovsdbnb.Node{
		{Name: "ovn-worker", Subnet: "10.244.1.0/24", JoinIP: "100.64.0.3/16", ExternalIP: "172.18.0.2/24"},
		{Name: "ovn-worker2", Subnet: "10.244.2.0/24", JoinIP: "100.64.0.4/16", ExternalIP: "172.18.0.3/24"},
	}}

const malformedEgressIP = `apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata:
  name: egress-prod
spec:
  egressIPs: "172.18.0.44"
`

const thirdNode = `apiVersion: v1
kind: Node
metadata:
  name: ovn-worker3
  annotations:
    k8s.ovn.org/node-subnets: '{"default":["10.244.3.0/24"]}'
    k8s.ovn.org/node-primary-ifaddr: '{"ipv4":"172.18.0.4/24"}'
    k8s.ovn.org/node-gateway-router-lrp-ifaddr: '{"ipv4":"100.64.0.5/16"}'
status:
  conditions: [{type: Ready, status: "True"}]
  addresses: [{type: InternalIP, address: 172.18.0.4}]
`

// TestClusterNB runs the leader's work against a real NB: the first pass
// writes the rows and the status, a resync sends nothing, a deleted
// EgressIP's rows go, and a node without GR_<node> is an event and an
// error (retried) while the other owners are written.
func TestClusterNB(t *testing.T) {
	ovn := startNB(t)
	ctx := context.Background()
	cfg := demoConfig(t, "--nb-address", ovn.NB)
	s, c := loadDemo(t, cfg, nil)
	rec := record.NewFakeRecorder(100)
	m := NewMetrics()
	d := NewDataplane(cfg, c, rec, m, quiet)
	defer d.Close()

	if err := d.Cluster(ctx, s); err != nil {
		t.Fatal(err)
	}
	if p := ovn.Nbctl("lr-policy-list", ovsdbnb.ClusterRouter); !strings.Contains(p, "reroute                100.64.0.4") {
		t.Errorf("no reroute to the egress node:\n%s", p)
	}
	if n := ovn.Nbctl("lr-nat-list", "GR_ovn-worker2"); !strings.Contains(n, "172.18.0.44") {
		t.Errorf("no SNAT on GR_ovn-worker2:\n%s", n)
	}
	if got := eipStatus(t, c, "egress-prod"); got != "ovn-worker2=172.18.0.44" {
		t.Errorf("status %q", got)
	}
	ops := gathered(t, m, "ovnedge_nb_operations_total", "op="+"insert")
	if ops == 0 {
		t.Error("nb insert operations not counted")
	}

	if err := d.Cluster(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := d.Verify(ctx, s); err != nil {
		t.Errorf("resync: %v", err)
	}
	if after := gathered(t, m, "ovnedge_nb_operations_total", "op="+"insert"); after != ops {
		t.Errorf("a resync inserted %v rows", after-ops)
	}

	malformed, _ := loadDemo(t, demoConfig(t), map[string]string{"egressip.yaml": malformedEgressIP})
	if err := d.Cluster(ctx, malformed); err != nil {
		t.Fatal(err)
	}
	if p := ovn.Nbctl("lr-policy-list", ovsdbnb.ClusterRouter); !strings.Contains(p, "reroute                100.64.0.4") {
		t.Errorf("a malformed EgressIP lost its programmed reroute:\n%s", p)
	}
	if !strings.Contains(drain(rec), desired.ReasonInvalidObject) {
		t.Error("no event for the malformed EgressIP")
	}

	gone, _ := loadDemo(t, demoConfig(t), map[string]string{"egressip.yaml": ""})
	if err := d.Cluster(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if p := ovn.Nbctl("lr-policy-list", ovsdbnb.ClusterRouter); strings.Contains(p, "reroute                100.64.0.4") {
		t.Errorf("the deleted EgressIP's reroute stays:\n%s", p)
	}
	if n := ovn.Nbctl("lr-nat-list", "GR_ovn-worker2"); strings.Contains(n, "172.18.0.44") {
		t.Errorf("the deleted EgressIP's SNAT stays:\n%s", n)
	}

	third, _ := loadDemo(t, demoConfig(t), map[string]string{"node3.yaml": thirdNode})
	err := d.Cluster(ctx, third)
	var se *ovsdbnb.SyncError
	if !errors.As(err, &se) {
		t.Fatalf("missing GR_ovn-worker3: %v, want a SyncError", err)
	}
	if !strings.Contains(drain(rec), ReasonNBSyncFailed) {
		t.Error("no event for the owner the NB refused")
	}
	if lbs := ovn.Nbctl("lb-list"); !strings.Contains(lbs, "172.18.0.201:443") {
		t.Errorf("the other Services' load balancers were not written:\n%s", lbs)
	}
}

// TestClusterNBReplyQoS: the EgressIP reply-traffic QoS rule goes on
// every node switch of a NB whose schema has the QoS mark action (OVN
// 24.03's); on one without it (the installed 23.03's) it is left out with
// one warning, and everything else is written and verified.
func TestClusterNBReplyQoS(t *testing.T) {
	for _, mark := range []bool{true, false} {
		t.Run(fmt.Sprintf("mark=%v", mark), func(t *testing.T) {
			ovn := startNBWith(t, testbed.OVNOptions{QoSMark: mark})
			ctx := context.Background()
			cfg := demoConfig(t, "--nb-address", ovn.NB)
			s, c := loadDemo(t, cfg, nil)
			var logs strings.Builder
			d := NewDataplane(cfg, c, record.NewFakeRecorder(100), NewMetrics(), slog.New(slog.NewTextHandler(&logs, nil)))
			defer d.Close()
			for range 2 {
				if err := d.Cluster(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Verify(ctx, s); err != nil {
				t.Errorf("resync: %v", err)
			}
			if p := ovn.Nbctl("lr-policy-list", ovsdbnb.ClusterRouter); !strings.Contains(p, "pkt.mark == 42") {
				t.Errorf("no reply-traffic policy:\n%s", p)
			}
			rows := strings.Fields(ovn.Nbctl("--bare", "--columns=_uuid", "list", "QoS"))
			warned := strings.Count(logs.String(), "no QoS mark action")
			if !mark {
				if len(rows) != 0 || warned != 1 {
					t.Errorf("QoS rows %v and %d warnings, want none and one", rows, warned)
				}
				return
			}
			if len(rows) != 1 || warned != 0 {
				t.Fatalf("QoS rows %v and %d warnings, want one row and none", rows, warned)
			}
			if dump := ovn.Dump("QoS", "action"); !strings.Contains(dump, "{mark=42}") {
				t.Errorf("QoS action:\n%s", dump)
			}
			for _, sw := range []string{"ovn-worker", "ovn-worker2"} {
				if got := ovn.Nbctl("--bare", "--columns=qos_rules", "find", "Logical_Switch", "name="+sw); got != rows[0] {
					t.Errorf("switch %s qos_rules %q, want %s", sw, got, rows[0])
				}
			}
		})
	}
}

func drain(rec *record.FakeRecorder) string {
	var b strings.Builder
	for {
		select {
		case e := <-rec.Events:
			b.WriteString(e + "\n")
		default:
			return b.String()
		}
	}
}

// TestNodeFlows runs the node work against a real bridge with the gateway
// flows left to OVN-Kubernetes: the node's egress flows go in with
// ovnedge's own cookie, no Service flow does (ovnkube-node installs them,
// the VIPs' ARP bypass included), another controller's flow stays
// (TestNodeGatewayFlows covers ovnedge's gateway, TestBridgeCoexistOVNKubeNode
// ovnkube-node's flows).
func TestNodeFlows(t *testing.T) {
	ovs, cfg := demoBridge(t, "--gateway-flows=false")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, c := loadDemo(t, cfg, nil)
	m := NewMetrics()
	d := NewDataplane(cfg, c, record.NewFakeRecorder(100), m, quiet)
	defer d.Close()
	ovs.Ofctl("add-flow", ovs.Mgmt(), "cookie=0x77,priority=7,udp,actions=drop")

	if err := d.Node(ctx, s); err != nil {
		t.Fatal(err)
	}
	dump := ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt())
	egress := fmt.Sprintf("cookie=%#x, priority=105", brex.EgressCookie)
	for _, want := range []string{egress, "nat(src=172.18.0.3)", "cookie=0x77"} {
		if !strings.Contains(dump, want) {
			t.Errorf("bridge lacks %q:\n%s", want, dump)
		}
	}
	if strings.Contains(dump, "arp_tpa=") || strings.Contains(dump, "cookie=0xdeff105") {
		t.Errorf("a flow of ovnkube-node's gateway (ARP bypass, its cookie) installed:\n%s", dump)
	}
	if gathered(t, m, "ovnedge_flow_operations_total", "op="+"add") != 4 {
		t.Errorf("flow adds counted %v, want 4", gathered(t, m, "ovnedge_flow_operations_total", "op="+"add"))
	}
	if err := d.Verify(ctx, s); err != nil {
		t.Error(err)
	}
}

// TestNodeGatewayFlows runs the node work with the gateway flows on
// against a real bridge: the bridge MAC comes from the Open_vSwitch
// database (not the node annotation), the base flows take over the new
// bridge's NORMAL flow, Service traffic from the uplink goes to OVN, and
// switching the gateway flows off removes the base flows again.
func TestNodeGatewayFlows(t *testing.T) {
	ovs := testbed.StartOVS(t, testbed.OVSOptions{Bridge: "br-ex", Node: "ovn-worker2", HostIP: "172.18.0.3/24"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := []string{"--ovs-db", ovs.DB, "--ovs-rundir", ovs.RunDir, "--bridge", ovs.Bridge,
		"--node-name", "ovn-worker2", "--uplink", ovs.Uplink, "--patch-port", ovs.Patch}
	cfg := demoConfig(t, args...)
	s, c := loadDemo(t, cfg, nil)
	m := NewMetrics()
	d := NewDataplane(cfg, c, record.NewFakeRecorder(100), m, quiet)
	defer d.Close()
	mac := strings.Trim(ovs.Vsctl("get", "Interface", ovs.Bridge, "mac_in_use"), `"`)
	if mac == "02:42:ac:12:00:03" {
		t.Fatalf("the bridge has the annotation's MAC: the test cannot tell them apart")
	}
	if strings.Contains(ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt()), "cookie=") {
		t.Fatal("a new bridge should hold only the cookie-0 NORMAL flow")
	}

	if err := d.Node(ctx, s); err != nil {
		t.Fatal(err)
	}
	dump := ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt())
	for _, want := range []string{"arp_tpa=172.18.0.200", "nat(src=172.18.0.3)", "tp_dst=30080",
		"priority=50,ip,dl_dst=" + mac, "dl_src=" + mac + ",nw_src=172.18.0.200,tp_src=80"} {
		if !strings.Contains(dump, want) {
			t.Errorf("bridge lacks %q:\n%s", want, dump)
		}
	}
	if n := strings.Count(dump, "cookie=0xdeff105, priority=0 actions=NORMAL") + strings.Count(dump, "cookie=0xdeff105, table=1, priority=0 actions=NORMAL"); n != 2 ||
		strings.Count(dump, "priority=0 actions=NORMAL") != 2 {
		t.Errorf("want the base's NORMAL flows in tables 0 and 1 only, with its cookie:\n%s", dump)
	}
	if gathered(t, m, "ovnedge_flow_operations_total", "op="+"modify") != 1 {
		t.Errorf("flow modifies counted %v, want 1 (the bridge's NORMAL flow)", gathered(t, m, "ovnedge_flow_operations_total", "op="+"modify"))
	}
	if err := d.Verify(ctx, s); err != nil {
		t.Error(err)
	}
	for flow, want := range map[string]string{
		"in_port=" + ovs.Uplink + ",tcp,nw_src=172.18.0.1,nw_dst=172.18.0.200,tp_dst=80":                   fmt.Sprintf("output:%d\n", ovs.Ofport(ovs.Patch)),
		"in_port=" + ovs.Patch + ",tcp,dl_src=" + mac + ",nw_src=172.18.0.200,nw_dst=172.18.0.1,tp_src=80": fmt.Sprintf("output:%d\n", ovs.Ofport(ovs.Uplink)),
		"in_port=" + ovs.Uplink + ",arp,arp_op=1,arp_tpa=172.18.0.201":                                     "LOCAL\n",
	} {
		if tr := ovs.Trace(flow); !strings.Contains(tr, "priority 110") || !strings.Contains(tr, want) {
			t.Errorf("trace %s: want priority 110 and %s:\n%s", flow, want, tr)
		}
	}

	// Gateway flows off in the same process (OVN-Kubernetes takes over):
	// base and Service flows go, the bypass too, the egress flows stay
	// with ovnedge's own cookie.
	d.node.params.GatewayFlows = false
	if err := d.Node(ctx, s); err != nil {
		t.Fatal(err)
	}
	dump = ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt())
	if strings.Contains(dump, "tp_dst=30080") || strings.Contains(dump, "priority=50") || strings.Contains(dump, "arp_tpa=172.18.0.200") ||
		strings.Contains(dump, "cookie=0xdeff105") || !strings.Contains(dump, fmt.Sprintf("cookie=%#x, priority=105,pkt_mark=0x3f0", brex.EgressCookie)) {
		t.Errorf("after switching the gateway flows off:\n%s", dump)
	}
}

// secondaryEgressIP is an EgressIP the leader assigned to ovn-worker2 on
// its secondary host network 192.168.100.0/24.
const secondaryEgressIP = `apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata:
  name: egress-prod
spec:
  egressIPs: ["192.168.100.50"]
  namespaceSelector:
    matchLabels: {env: prod}
status:
  items:
  - {node: ovn-worker2, egressIP: 192.168.100.50}
`

// TestNodeHostEgress: an egress IP on a secondary host network is put on
// the node's link holding that network, and removed with the EgressIP.
func TestNodeHostEgress(t *testing.T) {
	testbed.Require(t, "ip", "sysctl", "nft")
	node := testbed.NewNetns(t, "dhnode")
	peer := testbed.NewNetns(t, "dhpeer")
	testbed.Link(t, node, "eg0", []string{"192.168.100.2/24"}, peer, "p0", []string{"192.168.100.1/24"})
	node.Run(t, "sysctl", "-qw", "net.ipv4.conf.eg0.forwarding=1") // a host egress link forwards, as on a real node
	nodes, err := os.ReadFile("../examples/demo/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withHost := strings.Replace(string(nodes), `k8s.ovn.org/host-cidrs: '["172.18.0.3/24"]'`,
		`k8s.ovn.org/host-cidrs: '["172.18.0.3/24","192.168.100.2/24"]'`, 1)
	edits := map[string]string{"nodes.yaml": withHost, "egressip.yaml": secondaryEgressIP}
	cfg := demoConfig(t, "--node-name", "ovn-worker2", "--host-netns", "/var/run/netns/"+node.Name)
	s, c := loadDemo(t, cfg, edits)
	d := NewDataplane(cfg, c, record.NewFakeRecorder(100), NewMetrics(), quiet)
	defer d.Close()
	ctx := context.Background()

	ns, err := desired.ComputeNode(s, d.cluster.params, "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	if len(ns.Host) != 1 || ns.Host[0].EgressIP.String() != "192.168.100.50" {
		t.Fatalf("host assignments %+v", ns.Host)
	}
	if _, _, err := d.node.host.Converge(ctx, ns.Host); err != nil {
		t.Fatal(err)
	}
	if addrs := node.Run(t, "ip", "-4", "addr", "show", "eg0"); !strings.Contains(addrs, "192.168.100.50") {
		t.Errorf("egress IP not on eg0:\n%s", addrs)
	}
	edits["egressip.yaml"] = ""
	gone, _ := loadDemo(t, demoConfig(t), edits)
	ns, err = desired.ComputeNode(gone, d.cluster.params, "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.node.host.Converge(ctx, ns.Host); err != nil {
		t.Fatal(err)
	}
	if addrs := node.Run(t, "ip", "-4", "addr", "show", "eg0"); strings.Contains(addrs, "192.168.100.50") {
		t.Errorf("egress IP still on eg0 after the EgressIP's deletion:\n%s", addrs)
	}
}

// TestNodeHostEgressRejected: an egress IP the node cannot host (its
// link does not forward) is a Warning event on its EgressIP and blocks
// neither the other egress IP nor the reconcile; a fenced node (host lease
// lost) withdraws its host egress IPs and puts them back with the lease.
func TestNodeHostEgressRejected(t *testing.T) {
	testbed.Require(t, "ip", "sysctl", "nft")
	node := testbed.NewNetns(t, "dhrnode")
	peer := testbed.NewNetns(t, "dhrpeer")
	testbed.Link(t, node, "eg0", []string{"192.168.100.2/24"}, peer, "p0", []string{"192.168.100.1/24"})
	testbed.Link(t, node, "eg1", []string{"192.168.101.2/24"}, peer, "p1", []string{"192.168.101.1/24"})
	node.Run(t, "sysctl", "-qw", "net.ipv4.conf.eg0.forwarding=1")
	node.Run(t, "sysctl", "-qw", "net.ipv4.conf.eg1.forwarding=0")
	nodes, err := os.ReadFile("../examples/demo/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withHost := strings.Replace(string(nodes), `k8s.ovn.org/host-cidrs: '["172.18.0.3/24"]'`,
		`k8s.ovn.org/host-cidrs: '["172.18.0.3/24","192.168.100.2/24","192.168.101.2/24"]'`, 1)
	bad := strings.NewReplacer("egress-prod", "egress-bad", "192.168.100.50", "192.168.101.50").Replace(secondaryEgressIP)
	edits := map[string]string{"nodes.yaml": withHost, "egressip.yaml": secondaryEgressIP + "\n---\n" + bad}
	cfg := demoConfig(t, "--node-name", "ovn-worker2", "--host-netns", "/var/run/netns/"+node.Name, "--egressip-host-backend", "iptables")
	s, c := loadDemo(t, cfg, edits)
	d := NewDataplane(cfg, c, record.NewFakeRecorder(100), NewMetrics(), quiet)
	defer d.Close()
	var fenced bool
	d.hooks.fenced = func() bool { return fenced }
	ctx := context.Background()
	ns, err := desired.ComputeNode(s, d.cluster.params, "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	if len(ns.Host) != 2 {
		t.Fatalf("host assignments %+v", ns.Host)
	}
	events, report, err := d.node.host.Converge(ctx, ns.Host)
	if err != nil {
		t.Fatalf("a rejected assignment failed the converge: %v", err)
	}
	// The node's report (its Node annotation, which the leader reads):
	// hosted and refused, with the reason.
	good, badIP := netip.MustParseAddr("192.168.100.50"), netip.MustParseAddr("192.168.101.50")
	if !slices.Equal(report.Hosted, []netip.Addr{good}) || len(report.Refused) != 1 ||
		!strings.Contains(report.Refused[badIP], string(hostnet.ReasonForwardingDisabled)) {
		t.Errorf("report %s, want %s hosted and %s refused (%s)", report, good, badIP, hostnet.ReasonForwardingDisabled)
	}
	// The leader moves the refused IP away: the node keeps refusing it
	// while its link does not forward, and stops once it does.
	var onlyGood []egress.HostAssignment
	for _, h := range ns.Host {
		if h.EgressIP == good {
			onlyGood = append(onlyGood, h)
		}
	}
	if _, report, _ = d.node.host.Converge(ctx, onlyGood); report.Refused[badIP] == "" {
		t.Errorf("moved away, the refusal of %s was dropped while it still fails: %s", badIP, report)
	}
	node.Run(t, "sysctl", "-qw", "net.ipv4.conf.eg1.forwarding=1")
	if _, report, _ = d.node.host.Converge(ctx, onlyGood); len(report.Refused) != 0 {
		t.Errorf("eg1 forwards now, the node still refuses: %s", report)
	}
	node.Run(t, "sysctl", "-qw", "net.ipv4.conf.eg1.forwarding=0")
	if len(events) != 1 || events[0].Reason != egress.ReasonHostRequirement || events[0].Object.Name != "egress-bad" ||
		!strings.Contains(events[0].Message, "192.168.101.50") {
		t.Errorf("events %v, want one %s on egress-bad", events, egress.ReasonHostRequirement)
	}
	addrs := func() string { return node.Run(t, "ip", "-4", "addr", "show") }
	if a := addrs(); !strings.Contains(a, "192.168.100.50") || strings.Contains(a, "192.168.101.50") {
		t.Errorf("want 192.168.100.50 hosted and 192.168.101.50 not:\n%s", a)
	}
	if rules := node.Run(t, "iptables", "-t", "nat", "-S", hostnet.ChainName); !strings.Contains(rules, "--to-source 192.168.100.50") {
		t.Errorf("iptables backend: no SNAT in %s:\n%s", hostnet.ChainName, rules)
	}
	fenced = true
	if _, _, err := d.node.host.Converge(ctx, ns.Host); err != nil {
		t.Fatal(err)
	}
	if a := addrs(); strings.Contains(a, "192.168.100.50") {
		t.Errorf("fenced node still hosts 192.168.100.50:\n%s", a)
	}
	fenced = false
	if _, _, err := d.node.host.Converge(ctx, ns.Host); err != nil {
		t.Fatal(err)
	}
	if a := addrs(); !strings.Contains(a, "192.168.100.50") {
		t.Errorf("lease back, 192.168.100.50 not hosted again:\n%s", a)
	}
}

// TestClusterRestartRemovesStale: objects deleted while the daemon was
// down lose their rows on the first sync after a restart; a malformed
// object keeps what it had.
func TestClusterRestartRemovesStale(t *testing.T) {
	ovn := startNB(t)
	ctx := context.Background()
	cfg := demoConfig(t, "--nb-address", ovn.NB)
	s, c := loadDemo(t, cfg, nil)
	first := NewDataplane(cfg, c, record.NewFakeRecorder(100), NewMetrics(), quiet)
	if err := first.Cluster(ctx, s); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if lbs := ovn.Nbctl("lb-list"); !strings.Contains(lbs, "10.96.0.10:80") {
		t.Fatalf("no load balancer for Service web:\n%s", lbs)
	}

	down, c2 := loadDemo(t, cfg, map[string]string{"services.yaml": "", "egressip.yaml": malformedEgressIP})
	second := NewDataplane(cfg, c2, record.NewFakeRecorder(100), NewMetrics(), quiet)
	defer second.Close()
	if err := second.Cluster(ctx, down); err != nil {
		t.Fatal(err)
	}
	if lbs := ovn.Nbctl("lb-list"); strings.Contains(lbs, "10.96.0.10:80") {
		t.Errorf("the Service deleted while the daemon was down keeps its load balancer:\n%s", lbs)
	}
	if p := ovn.Nbctl("lr-policy-list", ovsdbnb.ClusterRouter); !strings.Contains(p, "reroute                100.64.0.4") {
		t.Errorf("the malformed EgressIP lost its reroute over the restart:\n%s", p)
	}
}

// TestClusterReadsWrittenStatus: the leader moves an egress IP away from
// an unreachable node and writes the status; the node is back before the
// informer shows the write. Computed from the stale object, whose status
// still names the node, the IP would move back; the leader reads what it
// wrote instead, on the full and on the incremental path.
func TestClusterReadsWrittenStatus(t *testing.T) {
	b, err := os.ReadFile("../examples/demo/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	both := strings.Replace(string(b), "  name: ovn-worker\n", "  name: ovn-worker\n  labels:\n    k8s.ovn.org/egress-assignable: \"\"\n", 1)
	for _, incremental := range []bool{false, true} {
		t.Run(map[bool]string{false: "full", true: "incremental"}[incremental], func(t *testing.T) {
			ovn := startNB(t)
			cfg := demoConfig(t, "--nb-address", ovn.NB)
			stale, c := loadDemo(t, cfg, map[string]string{"nodes.yaml": both, "egressip.yaml": egressIPOn("ovn-worker2")})
			d := NewDataplane(cfg, c, record.NewFakeRecorder(100), NewMetrics(), quiet)
			defer d.Close()
			down := true
			d.hooks.reachable = func(node string) bool { return node != "ovn-worker2" || !down }
			snap := func() desired.Snapshot {
				s := stale
				if incremental {
					s.Changed = &desired.Changes{Reassign: true}
				}
				return s
			}
			if incremental { // the index starts from a full pass
				if err := d.Cluster(context.Background(), stale); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Cluster(context.Background(), snap()); err != nil {
				t.Fatal(err)
			}
			if got := eipStatus(t, c, "egress-prod"); got != "ovn-worker=172.18.0.44" {
				t.Fatalf("status after ovn-worker2 went down: %q", got)
			}
			down = false
			// The informer still shows the object as it was before the write.
			if err := d.Cluster(context.Background(), snap()); err != nil {
				t.Fatal(err)
			}
			if got := eipStatus(t, c, "egress-prod"); got != "ovn-worker=172.18.0.44" {
				t.Errorf("status after ovn-worker2 came back, read from a stale informer: %q, want the egress IP kept on ovn-worker", got)
			}
			if n := ovn.Nbctl("lr-nat-list", "GR_ovn-worker2"); strings.Contains(n, "172.18.0.44") {
				t.Errorf("the egress IP's SNAT moved back to GR_ovn-worker2:\n%s", n)
			}
			if n := ovn.Nbctl("lr-nat-list", "GR_ovn-worker"); !strings.Contains(n, "172.18.0.44") {
				t.Errorf("no SNAT of the egress IP on GR_ovn-worker:\n%s", n)
			}
		})
	}
}
