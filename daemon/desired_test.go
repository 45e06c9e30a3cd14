package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/egress/hostspec"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	"github.com/ovnedge/ovnedge/testbed"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// demoDir copies examples/demo's manifests to a temporary directory and
// applies edits: file name -> new content ("" deletes the file).
func demoDir(t *testing.T, edits map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob("../examples/demo/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("demo manifests: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		testbed.WriteFile(t, dir, filepath.Base(f), string(b))
	}
	for name, content := range edits {
		if content == "" {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		testbed.WriteFile(t, dir, name, content)
	}
	return dir
}

func demoSnapshot(t *testing.T, edits map[string]string) desired.Snapshot {
	t.Helper()
	s, _, err := LoadSnapshot(context.Background(), &Config{Manifests: demoDir(t, edits)}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func demoParams(t *testing.T, args ...string) desired.Params {
	t.Helper()
	cfg, _, err := ParseConfig("test", append([]string{"--cluster-subnets", "10.244.0.0/16/24", "--uplink", "eth0"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return ParamsFrom(cfg)
}

const badNode = `apiVersion: v1
kind: Node
metadata:
  name: ovn-worker3
  labels: {k8s.ovn.org/egress-assignable: ""}
  annotations:
    k8s.ovn.org/node-subnets: 'not json'
status:
  conditions: [{type: Ready, status: "True"}]
`

const dupService = `apiVersion: v1
kind: Service
metadata:
  name: web-dup
  namespace: prod
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.12
  clusterIPs: [10.96.0.12]
  selector: {app: web}
  ports:
  - {name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30081}
status:
  loadBalancer:
    ingress:
    - ip: 172.18.0.200
`

const badEgressIP = `apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata:
  name: egress-bad
spec:
  egressIPs: ["300.1.2.3"]
  namespaceSelector:
    matchLabels: {env: prod}
`

// TestComputeCluster checks the leader's desired state of the demo and of
// bad input: a bad node or EgressIP is an event, everything else is as
// without it.
func TestComputeCluster(t *testing.T) {
	for _, tc := range []struct {
		name       string
		edits      map[string]string
		args       []string
		wantEvents []string // reasons
		wantStatus string
		wantIngr   string
	}{
		{name: "demo", wantStatus: "[{ovn-worker2 172.18.0.44}]"},
		{name: "node without annotations", edits: map[string]string{"bad-node.yaml": badNode},
			wantEvents: []string{desired.ReasonInvalidNode}, wantStatus: "[{ovn-worker2 172.18.0.44}]"},
		{name: "invalid egress IP", edits: map[string]string{"bad-eip.yaml": badEgressIP},
			wantEvents: []string{egress.ReasonInvalidEgressIP}, wantStatus: "[{ovn-worker2 172.18.0.44}]"},
		// In manifests mode the younger Service is the later in file
		// order (the source sets creationTimestamp as it creates them).
		{name: "conflicting LoadBalancer IP", edits: map[string]string{"zz-dup.yaml": dupService},
			wantEvents: []string{ipam.ReasonDuplicate}, wantStatus: "[{ovn-worker2 172.18.0.44}]"},
		{name: "egress IPs off", args: []string{"--enable-egress-ip=false"}, wantStatus: ""},
		{name: "LB IPAM keeps an ingress inside its pool", args: []string{"--lb-pools", "pub=172.18.0.192/26"},
			wantStatus: "[{ovn-worker2 172.18.0.44}]"},
		{name: "LB IPAM replaces an ingress outside its pool", args: []string{"--lb-pools", "pub=172.18.0.208/29"},
			wantStatus: "[{ovn-worker2 172.18.0.44}]", wantIngr: "172.18.0.209"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := desired.ComputeCluster(demoSnapshot(t, tc.edits), demoParams(t, tc.args...), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var reasons []string
			for _, e := range cs.Events {
				reasons = append(reasons, e.Reason)
			}
			for _, r := range tc.wantEvents {
				if !slices.Contains(reasons, r) {
					t.Errorf("events %v lack %s", cs.Events, r)
				}
			}
			if got := fmtStatus(cs); got != tc.wantStatus {
				t.Errorf("egress-prod status %s, want %s", got, tc.wantStatus)
			}
			ing := cs.Ingress["prod/web"]
			if tc.wantIngr == "" && ing != nil || tc.wantIngr != "" && (len(ing) != 1 || ing[0].IP != tc.wantIngr) {
				t.Errorf("prod/web ingress %v, want %q", ing, tc.wantIngr)
			}
			if len(cs.LB[ovsdbnb.Owner{Type: "Service", Name: "prod/web"}].LoadBalancers) == 0 {
				t.Errorf("no load balancer for prod/web")
			}
			for o, st := range cs.LB {
				for _, lb := range st.LoadBalancers {
					if slices.Contains(lb.Routers, "GR_ovn-worker3") {
						t.Errorf("%s: load balancer %s on the gateway router of a node without annotations", o, lb.Name)
					}
					if o.Name == "prod/web-dup" && strings.Contains(fmt.Sprint(lb.VIPs), "172.18.0.200") {
						t.Errorf("the younger Service took VIP 172.18.0.200: %v", lb.VIPs)
					}
				}
			}
		})
	}
}

func fmtStatus(cs desired.ClusterState) string {
	items, ok := cs.Status["egress-prod"]
	if !ok {
		return ""
	}
	var b strings.Builder
	b.WriteString("[")
	for i, it := range items {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString("{" + it.Node + " " + it.EgressIP + "}")
	}
	return b.String() + "]"
}

// TestComputeNode checks one node's flow sets and that bad annotations
// keep the programmed egress flows instead of deleting them, with the
// gateway flows left to OVN-Kubernetes: no Service flow (ovnkube-node
// installs them, the ARP bypass included) and the egress flows with
// ovnedge's own cookie (TestComputeNodeGateway covers the default).
func TestComputeNode(t *testing.T) {
	p := demoParams(t, "--gateway-flows=false", "--enable-l2-announce")
	ns, err := desired.ComputeNode(demoSnapshot(t, nil), p, "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	if len(ns.Sets) != 1 || len(ns.Sets[desired.OwnerEgressFlows]) != 4 {
		t.Errorf("flow sets %v, want the egress flows only", ns.Sets)
	}
	for _, f := range ns.Sets[desired.OwnerEgressFlows] {
		if f.Cookie != brex.EgressCookie {
			t.Errorf("egress flow %v: want ovnedge's cookie %#x beside ovnkube-node's gateway", f, brex.EgressCookie)
		}
	}
	// Every VIP is announced by exactly one of the two Ready nodes.
	other, err := desired.ComputeNode(demoSnapshot(t, nil), p, "ovn-worker")
	if err != nil {
		t.Fatal(err)
	}
	announced := append(slices.Clone(ns.Announce), other.Announce...)
	slices.SortFunc(announced, netip.Addr.Compare)
	if want := []netip.Addr{netip.MustParseAddr("172.18.0.200"), netip.MustParseAddr("172.18.0.201")}; !slices.Equal(announced, want) {
		t.Errorf("announced VIPs %v, want each of %v once", announced, want)
	}
	if _, err := desired.ComputeNode(demoSnapshot(t, nil), p, "nope"); err == nil {
		t.Error("an unknown node must be an error")
	}

	bad, err := desired.ComputeNode(demoSnapshot(t, map[string]string{"bad-node.yaml": badNode}), p, "ovn-worker3")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(bad.Keep, desired.OwnerEgressFlows) || len(bad.Events) != 1 {
		t.Fatalf("bad node: keep %v, events %v", bad.Keep, bad.Events)
	}
	var prog ovsflow.Program
	if err := ns.Update(&prog); err != nil {
		t.Fatal(err)
	}
	if err := prog.Set("someone-else", []ovsflow.Flow{{Priority: 5}}); err != nil {
		t.Fatal(err)
	}
	bad.Sets = map[string][]ovsflow.Flow{} // and the Services are gone
	if err := bad.Update(&prog); err != nil {
		t.Fatal(err)
	}
	if got := prog.Owners(); !slices.Equal(got, []string{desired.OwnerEgressFlows, "someone-else"}) {
		t.Errorf("owners after update %v: egress kept, services deleted, others untouched", got)
	}
}

const nodeWithoutGateway = `apiVersion: v1
kind: Node
metadata:
  name: ovn-worker3
  annotations:
    k8s.ovn.org/node-subnets: '{"default":["10.244.3.0/24"]}'
    k8s.ovn.org/node-primary-ifaddr: '{"ipv4":"172.18.0.4/24"}'
    k8s.ovn.org/node-gateway-router-lrp-ifaddr: '{"ipv4":"100.64.0.5/16"}'
status:
  conditions: [{type: Ready, status: "True"}]
`

const hostNetworkService = `apiVersion: v1
kind: Service
metadata: {name: ingress, namespace: kube-system}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  clusterIP: 10.96.0.20
  ports: [{name: https, protocol: TCP, port: 443, targetPort: 8443, nodePort: 31443}]
status:
  loadBalancer: {ingress: [{ip: 172.18.0.202}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ingress-a
  namespace: kube-system
  labels: {kubernetes.io/service-name: ingress}
addressType: IPv4
endpoints:
- {addresses: [172.18.0.3], conditions: {ready: true}, nodeName: ovn-worker2}
ports: [{name: https, protocol: TCP, port: 8443}]
`

// TestComputeNodeGateway checks the shared gateway flows of a node: base
// and per-Service owners, the bridge MAC from --bridge-mac or the
// l3-gateway-config annotation, and what stays when the node lacks one.
func TestComputeNodeGateway(t *testing.T) {
	s := demoSnapshot(t, map[string]string{"ingress.yaml": hostNetworkService, "node3.yaml": nodeWithoutGateway})
	ns, err := desired.ComputeNode(s, demoParams(t), "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	count := func(owner, substr string) int {
		n := 0
		for _, f := range ns.Sets[owner] {
			if strings.Contains(f.String(), substr) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		owner, substr string
		want          int
	}{
		{desired.OwnerBaseFlows, "dl_dst=02:42:ac:12:00:03", 3}, // the annotation's MAC
		{desired.OwnerBaseFlows, "0xdeff105, priority=0 actions=NORMAL", 1},
		{desired.OwnerEgressFlows, "priority=", 4},
		{desired.OwnerEgressFlows, "cookie=0xdeff105,", 4}, // OVN-Kubernetes' cookie with the gateway flows
		{"service/prod/web", "priority=110", 6},            // ARP, ICMP, VIP in/out, NodePort in/out
		{"service/prod/api", "priority=110", 4},
		{"service/kube-system/ingress", "nat(dst=172.18.0.3:8443)", 2}, // NodePort and VIP to the host endpoint
		{"service/kube-system/ingress", "table=6, priority=110 actions=LOCAL", 1},
	} {
		if got := count(c.owner, c.substr); got != c.want {
			t.Errorf("%s: %d flows with %q, want %d: %v", c.owner, got, c.substr, c.want, ns.Sets[c.owner])
		}
	}
	if len(ns.Keep) != 0 || len(ns.Events) != 0 {
		t.Errorf("keep %v, events %v", ns.Keep, ns.Events)
	}
	// On ovn-worker the host endpoint is remote: the ingress goes to OVN.
	other, err := desired.ComputeNode(s, demoParams(t), "ovn-worker")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range other.Sets["service/kube-system/ingress"] {
		if strings.Contains(f.String(), "ct(") {
			t.Errorf("ovn-worker DNATs to a host endpoint it does not have: %s", f)
		}
	}

	// --bridge-mac wins over the annotation.
	withMAC, err := desired.ComputeNode(s, demoParams(t, "--bridge-mac", "0a:0b:0c:0d:0e:0f"), "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	if f := withMAC.Sets[desired.OwnerBaseFlows][0].String(); !strings.Contains(f, "0a:0b:0c:0d:0e:0f") {
		t.Errorf("--bridge-mac not used: %s", f)
	}

	// No MAC anywhere: the base and the Services' flows stay as they are.
	bare, err := desired.ComputeNode(s, demoParams(t), "ovn-worker3")
	if err != nil {
		t.Fatal(err)
	}
	wantKeep := []string{desired.OwnerBaseFlows, "service/kube-system/ingress", "service/prod/api", "service/prod/web"}
	keep := slices.Sorted(slices.Values(bare.Keep))
	if !slices.Equal(keep, wantKeep) || len(bare.Events) != 1 || !strings.Contains(bare.Events[0].Message, "no bridge MAC") {
		t.Errorf("node without a bridge MAC: keep %v (want %v), events %v", keep, wantKeep, bare.Events)
	}
	if _, ok := bare.Sets[desired.OwnerEgressFlows]; !ok {
		t.Errorf("node without a bridge MAC lost its egress flows")
	}
	var prog ovsflow.Program
	if err := ns.Update(&prog); err != nil {
		t.Fatal(err)
	}
	if err := bare.Update(&prog); err != nil {
		t.Fatal(err)
	}
	if got := prog.Owners(); !slices.Contains(got, desired.OwnerBaseFlows) || !slices.Contains(got, "service/prod/web") {
		t.Errorf("owners after an update without a bridge MAC: %v", got)
	}
	// Gateway flows off: the base and Service owners go (ovnkube-node
	// programs them), the egress flows take ovnedge's own cookie.
	off, err := desired.ComputeNode(s, demoParams(t, "--gateway-flows=false"), "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Update(&prog); err != nil {
		t.Fatal(err)
	}
	if got := prog.Owners(); !slices.Equal(got, []string{desired.OwnerEgressFlows}) {
		t.Errorf("gateway flows off: owners %v, want the egress flows only", got)
	}
}

// TestRenderGolden pins `ovnedge render` of the demo manifests.
func TestRenderGolden(t *testing.T) {
	dir := demoDir(t, nil)
	for _, what := range []string{"flows", "nb"} {
		var out, errOut strings.Builder
		code := Main(context.Background(), []string{"render", "--manifests", dir, "--node", "ovn-worker2",
			"--what", what, "--cluster-subnets", "10.244.0.0/16/24"}, &out, &errOut)
		if code != 0 {
			t.Fatalf("render --what %s: exit %d: %s", what, code, errOut.String())
		}
		golden(t, "testdata/render-"+what+".golden", out.String())
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	flowtest.Golden(t, path, []byte(got))
}

const assignedEgressIP = `apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata:
  name: egress-prod
spec:
  egressIPs: ["172.18.0.44"]
  namespaceSelector:
    matchLabels: {env: prod}
status:
  items: [{node: ovn-worker, egressIP: 172.18.0.44}]
`

// TestComputeNodeBGP: every ready node announces the ETP=Cluster VIPs,
// only nodes with a ready local endpoint the ETP=Local one, a node that
// is not ready none; egress IPs go with their node when asked.
func TestComputeNodeBGP(t *testing.T) {
	snap := demoSnapshot(t, map[string]string{"ingress.yaml": hostNetworkService, "egressip.yaml": assignedEgressIP})
	p := demoParams(t, "--gateway-flows=false", "--enable-bgp", "--bgp-announce-egress-ips")
	routes := func(node string, p desired.Params) []netip.Prefix {
		ns, err := desired.ComputeNode(snap, p, node)
		if err != nil {
			t.Fatal(err)
		}
		return ns.Routes
	}
	for node, want := range map[string][]netip.Prefix{
		"ovn-worker":  prefixes("172.18.0.44/32", "172.18.0.200/32", "172.18.0.201/32"),
		"ovn-worker2": prefixes("172.18.0.200/32", "172.18.0.201/32", "172.18.0.202/32"),
	} {
		if got := routes(node, p); !slices.Equal(got, want) {
			t.Errorf("%s announces %v, want %v", node, got, want)
		}
	}
	ns, _ := desired.ComputeNode(snap, p, "ovn-worker")
	if ns.RouterID != netip.MustParseAddr("172.18.0.2") {
		t.Errorf("router ID %v, want the node's InternalIP", ns.RouterID)
	}
	p.Alive = func(n string) bool { return n != "ovn-worker2" }
	if got := routes("ovn-worker2", p); len(got) != 0 {
		t.Errorf("a dead node announces %v", got)
	}
	off := demoParams(t, "--gateway-flows=false")
	if got := routes("ovn-worker", off); got != nil {
		t.Errorf("without --enable-bgp: routes %v", got)
	}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// A node whose k8s.ovn.org annotations break keeps its last good parse for
// every consumer: its per-node load balancers stay as they were (egress
// IPs on or off), and a Warning event on the node names the node and the
// annotation. Without a last good parse (a node never seen whole) it is
// skipped.
func TestComputeClusterLastGoodNode(t *testing.T) {
	for _, args := range [][]string{nil, {"--enable-egress-ip=false"}} {
		t.Run(fmt.Sprint(args), func(t *testing.T) {
			p := demoParams(t, args...)
			good := demoSnapshot(t, nil)
			before, err := desired.ComputeCluster(good, p, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			bad := good
			bad.Nodes = slices.Clone(good.Nodes)
			i := slices.IndexFunc(bad.Nodes, func(n *corev1.Node) bool { return n.Name == "ovn-worker2" })
			bad.Nodes[i] = bad.Nodes[i].DeepCopy()
			bad.Nodes[i].Annotations[ovnknode.AnnotationNodeSubnets] = "not json"

			after, err := desired.ComputeCluster(bad, p, nil, before.Nodes)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(after.LB, before.LB) {
				t.Errorf("load balancers changed when ovn-worker2's annotations broke:\n%v\nwant\n%v", after.LB, before.LB)
			}
			ev := slices.IndexFunc(after.Events, func(e event.Event) bool { return e.Reason == desired.ReasonInvalidNode })
			if ev < 0 || after.Events[ev].Object.Name != "ovn-worker2" ||
				!strings.Contains(after.Events[ev].Message, "ovn-worker2") ||
				!strings.Contains(after.Events[ev].Message, ovnknode.AnnotationNodeSubnets) ||
				!strings.Contains(after.Events[ev].Message, "load balancers") {
				t.Errorf("events %v, want a %s event on ovn-worker2 naming %s", after.Events, desired.ReasonInvalidNode, ovnknode.AnnotationNodeSubnets)
			}
			again, err := desired.ComputeCluster(bad, p, nil, after.Nodes)
			if err != nil || !reflect.DeepEqual(again.LB, before.LB) {
				t.Errorf("second computation with the node still broken: load balancers changed (%v)", err)
			}

			fresh, err := desired.ComputeCluster(bad, p, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			for o, st := range fresh.LB {
				for _, lb := range st.LoadBalancers {
					if slices.Contains(lb.Routers, "GR_ovn-worker2") {
						t.Errorf("%s: load balancer %s on a node never parsed", o, lb.Name)
					}
				}
			}
		})
	}
}

// TestLBClassOurs: which Services ovnedge's LB IPAM assigns (as MetalLB's
// --lb-class decides), and that with --underlay-lb-mode=metallb the
// Services without a class are MetalLB's.

// A node whose own k8s.ovn.org annotations break keeps computing its
// egress and gateway flows from its last good parse (Params.LastGood, the
// NodeState.Self of the previous computation): the bridge's flows stay as
// they were, not rebuilt from its status address, and a Warning event on
// the node names the annotation. Without a last good parse the egress
// flows are kept as they are and the event says so.
func TestComputeNodeLastGoodNode(t *testing.T) {
	p := demoParams(t, "--uplink", "eth1", "--patch-port", "patch-breth0")
	good := demoSnapshot(t, nil)
	i := slices.IndexFunc(good.Nodes, func(n *corev1.Node) bool { return n.Name == "ovn-worker2" })
	// A status address other than node-primary-ifaddr: what the
	// gateway flows would fall back to.
	good.Nodes[i] = good.Nodes[i].DeepCopy()
	good.Nodes[i].Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.99"}}
	before, err := desired.ComputeNode(good, p, "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	if before.Self == nil || len(before.Sets[desired.OwnerEgressFlows]) == 0 || len(before.Sets[desired.OwnerBaseFlows]) == 0 {
		t.Fatalf("good node: Self %v, %d egress and %d base flows", before.Self, len(before.Sets[desired.OwnerEgressFlows]), len(before.Sets[desired.OwnerBaseFlows]))
	}
	bad := good
	bad.Nodes = slices.Clone(good.Nodes)
	bad.Nodes[i] = good.Nodes[i].DeepCopy()
	bad.Nodes[i].Annotations[ovnknode.AnnotationNodeSubnets] = "not json"

	p.LastGood = before.Self
	after, err := desired.ComputeNode(bad, p, "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after.Sets, before.Sets) {
		for o := range before.Sets {
			if !reflect.DeepEqual(after.Sets[o], before.Sets[o]) {
				t.Errorf("%s's flows changed when the node's annotations broke:\n%v\nwant\n%v", o, after.Sets[o], before.Sets[o])
			}
		}
	}
	if after.Self != before.Self {
		t.Errorf("Self %v, want the last good parse", after.Self)
	}
	wantEvent := func(ns desired.NodeState, words ...string) {
		t.Helper()
		ev := slices.IndexFunc(ns.Events, func(e event.Event) bool { return e.Reason == desired.ReasonInvalidNode })
		if ev < 0 || ns.Events[ev].Object.Name != "ovn-worker2" {
			t.Fatalf("events %v, want a %s event on ovn-worker2", ns.Events, desired.ReasonInvalidNode)
		}
		for _, w := range append(words, "ovn-worker2", ovnknode.AnnotationNodeSubnets) {
			if !strings.Contains(ns.Events[ev].Message, w) {
				t.Errorf("event %q does not say %q", ns.Events[ev].Message, w)
			}
		}
	}
	wantEvent(after, "last good")

	p.LastGood = nil
	fresh, err := desired.ComputeNode(bad, p, "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Self != nil || !slices.Contains(fresh.Keep, desired.OwnerEgressFlows) {
		t.Errorf("no last good parse: Self %v, Keep %v; want none and the egress flows kept", fresh.Self, fresh.Keep)
	}
	wantEvent(fresh, "kept as they are")

	// A Kube-OVN node (no k8s.ovn.org annotations) without EgressIPs is
	// not broken: no event, gateway flows from its status address.
	off := demoParams(t, "--enable-egress-ip=false", "--uplink", "eth1", "--patch-port", "patch-breth0", "--bridge-mac", "02:42:ac:12:00:03")
	plain := good
	plain.Nodes = slices.Clone(good.Nodes)
	plain.Nodes[i] = good.Nodes[i].DeepCopy()
	plain.Nodes[i].Annotations = nil
	ns, err := desired.ComputeNode(plain, off, "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(ns.Events, func(e event.Event) bool { return e.Reason == desired.ReasonInvalidNode }) || len(ns.Sets[desired.OwnerBaseFlows]) == 0 {
		t.Errorf("node without annotations: events %v, %d base flows; want no %s event and base flows", ns.Events, len(ns.Sets[desired.OwnerBaseFlows]), desired.ReasonInvalidNode)
	}
}

// egressIPOn is the demo's EgressIP with its egress IP assigned to node.
func egressIPOn(node string) string {
	return `apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: egress-prod}
spec:
  egressIPs: ["172.18.0.44"]
  namespaceSelector: {matchLabels: {env: prod}}
status:
  items: [{node: ` + node + `, egressIP: 172.18.0.44}]
`
}

// TestComputeNodeFence: a node holds the OVN-hosted egress IPs its
// EgressIPs' status gives it; once one moves away its fence flows are
// owner OwnerEgressFence, and they go with the fence.
func TestComputeNodeFence(t *testing.T) {
	p := demoParams(t, "--gateway-flows=false")
	eip := netip.MustParseAddr("172.18.0.44")
	compute := func(on, node string) desired.NodeState {
		t.Helper()
		ns, err := desired.ComputeNode(demoSnapshot(t, map[string]string{"egressip.yaml": egressIPOn(on)}), p, node)
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	if got := compute("ovn-worker2", "ovn-worker2").Held; !slices.Equal(got, []netip.Addr{eip}) {
		t.Errorf("held %v, want %v", got, eip)
	}
	if got := compute("ovn-worker2", "ovn-worker").Held; len(got) != 0 {
		t.Errorf("another node holds %v", got)
	}
	now := time.Now()
	var f egress.Fence
	f.Update(now, compute("ovn-worker2", "ovn-worker2").Held)
	moved := compute("ovn-worker", "ovn-worker2")
	fenced, _ := f.Update(now.Add(time.Second), moved.Held)
	if err := moved.Fence(p.Patch, fenced); err != nil {
		t.Fatal(err)
	}
	var prog ovsflow.Program
	if err := moved.Update(&prog); err != nil {
		t.Fatal(err)
	}
	if got := prog.Flows(desired.OwnerEgressFence); len(got) != 1 || got[0].Match.ARPSpa != netip.PrefixFrom(eip, 32) {
		t.Fatalf("fence flows %v", got)
	}
	if err := moved.Fence(p.Patch, nil); err != nil {
		t.Fatal(err)
	}
	if err := moved.Update(&prog); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(prog.Owners(), desired.OwnerEgressFence) {
		t.Errorf("fence still programmed after it ended: %v", prog.Owners())
	}
}

// TestComputeNodeHostGuard: a node with a secondary host network in its
// host-cidrs guards it for the cluster's pod subnets (whether or not an
// egress IP is assigned to it); one without, or with
// --egressip-host-guard=false or EgressIPs off, guards nothing.
func TestComputeNodeHostGuard(t *testing.T) {
	nodes, err := os.ReadFile("../examples/demo/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secondary := strings.Replace(string(nodes), `host-cidrs: '["172.18.0.3/24"]'`, `host-cidrs: '["172.18.0.3/24","172.19.0.3/24","fd00:19::3/64"]'`, 1)
	snap := demoSnapshot(t, map[string]string{"nodes.yaml": secondary})
	want := hostspec.Guard{PodSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		Networks: []netip.Prefix{netip.MustParsePrefix("172.19.0.0/24"), netip.MustParsePrefix("fd00:19::/64")}}
	for _, tc := range []struct {
		name, node string
		args       []string
		want       hostspec.Guard
	}{
		{"secondary network", "ovn-worker2", nil, want},
		{"primary only", "ovn-worker", nil, hostspec.Guard{}},
		{"guard off", "ovn-worker2", []string{"--egressip-host-guard=false"}, hostspec.Guard{}},
		{"egress IPs off", "ovn-worker2", []string{"--enable-egress-ip=false"}, hostspec.Guard{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, err := desired.ComputeNode(snap, demoParams(t, append([]string{"--gateway-flows=false"}, tc.args...)...), tc.node)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ns.HostGuard, tc.want) {
				t.Errorf("guard %+v, want %+v", ns.HostGuard, tc.want)
			}
		})
	}
}

// TestHostEgressPodWatches: a node watches the pods of the EgressIPs that
// give it an egress IP on a secondary host network, by their podSelector,
// in the namespaces their namespaceSelector matches (in every namespace
// past desired.MaxNamespacedPodWatches of them), and no pod for egress IPs
// on its primary network or on other nodes.
func TestHostEgressPodWatches(t *testing.T) {
	nodes, err := os.ReadFile("../examples/demo/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withHost := strings.Replace(string(nodes), `k8s.ovn.org/host-cidrs: '["172.18.0.3/24"]'`,
		`k8s.ovn.org/host-cidrs: '["172.18.0.3/24","192.168.100.2/24"]'`, 1)
	eip := func(name, namespaceSelector, podSelector, node, ip string) string {
		return `apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: ` + name + `}
spec:
  egressIPs: ["` + ip + `"]
  namespaceSelector: ` + namespaceSelector + `
  podSelector: ` + podSelector + `
status:
  items: [{node: ` + node + `, egressIP: "` + ip + `"}]
`
	}
	prod := "{matchLabels: {env: prod}}"
	eips := strings.Join([]string{
		eip("all-pods", prod, "{}", "ovn-worker2", "192.168.100.50"),
		eip("web", prod, "{matchLabels: {app: web}}", "ovn-worker2", "192.168.100.51"),
		eip("web-too", prod, "{matchLabels: {app: web}}", "ovn-worker2", "192.168.100.52"),
		eip("primary", prod, "{matchLabels: {app: db}}", "ovn-worker2", "172.18.0.44"),
		eip("elsewhere", prod, "{matchLabels: {app: api}}", "ovn-worker", "192.168.100.53"),
		eip("bad-selector", prod, "{matchExpressions: [{key: app, operator: Near}]}", "ovn-worker2", "192.168.100.54"),
		eip("no-namespace", "{matchLabels: {env: none}}", "{matchLabels: {app: x}}", "ovn-worker2", "192.168.100.55"),
		eip("many-namespaces", "{matchLabels: {team: many}}", "{matchLabels: {app: batch}}", "ovn-worker2", "192.168.100.56"),
	}, "---\n")
	var namespaces []string
	for i := range desired.MaxNamespacedPodWatches + 1 {
		namespaces = append(namespaces, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: many-%d, labels: {team: many}}\n", i))
	}
	broken := strings.Replace(withHost, `k8s.ovn.org/host-cidrs: '["172.18.0.3/24","192.168.100.2/24"]'`,
		`k8s.ovn.org/host-cidrs: 'not json'`, 1)
	hosted := []desired.PodWatch{{LabelSelector: "app=batch"}, {Namespace: "prod"}, {Namespace: "prod", LabelSelector: "app=web"}}
	for _, c := range []struct {
		name, nodes, node string
		want              []desired.PodWatch
		ok                bool
	}{
		{"host network", withHost, "ovn-worker2", hosted, true},
		{"no host network", string(nodes), "ovn-worker2", nil, true},
		{"other node", withHost, "ovn-worker", nil, true},
		{"unknown node", withHost, "ovn-worker9", nil, false},
		{"broken annotations", broken, "ovn-worker2", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := demoSnapshot(t, map[string]string{"nodes.yaml": c.nodes, "egressip.yaml": eips, "many.yaml": strings.Join(namespaces, "---\n")})
			got, ok := desired.HostEgressPodWatches(s, c.node)
			if !slices.Equal(got, c.want) || ok != c.ok {
				t.Errorf("HostEgressPodWatches(%s) = %q, %v; want %q, %v", c.node, got, ok, c.want, c.ok)
			}
		})
	}
}

const webEgressService = `apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {namespace: prod, name: web}
spec: {}
status: {host: ovn-worker2}
`

// TestComputeNodeEgressService: the host of EgressService prod/web SNATs
// the Service's endpoints to its ingress IP and alone announces that IP
// (L2 and BGP); another node announces it no more and SNATs nothing.
func TestComputeNodeEgressService(t *testing.T) {
	s, _, err := LoadSnapshot(context.Background(), &Config{Manifests: demoDir(t, map[string]string{"esvc.yaml": webEgressService}),
		EnableEgressService: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	vip := netip.MustParseAddr("172.18.0.200")
	for _, c := range []struct {
		args []string
		node string
		host bool
	}{
		{nil, "ovn-worker2", true},
		{nil, "ovn-worker", false},
		{[]string{"--enable-egress-service=false"}, "ovn-worker", false},
	} {
		p := demoParams(t, append([]string{"--gateway-flows=false", "--enable-bgp", "--enable-l2-announce", "--enable-egress-service"}, c.args...)...)
		ns, err := desired.ComputeNode(s, p, c.node)
		if err != nil {
			t.Fatal(err)
		}
		announced := slices.Contains(ns.Announce, vip)
		routed := slices.Contains(ns.Routes, netip.PrefixFrom(vip, 32))
		if !p.EnableEgressService {
			if ns.EgressService != nil || !routed {
				t.Errorf("%s without EgressServices: %+v, routes %v", c.node, ns.EgressService, ns.Routes)
			}
			continue
		}
		if announced != c.host || routed != c.host {
			t.Errorf("%s: announces %s over L2 %v and BGP %v, want %v", c.node, vip, announced, routed, c.host)
		}
		if snat := ns.EgressService.SNAT; (len(snat) > 0) != c.host || c.host && snat[0].Source != vip {
			t.Errorf("%s: SNAT %+v", c.node, snat)
		}
	}
}
