package ovsdbnb_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/internal/testbed"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// writeCert writes a certificate for name (signed by ca/caKey, or self
// signed when ca is nil) and its key to dir/<name>.{crt,key}.
func writeCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	if ca == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		ca, caKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{name + ".crt": {Type: "CERTIFICATE", Bytes: der},
		name + ".key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestDialSSL writes through an ssl: endpoint, the server and the client
// each checking the other's certificate against the CA.
func TestDialSSL(t *testing.T) {
	testbed.Require(t, "ovsdb-tool", "ovsdb-server")
	dir := t.TempDir()
	ca, caKey := writeCert(t, dir, "ca", nil, nil)
	writeCert(t, dir, "server", ca, caKey)
	writeCert(t, dir, "client", ca, caKey)
	f := func(name string) string { return filepath.Join(dir, name) }
	if out, err := exec.Command("ovsdb-tool", "create", f("nb.db"), "/usr/share/ovn/ovn-nb.ovsschema").CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool create: %v: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	server := exec.Command("ovsdb-server", f("nb.db"), "--remote=pssl:"+port+":127.0.0.1",
		"--private-key="+f("server.key"), "--certificate="+f("server.crt"), "--ca-cert="+f("ca.crt"),
		"--unixctl="+f("nb.ctl"), "--log-file="+f("nb.log"), "--no-chdir", "-vconsole:off")
	if err := server.Start(); err != nil {
		t.Fatalf("start ovsdb-server: %v", err)
	}
	t.Cleanup(func() {
		_ = server.Process.Kill()
		_ = server.Wait()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	endpoint := "ssl:127.0.0.1:" + port
	var c *ovsdbnb.Client
	for c == nil {
		if c, err = ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{endpoint}, ConnectTimeout: time.Second,
			PrivateKey: f("client.key"), Certificate: f("client.crt"), CACert: f("ca.crt")}); err != nil {
			if ctx.Err() != nil {
				log, _ := os.ReadFile(f("nb.log"))
				t.Fatalf("Dial %s: %v\n%s", endpoint, err, log)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Cleanup(c.Close)
	if res := sync(t, c, services(1)); res.Inserts != 1 || c.Endpoint() != endpoint {
		t.Errorf("sync over %s: %+v, want 1 insert", c.Endpoint(), res)
	}
}
