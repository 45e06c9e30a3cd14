package metrics

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
	"github.com/ovnedge/ovnedge/dataplane"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// Metrics are the daemon's Prometheus metrics and its health state.
type Metrics struct {
	Registry *prometheus.Registry
	// Reconcile is the latency of one reconcile, by loop ("nb",
	// "flows", "assign", ...) and result ("ok", "error").
	Reconcile *prometheus.HistogramVec
	// Failovers counts egress IPs moved from one node to another.
	Failovers prometheus.Counter
	// Audits counts the periodic checks of the leader's incremental
	// state against a full recompute, by result ("match", "differed":
	// the full recompute replaced it, "failed").
	Audits *prometheus.CounterVec

	ready atomic.Bool
	why   atomic.Pointer[string] // why not ready, for /readyz
	arp   arpCollector
	bgp   bgpCollector
	flows flowCollector
	nb    nbCollector
}

// New registers the daemon's metrics, plus Go runtime and process
// collectors, in a registry of their own.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Reconcile: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ovnedge", Name: "reconcile_duration_seconds",
			Help:    "Time from the start of a reconcile to the dataplane holding its result.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"loop", "result"}),
		Failovers: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "egressip_failovers_total",
			Help: "Egress IPs moved from one node to another.",
		}),
		Audits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "audits_total",
			Help: "Periodic checks of the leader's incremental desired state against a full recompute, by result " +
				"(match, differed: the full recompute replaced it, failed).",
		}, []string{"result"}),
	}
	m.Registry.MustRegister(m.Reconcile, m.Failovers, m.Audits, &m.arp, &m.bgp, &m.flows, &m.nb,
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

// SetFlowStats makes /metrics export a bridge's flow writer's counts
// (dataplane.Flows.Stats): ovnedge_flow_operations_total{op} (flow mods
// sent) and ovnedge_flow_repairs_total{bridge} (the resyncs that found the
// bridge differing from its program and changed it).
func (m *Metrics) SetFlowStats(bridge string, stats func() dataplane.FlowStats) {
	m.flows.mu.Lock()
	defer m.flows.mu.Unlock()
	if m.flows.stats == nil {
		m.flows.stats = map[string]func() dataplane.FlowStats{}
	}
	m.flows.stats[bridge] = stats
}

// flowCollector exports the bridges' flow writers' counts.
type flowCollector struct {
	mu    sync.Mutex
	stats map[string]func() dataplane.FlowStats // by bridge
}

var (
	flowOps = prometheus.NewDesc("ovnedge_flow_operations_total",
		"OpenFlow flow mods sent to the bridges, by operation.", []string{"op"}, nil)
	flowRepairs = prometheus.NewDesc("ovnedge_flow_repairs_total",
		"Resyncs that found a bridge's flows differing from ovnedge's program (deleted or changed by hand, "+
			"lost in an ovs-vswitchd restart) and repaired them.", []string{"bridge"}, nil)
)

func (c *flowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- flowOps
	ch <- flowRepairs
}

func (c *flowCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.stats) == 0 {
		return
	}
	var ops dataplane.FlowStats
	for bridge, f := range c.stats {
		s := f()
		ops.Added, ops.Modified, ops.Deleted = ops.Added+s.Added, ops.Modified+s.Modified, ops.Deleted+s.Deleted
		ch <- prometheus.MustNewConstMetric(flowRepairs, prometheus.CounterValue, float64(s.Repairs), bridge)
	}
	for op, n := range map[string]uint64{"add": ops.Added, "modify": ops.Modified, "delete": ops.Deleted} {
		ch <- prometheus.MustNewConstMetric(flowOps, prometheus.CounterValue, float64(n), op)
	}
}

// SetNBStats makes /metrics export the NB writer's counts
// (ovsdbnb.Writer.Stats): ovnedge_nb_syncs_total, ovnedge_nb_operations_total{op},
// ovnedge_nb_repairs_total{reason}, ovnedge_nb_repaired_owners_total{reason}
// and ovnedge_nb_repair_comparing.
func (m *Metrics) SetNBStats(stats func() ovsdbnb.WriterStats) { m.nb.stats.Store(&stats) }

