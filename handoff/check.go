package handoff

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Checker is a leader's hand-off check, run while it leads: Find, as its
// Backoff allows. The zero value is ready; it is safe for concurrent use.
type Checker struct {
	Backoff
	mu  sync.Mutex
	why string // the reason last returned for keeping the Lease
}

// Check returns the successor to hand the Lease to at now ("" to keep
// it; a successor is recorded as a hand-over), and Find's error the first
// time it gives that reason (nil while the reason stays the same).
func (c *Checker) Check(ctx context.Context, cs kubernetes.Interface, namespace, name string, now time.Time) (string, error) {
	if !c.Allow(now) {
		return "", nil
	}
	to, err := Find(ctx, cs, namespace, name)
	if to != "" {
		c.HandedOver(now)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch msg := fmt.Sprint(err); {
	case err == nil:
		c.why = ""
	case msg == c.why:
		err = nil
	default:
		c.why = msg
	}
	return to, err
}
