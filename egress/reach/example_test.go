package reach_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/ovnedge/ovnedge/egress/reach"
)

// Nothing listens on 127.0.0.1:9, so the kernel refuses the connection: a
// host answered, the node is up.
func ExampleProbeDiscard() {
	up, err := reach.ProbeDiscard(context.Background(), nil, netip.MustParseAddr("127.0.0.1"), time.Second)
	fmt.Println(up, err)
	// Output: true <nil>
}

// The daemon fills a Checker's Config from its settings: a 1 s total
// timeout, the gRPC health check on port 9107 with the NB client's
// certificates, and a 1 s interval, so that a node that stops answering
// is reported within 2 s.
func ExampleNewConfig() {
	cfg, err := reach.NewConfig(1, 9107, time.Second, reach.TLSFiles{
		CertFile: "/etc/ovn/ovnnb-cert.pem", KeyFile: "/etc/ovn/ovnnb-privkey.pem", CAFile: "/etc/ovn/ovnnb-ca.cert",
	})
	fmt.Println(cfg.Interval, cfg.Timeout, cfg.Port, err)

	_, err = reach.NewConfig(1, 70000, 0, reach.TLSFiles{})
	fmt.Println(err)
	// Output:
	// 1s 1s 9107 <nil>
	// egressip-node-healthcheck-port 70000: not a TCP port
}
