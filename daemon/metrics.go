package daemon

import (
	"net/http"
	"net/http/pprof"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ovnedge/ovnedge/arp"
	"github.com/ovnedge/ovnedge/bgp"
)

// Metrics are the daemon's Prometheus metrics and its health state.
type Metrics struct {
	Registry *prometheus.Registry
	// Reconcile is the latency of one reconcile, by loop ("nb",
	// "flows", "assign", ...) and result ("ok", "error").
	Reconcile *prometheus.HistogramVec
	// NBOps counts Northbound operations sent, by operation.
	NBOps *prometheus.CounterVec
	// NBSyncs counts the cluster loop's Northbound syncs (one plan of the
	// owners whose rows may differ; one transaction when they do).
	NBSyncs prometheus.Counter
	// FlowOps counts OpenFlow flow mods sent, by operation.
	FlowOps *prometheus.CounterVec
	// Failovers counts egress IPs moved from one node to another.
	Failovers prometheus.Counter
	// NBRepairs counts the NB drift repairs that wrote rows, by reason
	// (see nbRepair*); NBRepairedOwners counts the owners they wrote.
	NBRepairs, NBRepairedOwners *prometheus.CounterVec
	// NBComparing is 1 while the leader compares owners' NB rows with
	// what it wrote (the NB repair: after its own writes' echo, a
	// reconnection, the periodic resync), else 0.
	NBComparing prometheus.Gauge
	// Audits counts the periodic checks of the leader's incremental
	// state against a full recompute, by result ("match", "differed":
	// the full recompute replaced it, "failed").
	Audits *prometheus.CounterVec

	ready atomic.Bool
	arp   arpCollector
	bgp   bgpCollector
	flows flowRepairCollector
}

// NewMetrics registers the daemon's metrics, plus Go runtime and process
// collectors, in a registry of their own.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Reconcile: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ovnedge", Name: "reconcile_duration_seconds",
			Help:    "Time from the start of a reconcile to the dataplane holding its result.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"loop", "result"}),
		NBOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "nb_operations_total",
			Help: "OVN Northbound operations sent, by operation.",
		}, []string{"op"}),
		NBSyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "nb_syncs_total",
			Help: "Northbound syncs of the cluster loop: plans of the owners whose rows may have changed.",
		}),
		FlowOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "flow_operations_total",
			Help: "OpenFlow flow mods sent to the bridge, by operation.",
		}, []string{"op"}),
		Failovers: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "egressip_failovers_total",
			Help: "Egress IPs moved from one node to another.",
		}),
		NBRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "nb_repairs_total",
			Help: "Repairs of OVN Northbound rows changed behind ovnedge's back that wrote rows, by reason " +
				"(changed, reconnected, topology, periodic).",
		}, []string{"reason"}),
		NBRepairedOwners: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "nb_repaired_owners_total",
			Help: "Owners (Services, EgressIPs, ...) whose Northbound rows a repair wrote, by reason.",
		}, []string{"reason"}),
		NBComparing: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "ovnedge", Name: "nb_repair_comparing",
			Help: "1 while the leader compares owners' Northbound rows with what it last wrote (the drift repair), else 0.",
		}),
		Audits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "audits_total",
			Help: "Periodic checks of the leader's incremental desired state against a full recompute, by result " +
				"(match, differed: the full recompute replaced it, failed).",
		}, []string{"result"}),
	}
	m.Registry.MustRegister(m.Reconcile, m.NBOps, m.NBSyncs, m.FlowOps, m.Failovers, m.NBRepairs, m.NBRepairedOwners, m.NBComparing, m.Audits,
		&m.arp, &m.bgp, &m.flows,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetARPStats makes /metrics export the per-address counters stats
// returns (arp.Responder.Stats) as ovnedge_arp_requests_total,
// ovnedge_arp_replies_total and ovnedge_arp_gratuitous_total.
func (m *Metrics) SetARPStats(stats func() map[netip.Addr]arp.Stats) { m.arp.stats.Store(&stats) }

// arpCollector exports the ARP/NDP responder's counters, by address.
type arpCollector struct {
	stats atomic.Pointer[func() map[netip.Addr]arp.Stats]
}

var (
	arpRequests = prometheus.NewDesc("ovnedge_arp_requests_total",
		"ARP requests and IPv6 neighbour solicitations seen for an owned address.", []string{"address"}, nil)
	arpReplies = prometheus.NewDesc("ovnedge_arp_replies_total",
		"ARP replies and solicited neighbour advertisements sent for an owned address.", []string{"address"}, nil)
	arpGratuitous = prometheus.NewDesc("ovnedge_arp_gratuitous_total",
		"Gratuitous ARP frames and unsolicited neighbour advertisements sent for an owned address.", []string{"address"}, nil)
)

func (c *arpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- arpRequests
	ch <- arpReplies
	ch <- arpGratuitous
}

func (c *arpCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.stats.Load()
	if f == nil {
		return
	}
	for a, s := range (*f)() {
		for _, v := range []struct {
			d *prometheus.Desc
			n uint64
		}{{arpRequests, s.RequestsSeen}, {arpReplies, s.RepliesSent}, {arpGratuitous, s.GratuitousSent}} {
			ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, float64(v.n), a.String())
		}
	}
}

