package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
)

// loopbackRouter is a GoBGP speaker on 127.0.0.1 taking a session from
// the node (AS 64513, also on 127.0.0.1): the upstream router of the test.
func loopbackRouter(t *testing.T) (*server.BgpServer, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	lvl := &slog.LevelVar{}
	lvl.Set(slog.LevelError + 4)
	r := server.NewBgpServer(server.LoggerOption(quiet, lvl))
	go r.Serve()
	t.Cleanup(r.Stop)
	ctx := context.Background()
	if err := r.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 64512, RouterId: "10.255.0.1",
		ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"}}}); err != nil {
		t.Fatal(err)
	}
	if err := r.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 64513},
		Transport: &api.Transport{PassiveMode: true}}}); err != nil {
		t.Fatal(err)
	}
	return r, port
}

func routerPrefixes(t *testing.T, r *server.BgpServer) map[string]bool {
	out := map[string]bool{}
	if err := r.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: gobgp.RF_IPv4_UC},
		func(n gobgp.NLRI, _ []*apiutil.Path) { out[n.String()] = true }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAdvertise: the node's routes reach the router and follow ns.Routes;
// the session's coming up is a Normal event on the Node; metrics count.
func TestAdvertise(t *testing.T) {
	r, port := loopbackRouter(t)
	cfg, _, err := ParseConfig("test", []string{"--node-name=n1", "--enable-bgp", "--bgp-peer-address=127.0.0.1",
		"--bgp-peer-port=" + strconv.Itoa(port), "--bgp-graceful-restart=0"})
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(10)
	m := NewMetrics()
	d := NewDataplane(cfg, &Clients{}, rec, m, quiet)
	defer d.Close()
	ns := NodeState{RouterID: netip.MustParseAddr("127.0.0.2"), Routes: prefixes("172.18.0.200/32", "172.18.0.201/32")}
	bcfg, err := cfg.BGP(ns.RouterID)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.advertise(context.Background(), bcfg, &ns); err != nil {
		t.Fatal(err)
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for start := time.Now(); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s: not within 10s", what)
			}
		}
	}
	wait("two routes", func() bool { return len(routerPrefixes(t, r)) == 2 })
	ns.Routes = ns.Routes[1:]
	if err := d.advertise(context.Background(), bcfg, &ns); err != nil {
		t.Fatal(err)
	}
	wait(".200 withdrawn", func() bool { p := routerPrefixes(t, r); return len(p) == 1 && p["172.18.0.201/32"] })
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, ReasonBGPSessionUp) || !strings.Contains(e, "127.0.0.1") {
			t.Errorf("event %q, want %s about 127.0.0.1", e, ReasonBGPSessionUp)
		}
	case <-time.After(5 * time.Second):
		t.Error("no session event")
	}
	if st := d.speaker.Stats(); st.Announced != 1 || st.Updates != 3 || st.Sessions != 1 {
		t.Errorf("stats %+v", st)
	}
	// The router goes away: a Warning event on the Node.
	r.Stop()
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "Warning "+ReasonBGPSessionDown) || !strings.Contains(e, "127.0.0.1") {
			t.Errorf("event %q, want a Warning %s about 127.0.0.1", e, ReasonBGPSessionDown)
		}
	case <-time.After(10 * time.Second):
		t.Error("no event for the session going down")
	}
}

// TestBGPConfigPeerCRDs: with --bgp-peer-crds the node runs the flags'
// peers plus MetalLB's BGPPeers that select it; a flag's address keeps the
// flag's settings; a bad BGPPeer is an event and refuses only itself.
func TestBGPConfigPeerCRDs(t *testing.T) {
	cfg, _, err := ParseConfig("test", []string{"--node-name=n1", "--enable-bgp", "--bgp-peer-address=172.18.0.1",
		"--bgp-peer-crds", "--bgp-asn=64513"})
	if err != nil {
		t.Fatal(err)
	}
	peer := func(name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
			"metadata": map[string]any{"namespace": "metallb-system", "name": name}, "spec": spec}}
	}
	rack := func(r string) []any { return []any{map[string]any{"matchLabels": map[string]any{"rack": r}}} }
	s := Snapshot{BGPPeers: []*unstructured.Unstructured{
		peer("tor-r1", map[string]any{"myASN": int64(64513), "peerASN": int64(65001), "peerAddress": "10.1.0.1", "nodeSelectors": rack("r1"), "bfdProfile": "fast"}),
		peer("tor-r2", map[string]any{"myASN": int64(64513), "peerASN": int64(65002), "peerAddress": "10.2.0.1", "nodeSelectors": rack("r2")}),
		peer("same-as-flag", map[string]any{"myASN": int64(64513), "peerASN": int64(65003), "peerAddress": "172.18.0.1"}),
		peer("broken", map[string]any{"myASN": int64(64513), "peerAddress": "10.9.0.1"}),
	}, BFDProfiles: []*unstructured.Unstructured{{Object: map[string]any{"apiVersion": "metallb.io/v1beta1", "kind": "BFDProfile",
		"metadata": map[string]any{"namespace": "metallb-system", "name": "fast"},
		"spec":     map[string]any{"transmitInterval": int64(100), "receiveInterval": int64(100), "detectMultiplier": int64(3)}}}}}
	self := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "r1"}}}
	d := NewDataplane(cfg, &Clients{}, record.NewFakeRecorder(10), nil, quiet)
	got, evs, err := d.bgpConfig(s, self, &NodeState{RouterID: netip.MustParseAddr("172.18.0.2")})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, p := range got.Peers {
		addrs = append(addrs, fmt.Sprintf("%v/AS%d/bfd=%v", p.Address, p.ASN, p.BFD.Enabled))
	}
	want := []string{"172.18.0.1/AS64512/bfd=false", "10.1.0.1/AS65001/bfd=true"}
	if !slices.Equal(addrs, want) {
		t.Errorf("peers %v, want %v", addrs, want)
	}
	if len(evs) != 1 || evs[0].Object.Name != "broken" || !strings.Contains(evs[0].Message, "missing peer ASN") {
		t.Errorf("events %v, want one about broken", evs)
	}
}

// TestLeaving: the node states in which a stopping ovnedge withdraws its
// routes (--bgp-shutdown=auto) rather than keeping them for a restart.
func TestLeaving(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		node corev1.Node
		want bool
	}{
		{"ready", corev1.Node{}, false},
		{"cordoned", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, true},
		{"being deleted", corev1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, true},
		{"out of service", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}}}, true},
		{"autoscaler", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: corev1.TaintEffectNoSchedule}}}}, true},
		{"other taint", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}}}, false},
	} {
		if got := leaving(&tc.node); got != tc.want {
			t.Errorf("%s: leaving %v, want %v", tc.name, got, tc.want)
		}
	}
}
