package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovsflow"
)

// Flows keeps a bridge's flows those of the node's desired state: the
// external bridge's (desired.NodeState.Update) or a provider bridge's
// (UpdateProvider). Only the difference from what its ovsflow.Applier last
// applied is sent, in one bundle; flows of other controllers are left
// alone, and drift (flows deleted or changed by someone else, lost in an
// ovs-vswitchd restart) is repaired as soon as the flow monitor reports
// it, and by a dump every Verify.
type Flows struct {
	opts FlowsOptions

	mu                       sync.Mutex
	ports                    *ovsflow.OVSDBPorts
	applier                  *ovsflow.Applier
	program                  ovsflow.Program
	bg                       background
	armed                    atomic.Bool // a retry is scheduled
	added, modified, deleted atomic.Uint64
}

// FlowsOptions configure a Flows writer.
type FlowsOptions struct {
	// Bridge names the bridge; OVSDB is the Open_vSwitch database
	// endpoint (its ports and MAC are read there).
	Bridge, OVSDB string
	// Transport reaches the bridge's OpenFlow socket; one may serve
	// several bridges.
	Transport ovsflow.Transport
	// Update makes p hold this bridge's part of ns (NodeState.Update or
	// NodeState.UpdateProvider).
	Update func(ns *desired.NodeState, p *ovsflow.Program) error
	// Owns and Verify are the Applier's (ApplierOptions.Owns,
	// VerifyInterval): Owns lets the first Apply after a restart delete
	// the flows of owners gone meanwhile (brex.Owns).
	Owns   func(ovsflow.FlowID) bool
	Verify time.Duration
	// Waiting, when not nil, names the ports the flows wait for (those
	// through a port the bridge lacks are left out); while there are
	// some, Retry is called a second later.
	Waiting func(ns *desired.NodeState) []string
	Retry   func()
	Logger  *slog.Logger
}

// FlowStats are a Flows writer's counts: flow mods sent by operation, and
// the repairs of its Applier.
type FlowStats struct {
	Added, Modified, Deleted, Repairs uint64
}

// NewFlows returns a Flows writer; it connects on first use.
func NewFlows(opts FlowsOptions) *Flows {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Flows{opts: opts}
}

// open connects to the Open_vSwitch database and starts the Applier's
// repair, once.
func (f *Flows) open(ctx context.Context) error {
	if f.applier != nil {
		return nil
	}
	ports, err := ovsflow.DialOVSDBPorts(ctx, f.opts.OVSDB)
	if err != nil {
		return fmt.Errorf("open_vswitch database: %w", err)
	}
	f.ports = ports
	f.applier = ovsflow.NewApplier(f.opts.Bridge, f.opts.Transport, ports, ovsflow.ApplierOptions{
		KeepForeign: true, Owns: f.opts.Owns, VerifyInterval: f.opts.Verify, Logger: f.opts.Logger})
	a := f.applier
	f.bg.run(ctx, func(ctx context.Context) {
		if err := a.Run(ctx); err != nil && ctx.Err() == nil {
			f.opts.Logger.Error("bridge replay stopped", "bridge", f.opts.Bridge, "err", err)
		}
	})
	return nil
}

// MAC is the bridge's MAC address, read from the database on every call
// (a bridge created again gets a new one).
func (f *Flows) MAC(ctx context.Context) (net.HardwareAddr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.open(ctx); err != nil {
		return nil, err
	}
	mac, err := f.ports.MAC(ctx, f.opts.Bridge)
	if err != nil {
		return nil, fmt.Errorf("bridge %s MAC: %w", f.opts.Bridge, err)
	}
	return mac, nil
}

// Uplink is the bridge port of the physical NIC, found from the database
// (ovsflow.Uplink) on every call.
func (f *Flows) Uplink(ctx context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.open(ctx); err != nil {
		return "", err
	}
	return f.ports.Uplink(ctx, f.opts.Bridge)
}

