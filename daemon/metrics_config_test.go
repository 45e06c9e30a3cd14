package daemon

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/metrics"
)

// TestParseConfigMetricsServing: the defaults keep everything plain on
// --metrics-address (library and CLI users, the e2e harnesses); the
// secure metrics, the health and pprof addresses come from flags or the
// [ovnedge] section; pprof is refused on a non-loopback address.
func TestParseConfigMetricsServing(t *testing.T) {
	file := writeFile(t, `
[ovnedge]
metrics-secure = true
metrics-cert-file = /etc/tls/tls.crt
metrics-key-file = /etc/tls/tls.key
health-address = :9475
pprof-address = 127.0.0.1:6060
`)
	for _, tc := range []struct {
		name    string
		args    []string
		want    serving
		wantErr string
	}{
		{name: "defaults", want: serving{metrics: ":9476"}},
		{name: "flags", args: []string{"--metrics-secure", "--metrics-cert-file=c", "--metrics-key-file=k",
			"--health-address=:1", "--enable-pprof", "--pprof-address=[::1]:2"},
			want: serving{metrics: ":9476", secure: true, cert: "c", key: "k", health: ":1", pprof: true, pprofAddr: "[::1]:2"}},
		{name: "config file", args: []string{"--config-file", file},
			want: serving{metrics: ":9476", secure: true, cert: "/etc/tls/tls.crt", key: "/etc/tls/tls.key", health: ":9475",
				pprofAddr: "127.0.0.1:6060"}},
		{name: "localhost pprof", args: []string{"--pprof-address=localhost:6060"}, want: serving{metrics: ":9476", pprofAddr: "localhost:6060"}},
		{name: "pprof on every address", args: []string{"--pprof-address=:6060"}, wantErr: "not a loopback address"},
		{name: "pprof on a host address", args: []string{"--pprof-address=10.0.0.1:6060"}, wantErr: "pprof-address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := ParseConfig("daemon", tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseConfig(%q) = %v, want an error with %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := servingOf(c); got != tc.want {
				t.Errorf("ParseConfig(%q): %+v, want %+v", tc.args, got, tc.want)
			}
		})
	}
}

// serving is what a Config says of serving metrics, health and pprof.
type serving struct {
	metrics, cert, key, health, pprofAddr string
	secure, pprof                         bool
}

func servingOf(c *Config) serving {
	return serving{metrics: c.MetricsAddr, cert: c.MetricsCertFile, key: c.MetricsKeyFile, health: c.HealthAddr,
		pprofAddr: c.PprofAddr, secure: c.MetricsSecure, pprof: c.Pprof}
}

// TestServeMetricsSecureNeedsAPIServer: secure metrics cannot ask a
// manifests directory about their scrapers.
func TestServeMetricsSecureNeedsAPIServer(t *testing.T) {
	cfg := &Config{MetricsAddr: "127.0.0.1:0", MetricsSecure: true}
	_, err := serveMetrics(cfg, &Clients{FromManifests: true}, runEnv{Log: slog.New(slog.DiscardHandler), Metrics: metrics.New()})
	if err == nil || !strings.Contains(err.Error(), "manifests") {
		t.Errorf("serveMetrics: %v, want an error about manifests", err)
	}
}
