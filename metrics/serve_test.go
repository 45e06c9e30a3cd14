package metrics

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sync/atomic"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ovnedge/ovnedge/testbed"
)

// freeAddr is a free loopback address.
func freeAddr(t *testing.T) string {
	return "127.0.0.1:" + strconv.Itoa(testbed.FreePorts(t, 1)[0])
}

// get GETs url with the bearer token (none when empty), trusting any
// certificate, and returns the status code and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestServeAddresses serves each layout and checks which paths each
// address answers: health alone on a health address, /metrics alone on a
// secure or split metrics address, pprof on loopback only.
func TestServeAddresses(t *testing.T) {
	type want map[string]int // "<addr>/<path>" -> status; 0: refused
	for _, tc := range []struct {
		name    string
		o       func(metricsAddr, healthAddr, pprofAddr string) ServeOptions
		want    want
		wantErr string
	}{
		{"everything on the metrics address (the flags' defaults)", func(m, h, p string) ServeOptions {
			return ServeOptions{MetricsAddr: m, Pprof: true}
		}, want{"m/metrics": 200, "m/healthz": 200, "m/readyz": 503, "m/debug/pprof/": 200}, ""},
		{"health apart", func(m, h, p string) ServeOptions {
			return ServeOptions{MetricsAddr: m, HealthAddr: h}
		}, want{"m/metrics": 200, "m/healthz": 404, "m/readyz": 404, "m/debug/pprof/": 404,
			"h/healthz": 200, "h/readyz": 503, "h/metrics": 404, "h/debug/pprof/": 404}, ""},
		{"pprof apart", func(m, h, p string) ServeOptions {
			return ServeOptions{MetricsAddr: m, HealthAddr: h, Pprof: true, PprofAddr: p}
		}, want{"m/debug/pprof/": 404, "h/debug/pprof/": 404, "p/debug/pprof/": 200, "p/metrics": 404, "p/healthz": 404}, ""},
		{"pprof off", func(m, h, p string) ServeOptions {
			return ServeOptions{MetricsAddr: m, PprofAddr: p}
		}, want{"m/debug/pprof/": 404, "p/debug/pprof/": 0}, ""},
		{"health alone", func(m, h, p string) ServeOptions {
			return ServeOptions{HealthAddr: h}
		}, want{"m/metrics": 0, "h/healthz": 200}, ""},
		{"pprof on a non-loopback metrics address", func(m, h, p string) ServeOptions {
			return ServeOptions{MetricsAddr: ":0", Pprof: true}
		}, nil, "loopback address only"},
		{"pprof on a non-loopback address", func(m, h, p string) ServeOptions {
			return ServeOptions{MetricsAddr: m, Pprof: true, PprofAddr: "0.0.0.0:0"}
		}, nil, "not a loopback address"},
		{"secure without TLS", func(m, h, p string) ServeOptions {
			return ServeOptions{MetricsAddr: m, Auth: &KubeAuth{}}
		}, nil, "without a TLS configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := map[string]string{"m": freeAddr(t), "h": freeAddr(t), "p": freeAddr(t)}
			m := New()
			stop, err := m.Serve(withLog(tc.o(addrs["m"], addrs["h"], addrs["p"])))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Serve: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(stop)
			for where, code := range tc.want {
				url := "http://" + addrs[where[:1]] + where[1:]
				if got, body := get(t, url, ""); got != code {
					t.Errorf("GET %s (%s) = %d %.80q, want %d", where, url, got, body, code)
				}
			}
		})
	}
}

func withLog(o ServeOptions) ServeOptions {
	o.Log = slog.New(slog.DiscardHandler)
	return o
}

