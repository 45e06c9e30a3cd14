package ovsdbnb_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestDialSSL writes through an ssl: endpoint, the server and the client
// each checking the other's certificate against the CA.
func TestDialSSL(t *testing.T) {
	testbed.Require(t, "ovsdb-tool", "ovsdb-server")
	dir := t.TempDir()
	ca := testbed.WriteCert(t, dir, "ca", nil)
	testbed.WriteCert(t, dir, "server", ca)
	testbed.WriteCert(t, dir, "client", ca)
	f := func(name string) string { return filepath.Join(dir, name) }
	if out, err := exec.Command("ovsdb-tool", "create", f("nb.db"), "/usr/share/ovn/ovn-nb.ovsschema").CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool create: %v: %s", err, out)
	}
	server := exec.Command("ovsdb-server", f("nb.db"), "--remote=pssl:0:127.0.0.1",
		"--private-key="+f("server.key"), "--certificate="+f("server.crt"), "--ca-cert="+f("ca.crt"),
		"--unixctl="+f("nb.ctl"), "--log-file="+f("nb.log"), "--no-chdir", "-vconsole:off")
	if err := server.Start(); err != nil {
		t.Fatalf("start ovsdb-server: %v", err)
	}
	t.Cleanup(func() {
		_ = server.Process.Kill()
		_ = server.Wait()
	})

	endpoint := "ssl:127.0.0.1:" + testbed.ListeningPort(t, f("nb.log"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c *ovsdbnb.Client
	var err error
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
