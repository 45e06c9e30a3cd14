package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
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
	if err := d.advertise(context.Background(), &ns); err != nil {
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
	if err := d.advertise(context.Background(), &ns); err != nil {
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
