package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/arp"
	"github.com/ovnedge/ovnedge/bgp"
	"github.com/ovnedge/ovnedge/dataplane"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// nodeWork is a node instance's work: it computes the node's desired
// state (desired.ComputeNode) and hands it to the node's writers, one per
// dataplane (package dataplane): the bridge's flows, the provider
// bridge's, the egress IPs on host interfaces, the L2 announcements and
// the BGP routes.
type nodeWork struct {
	cfg    *Config
	params desired.Params
	log    *slog.Logger
	events eventLog
	hooks  *hooks

	mu        sync.Mutex
	transport *ovsflow.NativeTransport
	bridge    *dataplane.Flows
	provider  *dataplane.Flows // nil without a provider bridge
	host      *dataplane.HostEgress
	writers   []dataplane.Writer // in the order they write
	// lastSelf is this node's last good parse of its k8s.ovn.org
	// annotations (Params.LastGood).
	lastSelf *ovnknode.Node
	// fence silences the OVN-hosted egress IPs the node lost for a while
	// (egress.Fence); fenceTimer asks for the pass that lifts the next
	// fence.
	fence      egress.Fence
	fenceTimer *time.Timer
	// resumed: the fences a previous process left on the bridge are
	// in fence (resumeFences).
	resumed bool
	// current is the Snapshot of the pass under way (the host report is
	// written against its Node).
	current desired.Snapshot
	// uplink is the uplink the last pass used: --uplink, or found from
	// the bridge.
	uplink atomic.Value // string
}

// newNodeWork returns the node's work for cfg; its writers connect on
// first use.
func newNodeWork(cfg *Config, p desired.Params, clients *Clients, ev eventLog, m *Metrics, h *hooks, log *slog.Logger) *nodeWork {
	n := &nodeWork{cfg: cfg, params: p, log: log, events: ev, hooks: h,
		transport: ovsflow.NewNativeTransport(cfg.OVSRunDir, ovsflow.NativeOptions{Logger: log})}
	status := newStatus(clients, log, m)
	// Owns: flows a previous process left for owners gone meanwhile (a
	// Service deleted while the daemon was down) are removed by the first
	// apply; unchanged ones are left as they are. Without the gateway
	// flows ovnkube-node's flows are never ovnedge's (brex.Owns).
	n.bridge = dataplane.NewFlows(dataplane.FlowsOptions{Bridge: cfg.Bridge, OVSDB: cfg.OVSDB, Transport: n.transport,
		Update: (*desired.NodeState).Update, Owns: brex.Owns(p.GatewayFlows), Verify: bridgeVerify, Logger: log})
	n.host = dataplane.NewHostEgress(dataplane.HostOptions{Node: cfg.NodeName, Netns: cfg.HostNetns, Backend: cfg.HostBackend,
		Confirm: confirmer(clients, cfg.NodeName), Fenced: h.isFenced, LinksChanged: h.kickNode, Logger: log,
		Report: func(ctx context.Context, r ovnknode.HostReport) error {
			return status.ReportHost(ctx, cfg.NodeName, n.snapshot(), r)
		}})
	n.writers = []dataplane.Writer{n.bridge, n.host}
	if cfg.EnableEgressService {
		n.writers = append(n.writers, &dataplane.EgressServiceHost{Node: cfg.NodeName, Netns: cfg.HostNetns})
	}
	if cfg.EnableL2Announce {
		n.writers = append(n.writers, dataplane.NewL2(dataplane.L2Options{Interface: cfg.Bridge, Logger: log,
			Addrs: func(ns *desired.NodeState) []netip.Addr { return ns.Announce }, Started: startedL2(m)}))
	}
	if cfg.ProviderBridge != "" && p.UnderlayOn() {
		n.provider = dataplane.NewFlows(dataplane.FlowsOptions{Bridge: cfg.ProviderBridge, OVSDB: cfg.OVSDB,
			Transport: n.transport, Update: providerUpdate(cfg), Logger: log, Retry: h.kickNode,
			Waiting: func(ns *desired.NodeState) []string { return ns.ProviderMissing }})
		n.writers = append(n.writers, n.provider)
	}
	if cfg.UnderlayLBMode == UnderlayStandalone {
		n.writers = append(n.writers, underlayL2(cfg, log))
	}
	if cfg.EnableBGP {
		n.writers = append(n.writers, dataplane.NewBGP(dataplane.BGPOptions{Node: cfg.NodeName, Config: cfg.BGP,
			PeerCRDs: cfg.BGPPeerCRDs, Shutdown: cfg.BGPShutdown, Record: ev.recordOne, Started: startedBGP(m), Logger: log}))
	}
	if m != nil {
		for _, f := range []*dataplane.Flows{n.bridge, n.provider} {
			if f != nil {
				m.SetFlowStats(f.Bridge(), f.Stats)
			}
		}
	}
	return n
}

