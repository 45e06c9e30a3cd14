package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// TestNodeFenceSurvivesRestart runs the node work against a real bridge:
// the node holds an OVN-hosted egress IP, the IP moves to another node
// and the node fences it; a new process (the node instance restarted
// within the hold) keeps the fence it finds on the bridge, where its first
// write would otherwise have removed it, and lifts it once the IP comes
// back.
func TestNodeFenceSurvivesRestart(t *testing.T) {
	ovs, cfg := demoBridge(t, "--gateway-flows=false")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, c := loadDemo(t, cfg, nil)
	on := func(node string) func(d *Dataplane) {
		return func(d *Dataplane) {
			t.Helper()
			if err := d.Node(ctx, demoSnapshot(t, map[string]string{"egressip.yaml": egressIPOn(node)})); err != nil {
				t.Fatal(err)
			}
		}
	}
	fence := fmt.Sprintf("cookie=%#x, priority=%d,arp,", brex.FenceCookie, brex.PriorityEgressFence)
	fenced := func() bool {
		for l := range strings.Lines(ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt())) {
			if strings.Contains(l, fence) && strings.Contains(l, "arp_spa=172.18.0.44,arp_op=2 actions=drop") {
				return true
			}
		}
		return false
	}

	d := NewDataplane(cfg, c, record.NewFakeRecorder(100), NewMetrics(), quiet)
	on("ovn-worker2")(d)
	if fenced() {
		t.Fatal("fenced while the node holds the IP")
	}
	on("ovn-worker")(d)
	if !fenced() {
		t.Fatalf("no fence once the IP moved away:\n%s", ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt()))
	}
	d.Close()

	d = NewDataplane(cfg, c, record.NewFakeRecorder(100), NewMetrics(), quiet)
	defer d.Close()
	on("ovn-worker")(d)
	if !fenced() {
		t.Fatalf("the restarted node removed the fence:\n%s", ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt()))
	}
	on("ovn-worker2")(d)
	if fenced() {
		t.Fatal("the fence stayed once the IP came back")
	}
}
