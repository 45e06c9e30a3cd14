package dataplane

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	"github.com/ovnedge/ovnedge/bgp"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/event"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
// the session's coming up is a Normal event on the Node; the speaker counts.
func TestAdvertise(t *testing.T) {
	r, port := loopbackRouter(t)
	events := make(chan event.Event, 10)
	b := NewBGP(BGPOptions{Node: "n1", Shutdown: "auto", Record: func(e event.Event) { events <- e }, Logger: quiet})
	defer b.Close()
	ns := desired.NodeState{RouterID: netip.MustParseAddr("127.0.0.2"), Routes: prefixes("172.18.0.200/32", "172.18.0.201/32")}
	bcfg := bgp.Config{ASN: 64513, RouterID: ns.RouterID, Peers: []bgp.Peer{{Address: netip.MustParseAddr("127.0.0.1"),
		ASN: 64512, Port: uint16(port), HoldTime: 90 * time.Second}}}
	if err := b.advertise(context.Background(), bcfg, &ns); err != nil {
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
	if err := b.advertise(context.Background(), bcfg, &ns); err != nil {
		t.Fatal(err)
	}
	wait(".200 withdrawn", func() bool { p := routerPrefixes(t, r); return len(p) == 1 && p["172.18.0.201/32"] })
	select {
	case e := <-events:
		if !strings.Contains(e.String(), "Normal Node n1 "+ReasonBGPSessionUp) || !strings.Contains(e.Message, "127.0.0.1") {
			t.Errorf("event %q, want %s about 127.0.0.1", e, ReasonBGPSessionUp)
		}
	case <-time.After(5 * time.Second):
		t.Error("no session event")
	}
	if st := b.speaker.Stats(); st.Announced != 1 || st.Updates != 3 || st.Sessions != 1 {
		t.Errorf("stats %+v", st)
	}
	// The router goes away: a Warning event on the Node.
	r.Stop()
	select {
	case e := <-events:
		if !strings.Contains(e.String(), "Warning Node n1 "+ReasonBGPSessionDown) || !strings.Contains(e.Message, "127.0.0.1") {
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
	flags := func(id netip.Addr) (bgp.Config, error) {
		return bgp.Config{ASN: 64513, RouterID: id, Peers: []bgp.Peer{{Address: netip.MustParseAddr("172.18.0.1"), ASN: 64512}}}, nil
	}
	peer := func(name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
			"metadata": map[string]any{"namespace": "metallb-system", "name": name}, "spec": spec}}
	}
	rack := func(r string) []any { return []any{map[string]any{"matchLabels": map[string]any{"rack": r}}} }
	s := desired.Snapshot{BGPPeers: []*unstructured.Unstructured{
		peer("tor-r1", map[string]any{"myASN": int64(64513), "peerASN": int64(65001), "peerAddress": "10.1.0.1", "nodeSelectors": rack("r1"), "bfdProfile": "fast"}),
		peer("tor-r2", map[string]any{"myASN": int64(64513), "peerASN": int64(65002), "peerAddress": "10.2.0.1", "nodeSelectors": rack("r2")}),
		peer("same-as-flag", map[string]any{"myASN": int64(64513), "peerASN": int64(65003), "peerAddress": "172.18.0.1"}),
		peer("broken", map[string]any{"myASN": int64(64513), "peerAddress": "10.9.0.1"}),
	}, BFDProfiles: []*unstructured.Unstructured{{Object: map[string]any{"apiVersion": "metallb.io/v1beta1", "kind": "BFDProfile",
		"metadata": map[string]any{"namespace": "metallb-system", "name": "fast"},
		"spec":     map[string]any{"transmitInterval": int64(100), "receiveInterval": int64(100), "detectMultiplier": int64(3)}}}}}
	self := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "r1"}}}
	b := NewBGP(BGPOptions{Node: "n1", Config: flags, PeerCRDs: true})
	got, evs, err := b.config(s, self, &desired.NodeState{RouterID: netip.MustParseAddr("172.18.0.2")})
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

var quiet = slog.New(slog.DiscardHandler)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}
