package metrics

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// ServeOptions say where an instance serves its metrics, its health and
// its profiles. Empty addresses serve nothing.
type ServeOptions struct {
	// MetricsAddr serves /metrics: over plain HTTP to anyone, or, with
	// Auth, over HTTPS (TLS) to the requests Auth admits.
	MetricsAddr string
	Auth        *KubeAuth
	TLS         *tls.Config
	// HealthAddr serves /healthz and /readyz alone, over plain HTTP (the
	// kubelet's probes). Empty: on a plain MetricsAddr; with Auth,
	// nowhere.
	HealthAddr string
	// Pprof serves /debug/pprof/ on PprofAddr, which must be a loopback
	// address; PprofAddr empty: on MetricsAddr, which must then be a
	// plain loopback address.
	Pprof     bool
	PprofAddr string
	Log       *slog.Logger
}

// listener is one address and what it serves.
type listener struct {
	addr, what string
	h          http.Handler
	tls        *tls.Config
}

// Serve starts serving as o says and returns once every address listens;
// stop closes them all.
func (m *Metrics) Serve(o ServeOptions) (stop func(), err error) {
	ls, err := m.listeners(o)
	if err != nil {
		return nil, err
	}
	var srvs []*http.Server
	stop = func() {
		for _, s := range srvs {
			s.Close()
		}
	}
	for _, l := range ls {
		srv, err := serve(l, o.Log)
		if err != nil {
			stop()
			return nil, err
		}
		srvs = append(srvs, srv)
	}
	return stop, nil
}

// listeners plans the addresses of o.
func (m *Metrics) listeners(o ServeOptions) ([]listener, error) {
	if o.Auth != nil && o.TLS == nil {
		return nil, errors.New("secure metrics without a TLS configuration")
	}
	var ls []listener
	if o.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", m.MetricsHandler())
		l := listener{addr: o.MetricsAddr, what: "metrics", h: mux}
		if o.Auth != nil {
			l.h, l.tls = o.Auth.Wrap(mux), o.TLS
		} else if o.HealthAddr == "" {
			mux.Handle("/healthz", m.HealthHandler())
			mux.Handle("/readyz", m.HealthHandler())
			l.what = "metrics and health"
		}
		if o.Pprof && o.PprofAddr == "" {
			if l.tls != nil || !Loopback(o.MetricsAddr) {
				return nil, fmt.Errorf("pprof is served on a loopback address only: the metrics address %s is not a plain one; give a pprof address",
					o.MetricsAddr)
			}
			mux.Handle("/debug/pprof/", PprofHandler())
		}
		ls = append(ls, l)
	}
	if o.HealthAddr != "" {
		ls = append(ls, listener{addr: o.HealthAddr, what: "health", h: m.HealthHandler()})
	}
	if o.Pprof && o.PprofAddr != "" {
		if !Loopback(o.PprofAddr) {
			return nil, fmt.Errorf("pprof address %s: not a loopback address", o.PprofAddr)
		}
		ls = append(ls, listener{addr: o.PprofAddr, what: "pprof", h: PprofHandler()})
	}
	return ls, nil
}

// serve listens on l's address and serves it until the server is
// closed.
func serve(l listener, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return nil, fmt.Errorf("%s address: %w", l.what, err)
	}
	srv := &http.Server{Handler: l.h, ReadHeaderTimeout: 5 * time.Second, TLSConfig: l.tls,
		// a failed TLS handshake (a scanner, a plain HTTP client) at debug
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	if l.tls != nil {
		ln = tls.NewListener(ln, l.tls)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(l.what+" server", "err", err)
		}
	}()
	log.Info("serving "+l.what, "address", ln.Addr().String(), "tls", l.tls != nil)
	return srv, nil
}

// Loopback reports whether addr (HOST:PORT) is on a loopback address:
// 127.0.0.0/8, ::1 or localhost.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
