package ovsdbnb_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

func TestSyncBatchBound(t *testing.T) {
	o := testbed.StartOVN(t)
	var largest atomic.Int64
	h := onLog{msg: "ovsdbnb: transaction committed", fn: func(r slog.Record) {
		n, _ := strconv.Atoi(attr(r, "operations"))
		if int64(n) > largest.Load() {
			largest.Store(int64(n))
		}
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{o.NB}, Logger: slog.New(h)})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(c.Close)

	big := ovsdbnb.Owner{Type: "Service", Name: "default/big"}
	var bigState ovsdbnb.State
	for i := range 40 {
		lb := serviceLB(1000+i, 0)
		lb.Name = fmt.Sprintf("big-%d", i)
		bigState.LoadBalancers = append(bigState.LoadBalancers, lb)
	}
	tests := []struct {
		name         string
		desired      map[ovsdbnb.Owner]ovsdbnb.State
		transactions int
		largest      int64
	}{
		// One insert per owner: 30 + 30 + 30 + 10.
		{"100 owners", services(100), 4, 30},
		// An owner's operations are never split.
		{"one owner above the bound", map[ovsdbnb.Owner]ovsdbnb.State{big: bigState}, 1, 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			largest.Store(0)
			res, err := c.SyncWith(ctx, tc.desired, ovsdbnb.SyncOptions{BatchOps: 30})
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if res.Transactions != tc.transactions || largest.Load() != tc.largest || res.Owners != len(tc.desired) {
				t.Errorf("%+v, largest transaction %d operations; want %d transactions, largest %d",
					res, largest.Load(), tc.transactions, tc.largest)
			}
		})
	}
}

// TestSyncPipelinedFailure: while several batches are in flight, an owner
// the server rejects (a second address set of the same name, in another
// batch) fails alone; every other owner of every batch is written.
func TestSyncPipelinedFailure(t *testing.T) {
	o := testbed.StartOVN(t)
	c := dial(t, o.NB)
	desired := services(100)
	shared := ovsdbnb.State{AddressSets: []ovsdbnb.AddressSet{{ExternalIDs: map[string]string{ovsdbnb.KeyID: "shared"}}}}
	first, last := ovsdbnb.Owner{Type: "AAA", Name: "first"}, ovsdbnb.Owner{Type: "ZZZ", Name: "last"}
	desired[first], desired[last] = shared, shared
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.SyncWith(ctx, desired, ovsdbnb.SyncOptions{BatchOps: 10})
	var se *ovsdbnb.SyncError
	if !errors.As(err, &se) || len(se.Owners) != 1 || !strings.Contains(se.Error(), "constraint violation") {
		t.Fatalf("Sync: %v, want one owner refused with a constraint violation", err)
	}
	if got := se.Owners[0].Owner; got != first && got != last {
		t.Errorf("refused owner %s, want %s or %s", got, first, last)
	}
	if res.Owners != 101 || res.Inserts != 101 || res.Transactions < 11 {
		t.Errorf("result %+v, want 101 owners and inserts in at least 11 transactions", res)
	}
	if n := len(strings.Fields(o.Nbctl("--bare", "--columns=_uuid", "list", "Load_Balancer"))); n != 100 {
		t.Errorf("%d load balancers in the NB, want 100", n)
	}
	// Idempotent: again, only the refused owner has work and fails again.
	if res, err := c.SyncWith(ctx, desired, ovsdbnb.SyncOptions{BatchOps: 10}); !errors.As(err, &se) || res.Owners != 101 || res.Inserts != 0 {
		t.Errorf("second Sync: %+v, %v; want 101 owners as desired, no insert and the refused owner again", res, err)
	}
}
