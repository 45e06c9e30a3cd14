package ovsflow

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
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

func (o *NativeOptions) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
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
	// foreign holds, per bridge, the flows of the last Dump that the
	// model cannot hold, by the opaque key Dump gave them, so that a
	// delete_strict of that key can name them exactly.
	foreign map[string]map[string]openflow.FlowStats
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
	return &NativeTransport{runDir: runDir, opts: opts, clients: map[string]*openflow.Client{},
		foreign: map[string]map[string]openflow.FlowStats{}}
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
		c = openflow.NewClient(network, addr, openflow.Options{MaxVersion: t.opts.MaxVersion, Logger: t.opts.logger().With("bridge", bridge)})
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
// A flow the model cannot hold (another controller's, with a field,
// action or timeout of its own) gets an opaque key, table=T,
// priority=P,opaque_match=<hex>, and opaque actions, so that an [Applier]
// keeps it (KeepForeign), replaces it or deletes it like any other.
func (t *NativeTransport) Dump(ctx context.Context, bridge string) ([]byte, error) {
	stats, err := t.client(bridge).DumpFlows(ctx)
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", bridge, err)
	}
	var b []byte
	foreign := map[string]openflow.FlowStats{}
	for i := range stats {
		s := &stats[i]
		f, err := decodeFlow(s)
		if err == nil {
			b = append(f.AppendText(b), '\n')
			continue
		}
		key := opaqueKey(s, i)
		foreign[key] = *s
		t.opts.logger().Debug("flow outside the model", "bridge", bridge, "key", key, "err", err)
		b = appendCookie(b, s.Cookie)
		b = append(b, key...)
		b = append(b, " actions=opaque\n"...)
	}
	t.mu.Lock()
	t.foreign[bridge] = foreign
	t.mu.Unlock()
	return b, nil
}

// opaqueKey is the key Dump gives the i-th flow of a dump when the model
// cannot hold it, as parseDump reads it back.
func opaqueKey(s *openflow.FlowStats, i int) string {
	var b []byte
	if s.Table != 0 {
		b = append(b, "table="...)
		b = strconv.AppendUint(b, uint64(s.Table), 10)
		b = append(b, ", "...)
	}
	b = append(b, "priority="...)
	b = strconv.AppendUint(b, uint64(s.Priority), 10)
	b = append(b, ",opaque_match="...)
	if s.MatchErr != nil { // unique in the dump, and never deleted by this key
		return string(strconv.AppendInt(append(b, "undecoded#"...), int64(i), 10))
	}
	return string(hex.AppendEncode(b, openflow.AppendMatch(nil, s.Match)))
}

// foreignDelete is the delete_strict of a flow the last Dump found
// outside the model, by its opaque key.
func (t *NativeTransport) foreignDelete(bridge, key string) (openflow.FlowMod, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.foreign[bridge][key]
	if s.MatchErr != nil {
		return openflow.FlowMod{}, false // its match is unknown: deleting by key would hit another flow
	}
	return openflow.FlowMod{Command: openflow.FlowDeleteStrict, Table: s.Table, Priority: s.Priority, Match: s.Match}, ok
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
		if m.Op == ModDeleteStrict {
			if fm, ok := t.foreignDelete(bridge, m.Flow); ok {
				wire[i] = fm
				continue
			}
		}
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

// MonitorFlows reports the flows another connection adds, modifies or
// deletes on the bridge (OpenFlow 1.4 flow monitoring), on every
// connection to it, until ctx ends; the transport's own flow-mods are not
// reported. A change that is no [FlowChange] of the model (a PAUSED
// monitor, whose changes are unknown) comes as Event "PAUSED". Nothing is
// reported over OpenFlow 1.3.
func (t *NativeTransport) MonitorFlows(ctx context.Context, bridge string) <-chan FlowChange {
	in := t.client(bridge).MonitorFlows(ctx)
	out := make(chan FlowChange, 64)
	go func() {
		for {
			var u openflow.FlowUpdate
			select {
			case <-ctx.Done():
				return
			case u = <-in:
			}
			c := FlowChange{Event: openflow.EventName(u.Event), Table: u.Table, Priority: u.Priority, Cookie: u.Cookie}
			if u.MatchErr == nil && u.Event != openflow.EventPaused && u.Event != openflow.EventResumed {
				if m, err := decodeMatch(u.Match); err == nil {
					f := Flow{Table: u.Table, Priority: u.Priority, Match: m}
					c.Key = string(f.appendKey(nil))
				}
			}
			select {
			case out <- c:
			default: // full: the consumer is awake and reads the bridge anyway
			}
		}
	}()
	return out
}
