package ovsdbnb_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/internal/testbed"
	"github.com/ovnedge/ovnedge/ovsdbnb"
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
