package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestDemo runs `make demo`'s program on the demo manifests against a real
// sandbox and checks that the report shows what ovnedge programmed.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	Run(context.Background(), t, &out, Options{Manifests: ".", Node: "ovn-worker2", ClusterSubnet: "10.244.0.0/16",
		Gateway: "172.18.0.1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	report := out.String()
	for _, want := range []string{
		"100                              ip4.src == 10.244.1.3         reroute                100.64.0.4", // the EgressIP's reroute
		"snat                                   172.18.0.44                         10.244.1.3",            // its SNAT on GR_ovn-worker2
		"172.18.0.200:80     10.244.1.3:8080",                                                              // the LoadBalancer VIP
		"172.18.0.201:443    10.244.1.3:8443",                                                              // the ExternalIP
		"arp_tpa=172.18.0.200,arp_op=1 actions=LOCAL",                                                      // the ARP bypass on br-ex
		"priority=105,pkt_mark=0x3f0,ip,in_port=2 actions=ct(commit,zone=64000,nat(src=172.18.0.3)",        // egress flows
		"ct_snat(ip4.src=172.18.0.44)",                                                                     // the pod's traced packet
		"ct_lb_mark(backends=10.244.1.3:8080)",                                                             // the VIP's traced packet
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", report)
	}
}
