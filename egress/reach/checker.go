package reach

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// DefaultInterval is OVN-Kubernetes' fixed check interval, and
// DefaultTimeout the default of egressip-reachability-total-timeout.
const (
	DefaultInterval = 5 * time.Second
	DefaultTimeout  = time.Second
)

// Config configures a Checker, from the daemon's flags and config file
// ([ovnkubernetesfeature] egressip-reachability-total-timeout and
// egressip-node-healthcheck-port).
type Config struct {
	// Interval between rounds, DefaultInterval when 0.
	Interval time.Duration
	// Timeout bounds each probe; 0 disables probing and every target is
	// reachable.
	Timeout time.Duration
	// Port is the nodes' gRPC health port; 0 uses the DISCARD probe.
	Port int
	// TLS is for the gRPC session.
	TLS TLSFiles
	// RestartGrace is how long a node whose gRPC health port refuses
	// connections still counts as up (Client.SetRestartGrace); 0: down
	// at once, as OVN-Kubernetes counts it.
	RestartGrace time.Duration
	// Dial opens the sockets, a net.Dialer when nil.
	Dial DialFunc
	// Logger, slog.Default when nil.
	Logger *slog.Logger
}

// DefaultConfig is OVN-Kubernetes' default: the DISCARD probe every
// DefaultInterval, each within DefaultTimeout.
func DefaultConfig() Config {
	return Config{Interval: DefaultInterval, Timeout: DefaultTimeout}
}

// NewConfig makes a Config from the settings as OVN-Kubernetes spells
// them (flags, or the config file section [ovnkubernetesfeature]):
// totalTimeout is egressip-reachability-total-timeout in seconds (0: no
// probe, every node is reachable), port is egressip-node-healthcheck-port
// (0: the DISCARD probe, else gRPC on that port, with tls when its files
// are set) and interval the check interval (0: DefaultInterval). Out of
// range values are an error naming the setting.
func NewConfig(totalTimeout, port int, interval time.Duration, tls TLSFiles) (Config, error) {
	switch {
	case totalTimeout < 0:
		return Config{}, fmt.Errorf("egressip-reachability-total-timeout %d: negative", totalTimeout)
	case port < 0 || port > 65535:
		return Config{}, fmt.Errorf("egressip-node-healthcheck-port %d: not a TCP port", port)
	case interval < 0:
		return Config{}, fmt.Errorf("egress node check interval %v: negative", interval)
	}
	if interval == 0 {
		interval = DefaultInterval
	}
	return Config{Interval: interval, Timeout: time.Duration(totalTimeout) * time.Second, Port: port, TLS: tls}, nil
}

// Target is a node to probe at its management IP.
type Target struct {
	Node string
	Addr netip.Addr
}

// Checker probes a set of nodes every interval and reports when one
// becomes reachable or unreachable.
type Checker struct {
	cfg      Config
	client   *Client
	onChange func(node string, up bool)

	mu      sync.Mutex
	targets []Target
	state   map[string]bool
	heard   map[string]time.Time
	kick    chan struct{}
}

// NewChecker returns a checker that calls onChange (from one goroutine,
// never concurrently) with each node's first result and then with every
// change.
func NewChecker(cfg Config, onChange func(node string, up bool)) (*Checker, error) {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("reachability checker: negative interval or timeout")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if onChange == nil {
		onChange = func(string, bool) {}
	}
	c := &Checker{cfg: cfg, onChange: onChange, state: map[string]bool{}, heard: map[string]time.Time{},
		kick: make(chan struct{}, 1)}
	if cfg.Port != 0 && cfg.Timeout > 0 {
		var err error
		if c.client, err = NewClient(cfg.Port, cfg.TLS, cfg.Dial); err != nil {
			return nil, fmt.Errorf("reachability checker: %w", err)
		}
		c.client.SetRestartGrace(cfg.RestartGrace)
	}
	return c, nil
}

// SetTargets replaces the nodes to probe; new nodes (or new addresses)
// are probed at once, the others at the next interval.
func (c *Checker) SetTargets(targets []Target) {
	c.mu.Lock()
	had := make(map[Target]bool, len(c.targets))
	for _, t := range c.targets {
		had[t] = true
	}
	added := false
	for _, t := range targets {
		added = added || !had[t]
	}
	c.targets = slices.Clone(targets)
	keep := map[string]bool{}
	for _, t := range targets {
		keep[t.Node] = true
	}
	for n := range c.state {
		if !keep[n] {
			delete(c.state, n)
		}
	}
	for n := range c.heard {
		if !keep[n] {
			delete(c.heard, n)
		}
	}
	c.mu.Unlock()
	if added {
		c.Kick()
	}
}

// Kick asks Run for a round now (e.g. when the heartbeat hears a node
// again, so the node is usable without waiting for the interval).
func (c *Checker) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Heard tells the checker that node was just heard from by other means
// (the heartbeat heard it again) and asks for a round now. A probe of
// node that began before and fails afterwards is stale: it is not
// reported, and the round Heard asks for probes node afresh. Without
// this, a probe sent while the node was down and timing out after it
// came back would report it down again (and move its egress IPs away)
// up to a timeout after the heartbeat heard it.
func (c *Checker) Heard(node string) {
	c.mu.Lock()
	c.heard[node] = time.Now()
	c.mu.Unlock()
	c.Kick()
}

// Reachable reports the last result for node; a node never probed yet,
// and every node when the timeout is 0, is reachable.
func (c *Checker) Reachable(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	up, ok := c.state[node]
	return !ok || up
}

// Run probes until ctx ends, then closes the sessions.
func (c *Checker) Run(ctx context.Context) {
	if c.client != nil {
		defer c.client.Close()
	}
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		c.Round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
	}
}

// Round probes every target once, in parallel, and reports the changes.
// Run calls it every interval; tests may call it directly.
func (c *Checker) Round(ctx context.Context) {
	c.mu.Lock()
	targets := slices.Clone(c.targets)
	c.mu.Unlock()
	results := make([]bool, len(targets))
	began := time.Now()
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { results[i] = c.probe(ctx, t) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	if c.client != nil {
		keep := map[netip.Addr]bool{}
		for _, t := range targets {
			keep[t.Addr] = true
		}
		c.client.Forget(keep)
	}
	for i, t := range targets {
		c.mu.Lock()
		stale := !results[i] && c.heard[t.Node].After(began) // heard from since the probe began
		current := slices.Contains(c.targets, t) && !stale
		was, known := c.state[t.Node]
		changed := current && (!known || was != results[i])
		if current {
			c.state[t.Node] = results[i]
		}
		c.mu.Unlock()
		if stale {
			c.cfg.Logger.Debug("egress node probe failed, but the node was heard from since it began: ignored", "node", t.Node)
		}
		if changed {
			c.onChange(t.Node, results[i])
		}
	}
}

func (c *Checker) probe(ctx context.Context, t Target) bool {
	if c.cfg.Timeout == 0 {
		return true
	}
	var up bool
	var err error
	if c.client != nil {
		up, err = c.client.Check(ctx, t.Addr, c.cfg.Timeout)
	} else {
		up, err = ProbeDiscard(ctx, c.cfg.Dial, t.Addr, c.cfg.Timeout)
	}
	if !up && ctx.Err() == nil {
		c.cfg.Logger.Debug("egress node unreachable", "node", t.Node, "addr", t.Addr, "err", err)
	}
	return up
}
