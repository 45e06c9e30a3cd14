package testbed

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// KubeAPIVersion is the kube-apiserver version scripts/kube-apiserver.sh
// builds by default; KUBE_APISERVER_VERSION overrides both.
const KubeAPIVersion = "v1.34.4"

// EtcdVersion is the etcd scripts/etcd.sh builds and EtcdPath expects.
const EtcdVersion = "v3.6.16"

// EtcdPath returns where the etcd binary is expected: $ETCD if set, else
// scripts/etcd.sh's cache, ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/
// etcd-<version>/etcd. It must report watch progress (etcd >= 3.5.13),
// as every supported cluster's does: without it kube-apiserver serves no
// streaming list (WatchList) and informers fall back to a LIST.
func EtcdPath() string {
	if p := os.Getenv("ETCD"); p != "" {
		return p
	}
	return filepath.Join(ovnedgeCache(), "etcd-"+EtcdVersion, "etcd")
}

// kubeReadyTimeout bounds waiting for the apiserver's /readyz: it takes
// 3-5 s alone, more on a loaded machine.
const kubeReadyTimeout = 90 * time.Second

// The users of the tokens file.
const (
	// KubeAdmin is in group system:masters: RBAC allows it everything.
	KubeAdmin = "admin"
	// KubeUser is in no group but system:authenticated: RBAC allows it
	// nothing until a test binds it to a role.
	KubeUser = "ovnedge"
)

// KubeAPI is a running etcd and kube-apiserver, made by StartKubeAPI.
// Nothing else of Kubernetes runs: no controller-manager, scheduler or
// kubelet, so tests create EndpointSlices and set pod and node status
// themselves.
type KubeAPI struct {
	// Dir holds etcd's data, the certificates, keys, tokens, kubeconfigs
	// and logs.
	Dir string
	// URL is the apiserver's address, "https://127.0.0.1:PORT".
	URL string
	// Config is a client configuration of KubeAdmin.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file of KubeAdmin.
	Kubeconfig string
	// UserConfig is a client configuration of KubeUser.
	UserConfig *rest.Config
	// UserKubeconfig is the path of a kubeconfig file of KubeUser.
	UserKubeconfig string

	etcd, apiserver *daemon
}

// KubeAPIServerPath returns where the kube-apiserver binary is expected:
// $KUBE_APISERVER if set, else scripts/kube-apiserver.sh's cache,
// ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/kapi-<version>/kube-apiserver
// (KubeBinPath).
func KubeAPIServerPath() string { return KubeBinPath("kube-apiserver") }

// StartKubeAPI starts etcd (EtcdPath, without fsync) and the
// kube-apiserver built by scripts/kube-apiserver.sh on free loopback
// ports, with RBAC and two bearer tokens (KubeAdmin and KubeUser), and
// returns once /readyz answers. Everything is stopped, by PID, and removed
// when the test ends. Without the binaries the test is skipped, or fails
// when CI=true.
func StartKubeAPI(t T) *KubeAPI {
	t.Helper()
	return StartKubeAPIWith(t, KubeAPIOptions{})
}

// KubeAPIOptions shape StartKubeAPIWith; zero fields take the defaults
// noted.
type KubeAPIOptions struct {
	// AdvertiseAddress is the address the apiserver advertises as the
	// endpoint of the `kubernetes` Service (default 127.0.0.1, which the
	// API rejects as an endpoint: the Service then has none). It still
	// listens on 127.0.0.1 only; the address is in the serving
	// certificate. StartKubeCluster advertises KubeAPIAddress, which each
	// of its nodes forwards to the apiserver.
	AdvertiseAddress string
	// ServiceAccounts enables the ServiceAccount admission plugin: pods
	// get the projected token volume of rest.InClusterConfig, and a pod
	// is refused until its ServiceAccount exists (kube-controller-manager
	// creates each namespace's default one: StartKubeCluster runs it).
	ServiceAccounts bool
}

// StartKubeAPIWith is StartKubeAPI with options.
func StartKubeAPIWith(t T, o KubeAPIOptions) *KubeAPI {
	t.Helper()
	advertise := cmp.Or(o.AdvertiseAddress, "127.0.0.1")
	apiserver := KubeAPIServerPath()
	etcdBin := EtcdPath()
	if missing := missingBins(etcdBin, apiserver); len(missing) > 0 {
		t.Logf("testbed: StartKubeAPI needs %v: run scripts/kube-apiserver.sh (builds and caches etcd %s and kube-apiserver %s)",
			missing, EtcdVersion, KubeAPIVersion)
		Require(t, missing...)
		return nil // only reached with a T whose Skipf or Fatalf returns
	}
	begin := time.Now()
	dir := newDir(t)
	k := &KubeAPI{Dir: dir}
	ports := FreePorts(t, 3) // shared with StartNBCluster
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	k.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])

	etcd := startDaemon(t, "etcd", filepath.Join(dir, "etcd.log"), nil,
		etcdBin, "--data-dir", filepath.Join(dir, "etcd"), "--name", "default",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--unsafe-no-fsync")
	stopOnCleanup(t, etcd)

	tokens := map[string]string{KubeAdmin: randomHex(t) + randomHex(t), KubeUser: randomHex(t) + randomHex(t)}
	if err := writeKubeFiles(dir, tokens); err != nil {
		t.Fatalf("testbed: kube-apiserver files: %v", err)
		return nil
	}
	api := startDaemon(t, "kube-apiserver", filepath.Join(dir, "kube-apiserver.log"), nil,
		apiserver, "--etcd-servers="+etcdURL, "--etcd-prefix=/registry",
		"--bind-address=127.0.0.1", "--advertise-address="+advertise,
		"--secure-port="+strconv.Itoa(ports[2]), "--cert-dir="+filepath.Join(dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"), "--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16,fd00:10:96::/112", "--allow-privileged=true",
		disableAdmission(o.ServiceAccounts))
	stopOnCleanup(t, api) // registered after etcd's: the apiserver stops first
	k.etcd, k.apiserver = etcd, api

	ca := filepath.Join(dir, "certs", "apiserver.crt")
	config := func(token string) *rest.Config {
		return &rest.Config{Host: k.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: ca}}
	}
	k.Config, k.UserConfig = config(tokens[KubeAdmin]), config(tokens[KubeUser])
	err := waitFor(kubeReadyTimeout, func() error {
		if !etcd.alive() {
			return etcd.check(fmt.Errorf("etcd exited"))
		}
		return api.check(readyz(k.Config))
	})
	if err != nil {
		t.Fatalf("testbed: kube-apiserver not ready: %v%s", err, tails(logPaths(dir, "etcd", "kube-apiserver")))
		return nil
	}
	k.Kubeconfig, k.UserKubeconfig = k.KubeconfigFor(t, KubeAdmin, tokens[KubeAdmin]), k.KubeconfigFor(t, KubeUser, tokens[KubeUser])
	t.Logf("testbed: kube-apiserver %s ready in %v (dir %s)", k.URL, time.Since(begin).Round(time.Millisecond), dir)
	return k
}

