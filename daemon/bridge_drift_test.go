package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

// TestNodeBridgeDriftAndRestart runs the node work with the gateway flows
// against a real bridge: flows deleted or changed by hand come back
// within seconds with a log line naming the owners repaired; a restarted
// daemon with the same objects sends nothing (0 flows deleted and added
// again); one started after a Service was deleted removes that Service's
// flows (orphans of the previous process) and keeps another controller's.
func TestNodeBridgeDriftAndRestart(t *testing.T) {
	ovs, cfg := demoBridge(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, c := loadDemo(t, cfg, nil)
	ovs.Ofctl("add-flow", ovs.Mgmt(), "cookie=0x77,priority=7,udp,actions=drop")
	dump := func() string {
		t.Helper()
		b, err := ovsflow.SortDump([]byte(ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt())))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	start := func() (*Dataplane, *Metrics, *lockedBuilder) {
		logs := &lockedBuilder{}
		m := NewMetrics()
		d := NewDataplane(cfg, c, record.NewFakeRecorder(100), m, slog.New(slog.NewTextHandler(logs, nil)))
		return d, m, logs
	}

	d, m, logs := start()
	if err := d.Node(ctx, s); err != nil {
		t.Fatal(err)
	}
	want := dump()
	if !strings.Contains(want, "arp_tpa=172.18.0.200") || !strings.Contains(want, "cookie=0x77") {
		t.Fatalf("bridge after the first apply:\n%s", want)
	}
	waitBridge := func(what string) {
		t.Helper()
		begin := time.Now()
		for got := dump(); got != want; got = dump() {
			if time.Since(begin) > 5*time.Second {
				t.Fatalf("%s: bridge not repaired within 5s:\n%s", what, flowtest.Diff(want, got))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s: repaired in %v", what, time.Since(begin).Round(time.Millisecond))
	}
	time.Sleep(200 * time.Millisecond) // the applier's Run connects and resyncs once
	ovs.Ofctl("del-flows", ovs.Mgmt(), "cookie=0xdeff105/-1")
	waitBridge("base flows deleted by hand")
	ovs.Ofctl("del-flows", ovs.Mgmt(), "arp,arp_tpa=172.18.0.200")
	waitBridge("a Service's flows deleted by hand")
	for begin := time.Now(); strings.Count(logs.String(), "bridge flows repaired") < 2 && time.Since(begin) < 5*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range []string{"owners=\"[base egress]\"", "owners=[service/prod/web]", "DELETED cookie=0xdeff105"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("repair logs lack %q:\n%s", want, logs.String())
		}
	}
	if n := gathered(t, m, "ovnedge_flow_repairs_total", "bridge=br-ex"); n < 2 {
		t.Errorf("ovnedge_flow_repairs_total{bridge=br-ex} = %v after two repairs", n)
	}
	d.Close()

	d, m, _ = start()
	if err := d.Node(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"add", "modify", "delete"} {
		if n := gathered(t, m, "ovnedge_flow_operations_total", "op="+op); n != 0 {
			t.Errorf("restart with the same objects: %v flows %s, want none", n, op)
		}
	}
	if got := dump(); got != want {
		t.Errorf("restart with the same objects changed the bridge:\n%s", flowtest.Diff(want, got))
	}
	d.Close()

	noSvc, _ := loadDemo(t, demoConfig(t), map[string]string{"services.yaml": ""})
	d, m, _ = start()
	defer d.Close()
	if err := d.Node(ctx, noSvc); err != nil {
		t.Fatal(err)
	}
	got := dump()
	if strings.Contains(got, "arp_tpa=172.18.0.200") || strings.Contains(got, "nw_dst=172.18.0.201") || strings.Contains(got, "tp_dst=30080") ||
		!strings.Contains(got, "cookie=0x77") || !strings.Contains(got, "nat(src=172.18.0.3)") {
		t.Errorf("restart after the Services were deleted: orphans left or flows lost:\n%s", got)
	}
	if gathered(t, m, "ovnedge_flow_operations_total", "op="+"delete") == 0 || gathered(t, m, "ovnedge_flow_operations_total", "op="+"add") != 0 {
		t.Errorf("restart after the Services were deleted: %v deleted, %v added; want deletes only",
			gathered(t, m, "ovnedge_flow_operations_total", "op="+"delete"), gathered(t, m, "ovnedge_flow_operations_total", "op="+"add"))
	}
}
