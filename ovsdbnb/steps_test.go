package ovsdbnb_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

var eipB = ovsdbnb.Owner{Type: "EgressIP", Name: "eip2"}

// moveState is an EgressIP owner's rows: its pod rerouted to nexthop on
// lr0, and SNATed to its egress IP on the gateway routers gws.
func moveState(pod, egressIP, nexthop string, gws ...string) ovsdbnb.State {
	ids := map[string]string{ovsdbnb.KeyOwnerController: ovsdbnb.DefaultController, ovsdbnb.KeyOwnerType: "EgressIP"}
	st := ovsdbnb.State{Policies: []ovsdbnb.RouterPolicy{{Router: "lr0", Priority: 100, Match: "ip4.src == " + pod,
		Action: "reroute", Nexthops: []string{nexthop}, ExternalIDs: ids}}}
	for _, gw := range gws {
		st.NATs = append(st.NATs, ovsdbnb.NAT{Router: gw, Type: "snat", ExternalIP: egressIP, LogicalIP: pod,
			Options: map[string]string{"stateless": "false"}, ExternalIDs: ids})
	}
	return st
}

// moveSteps are the make-before-break steps of two EgressIP owners
// moving from gr1 (nexthop 100.64.0.1) to gr2 (100.64.0.2): the SNATs on
// gr2, the reroute, the SNATs on gr1 deleted.
func moveSteps() (old map[ovsdbnb.Owner]ovsdbnb.State, steps []map[ovsdbnb.Owner]ovsdbnb.State) {
	both := func(nexthop string, gws ...string) map[ovsdbnb.Owner]ovsdbnb.State {
		return map[ovsdbnb.Owner]ovsdbnb.State{eip: moveState("10.244.1.3", "172.18.0.33", nexthop, gws...),
			eipB: moveState("10.244.1.4", "172.18.0.44", nexthop, gws...)}
	}
	return both("100.64.0.1", "gr1"), []map[ovsdbnb.Owner]ovsdbnb.State{
		both("100.64.0.1", "gr1", "gr2"), both("100.64.0.2", "gr1", "gr2"), both("100.64.0.2", "gr2")}
}

// records returns the records of the NB's database log, its
// transactions in the order they committed (ovsdb-tool show-log -m).
func records(t *testing.T, o *testbed.OVN) []string {
	t.Helper()
	out, err := exec.Command("ovsdb-tool", "show-log", "-m", filepath.Join(o.Dir, "nb.db")).CombinedOutput()
	if err != nil {
		t.Fatalf("ovsdb-tool show-log: %v: %s", err, out)
	}
	return regexp.MustCompile(`(?m)^record `).Split(string(out), -1)
}

// inOrder fails t unless, for each pattern, the first record of the
// database log from the from'th on whose changes match it comes after
// that of the pattern before.
func inOrder(t *testing.T, o *testbed.OVN, from int, patterns ...string) {
	t.Helper()
	recs := records(t, o)
	at := make([]int, len(patterns))
	for i, p := range patterns {
		re := regexp.MustCompile(p)
		at[i] = -1
		for n := from; n < len(recs); n++ {
			if re.MatchString(recs[n]) {
				at[i] = n
				break
			}
		}
		if i > 0 && (at[i-1] < 0 || at[i] <= at[i-1]) {
			t.Errorf("the steps' commits are records %v of the database log, want increasing", at)
			return
		}
	}
}

// moveOrder are the changes of moveSteps' steps in the database log.
var moveOrder = []string{`table NAT insert`, `table Logical_Router_Policy row \S+ \(\S+\) diff`, `table NAT row \S+ \(\S+\) diff:\s+delete row`}

