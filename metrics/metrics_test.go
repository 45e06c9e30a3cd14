package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/arp"
	"github.com/ovnedge/ovnedge/bgp"
	"github.com/ovnedge/ovnedge/dataplane"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

func TestMetricsHandler(t *testing.T) {
	m := New()
	m.SetNBStats(func() ovsdbnb.WriterStats {
		return ovsdbnb.WriterStats{Inserts: 3, Repairs: map[string]uint64{"reconnected": 1}, RepairedOwners: map[string]uint64{"reconnected": 504}}
	})
	m.SetARPStats(func() map[netip.Addr]arp.Stats {
		return map[netip.Addr]arp.Stats{netip.MustParseAddr("172.18.0.200"): {RequestsSeen: 7, RepliesSent: 6, GratuitousSent: 10}}
	})
	m.SetBGPStats(func() bgp.Stats { return bgp.Stats{Announced: 12, Updates: 40, Sessions: 2} })
	m.SetFlowStats("br-ex", func() dataplane.FlowStats { return dataplane.FlowStats{Added: 2, Repairs: 4} })
	for _, tc := range []struct {
		name       string
		pprof      bool
		ready      bool
		path       string
		wantCode   int
		wantInBody string
	}{
		{"healthz", false, false, "/healthz", 200, "ok"},
		{"not ready", false, false, "/readyz", 503, "not ready"},
		{"ready", false, true, "/readyz", 200, "ok"},
		{"metrics", false, false, "/metrics", 200, `ovnedge_nb_operations_total{op="insert"} 3`},
		{"arp requests", false, false, "/metrics", 200, `ovnedge_arp_requests_total{address="172.18.0.200"} 7`},
		{"arp replies", false, false, "/metrics", 200, `ovnedge_arp_replies_total{address="172.18.0.200"} 6`},
		{"arp gratuitous", false, false, "/metrics", 200, `ovnedge_arp_gratuitous_total{address="172.18.0.200"} 10`},
		{"bgp sessions", false, false, "/metrics", 200, "ovnedge_bgp_sessions 2"},
		{"bgp prefixes", false, false, "/metrics", 200, "ovnedge_bgp_prefixes 12"},
		{"bgp updates", false, false, "/metrics", 200, "ovnedge_bgp_updates_total 40"},
		{"flow repairs", false, false, "/metrics", 200, `ovnedge_flow_repairs_total{bridge="br-ex"} 4`},
		{"flow operations", false, false, "/metrics", 200, `ovnedge_flow_operations_total{op="add"} 2`},
		{"nb repairs", false, false, "/metrics", 200, `ovnedge_nb_repairs_total{reason="reconnected"} 1`},
		{"nb repaired owners", false, false, "/metrics", 200, `ovnedge_nb_repaired_owners_total{reason="reconnected"} 504`},
		{"pprof off", false, false, "/debug/pprof/", 404, ""},
		{"pprof on", true, false, "/debug/pprof/", 200, "goroutine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.SetReady(tc.ready)
			srv := httptest.NewServer(m.Handler(tc.pprof))
			defer srv.Close()
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode || !strings.Contains(string(body), tc.wantInBody) {
				t.Errorf("GET %s = %d %q, want %d containing %q", tc.path, resp.StatusCode, body, tc.wantCode, tc.wantInBody)
			}
		})
	}
}