// SetBGPStats makes /metrics export the BGP speaker's counters (stats is
// bgp.Speaker.Stats): ovnedge_bgp_sessions, ovnedge_bgp_prefixes and
// ovnedge_bgp_updates_total.
func (m *Metrics) SetBGPStats(stats func() bgp.Stats) { m.bgp.stats.Store(&stats) }

// bgpCollector exports the BGP speaker's counters.
type bgpCollector struct {
	stats atomic.Pointer[func() bgp.Stats]
}

var (
	bgpSessions = prometheus.NewDesc("ovnedge_bgp_sessions", "Established BGP sessions.", nil, nil)
	bgpPrefixes = prometheus.NewDesc("ovnedge_bgp_prefixes", "Prefixes announced over BGP.", nil, nil)
	bgpUpdates  = prometheus.NewDesc("ovnedge_bgp_updates_total",
		"Prefix announcements and withdrawals handed to the BGP speaker.", nil, nil)
)

func (c *bgpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- bgpSessions
	ch <- bgpPrefixes
	ch <- bgpUpdates
}

func (c *bgpCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.stats.Load()
	if f == nil {
		return
	}
	s := (*f)()
	ch <- prometheus.MustNewConstMetric(bgpSessions, prometheus.GaugeValue, float64(s.Sessions))
	ch <- prometheus.MustNewConstMetric(bgpPrefixes, prometheus.GaugeValue, float64(s.Announced))
	ch <- prometheus.MustNewConstMetric(bgpUpdates, prometheus.CounterValue, float64(s.Updates))
}

// SetFlowRepairs makes /metrics export repairs (ovsflow.Applier.Repairs:
// the resyncs that found the bridge differing from its program and
// changed it) as ovnedge_flow_repairs_total{bridge}.
func (m *Metrics) SetFlowRepairs(bridge string, repairs func() uint64) {
	m.flows.mu.Lock()
	defer m.flows.mu.Unlock()
	if m.flows.repairs == nil {
		m.flows.repairs = map[string]func() uint64{}
	}
	m.flows.repairs[bridge] = repairs
}

// flowRepairCollector exports the bridge appliers' repair counts.
type flowRepairCollector struct {
	mu      sync.Mutex
	repairs map[string]func() uint64 // by bridge
}

var flowRepairs = prometheus.NewDesc("ovnedge_flow_repairs_total",
	"Resyncs that found a bridge's flows differing from ovnedge's program (deleted or changed by hand, "+
		"lost in an ovs-vswitchd restart) and repaired them.", []string{"bridge"}, nil)

func (c *flowRepairCollector) Describe(ch chan<- *prometheus.Desc) { ch <- flowRepairs }

func (c *flowRepairCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for bridge, f := range c.repairs {
		ch <- prometheus.MustNewConstMetric(flowRepairs, prometheus.CounterValue, float64(f()), bridge)
	}
}

// SetReady sets what /readyz answers: 200 once the informers have synced
// and the first reconcile is done, 503 before and during shutdown.
func (m *Metrics) SetReady(ready bool) { m.ready.Store(ready) }

// Handler serves /metrics, /healthz, /readyz and, when pprof is true,
// /debug/pprof/.
func (m *Metrics) Handler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