// nbCollector exports the NB writer's counts.
type nbCollector struct {
	stats atomic.Pointer[func() ovsdbnb.WriterStats]
}

var (
	nbSyncs = prometheus.NewDesc("ovnedge_nb_syncs_total",
		"Northbound syncs of the cluster loop: plans of the owners whose rows may have changed.", nil, nil)
	nbOps = prometheus.NewDesc("ovnedge_nb_operations_total",
		"OVN Northbound operations sent, by operation.", []string{"op"}, nil)
	nbRepairs = prometheus.NewDesc("ovnedge_nb_repairs_total",
		"Repairs of OVN Northbound rows changed behind ovnedge's back that wrote rows, by reason "+
			"(changed, reconnected, topology, periodic).", []string{"reason"}, nil)
	nbRepaired = prometheus.NewDesc("ovnedge_nb_repaired_owners_total",
		"Owners (Services, EgressIPs, ...) whose Northbound rows a repair wrote, by reason.", []string{"reason"}, nil)
	nbComparing = prometheus.NewDesc("ovnedge_nb_repair_comparing",
		"1 while the leader compares owners' Northbound rows with what it last wrote (the drift repair), else 0.", nil, nil)
)

func (c *nbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nbSyncs, nbOps, nbRepairs, nbRepaired, nbComparing} {
		ch <- d
	}
}

func (c *nbCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.stats.Load()
	if f == nil {
		return
	}
	s := (*f)()
	ch <- prometheus.MustNewConstMetric(nbSyncs, prometheus.CounterValue, float64(s.Syncs))
	for op, n := range map[string]uint64{"insert": s.Inserts, "update": s.Updates, "mutate": s.Mutates, "delete": s.Deletes} {
		ch <- prometheus.MustNewConstMetric(nbOps, prometheus.CounterValue, float64(n), op)
	}
	for _, reason := range ovsdbnb.RepairReasons {
		ch <- prometheus.MustNewConstMetric(nbRepairs, prometheus.CounterValue, float64(s.Repairs[reason]), reason)
		ch <- prometheus.MustNewConstMetric(nbRepaired, prometheus.CounterValue, float64(s.RepairedOwners[reason]), reason)
	}
	comparing := 0.0
	if s.Comparing {
		comparing = 1
	}
	ch <- prometheus.MustNewConstMetric(nbComparing, prometheus.GaugeValue, comparing)
}

// SetReady sets what /readyz answers: 200 once the informers have synced
// and the instance's own work last succeeded, 503 before, while it fails
// and during shutdown.
func (m *Metrics) SetReady(ready bool) { m.ready.Store(ready) }

// SetReadiness is SetReady with why, what /readyz says when not ready.
func (m *Metrics) SetReadiness(ready bool, why string) {
	m.why.Store(&why)
	m.ready.Store(ready)
}

// Handler serves /metrics, /healthz, /readyz and, when pprof is true,
// /debug/pprof/, all without authentication: for a loopback address or a
// trusted network. Serve and Servers split them for a host network.
func (m *Metrics) Handler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.MetricsHandler())
	mux.Handle("/healthz", m.HealthHandler())
	mux.Handle("/readyz", m.HealthHandler())
	if withPprof {
		mux.Handle("/debug/pprof/", PprofHandler())
	}
	return mux
}

// MetricsHandler serves /metrics alone (404 elsewhere).
func (m *Metrics) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	return mux
}

// HealthHandler serves /healthz (200 while the process serves) and
// /readyz (SetReadiness: 200, or 503 with the reason) alone: what the
// kubelet's probes ask, nothing else.
func (m *Metrics) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.ready.Load() {
			msg := "not ready"
			if why := m.why.Load(); why != nil {
				msg += ": " + *why
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// PprofHandler serves /debug/pprof/ (net/http/pprof), for a loopback
// address only: profiles show the process' memory and arguments.
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
