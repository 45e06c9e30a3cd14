package ovsdbnb_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// serviceOwner is the owner of the i-th generated Service.
func serviceOwner(i int) ovsdbnb.Owner {
	return ovsdbnb.Owner{Type: "Service", Name: fmt.Sprintf("default/svc-%d", i)}
}

// serviceLB is the cluster load balancer of the i-th generated Service:
// VIP 10.96.x.y:80, three backends; gen varies the first backend.
func serviceLB(i, gen int) ovsdbnb.LoadBalancer {
	return ovsdbnb.LoadBalancer{
		Name: fmt.Sprintf("Service_default/svc-%d_TCP_cluster", i), Protocol: "tcp",
		VIPs: map[string]string{fmt.Sprintf("10.96.%d.%d:80", i/250, i%250+1): fmt.Sprintf(
			"10.244.%d.%d:8080,10.244.1.%d:8080,10.244.2.%d:8080", gen%200, i%250+1, i%250+1, i%250+1)},
		Options:     map[string]string{"reject": "true", "event": "false", "skip_snat": "false"},
		ExternalIDs: map[string]string{ovsdbnb.KeyKind: "Service", ovsdbnb.KeyOwner: fmt.Sprintf("default/svc-%d", i)},
	}
}

// services is the desired state of n generated Services, one load
// balancer each.
func services(n int) map[ovsdbnb.Owner]ovsdbnb.State {
	desired := make(map[ovsdbnb.Owner]ovsdbnb.State, n)
	for i := range n {
		desired[serviceOwner(i)] = ovsdbnb.State{LoadBalancers: []ovsdbnb.LoadBalancer{serviceLB(i, 0)}}
	}
	return desired
}

// onLog is a slog handler that calls fn with every record whose message
// is msg, and drops all records.
type onLog struct {
	msg string
	fn  func(slog.Record)
}

func (h onLog) Enabled(context.Context, slog.Level) bool { return true }
func (h onLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.fn(r)
	}
	return nil
}
func (h onLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onLog) WithGroup(string) slog.Handler      { return h }

// attr returns the string value of r's attribute key.
func attr(r slog.Record, key string) string {
	v := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// TestRaftLeaderKilled writes 1,000 load balancers in 20 transactions to a
// 3-member NB cluster and kills the leader after the first commit, either
// before the next transaction is sent or while it may be in flight (its
// reply then lost, committed or not): the client moves to the new leader
// and the end state is the desired one, without a duplicate row.
func TestRaftLeaderKilled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		async bool
	}{{"between transactions", false}, {"during a transaction", true}} {
		t.Run(tc.name, func(t *testing.T) { raftLeaderKilled(t, tc.async) })
	}
}

func raftLeaderKilled(t *testing.T, async bool) {
	cl := testbed.StartNBCluster(t, 3)
	var killed atomic.Pointer[testbed.NBMember]
	kill := make(chan error, 1)
	h := onLog{msg: "ovsdbnb: transaction committed", fn: func(r slog.Record) {
		m := cl.Member(attr(r, "endpoint"))
		if m == nil || !killed.CompareAndSwap(nil, m) {
			return
		}
		if async {
			go func() { kill <- cl.Kill(m) }()
		} else {
			kill <- cl.Kill(m)
		}
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: cl.Remotes(), Logger: slog.New(h),
		ConnectTimeout: time.Second, InactivityProbe: 2 * time.Second, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(c.Close)
	if leader := cl.Leader(); leader == nil || c.Endpoint() != leader.Remote {
		t.Fatalf("client on %s, want the leader %v", c.Endpoint(), leader)
	}

	const n = 1000
	desired := services(n)
	// Each owner is one insert: 50 owners per transaction.
	res, err := c.SyncWith(ctx, desired, ovsdbnb.SyncOptions{BatchOps: 50})
	if err != nil {
		t.Fatalf("Sync across the leader's death: %v", err)
	}
	dead := killed.Load()
	if dead == nil {
		t.Fatal("no transaction committed, the leader was never killed")
	}
	if err := <-kill; err != nil {
		t.Fatal(err)
	}
	leader := cl.WaitLeader()
	t.Logf("killed %s after the first commit; client now on %s (leader %s); %+v", dead.Name, c.Endpoint(), leader.Name, res)
	if c.Endpoint() == dead.Remote || c.Endpoint() != leader.Remote {
		t.Errorf("client on %s, want the new leader %s", c.Endpoint(), leader.Remote)
	}
	// A transaction whose reply was lost may have committed: its rows
	// are then found, not inserted again. Killed "between transactions",
	// the next one can still be in flight (two are pipelined): its loss
	// shows as a replan.
	if res.Owners != n || res.Inserts > n || (!async && res.Replans == 0 && (res.Inserts != n || res.Transactions != n/50)) {
		t.Errorf("result %+v, want %d owners synced, %d inserts in %d transactions", res, n, n, n/50)
	}

	names := strings.Fields(cl.Nbctl("--bare", "--columns=name", "list", "Load_Balancer"))
	sort.Strings(names)
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			t.Errorf("duplicate load balancer %s", names[i])
		}
	}
	if len(names) != n {
		t.Errorf("%d load balancers on the cluster, want %d", len(names), n)
	}
	if got := cl.Nbctl("get", "Load_Balancer", "Service_default/svc-999_TCP_cluster", "vips"); !strings.Contains(got, `"10.96.3.250:80"="10.244.0.250:8080,10.244.1.250:8080,10.244.2.250:8080"`) {
		t.Errorf("svc-999 vips: %s", got)
	}
	if res := sync(t, c, desired); res.Ops() != 0 {
		t.Errorf("sync after failover sent %+v, want 0 ops", res)
	}
}
