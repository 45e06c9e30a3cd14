package ovsdbnb_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/testbed"
)

// writer is a Writer of EgressIP owners to the NB at endpoint, written
// make-before-break as the daemon writes them (egress.SilenceFirst).
func writer(t *testing.T, endpoint string) *ovsdbnb.Writer {
	t.Helper()
	w := ovsdbnb.NewWriter(ovsdbnb.WriterOptions{Dial: ovsdbnb.Options{Endpoints: []string{endpoint}},
		OwnerTypes: []string{"EgressIP"}, SteppedTypes: []string{"EgressIP"},
		Steps: func(old, new map[ovsdbnb.Owner]ovsdbnb.State) []map[ovsdbnb.Owner]ovsdbnb.State {
			return egress.SilenceFirst(old, new, nil)
		}})
	t.Cleanup(w.Close)
	return w
}

// TestWriterLostSync: after a sync whose outcome is unknown (the
// connection lost, or the context ended, with a transaction out: here
// the record of the stepped rows left as it was before a Write that
// committed), the next Write starts its make-before-break steps from the
// rows in the NB and deletes or inserts no router policy or NAT. The
// control case, which forgets only the owners written, deletes the
// policies the lost sync committed and inserts them again.
func TestWriterLostSync(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("lr-add", "lr0", "--", "lr-add", "gr1", "--", "lr-add", "gr2")
	c := dial(t, o.NB)
	want := map[ovsdbnb.Owner]ovsdbnb.State{eip: moveState("10.244.1.3", "172.18.0.33", "100.64.0.2", "gr2"),
		eipB: moveState("10.244.1.4", "172.18.0.44", "100.64.0.2", "gr2")}
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		lost, churn bool
	}{
		{"sync lost", true, false},
		{"control: owners forgotten only", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{eip: {}, eipB: {}})
			w := writer(t, o.NB)
			if _, err := w.Write(ctx, ovsdbnb.Desired{Stepped: want}); err != nil {
				t.Fatal(err)
			}
			waitHolds(t, c, want, "written")
			w.Forget(tc.lost)
			policies := testbed.WatchNB(t, o.NB, nbdb.LogicalRouterPolicyTable, &nbdb.LogicalRouterPolicy{},
				func(p *nbdb.LogicalRouterPolicy) string { return p.Match })
			nats := testbed.WatchNB(t, o.NB, nbdb.NATTable, &nbdb.NAT{}, func(n *nbdb.NAT) string { return n.ExternalIP })
			if _, err := w.Write(ctx, ovsdbnb.Desired{Stepped: want}); err != nil {
				t.Fatal(err)
			}
			waitHolds(t, c, want, "written again")
			time.Sleep(200 * time.Millisecond) // the watches' events
			pi, pd := policies.Churn()
			ni, nd := nats.Churn()
			if churn := pi+pd+ni+nd > 0; churn != tc.churn {
				t.Errorf("policies %d inserted, %d deleted; NATs %d inserted, %d deleted; want churn %v", pi, pd, ni, nd, tc.churn)
			}
		})
	}
}

// TestWriterRefusedRetried: an owner the server refuses (its router
// missing) is in the result, not recorded as written, and sent again by
// the next Write, which writes it once the router exists; an owner no
// longer wanted has its rows deleted.
func TestWriterRefusedRetried(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("lr-add", "lr0", "--", "lr-add", "gr1")
	c := dial(t, o.NB)
	w := writer(t, o.NB)
	ctx := context.Background()
	want := map[ovsdbnb.Owner]ovsdbnb.State{eip: moveState("10.244.1.3", "172.18.0.33", "100.64.0.1", "gr1"),
		eipB: moveState("10.244.1.4", "172.18.0.44", "100.64.0.2", "gr2")}
	res, err := w.Write(ctx, ovsdbnb.Desired{Stepped: want})
	// Each step that sends it refuses it again.
	if err == nil || len(res.Refused) == 0 || slices.ContainsFunc(res.Refused, func(oe *ovsdbnb.OwnerError) bool { return oe.Owner != eipB }) {
		t.Fatalf("Write with gr2 missing: %v, refused %v; want %s refused", err, res.Refused, eipB)
	}
	waitHolds(t, c, map[ovsdbnb.Owner]ovsdbnb.State{eip: want[eip]}, "the owner not refused")
	o.Nbctl("lr-add", "gr2")
	// Nothing dirty: the refused owner is sent again all the same, by
	// every Write until the writer's cache has seen gr2 (its monitor
	// update may come after ovn-nbctl returns).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := w.Write(ctx, ovsdbnb.Desired{Stepped: want, Dirty: map[ovsdbnb.Owner]bool{}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	waitHolds(t, c, want, "both")
	delete(want, eip)
	if _, err := w.Write(ctx, ovsdbnb.Desired{Stepped: want, Dirty: map[ovsdbnb.Owner]bool{eip: true}}); err != nil {
		t.Fatal(err)
	}
	waitHolds(t, c, map[ovsdbnb.Owner]ovsdbnb.State{eip: {}}, "no rows")
}

// waitHolds waits until c's cache (another client's than the Writer's)
// shows want, up to 10 s, then checks it with holds.
func waitHolds(t *testing.T, c *ovsdbnb.Client, want map[ovsdbnb.Owner]ovsdbnb.State, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, err := c.Current("EgressIP")
		if err == nil && !slices.ContainsFunc(slices.Collect(maps.Keys(want)), func(o ovsdbnb.Owner) bool { return !got[o].Equal(want[o].Sorted()) }) {
			return
		}
	}
	holds(t, c, want, what)
}
