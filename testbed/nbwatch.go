package testbed

import (
	"context"
	"sync"
	"time"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
)

// NBWatch counts the rows of one NB table by a key as another NB client
// (ovn-northd, a second daemon) sees them: it monitors that table alone
// over its own connection and is told of each change, so waiting for a
// row costs nothing while it is not there. Benchmarks use it to time how
// long a change takes to reach the database.
type NBWatch struct {
	cl   client.Client
	mu   sync.Mutex
	keys map[string]int // key -> rows
	// inserted and deleted count the rows that appeared and went since
	// the monitor's first reply (a row deleted and inserted again counts
	// in both).
	inserted, deleted int
	// churned are the keys of those rows, "+key" or "-key", in order.
	churned []string
	ready   bool
	changed chan struct{}
}

// WatchNB monitors table of the NB at endpoint, whose rows are of row's
// type, counting them by key. It is closed by t's cleanup.
func WatchNB[M model.Model](t T, endpoint, table string, row M, key func(M) string) *NBWatch {
	t.Helper()
	dbm, err := model.NewClientDBModel("OVN_Northbound", map[string]model.Model{table: row})
	if err != nil {
		t.Fatalf("testbed: watch %s: %v", table, err)
	}
	cl, err := client.NewOVSDBClient(dbm, client.WithEndpoint(endpoint))
	if err != nil {
		t.Fatalf("testbed: watch %s: %v", table, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Connect(ctx); err != nil {
		t.Fatalf("testbed: watch %s: connect: %v", table, err)
	}
	t.Cleanup(cl.Close)
	w := &NBWatch{cl: cl, keys: map[string]int{}, changed: make(chan struct{}, 1)}
	count := func(m model.Model, d int) {
		w.mu.Lock()
		w.keys[key(m.(M))] += d
		if w.ready && d > 0 {
			w.inserted++
			w.churned = append(w.churned, "+"+key(m.(M)))
		} else if w.ready {
			w.deleted++
			w.churned = append(w.churned, "-"+key(m.(M)))
		}
		w.mu.Unlock()
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	cl.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(_ string, m model.Model) { count(m, 1) },
		DeleteFunc: func(_ string, m model.Model) { count(m, -1) },
	})
	if _, err := cl.Monitor(ctx, cl.NewMonitor(client.WithTable(row))); err != nil {
		t.Fatalf("testbed: watch %s: monitor: %v", table, err)
	}
	// The first reply's rows are in the cache; their events may still be
	// on their way: they are counted as rows, not as insertions.
	for end := time.Now().Add(10 * time.Second); w.total() != len(cl.Cache().Table(table).RowsShallow()) && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	w.mu.Lock()
	w.ready = true
	w.mu.Unlock()
	return w
}

func (w *NBWatch) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.keys {
		n += c
	}
	return n
}

// Churn returns how many rows were inserted and deleted since WatchNB
// returned.
func (w *NBWatch) Churn() (inserted, deleted int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inserted, w.deleted
}

// Churned are the keys of the rows inserted ("+key") and deleted
// ("-key") since the monitor's first reply, in order.
func (w *NBWatch) Churned() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.churned...)
}

// Wait returns once a row with key exists (or, exists false, none does),
// and fails t after timeout.
func (w *NBWatch) Wait(t T, key string, exists bool, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		n := w.keys[key]
		w.mu.Unlock()
		if (n > 0) == exists {
			return
		}
		select {
		case <-w.changed:
		case <-deadline:
			t.Fatalf("testbed: row %q exists=%v not seen within %v", key, exists, timeout)
		}
	}
}

// Client is the watch's connection, for transactions of the test's own.
func (w *NBWatch) Client() client.Client { return w.cl }
