package reach

import (
	"sync"
)

// Combined is the leader's verdict on its egress nodes from its checks
// (a Checker's and a Heartbeat's Reachable): a node is reachable while
// every check says so, except that while no target at all is reachable,
// every one is. When every egress node is lost at once, the leader (or
// the network between it and all of them) is far more likely the one cut
// off than every node dead, and an egress IP that moved to no node would
// send its pods' packets out from their nodes' addresses: nothing moves
// on reachability alone then (a node that really died still goes
// NotReady, and loses its egress IPs then).
//
// Deviation from OVN-Kubernetes (ovn-kubernetes/ovn-kubernetes at 8871cd9,
// go-controller/pkg/clustermanager/egressip_controller.go), which takes
// every unreachable node's egress IPs away, to no node when none is left.
//
// Its methods are safe for concurrent use.
type Combined struct {
	mu      sync.Mutex
	checks  []func(node string) bool
	targets []string
	allDown bool
}

// NewCombined returns the verdict of checks.
func NewCombined(checks ...func(node string) bool) *Combined {
	return &Combined{checks: checks}
}

// Add adds a check.
func (c *Combined) Add(check func(node string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, check)
	c.update()
}

// SetTargets sets the nodes the checks watch.
func (c *Combined) SetTargets(targets []Target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.targets = c.targets[:0]
	for _, t := range targets {
		c.targets = append(c.targets, t.Node)
	}
	c.update()
}

// Changed tells c that a check's verdict changed (the checks' change
// callbacks call it before anything reads Reachable) and reports whether
// every target is now unreachable, and whether that flipped.
func (c *Combined) Changed() (allDown, flipped bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.allDown
	c.update()
	return c.allDown, c.allDown != was
}

// update recomputes allDown (c.mu held).
func (c *Combined) update() {
	c.allDown = len(c.targets) > 0
	for _, n := range c.targets {
		if c.each(n) {
			c.allDown = false
			return
		}
	}
}

func (c *Combined) each(node string) bool {
	for _, ok := range c.checks {
		if !ok(node) {
			return false
		}
	}
	return true
}

// Reachable reports whether node is reachable by every check, or every
// target is unreachable.
func (c *Combined) Reachable(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allDown || c.each(node)
}

// AllDown reports whether every target is unreachable (Reachable then
// says every node is).
func (c *Combined) AllDown() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allDown
}
