package ovsflow_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/testbed"
)

// The uplink is chosen as OVN-Kubernetes' GetNicName chooses it (its
// system-type, bridge-uplink and br<nic> rules), then by the one plain port.
func TestUplink(t *testing.T) {
	t.Parallel()
	internal := ovsflow.BridgePort{Name: "br-ex", Types: []string{"internal"}}
	patch := ovsflow.BridgePort{Name: "patch-br-ex_n1-to-br-int", Types: []string{"patch"}}
	plain := func(name string) ovsflow.BridgePort { return ovsflow.BridgePort{Name: name, Types: []string{""}} }
	system := func(name string) ovsflow.BridgePort { return ovsflow.BridgePort{Name: name, Types: []string{"system"}} }
	cases := []struct {
		name, bridge, bridgeUplink string
		ports                      []ovsflow.BridgePort
		want, err                  string
	}{
		{"one system port", "br-ex", "", []ovsflow.BridgePort{internal, patch, plain("eth1"), system("ens3")}, "ens3", ""},
		{"bridge-uplink", "br-ex", "eth1", []ovsflow.BridgePort{internal, plain("eth0"), plain("eth1")}, "eth1", ""},
		{"bridge-uplink not a port", "br-ex", "eth9", []ovsflow.BridgePort{internal, plain("eth0")}, "", "is not one of its ports"},
		{"br<nic>", "breth0", "", []ovsflow.BridgePort{{Name: "breth0", Types: []string{"internal"}}, plain("eth0"), plain("eth1")}, "eth0", ""},
		{"the one plain port", "br-ex", "", []ovsflow.BridgePort{internal, patch, plain("eth1")}, "eth1", ""},
		{"two system ports, no hint", "br-ex", "", []ovsflow.BridgePort{internal, system("a"), system("b")}, "", "cannot tell its uplink among 2 candidate ports [a b]"},
		{"no port", "br-ex", "", []ovsflow.BridgePort{internal, patch}, "", "among 0 candidate ports"},
		{"tunnels are no uplink", "br-ex", "", []ovsflow.BridgePort{internal, {Name: "gnv", Types: []string{"geneve"}}, plain("eth1")}, "eth1", ""},
	}
	for _, c := range cases {
		got, err := ovsflow.Uplink(c.bridge, c.bridgeUplink, c.ports)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// On a real bridge (breth0, uplink eth0) the uplink is found from the
// database: by the br<nic> rule once a second plain port is added, and by
// the bridge-uplink external id over that.
func TestOVSDBPortsUplink(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	ports := dialPorts(t, br)
	want := func(port string) {
		t.Helper()
		testbed.Eventually(t, 5*time.Second, func() error {
			got, err := ports.Uplink(ctxFor(t), br.Bridge)
			if err == nil && got != port {
				return fmt.Errorf("uplink %q, want %q", got, port)
			}
			return err
		})
	}
	want(brextest.Uplink)
	// A second plain port (no such interface: the row is enough).
	br.Vsctl("add-port", br.Bridge, "second")
	want(brextest.Uplink)
	br.Vsctl("br-set-external-id", br.Bridge, "bridge-uplink", "second")
	want("second")
	if _, err := ports.Uplink(ctxFor(t), "nope"); err == nil {
		t.Error("an unknown bridge must be an error")
	}
}
