package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/kubewatch"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/manifests"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// seed003Cluster is what the manifests of Kube-OVN's MetalLB underlay
// guide need around them: three
// Kube-OVN nodes (chassis in ovn.kubernetes.io/chassis, no OVN-Kubernetes
// annotations), the U2O interconnection MAC Kube-OVN's controller writes
// in the Subnet's status, and the Deployment's pods as the endpoint
// controller lists them (two on kube-ovn-worker, one on kube-ovn-worker2).
var seed003Cluster = seed003Node(1) + seed003Node(2) + seed003Node(3) + `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: nginx-lb-abcde
  namespace: default
  labels: {kubernetes.io/service-name: nginx-lb}
addressType: IPv4
ports: [{port: 80, protocol: TCP, name: ""}]
endpoints:
- {addresses: [10.180.204.11], nodeName: kube-ovn-worker, conditions: {ready: true}}
- {addresses: [10.180.204.12], nodeName: kube-ovn-worker, conditions: {ready: true}}
- {addresses: [10.180.204.13], nodeName: kube-ovn-worker2, conditions: {ready: true}}
`

// seed003Node is Kube-OVN node i, kube-ovn-worker[i], Ready.
func seed003Node(i int) string {
	name := "kube-ovn-worker"
	if i > 1 {
		name += strconv.Itoa(i)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %s
  annotations: {ovn.kubernetes.io/chassis: chassis-%d}
status:
  addresses: [{type: InternalIP, address: 172.18.0.%d}]
  conditions: [{type: Ready, status: "True"}]
---
`, name, i, i+1)
}

// seed003Snapshot loads the MetalLB underlay guide's manifests with the cluster around
// them; status, when not empty, is the Subnet's status and ingress
// nginx-lb's LoadBalancer IP (MetalLB's).
func seed003Snapshot(t *testing.T, status, ingress string) desired.Snapshot {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile("testdata/kubeovn/seed003.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if status != "" {
		doc = strings.Replace(doc, "  enableExternalLBAddress: true\n", "  enableExternalLBAddress: true\nstatus: "+status+"\n", 1)
	}
	if ingress != "" {
		doc += "status: {loadBalancer: {ingress: [{ip: " + ingress + "}]}}\n"
	}
	testbed.WriteFile(t, dir, "seed003.yaml", doc)
	testbed.WriteFile(t, dir, "cluster.yaml", seed003Cluster)
	s, _, err := LoadSnapshot(context.Background(), &Config{Manifests: dir}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes) != 3 || len(s.Subnets) != 1 || len(s.EndpointSlices) != 1 {
		t.Fatalf("snapshot: %d nodes, %d subnets, %d slices", len(s.Nodes), len(s.Subnets), len(s.EndpointSlices))
	}
	return s
}

// TestUnderlaySeed003Cluster: with --underlay-lb-mode=metallb and seed
// 003's controller flags, MetalLB's VIP of nginx-lb is a template load
// balancer on underlay-subnet whose backends are each chassis' own pods
// (kube-ovn-worker3 has none: all of them), and ovnedge writes no
// ingress (nor takes the Service into its --lb-pools); standalone gives nginx-lb the subnet's first excluded address
// itself; without the mode the VIP is the gateway routers' as any other.
func TestUnderlaySeed003Cluster(t *testing.T) {
	const lb = "Service_default/nginx-lb_TCP_underlay_underlay-subnet_IPv4"
	const tmpl = "Service__default_nginx_lb__TCP__80__underlay__IPv4"
	owner := lbsvc.ServiceOwner("default", "nginx-lb")
	// A Kube-OVN cluster: no EgressIPs, no OVN-Kubernetes gateway.
	flags := []string{"--enable-ovn-lb-prefer-local", "--ls-ct-skip-dst-lport-ips=false", "--enable-egress-ip=false", "--gateway-flows=false"}

	s := seed003Snapshot(t, "", "10.180.204.252")
	// --lb-pools leaves MetalLB's underlay address alone.
	cs, err := desired.ComputeCluster(s, demoParams(t, append(flags, "--underlay-lb-mode=metallb", "--lb-pools=default=172.18.0.200/29")...), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cs.Ingress["default/nginx-lb"]; ok || len(cs.Events) != 0 {
		t.Errorf("metallb mode: ingress %v, events %v", cs.Ingress, cs.Events)
	}
	st := cs.LB[owner]
	i := slices.IndexFunc(st.LoadBalancers, func(l ovsdbnb.LoadBalancer) bool { return l.Name == lb })
	if i < 0 || st.LoadBalancers[i].VIPs["10.180.204.252:80"] != "^"+tmpl || !slices.Equal(st.LoadBalancers[i].Switches, []string{"underlay-subnet"}) {
		t.Fatalf("no %s on underlay-subnet: %+v", lb, st.LoadBalancers)
	}
	var vars []string
	for _, v := range st.TemplateVars {
		vars = append(vars, v.Chassis+"/"+v.Name+"="+v.Value)
	}
	want := []string{"chassis-1/" + tmpl + "=10.180.204.11:80,10.180.204.12:80", "chassis-2/" + tmpl + "=10.180.204.13:80",
		"chassis-3/" + tmpl + "=10.180.204.11:80,10.180.204.12:80,10.180.204.13:80"}
	if !slices.Equal(vars, want) {
		t.Errorf("template variables\n%v\nwant\n%v", vars, want)
	}
	if on := vipOn(st, "10.180.204.252:80"); !slices.Equal(on, []string{lb}) {
		t.Errorf("the underlay VIP is on %v, want %s alone", on, lb)
	}

	s = seed003Snapshot(t, "", "")
	cs, err = desired.ComputeCluster(s, demoParams(t, append(flags, "--underlay-lb-mode=standalone")...), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ing := cs.Ingress["default/nginx-lb"]; len(ing) != 1 || ing[0].IP != "10.180.204.250" {
		t.Errorf("standalone: ingress %v, events %v", ing, cs.Events)
	}
	if on := vipOn(cs.LB[owner], "10.180.204.250:80"); !slices.Equal(on, []string{lb}) {
		t.Errorf("standalone: the allocated VIP is not programmed: %+v", cs.LB[owner].LoadBalancers)
	}
}

// TestUnderlaySeed003Node: the provider bridge's steering flows of seed
// 003 on kube-ovn-worker (golden; the router MAC is the Subnet's
// u2oInterconnectionMAC, the patch port that of localnet.underlay-subnet),
// none while the patch port is missing or without the MAC (an event says
// why); in standalone mode the one node elected among those with a local
// endpoint answers ARP for the VIP on the underlay interface, and the
// bridge responder never does.
func TestUnderlaySeed003Node(t *testing.T) {
	s := seed003Snapshot(t, "{u2oInterconnectionMAC: '0a:58:0a:b4:cc:fe'}", "10.180.204.252")
	p := demoParams(t, "--enable-egress-ip=false", "--gateway-flows=false", "--underlay-lb-mode=standalone", "--enable-ovn-lb-prefer-local", "--provider-bridge=br-provider",
		"--provider-nic=underlay0", "--provider-vlan=341", "--enable-l2-announce")
	ns, err := desired.ComputeNode(s, p, "kube-ovn-worker")
	if err != nil {
		t.Fatal(err)
	}
	text, err := desired.RenderFlows(desired.NodeState{Sets: ns.Provider})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/render-provider.golden", string(text))
	if len(ns.ProviderMissing) != 0 || len(ns.Events) != 0 {
		t.Errorf("missing %v, events %v", ns.ProviderMissing, ns.Events)
	}

	p.ProviderPorts = func(name string) bool { return name == "underlay0" }
	ns, _ = desired.ComputeNode(s, p, "kube-ovn-worker")
	if len(ns.Provider) != 0 || !slices.Equal(ns.ProviderMissing, []string{"patch-localnet.underlay-subnet-to-br-int"}) {
		t.Errorf("without the patch port: flows %v, missing %v", ns.Provider, ns.ProviderMissing)
	}
	p.ProviderPorts = nil
	ns, _ = desired.ComputeNode(seed003Snapshot(t, "", "10.180.204.252"), p, "kube-ovn-worker")
	if len(ns.Provider) != 0 || len(ns.Events) != 1 || ns.Events[0].Reason != lbsvc.ReasonUnderlayNoRouterMAC {
		t.Errorf("without the router MAC: flows %v, events %v", ns.Provider, ns.Events)
	}

	vip := netip.MustParseAddr("10.180.204.252")
	var owners []string
	for _, n := range []string{"kube-ovn-worker", "kube-ovn-worker2", "kube-ovn-worker3"} {
		ns, _ := desired.ComputeNode(s, p, n)
		if slices.Contains(ns.Announce, vip) {
			t.Errorf("%s answers for the underlay VIP on the bridge", n)
		}
		if slices.Contains(ns.UnderlayAnnounce, vip) {
			owners = append(owners, n)
		}
	}
	if len(owners) != 1 || owners[0] == "kube-ovn-worker3" {
		t.Errorf("underlay VIP announced by %v, want one node with a local endpoint", owners)
	}
}

// vipOn names the load balancers of st that have the VIP key ("ip:port").
func vipOn(st ovsdbnb.State, key string) []string {
	var out []string
	for _, l := range st.LoadBalancers {
		if _, ok := l.VIPs[key]; ok {
			out = append(out, l.Name)
		}
	}
	return out
}

// TestWatchSubnetsOnly: the underlay mode watches Subnets without the
// NetworkAttachmentDefinitions (a Kube-OVN cluster may lack Multus' CRD).
func TestWatchSubnetsOnly(t *testing.T) {
	src := manifests.NewSource("testdata/kubeovn", quiet)
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{UnderlayLBMode: UnderlayMetalLB}
	s, _ := snapshot(t, kubewatch.NewWatcher(src.Clientset, src.Dynamic, quiet, (&Clients{}).watchOptions(cfg)...))
	if len(s.Subnets) != 2 || len(s.NADs) != 0 {
		t.Errorf("%d subnets, %d NADs", len(s.Subnets), len(s.NADs))
	}
}
