package daemon

import (
	"net/http"
	"net/http/pprof"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the daemon's Prometheus metrics and its health state.
type Metrics struct {
	Registry *prometheus.Registry
	// Reconcile is the latency of one reconcile, by loop ("nb",
	// "flows", "assign", ...) and result ("ok", "error").
	Reconcile *prometheus.HistogramVec
	// NBOps counts Northbound operations sent, by operation.
	NBOps *prometheus.CounterVec
	// FlowOps counts OpenFlow flow mods sent, by operation.
	FlowOps *prometheus.CounterVec
	// Failovers counts egress IPs moved from one node to another.
	Failovers prometheus.Counter

	ready atomic.Bool
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
		FlowOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "flow_operations_total",
			Help: "OpenFlow flow mods sent to the bridge, by operation.",
		}, []string{"op"}),
		Failovers: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ovnedge", Name: "egressip_failovers_total",
			Help: "Egress IPs moved from one node to another.",
		}),
	}
	m.Registry.MustRegister(m.Reconcile, m.NBOps, m.FlowOps, m.Failovers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
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