// disableAdmission is the apiserver's --disable-admission-plugins: the
// ServiceAccount plugin unless serviceAccounts (without a controller-manager
// no namespace has its default ServiceAccount, which the plugin requires).
func disableAdmission(serviceAccounts bool) string {
	if serviceAccounts {
		return "--disable-admission-plugins="
	}
	return "--disable-admission-plugins=ServiceAccount"
}

// missingBins returns the binaries (names on PATH, or paths) that are not
// there.
func missingBins(bins ...string) []string {
	var missing []string
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	return missing
}

// writeKubeFiles writes the service account key pair (sa.key, sa.pub) and
// the bearer tokens file (tokens.csv) into dir.
func writeKubeFiles(dir string, tokens map[string]string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("service account public key: %w", err)
	}
	files := map[string][]byte{
		"sa.key": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": fmt.Appendf(nil, "%s,%s,%s-uid,system:masters\n%s,%s,%s-uid\n",
			tokens[KubeAdmin], KubeAdmin, KubeAdmin, tokens[KubeUser], KubeUser, KubeUser),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// readyz returns nil once the apiserver's /readyz answers 200.
func readyz(c *rest.Config) error {
	if _, err := os.Stat(c.CAFile); err != nil {
		return fmt.Errorf("no serving certificate yet: %w", err)
	}
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Host+"/readyz", nil)
	if err != nil {
		return fmt.Errorf("/readyz: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("/readyz: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("/readyz: %s: %s", resp.Status, body)
	}
	return nil
}

// KubeconfigFor writes <Dir>/<user>.kubeconfig, a kubeconfig file that
// authenticates with the bearer token (e.g. a ServiceAccount's, from a
// TokenRequest), and returns its path.
func (k *KubeAPI) KubeconfigFor(t T, user, token string) string {
	t.Helper()
	path := filepath.Join(k.Dir, user+".kubeconfig")
	if err := writeKubeconfig(path, k.URL, k.Config.CAFile, user, token); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	return path
}

// Process is a child process of the test, such as the daemon under test
// run against a KubeAPI, made by StartProcess.
type Process struct{ d *daemon }

// StartProcess starts argv (with env added to the environment) with its
// stdout and stderr appended to the file log, and stops it by its PID
// (SIGTERM, then SIGKILL) when the test ends.
func StartProcess(t T, name, log string, env []string, argv ...string) *Process {
	t.Helper()
	d := startDaemon(t, name, log, env, argv...)
	stopOnCleanup(t, d)
	return &Process{d: d}
}

// Pid returns the process's ID.
func (p *Process) Pid() int { return p.d.cmd.Process.Pid }

// Alive reports whether the process has not exited yet.
func (p *Process) Alive() bool { return p.d.alive() }

// Kill sends SIGKILL and waits until the process is reaped.
func (p *Process) Kill() error { return p.d.kill() }

// Terminate sends SIGTERM, then SIGKILL if the process has not exited
// within 3 s, and waits until it is reaped.
func (p *Process) Terminate() error { return p.d.terminate() }

// Log returns the last lines of the process's log, for failure messages.
func (p *Process) Log() string { return tails([]string{p.d.log}) }

// Watches is the API server's count of open watches of resource (its
// apiserver_longrunning_requests gauge, verb WATCH, every scope): the
// watches of every client, so a test takes the difference around what it
// starts.
func (k *KubeAPI) Watches(ctx context.Context, resource string) (int, error) {
	rc, err := rest.RESTClientFor(k.metricsConfig())
	if err != nil {
		return 0, err
	}
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("API server metrics: %w", err)
	}
	n := 0
	for l := range strings.SplitSeq(string(raw), "\n") {
		if !strings.HasPrefix(l, "apiserver_longrunning_requests{") || !strings.Contains(l, `resource="`+resource+`"`) ||
			!strings.Contains(l, `verb="WATCH"`) {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("API server metrics: %q: %w", l, err)
		}
		n += int(v)
	}
	return n, nil
}

// metricsConfig is Config for a plain REST client of non-API paths.
func (k *KubeAPI) metricsConfig() *rest.Config {
	c := rest.CopyConfig(k.Config)
	c.GroupVersion = &schema.GroupVersion{}
	c.NegotiatedSerializer = serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(runtime.NewScheme())}
	return c
}
