package ovsdbnb

import (
	"context"
	"sync"
)

// pipelineDepth is how many transactions of one Sync are in flight at
// once: while the server commits one, the client plans and encodes the
// next and decodes the update of the one before.
const pipelineDepth = 2

// pipeline sends the batches of one Sync, up to pipelineDepth at a time.
// Batches hold disjoint owners, and the rows they share (routers,
// switches, groups) they only mutate, so the order in which the server
// commits them does not matter. Each batch runs on a syncer of its own,
// merged into the parent by wait.
type pipeline struct {
	parent  *syncer
	desired map[Owner]State
	slots   chan struct{}
	wg      sync.WaitGroup

	mu   sync.Mutex
	err  error     // the first error of a batch; no batch is sent after it
	done []*syncer // the syncers of the finished batches
}

func newPipeline(parent *syncer, desired map[Owner]State) *pipeline {
	return &pipeline{parent: parent, desired: desired, slots: make(chan struct{}, pipelineDepth)}
}

// stopped reports whether a batch failed with an error that ends the Sync.
func (pl *pipeline) stopped() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.err != nil
}

// send applies batch, whose plans were made against the cache at the
// start of the Sync, once fewer than pipelineDepth batches are in flight.
func (pl *pipeline) send(ctx context.Context, batch []Owner, plans []*plan) {
	pl.slots <- struct{}{}
	s := &syncer{c: pl.parent.c, opts: pl.parent.opts, failed: map[Owner]*OwnerError{}, after: pl.parent.after}
	pl.wg.Add(1)
	go func() {
		defer pl.wg.Done()
		err := s.apply(ctx, pl.desired, batch, plans)
		<-pl.slots
		pl.mu.Lock()
		defer pl.mu.Unlock()
		pl.done = append(pl.done, s)
		if err != nil && pl.err == nil {
			pl.err = err
		}
	}()
}

// wait waits for the batches in flight, merges their results and
// failures into the parent and returns the first error.
func (pl *pipeline) wait() error {
	pl.wg.Wait()
	p := pl.parent
	for _, s := range pl.done {
		p.res.Add(s.res)
		for o, oe := range s.failed {
			if p.failed[o] == nil {
				p.failed[o] = oe
			}
		}
	}
	pl.done = nil
	return pl.err
}
