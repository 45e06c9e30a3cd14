package daemon

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/testbed"
)

// TestMainUsage checks the exit codes and messages of bad command lines.
func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout+stderr
	}{
		{nil, 2, "Commands:"},
		{[]string{"help"}, 0, "ovnedge render --manifests"},
		{[]string{"version"}, 0, "ovnedge"},
		{[]string{"lbsvc-agent", "--no-such-flag"}, 2, "no-such-flag"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"render", "--what", "flows"}, 2, "--manifests DIR is required"},
		{[]string{"render", "--manifests", "../examples/demo", "--what", "acl"}, 2, `--what "acl"`},
		{[]string{"render", "--manifests", "../examples/demo"}, 2, "needs --node"},
		{[]string{"sync", "--manifests", "../examples/demo", "--ovn-nb", "unix:/nope"}, 2, "--once is required"},
		{[]string{"daemon", "--cluster-subnets", "10.244.0.1/16"}, 2, "host bits set"},
		{[]string{"render", "-h"}, 0, "--what"},
	} {
		var out, errOut strings.Builder
		code := Main(context.Background(), tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
			t.Errorf("ovnedge %v: exit %d, want %d with %q; output:\n%s%s", tc.args, code, tc.code, tc.want, out.String(), errOut.String())
		}
	}
}

// TestMainSyncOnce runs `ovnedge sync --once` against a real NB and bridge:
// it exits 0 once the dataplane matches, and again on a second run.
func TestMainSyncOnce(t *testing.T) {
	ovn := startNB(t)
	ovs := testbed.StartOVS(t, testbed.OVSOptions{Bridge: "br-ex", Node: "ovn-worker2", HostIP: "172.18.0.3/24"})
	args := []string{"sync", "--manifests", demoDir(t, nil), "--ovn-nb", ovn.NB, "--ovs-db", ovs.DB,
		"--ovs-rundir", ovs.RunDir, "--bridge", ovs.Bridge, "--node", "ovn-worker2", "--uplink", ovs.Uplink,
		"--cluster-subnets", "10.244.0.0/16/24", "--once"}
	for run := 1; run <= 2; run++ {
		var out, errOut strings.Builder
		if code := Main(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("run %d: exit %d:\n%s", run, code, errOut.String())
		}
	}
	if p := ovn.Nbctl("lr-policy-list", "ovn_cluster_router"); !strings.Contains(p, "10.244.1.3") {
		t.Errorf("policies:\n%s", p)
	}
	if dump := ovs.Ofctl("--no-stats", "dump-flows", ovs.Mgmt()); !strings.Contains(dump, "arp_tpa=172.18.0.200") {
		t.Errorf("flows:\n%s", dump)
	}
}

// TestMainDaemonManifests runs `ovnedge daemon --manifests DIR` against a
// real NB: the EgressIP's rows appear, and go when its file is deleted;
// --log-level debug shows each reconcile; with --full-recompute 1s the
// leader audits its incremental state every second, and it matches.
//
// The egress nodes' reachability is not the subject (egress/reach's
// TestProbeDiscard and the e2e failover tests are): it is off, as the
// manifests' management addresses (10.244.x.2) are on no interface here.
// On, the leader's DISCARD probes went to them by the machine's default
// route, and the test passed only where something out there answered.
func TestMainDaemonManifests(t *testing.T) {
	ovn := startNB(t)
	dir := demoDir(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errOut lockedBuilder
	go func() {
		done <- Main(ctx, []string{"daemon", "--manifests", dir, "--nb-address", ovn.NB,
			"--cluster-subnets", "10.244.0.0/16/24", "--egressip-reachability-total-timeout", "0",
			"--metrics-address", "127.0.0.1:0", "--log-level", "debug", "--full-recompute", "1s"}, io.Discard, &errOut)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("daemon exit %d:\n%s", code, errOut.String())
		}
	}()
	waitFor := func(what string, cond func(policies string) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			p := ovn.Nbctl("lr-policy-list", "ovn_cluster_router")
			if cond(p) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; policies:\n%s\nlog:\n%s", what, p, errOut.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	reroute := func(p string) bool { return strings.Contains(p, "reroute                100.64.0.4") }
	waitFor("the EgressIP's reroute", reroute)
	if err := os.Remove(filepath.Join(dir, "egressip.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor("the reroute's removal", func(p string) bool { return !reroute(p) })
	if !strings.Contains(errOut.String(), "level=DEBUG msg=reconciled loop=cluster") {
		t.Errorf("--log-level debug: no reconcile logged:\n%s", errOut.String())
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(errOut.String(), `msg="audit: the incremental state matches a full recompute"`); {
		if time.Now().After(deadline) {
			t.Fatalf("--full-recompute 1s: no audit matched:\n%s", errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(errOut.String(), "audit: the incremental state differs") || strings.Contains(errOut.String(), "audit failed") {
		t.Errorf("an audit found the incremental state wrong:\n%s", errOut.String())
	}
}

// lockedBuilder is a strings.Builder safe for a writer and a reader.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
