package ovsflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ovnedge/ovnedge/ovsflow/openflow"
)

// NativeOptions tune a NativeTransport.
type NativeOptions struct {
	// MaxVersion is the highest OpenFlow version offered; when zero,
	// OpenFlow 1.4: it has bundles, and unlike 1.5 OVS still sends a
	// Nicira load back as a load in a dump (OpenFlow 1.5 turns it into a
	// set_field), so a dump decodes to exactly the flows installed.
	// [openflow.Version13] works too (bundles as ONF extensions).
	MaxVersion uint8
	// Target gives the network and address of a bridge's OpenFlow
	// socket; unix:<runDir>/<bridge>.mgmt when nil. Use it for "tcp".
	Target func(bridge string) (network, addr string)
	Logger *slog.Logger
}

// NativeTransport is a [Transport] speaking OpenFlow to the bridge itself
// (package openflow), without ovs-ofctl: a diff is one atomic bundle of
// flow-mods, a replace is one bundle of a delete of every flow and the
// adds, a dump is a flow-stats request decoded into the model. It keeps one
// connection per bridge, re-dialed after it drops. Its methods are safe for
// concurrent use.
type NativeTransport struct {
	runDir string
	opts   NativeOptions

	mu      sync.Mutex
	clients map[string]*openflow.Client
}

// NewNativeTransport returns a native transport for the bridges whose
// <bridge>.mgmt sockets are in runDir (/var/run/openvswitch when empty),
// the same directory [OfctlTransport.RunDir] names.
func NewNativeTransport(runDir string, opts NativeOptions) *NativeTransport {
	if runDir == "" {
		runDir = "/var/run/openvswitch"
	}
	if opts.MaxVersion == 0 {
		opts.MaxVersion = openflow.Version14
	}
	return &NativeTransport{runDir: runDir, opts: opts, clients: map[string]*openflow.Client{}}
}

func (t *NativeTransport) client(bridge string) *openflow.Client {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.clients[bridge]
	if !ok {
		network, addr := "unix", filepath.Join(t.runDir, bridge+".mgmt")
		if t.opts.Target != nil {
			network, addr = t.opts.Target(bridge)
		}
		log := t.opts.Logger
		if log == nil {
			log = slog.Default()
		}
		c = openflow.NewClient(network, addr, openflow.Options{MaxVersion: t.opts.MaxVersion, Logger: log.With("bridge", bridge)})
		t.clients[bridge] = c
	}
	return c
}

// Close drops every connection.
func (t *NativeTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.clients {
		c.Close()
	}
	clear(t.clients)
	return nil
}

// DumpFlows returns the bridge's flows decoded into the model, in the
// switch's order. A flow the model cannot hold is an error naming it.
func (t *NativeTransport) DumpFlows(ctx context.Context, bridge string) ([]Flow, error) {
	stats, err := t.client(bridge).DumpFlows(ctx)
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", bridge, err)
	}
	flows := make([]Flow, len(stats))
	for i := range stats {
		if flows[i], err = decodeFlow(&stats[i]); err != nil {
			return nil, fmt.Errorf("bridge %s: dumped flow table=%d, priority=%d, cookie=%#x: %w",
				bridge, stats[i].Table, stats[i].Priority, stats[i].Cookie, err)
		}
	}
	return flows, nil
}

// Dump returns the bridge's flows as ovs-ofctl prints them, one per line.
func (t *NativeTransport) Dump(ctx context.Context, bridge string) ([]byte, error) {
	flows, err := t.DumpFlows(ctx, bridge)
	if err != nil {
		return nil, err
	}
	var b []byte
	for i := range flows {
		b = append(flows[i].AppendText(b), '\n')
	}
	return b, nil
}

// Replace replaces every flow of the bridge in one atomic bundle: a delete
// of every flow, then the adds.
func (t *NativeTransport) Replace(ctx context.Context, bridge string, flows []byte) error {
	parsed, err := ParseFlows(flows)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	version, err := t.client(bridge).Connect(ctx)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	wire := make([]openflow.FlowMod, 1, len(parsed)+1)
	wire[0] = openflow.FlowMod{Command: openflow.FlowDelete, Table: openflow.TableAll}
	for i := range parsed {
		fm, err := encodeFlowMod(ModAdd, &parsed[i], version)
		if err != nil {
			return fmt.Errorf("bridge %s: %w", bridge, &FlowError{Flow: parsed[i].String(), Err: err})
		}
		wire = append(wire, fm)
	}
	return t.send(ctx, bridge, wire, func(i int) string {
		if i == 0 {
			return "delete all flows"
		}
		return parsed[i-1].String()
	})
}

// Bundle applies mods in one atomic bundle. A flow the model cannot
// encode, or that the switch refuses, fails the whole bundle with a
// [FlowError] naming it.
func (t *NativeTransport) Bundle(ctx context.Context, bridge string, mods []FlowMod) error {
	version, err := t.client(bridge).Connect(ctx)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	wire := make([]openflow.FlowMod, len(mods))
	for i, m := range mods {
		text := m.Flow
		if m.Op == ModDeleteStrict {
			text += " actions=drop" // a delete names only the key
		}
		f, err := ParseFlow(text)
		if err == nil {
			wire[i], err = encodeFlowMod(m.Op, &f, version)
		}
		if err != nil {
			return fmt.Errorf("bridge %s: %w", bridge, &FlowError{Flow: m.Op.String() + " " + m.Flow, Err: err})
		}
	}
	return t.send(ctx, bridge, wire, func(i int) string { return mods[i].Op.String() + " " + mods[i].Flow })
}

func (t *NativeTransport) send(ctx context.Context, bridge string, wire []openflow.FlowMod, name func(int) string) error {
	err := t.client(bridge).Bundle(ctx, wire)
	var me *openflow.ModError
	if errors.As(err, &me) && me.Index < len(wire) {
		return fmt.Errorf("bridge %s: %w", bridge, &FlowError{Flow: strings.TrimSpace(name(me.Index)), Err: err})
	}
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	return nil
}

// Watch signals every successful OpenFlow handshake with the bridge (the
// first and each after ovs-vswitchd restarts), redialing with backoff.
func (t *NativeTransport) Watch(ctx context.Context, bridge string) <-chan struct{} {
	return t.client(bridge).Watch(ctx)
}