// bridgeVerify is how often the node's bridge is dumped and compared with
// its program, besides the repairs the flow monitor triggers.
const bridgeVerify = 30 * time.Second

// snapshot is the Snapshot of the pass under way.
func (n *nodeWork) snapshot() desired.Snapshot { return n.current }

// providerUpdate is the provider bridge's part of a node state: the
// underlay steering flows, which need --provider-nic.
func providerUpdate(cfg *Config) func(*desired.NodeState, *ovsflow.Program) error {
	return func(ns *desired.NodeState, p *ovsflow.Program) error {
		if cfg.ProviderNIC == "" {
			return fmt.Errorf("provider bridge %s: --provider-nic is not set", cfg.ProviderBridge)
		}
		return ns.UpdateProvider(p)
	}
}

// underlayL2 answers ARP for the node's underlay VIPs on the underlay
// interface (standalone mode).
func underlayL2(cfg *Config, log *slog.Logger) dataplane.Writer {
	iface := cmp.Or(cfg.UnderlayInterface, cfg.ProviderBridge)
	if iface == "" {
		return failing{errors.New("underlay responder: neither --underlay-interface nor --provider-bridge is set")}
	}
	return dataplane.NewL2(dataplane.L2Options{Interface: iface, Logger: log,
		Addrs: func(ns *desired.NodeState) []netip.Addr { return ns.UnderlayAnnounce }})
}

// failing is a writer that cannot be set up: every Write fails with err.
type failing struct{ err error }

func (f failing) Write(context.Context, desired.Snapshot, *desired.NodeState) ([]event.Event, error) {
	return nil, f.err
}

func (failing) Close() {}

// startedL2 and startedBGP feed the metrics from a responder or speaker
// once it runs.
func startedL2(m *Metrics) func(*arp.Responder) {
	return func(r *arp.Responder) {
		if m != nil {
			m.SetARPStats(r.Stats)
		}
	}
}

func startedBGP(m *Metrics) func(*bgp.Speaker) {
	return func(s *bgp.Speaker) {
		if m != nil {
			m.SetBGPStats(s.Stats)
		}
	}
}

// confirmer reads an egress IP's EgressIP from the API server (not from
// the informer's cache): whether its status still names node. In
// manifests mode every assignment is confirmed.
func confirmer(c *Clients, node string) func(context.Context, egress.HostAssignment) (bool, error) {
	if c.FromManifests || c.Dynamic == nil {
		return nil
	}
	return func(ctx context.Context, h egress.HostAssignment) (bool, error) {
		u, err := c.Dynamic.Resource(egressv1.Resource).Get(ctx, h.EgressIPName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		e, err := egressv1.FromUnstructured(u)
		if err != nil {
			return false, nil
		}
		return slices.ContainsFunc(e.Status.Items, func(it egressv1.EgressIPStatusItem) bool {
			a, err := netip.ParseAddr(it.EgressIP)
			return err == nil && a.Unmap() == h.EgressIP && it.Node == node
		}), nil
	}
}

// pass is one reconcile of the node: its desired state, then every
// writer, each whatever the others did (a bad egress IP on a host
// interface blocks neither the flows nor the L2 announcements).
func (n *nodeWork) pass(ctx context.Context, s desired.Snapshot) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	ns, err := n.compute(ctx, s)
	if errors.Is(err, desired.ErrUnknownNode) {
		n.log.Warn("this node is not (yet) known; its flows stay as they are", "node", n.cfg.NodeName)
		return nil
	}
	if err != nil {
		return err
	}
	if n.params.EnableEgressIP {
		if err := n.resumeFences(ctx); err != nil {
			return err
		}
		n.fenceLost(&ns, n.params.Patch)
	}
	n.current = s
	var errs []error
	events := ns.Events
	for _, w := range n.writers {
		evs, err := w.Write(ctx, s, &ns)
		events, errs = append(events, evs...), append(errs, err)
	}
	n.events.record(events)
	return errors.Join(errs...)
}

