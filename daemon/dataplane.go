package daemon

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/metrics"
)

// Dataplane is the daemon's work on a Snapshot: the leader's cluster pass
// (the NB rows and the statuses) and the node's pass (its bridge, host
// and announcements). Its two halves may run at the same time.
type Dataplane struct {
	cluster *clusterWork
	node    *nodeWork // nil without a node name
	hooks   *hooks
}

// hooks connect the work to the daemon's other parts: the reachability
// checks, the node's liveness and the loops' wake-ups (wireReachability).
// A nil func is not wired.
type hooks struct {
	// reachable says whether an egress node answers its reachability
	// checks (nil: every node does); targets is given the
	// egress-assignable nodes to check, nodeTargets the other nodes (the
	// heartbeat among nodes).
	reachable            func(node string) bool
	targets, nodeTargets func([]reach.Target)
	// alive is Params.Alive of the node's work; fenced says whether the
	// node lost its host lease.
	alive  func(node string) bool
	fenced func() bool
	// kick asks for another node pass, wake for a cluster pass; after for
	// a cluster pass after a while (a held egress IP's hold runs out).
	kick, wake func()
	after      func(time.Duration)
}

func (h *hooks) kickNode() {
	if h.kick != nil {
		h.kick()
	}
}

func (h *hooks) wakeCluster() {
	if h.wake != nil {
		h.wake()
	}
}

func (h *hooks) requeue(after time.Duration) {
	if h.after != nil {
		h.after(after)
	}
}

func (h *hooks) isFenced() bool { return h.fenced != nil && h.fenced() }

// NewDataplane returns a Dataplane for cfg writing through clients;
// events go to rec (see NewRecorder). Connections are opened on first use.
func NewDataplane(cfg *Config, clients *Clients, rec record.EventRecorder, m *Metrics, log *slog.Logger) *Dataplane {
	p := ParamsFrom(cfg)
	p.LBCache = &lbsvc.Cache{}             // used under the cluster work's lock only
	p.GatewayCache = &lbsvc.GatewayCache{} // used under the node work's lock only
	p.Elections = &lbsvc.Elections{}       // used under the node work's lock only
	p.Hold = &egress.HostHold{Lease: cfg.HostLease}
	h := &hooks{}
	d := &Dataplane{hooks: h, cluster: newClusterWork(cfg, p, clients, eventLog{rec: rec}, m, h, log)}
	if cfg.NodeName != "" {
		d.node = newNodeWork(cfg, p, clients, eventLog{rec: rec}, m, h, log)
	}
	return d
}

// reconcilers returns the Dataplane's cluster and node work for run. The
// node work is left out without a node name.
func (d *Dataplane) reconcilers() reconcilers {
	r := reconcilers{Cluster: d.Cluster, Audit: d.Audit}
	if d.node != nil {
		r.Node = d.Node
	}
	return r
}

// Cluster is the leader's work: EgressIP assignment and status, LB IPAM
// and the Northbound rows of the EgressIPs and load balancers.
func (d *Dataplane) Cluster(ctx context.Context, s desired.Snapshot) error {
	return d.cluster.pass(ctx, s)
}

// Node is this node's work: the bridge's flows, the egress IPs on host
// interfaces, and (when on) the L2 announcements and BGP routes.
func (d *Dataplane) Node(ctx context.Context, s desired.Snapshot) error {
	if d.node == nil {
		return nil
	}
	return d.node.pass(ctx, s)
}

// Audit checks the leader's incremental desired state against a full
// recompute of list's Snapshot (see auditIndex); an error asks the caller
// to have the cluster loop recompute everything instead.
func (d *Dataplane) Audit(ctx context.Context, list func() (desired.Snapshot, error)) error {
	return d.cluster.auditIndex(ctx, list)
}

// Leading is told when this instance starts and stops leading (see
// clusterWork.leading).
func (d *Dataplane) Leading(leading bool) { d.cluster.leading(leading) }

// uplink is the node's uplink as its last pass found it ("" without a
// node or before the first pass).
func (d *Dataplane) uplink() string {
	if d.node == nil {
		return ""
	}
	return d.node.uplinkName()
}

// Hosting reports whether the node was last asked to host egress IPs on
// host interfaces (whether or not it is fenced).
func (d *Dataplane) Hosting() bool { return d.node != nil && d.node.hosting() }

// Verify reports whether the dataplane holds what was last written: a
// second NB sync sends nothing and the bridge holds the program.
func (d *Dataplane) Verify(ctx context.Context, s desired.Snapshot) error {
	errs := []error{d.cluster.verify(ctx, s)}
	if d.node != nil {
		errs = append(errs, d.node.verify(ctx))
	}
	return errors.Join(errs...)
}

// Close closes the Dataplane's connections. It changes nothing in the
// dataplane.
func (d *Dataplane) Close() {
	d.cluster.close()
	if d.node != nil {
		d.node.close()
	}
}

// Metrics are the daemon's Prometheus metrics and its health state
// (package metrics).
type Metrics = metrics.Metrics

// NewMetrics is metrics.New.
func NewMetrics() *Metrics { return metrics.New() }