// TestTLSConfig: a self-signed certificate without files, the files'
// certificate with them, read again once they change, and an error for
// one file alone.
func TestTLSConfig(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	self, err := TLSConfig("", "", "node-a", log)
	if err != nil || len(self.Certificates) != 1 {
		t.Fatalf("self-signed: %v, %d certificates", err, len(self.Certificates))
	}
	if _, err := TLSConfig("cert.pem", "", "node-a", log); err == nil {
		t.Error("a certificate without its key: no error")
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(host string) {
		c, k, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(certFile, c, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, k, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first")
	c, err := TLSConfig(certFile, keyFile, "", log)
	if err != nil || c.GetCertificate == nil {
		t.Fatalf("TLSConfig of files: %v", err)
	}
	f := &fileCert{certFile: certFile, keyFile: keyFile, log: log}
	if err := f.reload(); err != nil {
		t.Fatal(err)
	}
	f.checked = time.Now()
	name := func() string {
		t.Helper()
		cert, err := f.get(nil)
		if err != nil || cert.Leaf == nil {
			t.Fatalf("GetCertificate: %v", err)
		}
		return cert.Leaf.Subject.CommonName
	}
	if got := name(); !strings.HasPrefix(got, "first") {
		t.Fatalf("certificate %q, want first's", got)
	}
	write("second")
	future := time.Now().Add(time.Minute)
	for _, p := range []string{certFile, keyFile} {
		if err := os.Chtimes(p, future, future); err != nil {
			t.Fatal(err)
		}
	}
	if got := name(); !strings.HasPrefix(got, "first") {
		t.Errorf("certificate %q read again before %v", got, certCheckEvery)
	}
	f.checked = time.Now().Add(-certCheckEvery)
	if got := name(); !strings.HasPrefix(got, "second") {
		t.Errorf("certificate %q after the files changed, want second's", got)
	}
	if err := os.WriteFile(certFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.checked = time.Now().Add(-certCheckEvery)
	if got := name(); !strings.HasPrefix(got, "second") {
		t.Errorf("certificate %q after a broken file, want second's kept", got)
	}
}

// TestSecureMetricsKubeAPI serves /metrics securely with a real
// kube-apiserver doing the TokenReviews and SubjectAccessReviews: a
// client without a token gets 401, one with a token the API server does
// not know 401, one whose user RBAC does not allow get on /metrics 403,
// the same user once bound to a ClusterRole allowing it 200; health stays
// plain and open on its own address. Answers are cached: asking again
// sends no review.
func TestSecureMetricsKubeAPI(t *testing.T) {
	k := testbed.StartKubeAPI(t)
	var reviews atomic.Int64
	counted := rest.CopyConfig(k.Config)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "reviews") {
				reviews.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	admin := kubernetes.NewForConfigOrDie(k.Config)
	auth, err := NewKubeAuth(kubernetes.NewForConfigOrDie(counted), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tlsConf, err := TLSConfig("", "", "localhost", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	m.SetReady(true)
	metricsAddr, healthAddr := freeAddr(t), freeAddr(t)
	stop, err := m.Serve(withLog(ServeOptions{MetricsAddr: metricsAddr, Auth: auth, TLS: tlsConf, HealthAddr: healthAddr}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	url := "https://" + metricsAddr + "/metrics"
	check := func(who, token string, want int) {
		t.Helper()
		if got, body := get(t, url, token); got != want {
			t.Errorf("%s: GET /metrics = %d %.200q, want %d", who, got, body, want)
		}
	}
	check("no token", "", http.StatusUnauthorized)
	check("an unknown token", "not-a-token", http.StatusUnauthorized)
	check("a user without RBAC", k.UserConfig.BearerToken, http.StatusForbidden)
	check("system:masters", k.Config.BearerToken, http.StatusOK)
	before := reviews.Load()
	check("system:masters again", k.Config.BearerToken, http.StatusOK)
	check("an unknown token again", "not-a-token", http.StatusUnauthorized)
	check("a user without RBAC again", k.UserConfig.BearerToken, http.StatusForbidden)
	if n := reviews.Load(); n != before || n < 5 {
		t.Errorf("reviews sent: %d, then %d asking again (want at least 5, then none: the answers are cached)", before, n)
	}
	if got, _ := get(t, "http://"+metricsAddr+"/metrics", ""); got == http.StatusOK {
		t.Error("plain HTTP on the secure metrics address answered 200")
	}
	if got, body := get(t, "http://"+healthAddr+"/readyz", ""); got != http.StatusOK {
		t.Errorf("GET /readyz on the health address = %d %q, want 200", got, body)
	}

	ctx := context.Background()
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	if err == nil {
		_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: testbed.KubeUser}}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	// The denial is cached for DenyCacheTTL: a new server asks afresh.
	stop()
	auth, err = NewKubeAuth(admin, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stop, err = m.Serve(withLog(ServeOptions{MetricsAddr: metricsAddr, Auth: auth, TLS: tlsConf}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	check("the user bound to get /metrics", k.UserConfig.BearerToken, http.StatusOK)
	if _, body := get(t, url, k.UserConfig.BearerToken); !strings.Contains(body, "ovnedge_reconcile_duration_seconds") &&
		!strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics body without the registry's metrics: %.200q", body)
	}
}

// roundTripper is a func as an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
