package helm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/testbed"
)

// bridgeDrift: ovnedge's flows deleted by hand on the first node's breth0
// (the base flows and the ExternalIP's, by their cookies) come back by
// themselves, from the node pod the kubelet runs, and the client's
// connection to the ExternalIP through that node is answered again.
func (h *harness) bridgeDrift(t *testing.T) {
	n := h.cl.Nodes[0]
	want, err := ownedFlows(n, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(vipFlows(want)) == 0 {
		t.Fatalf("breth0 of %s has no flow for %s", n.Name, vip)
	}
	for round := range 2 {
		n.Ofctl("del-flows", testbed.ClusterBridge, fmt.Sprintf("cookie=%#x/-1", brex.BaseCookie))
		n.Ofctl("del-flows", testbed.ClusterBridge, fmt.Sprintf("cookie=%#x/-1", brex.ServiceCookie(svcNS, svcName, vip, 80)))
		deleted := time.Now()
		h.eventually(t, 30*time.Second, "the deleted flows back on "+n.Name, func() error {
			got, err := ownedFlows(n, false)
			if err == nil && !slices.Equal(got, want) {
				err = fmt.Errorf("%d owned flows, want %d", len(got), len(want))
			}
			return err
		})
		restored := time.Since(deleted)
		line, err := e2e.Reply(h.cl.Client, vip.String()+":80", 1000, 3*time.Second)
		if err != nil || !strings.HasPrefix(line, backendName+" ") {
			t.Errorf("round %d: %s:80 answered %q, %v after the flows came back", round, vip, line, err)
		}
		h.measured(fmt.Sprintf("bridge drift round %d: flows deleted -> restored", round), restored)
	}
}
