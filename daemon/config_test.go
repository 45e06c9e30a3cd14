package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"

	"github.com/ovnedge/ovnedge/bgp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func writeFile(t *testing.T, text string) string {
	path := filepath.Join(t.TempDir(), "ovnedge.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeKubeconfig writes a kubeconfig of server, with a token, and
// returns its path.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+server+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseConfigPrecedence(t *testing.T) {
	file := writeFile(t, `
[default]
cluster-subnets = 10.244.0.0/16/24
mtu = 1400

[logging]
loglevel = 5

[ovnkubernetesfeature]
enable-egress-ip = true
egressip-reachability-total-timeout = 3
egressip-node-healthcheck-port = 9107

[ovnnorth]
address = ssl:10.0.0.1:6641,ssl:10.0.0.2:6641

[ovnedge]
bridge = breth0
log-level = warn
manifests-poll = 2s
`)
	c, _, err := ParseConfig("daemon", []string{"--config-file", file, "--egressip-reachability-total-timeout=0", "--node-name", "n1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []ClusterSubnet{{netip.MustParsePrefix("10.244.0.0/16"), 24}}
	if !reflect.DeepEqual(c.ClusterSubnets, want) {
		t.Errorf("cluster subnets %v, want %v (from the file)", c.ClusterSubnets, want)
	}
	if c.ReachabilityTotalTimeout != 0 {
		t.Errorf("the flag must override the file: timeout %d", c.ReachabilityTotalTimeout)
	}
	if c.HealthCheckPort != 9107 || c.Bridge != "breth0" || c.NodeName != "n1" || c.LogLevel != slog.LevelWarn || c.ManifestsPoll != 2*time.Second {
		t.Errorf("file/flag values lost: %+v", c)
	}
	if got := strings.Join(c.NBAddress, " "); got != "ssl:10.0.0.1:6641 ssl:10.0.0.2:6641" {
		t.Errorf("nb address %q", got)
	}
	if c.JoinSubnet != netip.MustParsePrefix("100.64.0.0/16") || c.CTZone != 64000 || c.CheckInterval != 5*time.Second {
		t.Errorf("defaults lost: %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	bad := writeFile(t, "[ovnkubernetesfeature]\negressip-node-healthcheck-port = 70000\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--cluster-subnets", "10.244.0.1/16"}, "host bits"},
		{[]string{"--cluster-subnets", "10.244.0.0/16/8"}, "host prefix"},
		{[]string{"--join-subnet", "nonsense"}, "join-subnet"},
		{[]string{"--conntrack-zone", "0"}, "conntrack-zone"},
		{[]string{"--log-level", "loud"}, "log-level"},
		{[]string{"--config-file", bad}, "egressip-node-healthcheck-port"},
		{[]string{"--config-file", "/nonexistent/ovnedge.conf"}, "config file"},
		{[]string{"--gateway-flows", "maybe"}, "gateway-flows"},
		{[]string{"--bridge-mac", "02:42:ac"}, "bridge-mac"},
	}
	for _, c := range cases {
		_, _, err := ParseConfig("daemon", c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseConfig(%q) = %v, want an error mentioning %q", c.args, err, c.want)
		}
	}
}

// The gateway flows are on by default; [gateway] gateway-flows turns them
// off, as where OVN-Kubernetes' node agent programs the bridge, and
// [ovnedge] bridge-mac sets the bridge MAC.
func TestParseConfigGateway(t *testing.T) {
	c, _, err := ParseConfig("daemon", nil)
	if err != nil || !c.GatewayFlows || c.BridgeMAC != nil {
		t.Fatalf("defaults: gateway flows %v, MAC %v, %v", c.GatewayFlows, c.BridgeMAC, err)
	}
	file := writeFile(t, "[gateway]\ngateway-flows = false\n\n[ovnedge]\nbridge-mac = 02:42:ac:12:00:03\n")
	if c, _, err = ParseConfig("daemon", []string{"--config-file", file}); err != nil {
		t.Fatal(err)
	}
	if c.GatewayFlows || c.BridgeMAC.String() != "02:42:ac:12:00:03" {
		t.Errorf("from the file: gateway flows %v, MAC %v", c.GatewayFlows, c.BridgeMAC)
	}
	if p := ParamsFrom(c); p.GatewayFlows || p.BridgeMAC.String() != "02:42:ac:12:00:03" {
		t.Errorf("params: gateway flows %v, MAC %v", p.GatewayFlows, p.BridgeMAC)
	}
}

func TestParseClusterSubnets(t *testing.T) {
	got, err := ParseClusterSubnets("10.244.0.0/16, fd00:10:244::/48/64,10.128.0.0/14/23")
	if err != nil {
		t.Fatal(err)
	}
	want := []ClusterSubnet{
		{netip.MustParsePrefix("10.244.0.0/16"), 24},
		{netip.MustParsePrefix("fd00:10:244::/48"), 64},
		{netip.MustParsePrefix("10.128.0.0/14"), 23},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestParseConfigBoolFlags: a boolean flag alone means true, as users of
// OVN-Kubernetes' and Kube-OVN's binaries write them; =false still works.
func TestParseConfigBoolFlags(t *testing.T) {
	for _, c := range []struct {
		args     []string
		l2, lead bool
	}{
		{[]string{"--enable-l2-announce"}, true, true},
		{[]string{"--enable-l2-announce=true", "--leader-elect=false"}, true, false},
		{nil, false, true},
	} {
		cfg, fs, err := ParseConfig("daemon", c.args)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if cfg.EnableL2Announce != c.l2 || cfg.LeaderElect != c.lead {
			t.Errorf("%v: l2 %v leader %v, want %v %v (args left %v)", c.args, cfg.EnableL2Announce, cfg.LeaderElect, c.l2, c.lead, fs.Args())
		}
	}
	for _, args := range [][]string{{"--enable-l2-announce=maybe"}, {"--leader-elect", "false"}} {
		if _, _, err := ParseConfig("daemon", args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestParseConfigJoinSubnets: the IPv6 join subnet has OVN-Kubernetes'
// default and spellings; each join subnet must be of its family.
func TestParseConfigJoinSubnets(t *testing.T) {
	c, _, err := ParseConfig("daemon", nil)
	if err != nil || c.JoinSubnet6 != netip.MustParsePrefix("fd98::/64") {
		t.Fatalf("default v6 join subnet %v (%v)", c.JoinSubnet6, err)
	}
	c, _, err = ParseConfig("daemon", []string{"--gateway-v6-join-subnet=fd99::/64", "--gateway-v4-join-subnet=100.65.0.0/16"})
	if err != nil || c.JoinSubnet6 != netip.MustParsePrefix("fd99::/64") || c.JoinSubnet != netip.MustParsePrefix("100.65.0.0/16") {
		t.Errorf("ovn-k spellings: %v %v (%v)", c.JoinSubnet, c.JoinSubnet6, err)
	}
	if p := ParamsFrom(c); len(p.Egress.JoinSubnets) != 2 {
		t.Errorf("params join subnets %v", p.Egress.JoinSubnets)
	}
	for _, args := range [][]string{{"--v6-join-subnet=100.64.0.0/16"}, {"--join-subnet=fd98::/64"}} {
		if _, _, err := ParseConfig("daemon", args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestParseConfigMasqueradeAndTemplates: OVN-Kubernetes' masquerade subnet
// flags and [gateway] keys, their defaults (169.254.169.0/29, fd69::/125),
// the flag over the file, the errors; --lb-templates (default true).
func TestParseConfigMasqueradeAndTemplates(t *testing.T) {
	c, _, err := ParseConfig("daemon", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MasqueradeSubnetV4 != netip.MustParsePrefix("169.254.169.0/29") || c.MasqueradeSubnetV6 != netip.MustParsePrefix("fd69::/125") || !c.LBTemplates {
		t.Errorf("defaults: %v %v templates=%v", c.MasqueradeSubnetV4, c.MasqueradeSubnetV6, c.LBTemplates)
	}
	p := ParamsFrom(c)
	if p.LB.PerNodeLBs || p.LB.MasqueradeSubnetV4 != c.MasqueradeSubnetV4 || len(p.LB.ClusterSubnets) != 1 {
		t.Errorf("params: %+v", p.LB)
	}
	file := writeFile(t, "[gateway]\nv4-masquerade-subnet = 169.254.0.0/17\nv6-masquerade-subnet = fd69::/112\n[ovnedge]\nlb-templates = false\n")
	c, _, err = ParseConfig("daemon", []string{"--config-file", file, "--gateway-v6-masquerade-subnet=fd99::/125"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MasqueradeSubnetV4 != netip.MustParsePrefix("169.254.0.0/17") || c.MasqueradeSubnetV6 != netip.MustParsePrefix("fd99::/125") || c.LBTemplates {
		t.Errorf("file and flag: %v %v templates=%v", c.MasqueradeSubnetV4, c.MasqueradeSubnetV6, c.LBTemplates)
	}
	if !ParamsFrom(c).LB.PerNodeLBs {
		t.Error("--lb-templates=false: want per-node load balancers")
	}
	for _, args := range [][]string{
		{"--gateway-v4-masquerade-subnet=fd69::/125"},
		{"--gateway-v4-masquerade-subnet=169.254.169.0/30"},
		{"--gateway-v4-masquerade-subnet=169.254.169.1/29"},
		{"--gateway-v6-masquerade-subnet=169.254.169.0/29"},
	} {
		if _, _, err := ParseConfig("daemon", args); err == nil || !strings.Contains(err.Error(), "masquerade-subnet") {
			t.Errorf("%v: error %v, want one naming the flag", args, err)
		}
	}
}

// TestParseConfigSBAddress: the Southbound endpoints from the flag or
// OVN-Kubernetes' [ovnsouth] section.
func TestParseConfigSBAddress(t *testing.T) {
	file := writeFile(t, "[ovnsouth]\naddress = ssl:10.0.0.1:6642,ssl:10.0.0.2:6642\n")
	c, _, err := ParseConfig("daemon", []string{"--config-file", file})
	if err != nil || strings.Join(c.SBAddress, " ") != "ssl:10.0.0.1:6642 ssl:10.0.0.2:6642" {
		t.Errorf("file: %v (%v)", c.SBAddress, err)
	}
	c, _, err = ParseConfig("daemon", []string{"--config-file", file, "--sb-address=unix:/run/ovn/ovnsb_db.sock"})
	if err != nil || strings.Join(c.SBAddress, " ") != "unix:/run/ovn/ovnsb_db.sock" {
		t.Errorf("flag over file: %v (%v)", c.SBAddress, err)
	}
}

func TestParseConfigBGP(t *testing.T) {
	file := writeFile(t, `
[ovnedge]
lb-pools = public=172.18.0.200/29,other=172.18.0.208/29

[bgp]
enable = true
asn = 65010
peer-address = 172.18.0.1, fd00:18::1
bfd = true
bfd-interval = 100ms
communities = public=65010:100,public=65010:200
local-pref = public=300
`)
	c, _, err := ParseConfig("daemon", []string{"--config-file", file, "--bgp-hold-time=9s", "--bgp-peer-asn=65000", "--bgp-listen-port=179"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.EnableBGP || c.BGPASN != 65010 || c.BGPPeerASN != 65000 || len(c.BGPPeers) != 2 || !c.BGPBFD ||
		c.BGPHoldTime != 9*time.Second || c.BGPGracefulRestart != 120*time.Second {
		t.Fatalf("bgp settings lost: %+v", c)
	}
	bc, err := c.BGP(netip.MustParseAddr("172.18.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	if bc.RouterID != netip.MustParseAddr("172.18.0.2") || len(bc.Peers) != 2 || !bc.Restarting ||
		bc.Peers[0].BFD.Interval != 100*time.Millisecond || bc.Peers[1].Port != 179 || bc.ListenPort != 179 {
		t.Errorf("speaker config %+v", bc)
	}
	if len(bc.Pools) != 1 || bc.Pools[0].Name != "public" || len(bc.Pools[0].Communities) != 2 || bc.Pools[0].LocalPref != 300 {
		t.Errorf("pools %+v, want public with two communities and local-pref 300", bc.Pools)
	}
	c.BGPRouterID = netip.MustParseAddr("10.9.9.9")
	if bc, _ := c.BGP(netip.Addr{}); bc.RouterID != c.BGPRouterID {
		t.Errorf("--bgp-router-id ignored: %v", bc.RouterID)
	}
	for _, args := range [][]string{
		{"--bgp-asn=0"}, {"--bgp-hold-time=1s"}, {"--bgp-router-id=fd00::1"}, {"--bgp-communities=public"},
		{"--bgp-peer-address=nope"}, {"--bgp-graceful-restart=2h"},
	} {
		if _, _, err := ParseConfig("daemon", args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	for name, mut := range map[string]func(*Config){
		"no peer":       func(c *Config) { c.BGPPeers = nil },
		"unknown pool":  func(c *Config) { c.BGPLocalPref = map[string]uint32{"nope": 1} },
		"no router ID":  func(c *Config) { c.BGPRouterID = netip.Addr{} },
		"unknown pool2": func(c *Config) { c.BGPCommunities = map[string][]bgp.Community{"nope": {1}} },
	} {
		cc := *c
		mut(&cc)
		if _, err := cc.BGP(netip.Addr{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestParseConfigUnderlay: the settings of Kube-OVN's MetalLB underlay
// guide from flags (spelled as
// kube-ovn-controller spells them) and the [kubeovn] section; defaults are
// Kube-OVN's (prefer-local off, ls-ct-skip-dst-lport-ips on) and the
// underlay off.
func TestParseConfigUnderlay(t *testing.T) {
	c, _, err := ParseConfig("daemon", nil)
	if err != nil || c.UnderlayLBMode != UnderlayOff || c.PreferLocal || !c.LSCtSkipDstLportIPs || c.ProviderBridge != "" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	file := writeFile(t, `
[kubeovn]
underlay-lb-mode = standalone
enable-ovn-lb-prefer-local = true
ls-ct-skip-dst-lport-ips = false
provider-bridge = br-provider
provider-nic = underlay0
provider-vlan = 341
underlay-interface = underlay0.341
`)
	if c, _, err = ParseConfig("daemon", []string{"--config-file", file, "--underlay-lb-mode=metallb"}); err != nil {
		t.Fatal(err)
	}
	if c.UnderlayLBMode != UnderlayMetalLB || !c.PreferLocal || c.LSCtSkipDstLportIPs || c.ProviderBridge != "br-provider" ||
		c.ProviderNIC != "underlay0" || c.ProviderVLAN != 341 || c.UnderlayInterface != "underlay0.341" {
		t.Errorf("from the file and flags: %+v", c)
	}
	p := ParamsFrom(c)
	if !p.LB.PreferLocal || p.LB.LSCtSkipDstLportIPs || p.Underlay != UnderlayMetalLB {
		t.Errorf("params %+v", p)
	}
	c, _, err = ParseConfig("daemon", []string{"--enable-ovn-lb-prefer-local", "--ls-ct-skip-dst-lport-ips=false"})
	if err != nil || !c.PreferLocal || c.LSCtSkipDstLportIPs {
		t.Errorf("Kube-OVN's spelling: %+v, %v", c, err)
	}
	for _, args := range [][]string{{"--underlay-lb-mode=bgp"}, {"--provider-vlan=4095"}} {
		if _, _, err := ParseConfig("daemon", args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestEveryOptionInConfigFile: every option but --config-file can be set
// in the config file (its section's key has a field gcfg fills).
func TestEveryOptionInConfigFile(t *testing.T) {
	keys := map[string]bool{}
	rt := reflect.TypeFor[rawSection]()
	for i := range rt.NumField() {
		keys[rt.Field(i).Tag.Get("gcfg")] = true
	}
	for _, o := range options {
		if o.section != "" && !keys[o.key] {
			t.Errorf("option --%s: no config file key %q in [%s]", o.name, o.key, o.section)
		}
	}
}

// TestConnectContentTypes: the built-in kinds are asked for, and
// written, as protobuf, as OVN-Kubernetes' and Kube-OVN's clients ask for
// them (cheaper for the API server and the daemon than JSON, on every
// object of the lists and watches); the custom resources, which have no
// protobuf, as JSON. Connect sets no content type: client-go's generated
// clients (v0.35) default to protobuf, the dynamic client to JSON, and a
// content type set on the shared rest.Config would change both.
func TestConnectContentTypes(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][2]string{} // "METHOD path": Accept, Content-Type
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = [2]string{r.Header.Get("Accept"), r.Header.Get("Content-Type")}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(srv.Close)
	c, _, err := ParseConfig("daemon", []string{"--kubeconfig", writeKubeconfig(t, srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := Connect(c, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	eip := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
		"metadata": map[string]any{"name": "eip"}}}
	_, _ = cl.Typed.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	_, _ = cl.Typed.CoreV1().Services("shop").UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	_, _ = cl.Dynamic.Resource(egressv1.Resource).List(ctx, metav1.ListOptions{})
	_, _ = cl.Dynamic.Resource(egressv1.Resource).Update(ctx, eip, metav1.UpdateOptions{})
	const pb, js = "application/vnd.kubernetes.protobuf", "application/json"
	for _, tc := range []struct{ req, accept, content string }{
		{"GET /api/v1/pods", pb + "," + js, ""},
		{"PUT /api/v1/namespaces/shop/services/web/status", pb + "," + js, pb},
		{"GET /apis/k8s.ovn.org/v1/egressips", js, ""},
		{"PUT /apis/k8s.ovn.org/v1/egressips/eip", js, js},
	} {
		mu.Lock()
		got, ok := seen[tc.req]
		mu.Unlock()
		switch {
		case !ok:
			t.Errorf("%s: no request", tc.req)
		case !strings.HasPrefix(got[0], tc.accept) || got[1] != tc.content:
			t.Errorf("%s: Accept %q, Content-Type %q; want Accept %q, Content-Type %q", tc.req, got[0], got[1], tc.accept, tc.content)
		}
	}
}

// TestKubeAPIRateLimit: --kube-api-qps and --kube-api-burst (and their
// [kubernetes] keys) become the API client's rate limit; client-go's own
// 5/10 is not used unless asked for.
func TestKubeAPIRateLimit(t *testing.T) {
	kubeconfig := writeKubeconfig(t, "https://127.0.0.1:1")
	file := writeFile(t, "[kubernetes]\nkubeconfig = "+kubeconfig+"\nkube-api-qps = 200\nkube-api-burst = 400\n")
	for _, tc := range []struct {
		args  []string
		qps   float32
		burst int
	}{
		{[]string{"--kubeconfig", kubeconfig}, 200, 400},
		{[]string{"--config-file", file}, 200, 400},
		{[]string{"--config-file", file, "--kube-api-qps=7.5", "--kube-api-burst=3"}, 7.5, 3},
	} {
		c, _, err := ParseConfig("daemon", tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if c.KubeAPIQPS != tc.qps || c.KubeAPIBurst != tc.burst {
			t.Errorf("%v: qps %v burst %d, want %v %d", tc.args, c.KubeAPIQPS, c.KubeAPIBurst, tc.qps, tc.burst)
		}
		cl, err := Connect(c, slog.Default())
		if err != nil {
			t.Fatalf("%v: Connect: %v", tc.args, err)
		}
		if got := cl.Typed.CoreV1().RESTClient().GetRateLimiter().QPS(); got != tc.qps {
			t.Errorf("%v: the client's rate limiter allows %v/s, want %v", tc.args, got, tc.qps)
		}
	}
	for _, bad := range []string{"--kube-api-qps=0", "--kube-api-qps=x", "--kube-api-burst=0", "--kube-api-burst=-1"} {
		if _, _, err := ParseConfig("daemon", []string{bad}); err == nil || !strings.Contains(err.Error(), "kube-api") {
			t.Errorf("%s: error %v, want one naming the flag", bad, err)
		}
	}
}

// The Lease's timings take OVN-Kubernetes' cluster manager HA flags and
// [clustermgrha] keys (whole seconds); ovnedge's defaults are client-go's
// 15/10/2, and CheckLease refuses timings the election cannot keep.
func TestParseConfigLease(t *testing.T) {
	c, _, err := ParseConfig("daemon", nil)
	if err != nil || c.LeaseDuration != 15*time.Second || c.LeaseRenewDeadline != 10*time.Second || c.LeaseRetryPeriod != 2*time.Second || c.CheckLease() != nil {
		t.Errorf("defaults %v/%v/%v (%v, %v)", c.LeaseDuration, c.LeaseRenewDeadline, c.LeaseRetryPeriod, err, c.CheckLease())
	}
	file := writeFile(t, "[clustermgrha]\nelection-lease-duration = 6\nelection-renew-deadline = 4\nelection-retry-period = 1\n")
	c, _, err = ParseConfig("daemon", []string{"--config-file", file, "--cluster-manager-ha-election-retry-period=2"})
	if err != nil || c.LeaseDuration != 6*time.Second || c.LeaseRenewDeadline != 4*time.Second || c.LeaseRetryPeriod != 2*time.Second || c.CheckLease() != nil {
		t.Errorf("file and flag: %v/%v/%v (%v, %v)", c.LeaseDuration, c.LeaseRenewDeadline, c.LeaseRetryPeriod, err, c.CheckLease())
	}
	for _, args := range [][]string{
		{"--cluster-manager-ha-election-lease-duration=10"},
		{"--cluster-manager-ha-election-renew-deadline=2"},
	} {
		c, _, err := ParseConfig("daemon", args)
		if err != nil || c.CheckLease() == nil {
			t.Errorf("%v: %v, CheckLease %v; want a refusal", args, err, c.CheckLease())
		}
	}
	for _, v := range []string{"0", "-3", "1.5", "10s"} {
		if _, _, err := ParseConfig("daemon", []string{"--cluster-manager-ha-election-lease-duration=" + v}); err == nil {
			t.Errorf("lease duration %q accepted", v)
		}
	}
}
