package scale

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// sample is one event's times: Latency from just before the API write,
// FromEvent from the watch event (the object's change as a watcher of
// the apiserver, the daemon's informer among them, receives it) to the
// change that fulfils the event (an NB row's, or a bridge's flow), and
// API the write's own duration.
type sample struct{ Latency, FromEvent, API time.Duration }

// expected is a change expected before the write that makes it: an NB
// table's (Table.Expect) or a bridge's (FlowMonitor.Expect).
type expected interface {
	Wait(context.Context) (time.Time, error)
}

// timed is timedBy for the change want expects of NB table t.
func timed[M Row](ctx context.Context, timeout time.Duration, t *Table[M], want func(View[M]) bool,
	watch func(context.Context) (watch.Interface, error), write func() (string, error)) (sample, error) {
	return timedBy(ctx, timeout, func() expected { return t.Expect(want) }, watch, write)
}

// timedBy starts watch (the object of the event, selected by name) and
// registers the expected change (expect), then runs write, which returns
// the resourceVersion it wrote, and times the change from just before
// the write and from the watch event of that resourceVersion.
func timedBy(ctx context.Context, timeout time.Duration, expect func() expected,
	watch func(context.Context) (watch.Interface, error), write func() (string, error)) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, err := watch(ctx)
	if err != nil {
		return sample{}, fmt.Errorf("watch: %w", err)
	}
	defer w.Stop()
	seen := make(chan stamped, 16)
	go stamp(ctx, w, seen)
	e := expect()
	begin := time.Now()
	rv, err := write()
	if err != nil {
		return sample{}, err
	}
	api := time.Since(begin)
	at, err := e.Wait(ctx)
	if err != nil {
		return sample{}, fmt.Errorf("change not seen: %w", err)
	}
	for {
		select {
		case ev, ok := <-seen:
			if !ok {
				return sample{}, fmt.Errorf("watch ended before resourceVersion %s", rv)
			}
			if ev.rv == rv {
				return sample{Latency: at.Sub(begin), FromEvent: at.Sub(ev.at), API: api}, nil
			}
		case <-ctx.Done():
			return sample{}, fmt.Errorf("no watch event of resourceVersion %s: %w", rv, ctx.Err())
		}
	}
}

// stamped is a watch event's resourceVersion and when it arrived.
type stamped struct {
	rv string
	at time.Time
}

// stamp sends the resourceVersion of each of w's events with the time it
// arrived (taken here, as it is received, not when it is read), until
// ctx ends (timed returned: nobody reads out any more).
func stamp(ctx context.Context, w watch.Interface, out chan<- stamped) {
	defer close(out)
	for ev := range w.ResultChan() {
		at := time.Now()
		obj, err := meta.Accessor(ev.Object)
		if err != nil {
			continue // a watch error (Status): the wait times out
		}
		select {
		case out <- stamped{obj.GetResourceVersion(), at}:
		case <-ctx.Done():
			return
		}
	}
}

// byName is the list options of a watch of the object named name, from
// the apiserver's watch cache as it is (resourceVersion "0"): every
// later change, the write's among them, comes as an event. (Without a
// resourceVersion the watch waits for the cache to reach etcd's latest
// revision, and times out when no event of the kind moves it there.)
func byName(name string) metav1.ListOptions {
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: "0"}
}

// resourceVersion is the resourceVersion of the object a write returned.
func resourceVersion(obj metav1.Object, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return obj.GetResourceVersion(), nil
}

// progressf writes a progress line to stderr at once (a benchmark's log
// shows only when it ends).
func progressf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s scale: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