// holds fails t unless the NB's EgressIP owners of want are as want.
func holds(t *testing.T, c *ovsdbnb.Client, want map[ovsdbnb.Owner]ovsdbnb.State, what string) {
	t.Helper()
	got, err := c.Current("EgressIP")
	if err != nil {
		t.Fatal(err)
	}
	for ow, st := range want {
		if !got[ow].Equal(st.Sorted()) {
			t.Errorf("%s in the NB: %+v\nwant %s: %+v", ow, got[ow], what, st.Sorted())
		}
	}
}

// syncWithoutGR2 deletes gr2 while c's cache lags for lag (its
// updates held by proxy), and syncs steps.
func syncWithoutGR2(t *testing.T, o *testbed.OVN, proxy *lagProxy, c *ovsdbnb.Client, steps []map[ovsdbnb.Owner]ovsdbnb.State,
	lag time.Duration) []ovsdbnb.StepResult {
	t.Helper()
	proxy.hold()
	o.Nbctl("lr-del", "gr2")
	release := time.AfterFunc(lag, proxy.release)
	defer release.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c.SyncSteps(ctx, steps)
}

// moveBed is an NB with the routers of moveSteps, a client to it through
// a lag proxy, and moveSteps' owners synced to where they move from.
func moveBed(t *testing.T) (*testbed.OVN, *lagProxy, *ovsdbnb.Client) {
	t.Helper()
	o := testbed.StartOVN(t)
	o.Nbctl("lr-add", "lr0", "--", "lr-add", "gr1", "--", "lr-add", "gr2")
	proxy, endpoint := newLagProxy(t, o.NB)
	c := dial(t, endpoint)
	old, _ := moveSteps()
	sync(t, c, old)
	return o, proxy, c
}

// TestSyncSteps: a step that changes other parts of its owners' States
// than the step before is sent behind it, not waiting for its reply, and
// still commits after it; one that takes back rows the step before
// writes waits. Either way the NB ends as the last step.
func TestSyncSteps(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("lr-add", "lr0", "--", "lr-add", "gr1", "--", "lr-add", "gr2", "--", "lr-add", "gr3")
	c := dial(t, o.NB)
	old, move := moveSteps()
	tests := []struct {
		name     string
		steps    []map[ovsdbnb.Owner]ovsdbnb.State
		followed []int
		// order are patterns of the steps' changes in the database
		// log, to be committed in that order.
		order []string
	}{
		{"make, reroute, break", move, []int{0, 1, 1}, moveOrder},
		{"no owner in common", []map[ovsdbnb.Owner]ovsdbnb.State{{eip: move[0][eip]},
			{eipB: moveState("10.244.1.4", "172.18.0.44", "100.64.0.2", "gr1")}}, []int{0, 1},
			[]string{`table NAT insert`, `table Logical_Router_Policy row \S+ \(\S+\) diff`}},
		// Planned against the cache the step before has not reached,
		// it would leave that step's SNATs: it waits for it.
		{"a step taking back what the step before writes", []map[ovsdbnb.Owner]ovsdbnb.State{move[0], old}, []int{0, 0}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{eip: {}, eipB: {}})
			sync(t, c, old)
			from := len(records(t, o))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res := c.SyncSteps(ctx, tc.steps)
			for i, r := range res {
				if r.Err != nil {
					t.Fatalf("step %d: %v", i, r.Err)
				}
				if r.Followed != tc.followed[i] {
					t.Errorf("step %d: %+v, want %d followed", i, r.Result, tc.followed[i])
				}
			}
			holds(t, c, tc.steps[len(tc.steps)-1], "the last step")
			inOrder(t, o, from, tc.order...)
		})
	}
}

