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
