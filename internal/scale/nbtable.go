package scale

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
)

// Row is a model of the nbdb package (a pointer, e.g. *nbdb.NAT).
type Row interface {
	model.Model
	GetUUID() string
}

// Table follows one NB table over a connection of its own, as ovn-northd
// would, holding every row, indexed by a key. Wait takes the time a
// condition on the rows became true when the row change that made it
// true arrives, so what it measures is the time a change takes to reach
// another client of the database.
type Table[M Row] struct {
	cl  client.Client
	key func(M) []string

	mu      sync.Mutex
	rows    map[string]M                   // by UUID
	byKey   map[string]map[string]struct{} // key -> UUIDs
	first   time.Time                      // when the first change arrived
	last    time.Time                      // when the last change arrived
	changes int64
	waiters []*waiter[M]
}

type waiter[M Row] struct {
	cond func(View[M]) bool
	done chan time.Time
}

// View is a Table's rows, read inside a condition (under the Table's
// lock).
type View[M Row] struct{ t *Table[M] }

// Len is the number of rows.
func (v View[M]) Len() int { return len(v.t.rows) }

// Keys is the number of distinct keys.
func (v View[M]) Keys() int { return len(v.t.byKey) }

// Rows returns the rows of a key.
func (v View[M]) Rows(key string) []M {
	var out []M
	for u := range v.t.byKey[key] {
		out = append(out, v.t.rows[u])
	}
	return out
}

// WatchTable connects to the NB at endpoint and monitors table, whose
// rows are of row's type; key returns the keys a row is indexed by.
func WatchTable[M Row](ctx context.Context, endpoint, table string, row M, key func(M) []string) (*Table[M], error) {
	dbm, err := model.NewClientDBModel("OVN_Northbound", map[string]model.Model{table: row})
	if err != nil {
		return nil, fmt.Errorf("scale: watch %s: %w", table, err)
	}
	cl, err := client.NewOVSDBClient(dbm, client.WithEndpoint(endpoint))
	if err != nil {
		return nil, fmt.Errorf("scale: watch %s: %w", table, err)
	}
	if err := cl.Connect(ctx); err != nil {
		return nil, fmt.Errorf("scale: watch %s: connect: %w", table, err)
	}
	t := &Table[M]{cl: cl, key: key, rows: map[string]M{}, byKey: map[string]map[string]struct{}{}}
	cl.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(_ string, m model.Model) { t.change(m.(M), false) },
		UpdateFunc: func(_ string, _, m model.Model) { t.change(m.(M), false) },
		DeleteFunc: func(_ string, m model.Model) { t.change(m.(M), true) },
	})
	if _, err := cl.Monitor(ctx, cl.NewMonitor(client.WithTable(row))); err != nil {
		cl.Close()
		return nil, fmt.Errorf("scale: watch %s: monitor: %w", table, err)
	}
	return t, nil
}

// Close closes the connection.
func (t *Table[M]) Close() { t.cl.Close() }

// change applies a row's add or update (its new version), or delete,
// and completes the waiters whose condition now holds.
func (t *Table[M]) change(m M, deleted bool) {
	now := time.Now()
	u := m.GetUUID()
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.rows[u]; ok {
		for _, k := range t.key(old) {
			delete(t.byKey[k], u)
			if len(t.byKey[k]) == 0 {
				delete(t.byKey, k)
			}
		}
		delete(t.rows, u)
	}
	if !deleted {
		t.rows[u] = m
		for _, k := range t.key(m) {
			if t.byKey[k] == nil {
				t.byKey[k] = map[string]struct{}{}
			}
			t.byKey[k][u] = struct{}{}
		}
	}
	if t.first.IsZero() {
		t.first = now
	}
	t.last = now
	t.changes++
	kept := t.waiters[:0]
	for _, w := range t.waiters {
		if w.cond(View[M]{t}) {
			w.done <- now
			continue
		}
		kept = append(kept, w)
	}
	clear(t.waiters[len(kept):])
	t.waiters = kept
}

// Expectation is a condition on a Table's rows awaited from before the
// change that should make it hold.
type Expectation[M Row] struct {
	t *Table[M]
	w *waiter[M]
}

// Expect registers cond (called under the Table's lock, after every
// change): make the change after Expect, then Wait. A cond that holds
// already completes at once.
func (t *Table[M]) Expect(cond func(View[M]) bool) *Expectation[M] {
	w := &waiter[M]{cond: cond, done: make(chan time.Time, 1)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if cond(View[M]{t}) {
		w.done <- time.Now()
	} else {
		t.waiters = append(t.waiters, w)
	}
	return &Expectation[M]{t: t, w: w}
}

// Wait returns the time the change that made the condition hold arrived,
// or ctx's error.
func (e *Expectation[M]) Wait(ctx context.Context) (time.Time, error) {
	select {
	case at := <-e.w.done:
		return at, nil
	case <-ctx.Done():
	}
	t := e.t
	t.mu.Lock()
	t.waiters = slices.DeleteFunc(t.waiters, func(x *waiter[M]) bool { return x == e.w })
	t.mu.Unlock()
	select { // completed meanwhile
	case at := <-e.w.done:
		return at, nil
	default:
		return time.Time{}, ctx.Err()
	}
}

// Wait waits for cond as Expect and Wait do.
func (t *Table[M]) Wait(ctx context.Context, cond func(View[M]) bool) (time.Time, error) {
	return t.Expect(cond).Wait(ctx)
}

// Read calls f with the rows, under the Table's lock.
func (t *Table[M]) Read(f func(View[M])) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(View[M]{t})
}

// FirstChange returns when the first change arrived (zero: none yet).
func (t *Table[M]) FirstChange() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.first
}

// LastChange returns when the last change arrived and how many there
// have been.
func (t *Table[M]) LastChange() (time.Time, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last, t.changes
}