// compute is the node's desired state of s, with what the bridges say:
// the bridge's MAC (read on every pass: a bridge created again gets a new
// one) and the provider bridge's ports.
func (n *nodeWork) compute(ctx context.Context, s desired.Snapshot) (desired.NodeState, error) {
	p := n.params
	p.Alive = n.hooks.alive
	if p.Uplink == "" {
		uplink, err := n.bridge.Uplink(ctx)
		if err != nil {
			return desired.NodeState{}, fmt.Errorf("uplink not set: %w", err)
		}
		p.Uplink = uplink
	}
	if old, _ := n.uplink.Swap(p.Uplink).(string); old != p.Uplink {
		n.log.Info("uplink", "bridge", n.cfg.Bridge, "port", p.Uplink, "found", n.params.Uplink == "")
	}
	if n.hooks.nodeTargets != nil {
		n.hooks.nodeTargets(mgmtTargets(s.Nodes, false, n.cfg.NodeName))
	}
	if p.GatewayFlows && p.BridgeMAC == nil {
		mac, err := n.bridge.MAC(ctx)
		if err != nil {
			return desired.NodeState{}, fmt.Errorf("gateway flows: %w", err)
		}
		p.BridgeMAC = mac
	}
	if n.provider != nil {
		ports, err := n.provider.Ports(ctx)
		if err != nil {
			return desired.NodeState{}, err
		}
		p.ProviderPorts = func(name string) bool { return ports[name] != 0 }
	}
	p.LastGood = n.lastSelf
	ns, err := desired.ComputeNode(s, p, n.cfg.NodeName)
	if ns.Self != nil {
		n.lastSelf = ns.Self
	}
	return ns, err
}

// resumeFences gives the fence, before the node's first write, the
// fences a previous process left on the bridge, each for a whole hold
// from now: the IPs this node lost shortly before a restart stay fenced,
// which the first write would otherwise remove.
func (n *nodeWork) resumeFences(ctx context.Context) error {
	if n.resumed {
		return nil
	}
	flows, err := n.bridge.Installed(ctx)
	if err != nil {
		return fmt.Errorf("egress fences left on the bridge: %w", err)
	}
	if ips := brex.Fenced(flows); len(ips) > 0 {
		n.fence.Resume(time.Now(), ips)
		n.log.Info("egress fences resumed from the bridge", "ips", ips, "for", egress.FenceHold)
	}
	n.resumed = true
	return nil
}

// fenceLost adds to ns the fence flows of the OVN-hosted egress IPs the
// node lost in the last egress.FenceHold and arms the pass that lifts the
// next fence. A fence that cannot be built is logged, never in the way of
// the rest.
func (n *nodeWork) fenceLost(ns *desired.NodeState, patch string) {
	fenced, next := n.fence.Update(time.Now(), ns.Held)
	if err := ns.Fence(patch, fenced); err != nil {
		n.log.Warn("egress IPs this node lost are not fenced", "ips", fenced, "err", err)
	}
	if next.IsZero() || n.hooks.kick == nil {
		return
	}
	wait := time.Until(next) + 10*time.Millisecond
	if n.fenceTimer == nil {
		n.fenceTimer = time.AfterFunc(wait, n.hooks.kickNode)
	} else {
		n.fenceTimer.Reset(wait)
	}
}

// verify reports whether the bridge holds what was last applied.
func (n *nodeWork) verify(ctx context.Context) error {
	res, err := n.bridge.Resync(ctx)
	if err != nil {
		return err
	}
	if res.Changed() {
		return fmt.Errorf("bridge %s did not match: %d added, %d modified, %d deleted",
			n.cfg.Bridge, res.Added, res.Modified, res.Deleted)
	}
	return nil
}

// close stops the writers; the dataplanes stay as written.
func (n *nodeWork) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fenceTimer != nil {
		n.fenceTimer.Stop()
	}
	for _, w := range slices.Backward(n.writers) {
		w.Close()
	}
	_ = n.transport.Close()
}

// uplinkName is the uplink of the last pass, "" before the first.
func (n *nodeWork) uplinkName() string {
	s, _ := n.uplink.Load().(string)
	return s
}

// hosting reports whether the node was last asked to host egress IPs on
// host interfaces.
func (n *nodeWork) hosting() bool { return n.host.Hosting() }
