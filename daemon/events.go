package daemon

import (
	"log/slog"

	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/kubestatus"
)

// eventLog records events not recorded by the pass before: a reconcile
// recomputes everything, and an event repeated on every pass would
// flood.
type eventLog struct {
	rec  record.EventRecorder
	seen map[string]bool
}

// recordOne records e, whatever was recorded before.
func (l *eventLog) recordOne(e event.Event) {
	ref := e.Object
	l.rec.Event(&ref, e.Type, e.Reason, e.Message)
}

func (l *eventLog) record(events []event.Event) {
	now := map[string]bool{}
	for _, e := range events {
		k := e.String()
		now[k] = true
		if !l.seen[k] {
			ref := e.Object
			l.rec.Event(&ref, e.Type, e.Reason, e.Message)
		}
	}
	l.seen = now
}

// newStatus is the API status writer of the clients, counting failovers
// in m (when not nil).
func newStatus(c *Clients, log *slog.Logger, m *Metrics) *kubestatus.Writer {
	w := &kubestatus.Writer{Typed: c.Typed, Dynamic: c.Dynamic, FromManifests: c.FromManifests, Log: log}
	if m != nil {
		w.Failovers = func(n int) { m.Failovers.Add(float64(n)) }
	}
	return w
}
