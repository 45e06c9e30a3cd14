package dataplane

import (
	"context"
	"sync"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/event"
)

// A Writer makes one dataplane of a node hold its part of the node's
// desired state.
type Writer interface {
	// Write applies ns, computed from s. The events say what could not be
	// applied and why (on the objects at fault); the error is a failure to
	// apply, retried by the caller.
	Write(ctx context.Context, s desired.Snapshot, ns *desired.NodeState) ([]event.Event, error)
	// Close stops what Write started and leaves the dataplane as written.
	Close()
}

// background runs goroutines until their context ends or stop is called.
type background struct {
	stops []context.CancelFunc
	wg    sync.WaitGroup
}

// run runs f until ctx ends or stop is called.
func (b *background) run(ctx context.Context, f func(context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	b.stops = append(b.stops, cancel)
	b.wg.Go(func() { f(ctx) })
}

// stop ends every goroutine and waits for them.
func (b *background) stop() {
	for _, stop := range b.stops {
		stop()
	}
	b.wg.Wait()
}

// flatten is err's errors, those errors.Join joined (at any depth)
// unjoined; nil for nil.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}