// Ports are the ports of the bridge's database, by name.
func (f *Flows) Ports(ctx context.Context) (ovsflow.PortMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.open(ctx); err != nil {
		return nil, err
	}
	ports, err := f.ports.Ports(ctx)
	if err != nil {
		return nil, fmt.Errorf("bridge %s ports: %w", f.opts.Bridge, err)
	}
	return ports, nil
}

// Installed returns the flows the bridge holds now (lines of the dump
// outside ovsflow's flow model skipped): what a restarted process finds
// of its predecessor's state, such as its fences (brex.Fenced).
func (f *Flows) Installed(ctx context.Context) ([]ovsflow.Flow, error) {
	dump, err := f.opts.Transport.Dump(ctx, f.opts.Bridge)
	if err != nil {
		return nil, fmt.Errorf("bridge %s: dump: %w", f.opts.Bridge, err)
	}
	var flows []ovsflow.Flow
	for line := range bytes.Lines(dump) {
		if fl, err := ovsflow.ParseFlow(string(bytes.TrimSpace(line))); err == nil {
			flows = append(flows, fl)
		}
	}
	return flows, nil
}

// Write brings the bridge's program up to date in place and sends the
// bridge the difference from what was last applied. Program.Set leaves an
// owner whose flows did not change as it is, so the Applier resolves and
// diffs only the owners that changed. When the update fails nothing is
// sent; the program may then hold part of it, which the next Write
// completes (the Applier diffs against what it applied).
func (f *Flows) Write(ctx context.Context, _ desired.Snapshot, ns *desired.NodeState) ([]event.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.open(ctx); err != nil {
		return nil, err
	}
	f.retryWhileWaiting(ns)
	if err := f.opts.Update(ns, &f.program); err != nil {
		return nil, err
	}
	res, err := f.applier.Apply(ctx, &f.program)
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", f.opts.Bridge, err)
	}
	f.added.Add(uint64(res.Added))
	f.modified.Add(uint64(res.Modified))
	f.deleted.Add(uint64(res.Deleted))
	if res.Changed() {
		f.opts.Logger.Info("bridge flows applied", "bridge", f.opts.Bridge, "added", res.Added, "modified", res.Modified,
			"deleted", res.Deleted, "flows", f.program.Len())
	}
	return nil, nil
}

// retryWhileWaiting schedules a Retry a second from now while ports the
// flows need are missing (one at a time).
func (f *Flows) retryWhileWaiting(ns *desired.NodeState) {
	if f.opts.Waiting == nil || f.opts.Retry == nil {
		return
	}
	missing := f.opts.Waiting(ns)
	if len(missing) == 0 || !f.armed.CompareAndSwap(false, true) {
		return
	}
	f.opts.Logger.Info("bridge: waiting for ports", "bridge", f.opts.Bridge, "ports", missing)
	time.AfterFunc(time.Second, func() { f.armed.Store(false); f.opts.Retry() })
}

// Resync compares the bridge with what was last applied and repairs it;
// the result says what it changed.
func (f *Flows) Resync(ctx context.Context) (ovsflow.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.applier == nil {
		return ovsflow.Result{}, nil
	}
	res, err := f.applier.Resync(ctx)
	if err != nil {
		return res, fmt.Errorf("bridge %s: %w", f.opts.Bridge, err)
	}
	return res, nil
}

// Stats returns the writer's counts.
func (f *Flows) Stats() FlowStats {
	s := FlowStats{Added: f.added.Load(), Modified: f.modified.Load(), Deleted: f.deleted.Load()}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.applier != nil {
		s.Repairs = f.applier.Repairs()
	}
	return s
}

// Bridge is the bridge's name.
func (f *Flows) Bridge() string { return f.opts.Bridge }

// Close stops the repair and disconnects; the flows stay.
func (f *Flows) Close() {
	f.bg.stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ports != nil {
		f.ports.Close()
	}
}
