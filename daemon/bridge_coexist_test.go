package daemon

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
	"github.com/ovnedge/ovnedge/testbed"
)

// coexistEnv sets how long TestBridgeCoexistOVNKubeNode runs ovnedge beside
// ovnkube-node's flows (a Go duration; 30s by default, 5s with -short).
const coexistEnv = "OVNEDGE_COEXIST_DURATION"

// TestBridgeCoexistOVNKubeNode: a bridge holds the flows ovnkube-node writes for
// the demo Services (OVN-Kubernetes' cookies: its Service hashes on the
// NodePort, VIP and ARP bypass flows at 110, 0xdeff105 on its default
// flows), and ovnedge's node work runs with --gateway-flows=false on the
// same objects for a while, syncing every 200 ms and verifying the bridge
// every second. ovnedge adds its own egress flows once, then sends nothing:
// no flow-mod at all on the bridge (ovs-ofctl monitor), ovnkube-node's
// flows the same before and after (and not re-added: their durations
// grew), no repair logged or counted.
func TestBridgeCoexistOVNKubeNode(t *testing.T) {
	run := coexistDuration(t)
	ovs, cfg := demoBridge(t, "--gateway-flows=false")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, c := loadDemo(t, cfg, nil)
	ovnk := installOVNKubeNode(t, ovs, s)

	logs := &lockedBuilder{}
	m := NewMetrics()
	d := NewDataplane(cfg, c, record.NewFakeRecorder(1000), m, slog.New(slog.NewTextHandler(logs, nil)))
	defer d.Close()
	if err := d.Node(ctx, s); err != nil {
		t.Fatal(err)
	}
	if n := gathered(t, m, "ovnedge_flow_operations_total", "op=add"); n != 4 {
		t.Errorf("first sync added %v flows, want ovnedge's 4 egress flows", n)
	}
	for _, op := range []string{"modify", "delete"} {
		if n := gathered(t, m, "ovnedge_flow_operations_total", "op="+op); n != 0 {
			t.Errorf("first sync: %v flows %s, want none", n, op)
		}
	}
	before := ovnkubeFlows(t, ovs, ovnk, true)
	events := watchFlows(t, ovs)

	begin := time.Now()
	for i := 0; time.Since(begin) < run; i++ {
		if err := d.Node(ctx, s); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			if err := d.Verify(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // late monitor events

	if ev := events(); len(ev) > 0 {
		t.Errorf("%d flow-mods on the bridge in %v:\n%s", len(ev), run, strings.Join(ev, "\n"))
	}
	after := ovnkubeFlows(t, ovs, ovnk, true)
	if b, a := strings.Join(ovnk, "\n"), stripAll(after); b != a {
		t.Errorf("ovnkube-node's flows changed:\n%s", flowtest.Diff(b, a))
	}
	if !durationsGrew(before, after, run) {
		t.Errorf("ovnkube-node's flows were re-added (durations did not grow by %v):\nbefore\n%s\nafter\n%s", run,
			strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	if n := gathered(t, m, "ovnedge_flow_repairs_total", "bridge=br-ex"); n != 0 || strings.Contains(logs.String(), "repaired") {
		t.Errorf("%v repairs counted; logs:\n%s", n, logs.String())
	}
	for _, op := range []string{"modify", "delete"} {
		if n := gathered(t, m, "ovnedge_flow_operations_total", "op="+op); n != 0 {
			t.Errorf("%v flows %s, want none", n, op)
		}
	}
	if !t.Failed() {
		t.Logf("%d flows of ovnkube-node and ovnedge's egress flows untouched for %v", len(ovnk), run)
	}
}

// TestRestartRemovesOrphans: a daemon started anew after objects changed
// while none ran deletes the flows a previous process left for owners
// gone, in both modes, and nothing else. With the gateway flows a
// Service's flows (OVN-Kubernetes' cookies, known by their shape) and a
// flow an older ovnedge left with its marked cookie; beside ovnkube-node
// (--gateway-flows=false) ovnedge's own flows only (its egress flows, the
// EgressIP feature turned off, and a fence left behind), while
// ovnkube-node's flows stay, those of the deleted Service too (they are
// ovnkube-node's to remove), and so does another controller's flow.
func TestRestartRemovesOrphans(t *testing.T) {
	const foreign = "cookie=0x77, priority=7,udp actions=drop"
	for _, c := range []struct {
		name      string
		args      []string // both runs
		again     []string // the second run's
		ovnk      bool     // the bridge holds ovnkube-node's flows
		leftovers []string // flows a previous process left, gone after the restart
		gone      []string // in the first run's dump, not in the second's
		kept      []string // in both
		deleted   float64
	}{
		{name: "gateway flows",
			leftovers: []string{"cookie=0xede000000000099, priority=110,arp,in_port=UPLINK,arp_tpa=172.18.0.99,arp_op=1 actions=LOCAL"},
			gone:      []string{"arp_tpa=172.18.0.200", "nw_dst=172.18.0.201", "tp_dst=30080", "arp_tpa=172.18.0.99"},
			kept:      []string{foreign, "cookie=0xdeff105, priority=0 actions=NORMAL", "nat(src=172.18.0.3)"},
			deleted:   11},
		{name: "beside ovnkube-node", args: []string{"--gateway-flows=false"}, again: []string{"--enable-egress-ip=false"}, ovnk: true,
			leftovers: []string{fmt.Sprintf("cookie=%#x, priority=120,arp,in_port=PATCH,arp_spa=172.18.0.99,arp_op=2 actions=drop", brex.FenceCookie)},
			gone:      []string{fmt.Sprintf("cookie=%#x", brex.EgressCookie), fmt.Sprintf("cookie=%#x", brex.FenceCookie)},
			kept:      []string{foreign, "arp_tpa=172.18.0.200", "nw_dst=172.18.0.201", "tp_dst=30080", "cookie=0xdeff105, priority=9"},
			deleted:   5},
	} {
		t.Run(c.name, func(t *testing.T) {
			ovs := testbed.StartOVS(t, testbed.OVSOptions{Bridge: "br-ex", Node: "ovn-worker2", HostIP: "172.18.0.3/24"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := append([]string{"--ovs-db", ovs.DB, "--ovs-rundir", ovs.RunDir, "--bridge", ovs.Bridge,
				"--node-name", "ovn-worker2", "--uplink", ovs.Uplink, "--patch-port", ovs.Patch}, c.args...)
			cfg := demoConfig(t, args...)
			s, cl := loadDemo(t, cfg, nil)
			if c.ovnk {
				installOVNKubeNode(t, ovs, s)
			}
			ovs.Ofctl("add-flow", ovs.Mgmt(), foreign)
			runNodeOnce(t, ctx, cfg, cl, s)
			first := ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt())
			ports := strings.NewReplacer("UPLINK", fmt.Sprint(ovs.Ofport(ovs.Uplink)), "PATCH", fmt.Sprint(ovs.Ofport(ovs.Patch)))
			for _, l := range c.leftovers {
				ovs.Ofctl("add-flow", ovs.Mgmt(), ports.Replace(l))
			}

			cfg2 := demoConfig(t, append(args, c.again...)...)
			noSvc, cl2 := loadDemo(t, cfg2, map[string]string{"services.yaml": ""})
			m := runNodeOnce(t, ctx, cfg2, cl2, noSvc)
			second := ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt())
			for _, w := range c.gone {
				if !strings.Contains(first+strings.Join(c.leftovers, "\n"), w) || strings.Contains(second, w) {
					t.Errorf("%q: want it before the restart and gone after:\nbefore\n%s\nafter\n%s", w, first, second)
				}
			}
			for _, w := range c.kept {
				if !strings.Contains(first, w) || !strings.Contains(second, w) {
					t.Errorf("%q: want it kept:\nbefore\n%s\nafter\n%s", w, first, second)
				}
			}
			if n := gathered(t, m, "ovnedge_flow_operations_total", "op=delete"); n != c.deleted {
				t.Errorf("restart deleted %v flows, want %v:\n%s", n, c.deleted, second)
			}
			for _, op := range []string{"add", "modify"} {
				if n := gathered(t, m, "ovnedge_flow_operations_total", "op="+op); n != 0 {
					t.Errorf("restart: %v flows %s, want none", n, op)
				}
			}
		})
	}
}

// runNodeOnce runs one node pass of a new daemon on s and closes it.
func runNodeOnce(t *testing.T, ctx context.Context, cfg *Config, c *Clients, s desired.Snapshot) *Metrics {
	t.Helper()
	m := NewMetrics()
	d := NewDataplane(cfg, c, record.NewFakeRecorder(100), m, quiet)
	defer d.Close()
	if err := d.Node(ctx, s); err != nil {
		t.Fatal(err)
	}
	return m
}

func coexistDuration(t *testing.T) time.Duration {
	if v := os.Getenv(coexistEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: %v", coexistEnv, err)
		}
		return d
	}
	if testing.Short() {
		return 5 * time.Second
	}
	return 30 * time.Second
}

// installOVNKubeNode writes on the bridge the flows ovnkube-node programs
// on ovn-worker2 for s in shared gateway mode, and returns them as the
// bridge shows them (sorted, without statistics). The Services' flows are
// those ovnedge renders with the gateway flows, which equal
// OVN-Kubernetes' own test expectations, cookies included (package brex's
// TestServiceFlowsMatchOVNKubernetes); the default flows are written the
// way go-controller/pkg/node/bridgeconfig/bridgeflows.go writes them for
// the default network over IPv4, with its cookie 0xdeff105.
func installOVNKubeNode(t *testing.T, ovs *testbed.OVS, s desired.Snapshot) []string {
	t.Helper()
	mac := strings.Trim(ovs.Vsctl("get", "Interface", ovs.Bridge, "mac_in_use"), `"`)
	p := demoParams(t, "--bridge-mac", mac, "--uplink", ovs.Uplink, "--patch-port", ovs.Patch)
	ns, err := desired.ComputeNode(s, p, "ovn-worker2")
	if err != nil {
		t.Fatal(err)
	}
	var prog ovsflow.Program
	for owner, flows := range ns.Sets {
		if strings.HasPrefix(owner, "service/") {
			if err := prog.Set(owner, flows); err != nil {
				t.Fatal(err)
			}
		}
	}
	up, patch := ovs.Ofport(ovs.Uplink), ovs.Ofport(ovs.Patch)
	text, err := prog.Render(ovsflow.PortMap{ovs.Uplink: uint32(up), ovs.Patch: uint32(patch)})
	if err != nil {
		t.Fatal(err)
	}
	base := []string{
		"priority=105, in_port=PATCH, dl_src=MAC, ip, pkt_mark=0x3f0, actions=ct(commit, zone=64000, nat(src=NODEIP), exec(set_field:0x1->ct_mark)),output:UPLINK",
		"priority=100, in_port=PATCH, dl_src=MAC, ip, actions=ct(commit, zone=64000, exec(set_field:0x1->ct_mark)), output:UPLINK",
		"priority=100, in_port=LOCAL, ip, actions=ct(commit, zone=64000, exec(set_field:0x2->ct_mark)), output:UPLINK",
		"priority=50, ip, dl_dst=MAC, actions=ct(zone=64000, nat, table=1)",
		"priority=10, table=0, dl_dst=MAC, actions=output:PATCH,NORMAL",
		"priority=10, table=0, in_port=PATCH, dl_src=MAC, actions=output:NORMAL",
		"priority=9, table=0, in_port=PATCH, actions=drop",
		"priority=0, table=0, actions=NORMAL",
		"priority=100, table=1, ip, ct_state=+trk+est, ct_mark=0x1, actions=output:PATCH",
		"priority=100, table=1, ip, ct_state=+trk+rel, ct_mark=0x1, actions=output:PATCH",
		"priority=100, table=1, ip, ct_state=+trk+est, ct_mark=0x2, actions=LOCAL",
		"priority=100, table=1, ip, ct_state=+trk+rel, ct_mark=0x2, actions=LOCAL",
		"priority=10, table=1, dl_dst=MAC, actions=LOCAL",
		"priority=0, table=1, actions=NORMAL",
	}
	fill := strings.NewReplacer("UPLINK", fmt.Sprint(up), "PATCH", fmt.Sprint(patch), "MAC", mac, "NODEIP", "172.18.0.3")
	var b strings.Builder
	b.Write(text)
	for _, f := range base {
		b.WriteString(fill.Replace("cookie=0xdeff105, "+f) + "\n")
	}
	file := t.TempDir() + "/ovnkube-node.flows"
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ovs.Ofctl("add-flows", ovs.Mgmt(), file)
	flows := ovnkubeFlows(t, ovs, nil, false)
	if !slices.ContainsFunc(flows, func(l string) bool { return strings.Contains(l, "arp_tpa=172.18.0.200") }) || len(flows) < 20 {
		t.Fatalf("ovnkube-node's flows not installed:\n%s", strings.Join(flows, "\n"))
	}
	return flows
}

// ovnkubeFlows are the bridge's flows of ovnkube-node: those with the
// key (table, priority, match) of one of want (lines without statistics)
// when not nil, else every flow without an ovnedge cookie nor the test's
// marker; with statistics or not, sorted by their text without
// statistics.
func ovnkubeFlows(t *testing.T, ovs *testbed.OVS, want []string, stats bool) []string {
	t.Helper()
	keys := map[string]bool{}
	for _, l := range want {
		keys[flowKey(l)] = true
	}
	args := []string{"dump-flows", ovs.Mgmt()}
	if !stats {
		args = append([]string{"--no-stats"}, args...)
	}
	var out []string
	for l := range strings.Lines(ovs.Ofctl(args...)) {
		l = strings.TrimSpace(l)
		f, err := ovsflow.ParseFlow(stripStats(l))
		switch {
		case l == "" || strings.HasPrefix(l, "OFPST_FLOW") || strings.Contains(l, "cookie=0x5eed"):
		case want != nil && !keys[flowKey(l)]:
		case want == nil && err == nil && brex.OwnedCookie(f.Cookie):
		default:
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(stripStats(a), stripStats(b)) })
	return out
}

// flowKey is a dump line's table, priority and match.
func flowKey(l string) string {
	head, _, _ := strings.Cut(stripStats(l), " actions=")
	_, key, _ := strings.Cut(head, ", ") // the cookie
	return key
}

// statFields are the fields of a dump line that change by themselves.
var statFields = []string{"duration=", "n_packets=", "n_bytes=", "idle_age=", "hard_age=", "reset_counts"}

// stripStats removes the statistics of a dump line (and table=0, which
// only a dump with statistics shows).
func stripStats(l string) string {
	var keep []string
	for f := range strings.SplitSeq(l, ", ") {
		if f != "table=0" && !slices.ContainsFunc(statFields, func(s string) bool { return strings.HasPrefix(f, s) }) {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, ", ")
}

// stripAll is lines without their statistics, one a line.
func stripAll(lines []string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = stripStats(l)
	}
	return strings.Join(out, "\n")
}

// durationsGrew reports whether every flow of after is at least d older
// than in before (the same flows, in the same order): none was added anew.
func durationsGrew(before, after []string, d time.Duration) bool {
	if len(before) != len(after) {
		return false
	}
	for i := range before {
		b, a := flowDuration(before[i]), flowDuration(after[i])
		if b < 0 || a < b+d {
			return false
		}
	}
	return true
}

func flowDuration(l string) time.Duration {
	for f := range strings.SplitSeq(l, ", ") {
		if v, ok := strings.CutPrefix(f, "duration="); ok {
			if d, err := time.ParseDuration(v); err == nil {
				return d
			}
		}
	}
	return -1
}

// watchFlows starts `ovs-ofctl monitor <bridge> watch:!initial` and waits
// until it reports a marker flow the test adds (cookie 0x5eed, another
// controller's); the function returned gives the flow changes reported
// since, the marker's left out.
func watchFlows(t *testing.T, ovs *testbed.OVS) func() []string {
	t.Helper()
	cmd := exec.Command("ovs-ofctl", "monitor", ovs.Mgmt(), "watch:!initial")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// The flow updates come on stderr (unbuffered); the control socket
	// goes to the test's run directory.
	cmd.Stderr = cmd.Stdout
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+ovs.RunDir)
	if err := cmd.Start(); err != nil {
		t.Fatalf("ovs-ofctl monitor: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var mu sync.Mutex
	var events, all []string
	marked := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := strings.TrimSpace(sc.Text())
			mu.Lock()
			all = append(all, l)
			mu.Unlock()
			switch {
			case strings.Contains(l, "cookie=0x5eed"):
				select {
				case <-marked:
				default:
					close(marked)
				}
			case strings.Contains(l, "event="):
				mu.Lock()
				events = append(events, l)
				mu.Unlock()
			}
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ovs.Ofctl("add-flow", ovs.Mgmt(), "cookie=0x5eed,table=250,priority=1,actions=drop")
		select {
		case <-marked:
			return func() []string {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(events)
			}
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("ovs-ofctl monitor reported no flow change within 10s:\n%s", strings.Join(all, "\n"))
		}
	}
}
