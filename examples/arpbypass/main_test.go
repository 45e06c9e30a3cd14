package main

import (
	"bytes"
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/testbed"
)

// TestRun applies the bypass to a real bridge and traces an ARP request
// for the VIP: it goes to LOCAL. A second run changes nothing.
func TestRun(t *testing.T) {
	ovs := testbed.StartOVS(t, testbed.OVSOptions{NoPatch: true})
	o := Options{OVSDB: ovs.DB, RunDir: ovs.RunDir, Bridge: ovs.Bridge, Uplink: ovs.Uplink, Namespace: "default",
		Name: "web", VIPs: []netip.Addr{netip.MustParseAddr("172.18.0.50")}, Port: 80}
	var out bytes.Buffer
	if err := Run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "1 flows added") {
		t.Errorf("output:\n%s", out.String())
	}
	trace := ovs.Trace("in_port=1,arp,arp_op=1,arp_tpa=172.18.0.50")
	if !strings.Contains(trace, "LOCAL") {
		t.Errorf("the ARP request does not reach LOCAL:\n%s", trace)
	}
	out.Reset()
	if err := Run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "0 flows added, 0 modified, 0 deleted") {
		t.Errorf("second run:\n%s", out.String())
	}
}