// TestSyncStepsRefused: the step before a followed step is refused by
// the server (its gateway router gr2 deleted while the cache, lagging,
// still shows it). The followed step's wait on its owners' rows fails
// and it is planned again once the step before is done: it is refused
// too, as Sync after Sync would refuse it, and the reroute never moves
// to a node without its SNAT.
func TestSyncStepsRefused(t *testing.T) {
	o, proxy, c := moveBed(t)
	old, move := moveSteps()
	res := syncWithoutGR2(t, o, proxy, c, move, 1500*time.Millisecond)
	if res[1].Followed != 1 || res[1].Replans == 0 {
		t.Errorf("the reroute: %+v, want it sent behind the SNATs, then planned again", res[1].Result)
	}
	for i, r := range res {
		var se *ovsdbnb.SyncError
		if !errors.As(r.Err, &se) || len(se.Owners) != 2 {
			t.Errorf("step %d: %v, want both owners refused", i, r.Err)
		}
		if r.Ops() != 0 {
			t.Errorf("step %d wrote %+v, want nothing", i, r.Result)
		}
	}
	holds(t, c, old, "it unchanged")
	if pol := o.Nbctl("lr-policy-list", "lr0"); strings.Contains(pol, "100.64.0.2") {
		t.Errorf("the reroute moved to gr2, whose SNAT was refused:\n%s", pol)
	}
}

// TestSyncStepsAllSent: the break of a move (its old SNATs deleted)
// changes the part the first step (the new SNATs) writes, and is still
// sent before that step is answered: planned against the cache as it
// was, less what the steps pending write. Every reply of the server is
// held until the client has sent the three transactions (for at most a
// second): a break that waited for the first step's reply would be sent
// after that second. The commits keep their order and the NB ends as the
// last step.
func TestSyncStepsAllSent(t *testing.T) {
	o, proxy, c := moveBed(t)
	_, move := moveSteps()
	from := len(records(t, o))

	sent := proxy.holdUntil(3, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := c.SyncSteps(ctx, move)
	if n := <-sent; n != 3 {
		t.Errorf("%d transactions sent before the first reply, want the 3 steps", n)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("step %d: %v", i, r.Err)
		}
		if want := min(i, 1); r.Followed != want || r.Replans != 0 {
			t.Errorf("step %d: %+v, want %d followed, no replan", i, r.Result, want)
		}
	}
	holds(t, c, move[2], "the last step")
	inOrder(t, o, from, moveOrder...)
}

// TestSyncStepsOlderRefused: a step sent behind two unanswered steps
// changes the reroute of an owner (eip1) whose SNATs only the first of
// them writes, and the server refuses eip1 in that step (gr2 deleted
// while the cache, lagging, still shows it) but commits its other
// owner, which the step before follows. The step waits for the first
// step's rows of eip1 too, not only for the step before: it is planned
// again and refused, and the reroute never moves to a node without its
// SNAT.
func TestSyncStepsOlderRefused(t *testing.T) {
	o, proxy, c := moveBed(t)
	nat := func(ip string) ovsdbnb.State { // eip2 rerouted to 100.64.0.3, SNATed to ip on gr1
		return moveState("10.244.1.4", ip, "100.64.0.3", "gr1")
	}
	steps := []map[ovsdbnb.Owner]ovsdbnb.State{
		{eip: moveState("10.244.1.3", "172.18.0.33", "100.64.0.1", "gr1", "gr2"), eipB: nat("172.18.0.44")},
		{eipB: nat("172.18.0.45")},
		{eip: moveState("10.244.1.3", "172.18.0.33", "100.64.0.2", "gr1", "gr2")},
	}
	res := syncWithoutGR2(t, o, proxy, c, steps, 200*time.Millisecond)
	for i, r := range res {
		var se *ovsdbnb.SyncError
		if refused := errors.As(r.Err, &se); refused != (i != 1) || i == 1 && r.Followed != 1 || i == 2 && r.Followed != 1 {
			t.Errorf("step %d: %+v, %v, want eip1 refused in steps 0 and 2 only, steps 1 and 2 followed", i, r.Result, r.Err)
		}
	}
	holds(t, c, steps[1], "the second step")
	if pol := o.Nbctl("lr-policy-list", "lr0"); strings.Contains(pol, "100.64.0.2") {
		t.Errorf("the reroute moved to gr2, whose SNAT was refused:\n%s", pol)
	}
}
