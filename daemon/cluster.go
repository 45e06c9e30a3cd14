package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/egresssvc"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/gcahead"
	"github.com/ovnedge/ovnedge/kubestatus"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/ovsdbnb/sbwait"
)

// clusterWork is the leader's work: it turns a Snapshot into the desired
// cluster state (incrementally, through a desired.Index) and hands it to
// its writers: the NB rows to an ovsdbnb.Writer, the statuses to the API
// server.
type clusterWork struct {
	cfg    *Config
	params desired.Params
	log    *slog.Logger
	m      *Metrics
	status *kubestatus.Writer
	events eventLog
	nb     *ovsdbnb.Writer // nil without --nb-address
	sb     *sbwait.Waiter  // nil without --sb-address
	hooks  *hooks
	gc     *gcahead.Collector // nil: --gc-ahead=false

	mu sync.Mutex // a pass, or the audit's look at the index
	// index is the incremental desired state (nil: computed anew next
	// time); lastNodes the egress nodes last computed; targetNodes those
	// the reachability targets were last set from.
	index                  *desired.Index
	lastNodes, targetNodes []ovnknode.Node
	// audit is the periodic check of index against a full recompute under
	// way (see Audit), nil when none is.
	audit *auditRun
	// passing counts the passes running or waiting for mu (an audit gives
	// way to them).
	passing atomic.Int32
	// resigned is set once this instance stopped leading: it writes
	// nothing until it leads again.
	resigned bool
	// noReplyQoS is set once the NB turned out not to take the
	// reply-traffic QoS rules (logged once).
	noReplyQoS bool
}

// newClusterWork returns the leader's work for cfg.
func newClusterWork(cfg *Config, p desired.Params, clients *Clients, ev eventLog, m *Metrics, h *hooks, log *slog.Logger) *clusterWork {
	c := &clusterWork{cfg: cfg, params: p, log: log, m: m, events: ev, hooks: h,
		status: newStatus(clients, log, m)}
	if cfg.GCAhead {
		c.gc = gcahead.New(log)
	}
	if len(cfg.NBAddress) > 0 {
		c.nb = ovsdbnb.NewWriter(ovsdbnb.WriterOptions{
			Dial: ovsdbnb.Options{Endpoints: cfg.NBAddress, PrivateKey: cfg.NBPrivKey, Certificate: cfg.NBCert,
				CACert: cfg.NBCA, Logger: log},
			OwnerTypes:   []string{egress.OwnerEgressIP, egress.OwnerNode, egress.OwnerClusterPolicies, egresssvc.OwnerType, lbsvc.OwnerService},
			SteppedTypes: []string{egress.OwnerEgressIP, egress.OwnerNode, egress.OwnerClusterPolicies, egresssvc.OwnerType},
			Steps: func(old, new map[ovsdbnb.Owner]ovsdbnb.State) []map[ovsdbnb.Owner]ovsdbnb.State {
				return egress.SilenceFirst(old, new, c.silenced)
			},
			Wake: h.wakeCluster, Logger: log})
		if m != nil {
			m.SetNBStats(c.nb.Stats)
		}
	}
	return c
}

// close closes the work's connections; it changes nothing in the NB.
func (c *clusterWork) close() {
	c.gc.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nb != nil {
		c.nb.Close()
	}
	if c.sb != nil {
		c.sb.Close()
		c.sb = nil
	}
}

// leading is told when this instance starts and stops leading. A former
// leader drops its NB connection and its record of what it wrote:
// another leader has written since, and on leading again this instance
// starts from the NB as a new process does. Until it leads again it
// writes nothing: a pass that began before the Lease was lost, or was
// queued behind it, would otherwise connect again and write beside the
// new leader.
func (c *clusterWork) leading(leading bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resigned = !leading
	c.audit = nil
	// The heartbeat drops its targets with the leadership: the next pass
	// sets them again, even with the nodes unchanged.
	c.targetNodes = nil
	if !leading && c.nb != nil {
		c.nb.Close()
		c.lastNodes = nil
	}
}

// pass is one reconcile of the leader: EgressIP assignment and status, LB
// IPAM and the NB rows of the EgressIPs and load balancers.
func (c *clusterWork) pass(ctx context.Context, s desired.Snapshot) error {
	c.passing.Add(1)
	defer c.passing.Add(-1)
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.gc.After()
	if c.resigned || ctx.Err() != nil {
		return ctx.Err() // no longer leading, or stopping: nothing is written
	}
	// Connected before the desired state is computed: whether the NB has
	// load balancer templates decides its NodePort rows. An NB that cannot
	// be reached fails the NB sync alone (the statuses are still written).
	nbErr := c.connectNB(ctx)
	// The statuses this leader wrote and its informer does not show yet
	// are read as written.
	var shown map[string]*unstructured.Unstructured
	s.EgressIPs, shown = c.status.OverlayWritten(s.EgressIPs)
	if s.Changed != nil {
		c.status.InjectWritten(s.Changed, shown)
	}
	cs, err := c.compute(s)
	if err != nil {
		return err
	}
	c.lastNodes = cs.Nodes
	c.followNodes(cs)
	return c.write(ctx, s, &cs, nbErr)
}

// followNodes asks for the pass again when a held egress IP's hold runs
// out, and gives the reachability checks their targets when the nodes
// changed (the same slice as the last pass's: the incremental path
// replaces it when a node changes).
func (c *clusterWork) followNodes(cs desired.ClusterState) {
	if cs.HoldWake > 0 {
		for _, h := range c.params.Hold.Held() {
			c.log.Info("egress IP on a host interface held until its old node lets it go", "egressIP", h.IP,
				"node", h.Node, "released", h.At.Format(time.RFC3339Nano), "for", cs.HoldWake.Round(time.Millisecond))
		}
		c.hooks.requeue(cs.HoldWake)
	}
	if c.hooks.targets != nil && !sameSlice(cs.Nodes, c.targetNodes) {
		c.hooks.targets(targetsOf(cs.Nodes, true, ""))
		c.targetNodes = cs.Nodes
	}
}

// write hands cs to the writers: the statuses to the API server, the
// rows to the NB.
//
// The EgressIP statuses never delay the NB: a node going NotReady moves
// its egress IPs in the NB without first waiting for a round trip to the
// apiserver per status. A pass that syncs only the owners that changed
// writes them once the NB is synced (or after statusDelay, when the NB
// does not answer): the apiserver's work for them no longer competes for
// the CPU with the NB transactions on a small control-plane machine,
// which made a NotReady's first step 3 times slower. A full pass writes
// them while the NB is synced, which takes seconds there.
func (c *clusterWork) write(ctx context.Context, s desired.Snapshot, cs *desired.ClusterState, nbErr error) (retErr error) {
	statusErr := make(chan error, 1)
	var once sync.Once
	startStatus := func() {
		once.Do(func() { go func() { statusErr <- c.status.WriteEgressStatus(ctx, s, cs.Status) }() })
	}
	syncsNB := nbErr == nil && c.nb != nil
	statusLater := syncsNB && cs.Dirty != nil && !c.nb.FullDue()
	if statusLater {
		t := time.AfterFunc(statusDelay, startStatus)
		defer t.Stop()
	} else {
		startStatus()
	}
	defer func() { retErr = errors.Join(retErr, <-statusErr) }()
	errs := []error{nbErr, c.status.WriteIngress(ctx, s, cs.Ingress)}
	events := cs.Events
	if cs.LBSvc != nil {
		lbEvents, err := c.status.SyncLBSvc(ctx, cs.LBSvc, s.LBSvcDeployments)
		events, errs = append(events, lbEvents...), append(errs, err)
	}
	if syncsNB {
		nbEvents, err := c.writeNB(ctx, s, cs)
		events, errs = append(events, nbEvents...), append(errs, err)
	} else if c.nb != nil {
		c.nb.Postpone(cs.Dirty)
	}
	errs = append(errs, c.status.WriteEgressServices(ctx, s, cs.EgressServices))
	if statusLater {
		startStatus()
	}
	c.events.record(events)
	return errors.Join(errs...)
}

// statusDelay is the longest a pass that syncs only the owners that
// changed holds its EgressIP statuses back for the NB sync.
const statusDelay = 100 * time.Millisecond

// compute is the leader's desired state of s: from the incremental index
// when s says what changed and the index is up to date, else computed
// anew (desired.ComputeCluster, or with a new index).
func (c *clusterWork) compute(s desired.Snapshot) (desired.ClusterState, error) {
	x := c.index
	mode := "incremental"
	ch := s.Changed
	if ch == nil || ch.Other || x == nil || !desired.Supported(c.params) || !reflect.DeepEqual(x.Params().LB, c.params.LB) {
		c.audit = nil // computed anew here: nothing left to check
		s, err := s.WithPods()
		if err != nil {
			return desired.ClusterState{}, err
		}
		if !desired.Supported(c.params) {
			c.index = nil
			return desired.ComputeCluster(s, c.params, c.hooks.reachable, c.lastNodes)
		}
		mode = "full"
		x = desired.NewIndex(c.params, c.hooks.reachable, c.lastNodes)
		ch = desired.SnapshotChanges(s)
	}
	start := time.Now()
	cs, err := x.Apply(ch)
	c.m.Reconcile.WithLabelValues("compute-"+mode, map[bool]string{true: "ok", false: "error"}[err == nil]).Observe(time.Since(start).Seconds())
	if err != nil {
		c.index, c.audit = nil, nil // computed anew next time
		return cs, err
	}
	c.index = x
	if c.audit != nil && mode == "incremental" {
		c.audit.seen.Merge(ch)
	}
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		args := []any{"mode", mode, "changes", ch.Len(), "dirty", len(cs.Dirty), "duration", time.Since(start)}
		if !ch.Since.IsZero() {
			// From the informers' delivery of the first change to this
			// computation's start: a pass late after its event shows here
			// whether the event came late or the loop did.
			args = append(args, "queued", start.Sub(ch.Since))
		}
		c.log.Debug("cluster state computed", args...)
	}
	return cs, nil
}

// sameSlice reports whether a and b are the same slice (the same
// elements in the same memory), not merely equal.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// connectNB connects the NB writer (once) and fits the load balancers to
// the NB's schema (fitTemplates).
func (c *clusterWork) connectNB(ctx context.Context) error {
	if c.nb == nil {
		return nil
	}
	cl, err := c.nb.Connect(ctx)
	if err != nil {
		return err
	}
	c.fitTemplates(cl.Schema())
	return nil
}

// fitTemplates turns the template load balancers of NodePorts
// (--lb-templates) into per-node ones on an NB whose schema has no
// Chassis_Template_Var table (OVN before 22.12), with one warning, as
// OVN-Kubernetes disables its template support there.
func (c *clusterWork) fitTemplates(schema ovsdb.DatabaseSchema) {
	if c.params.LB.PerNodeLBs || ovsdbnb.SupportsTemplates(schema) {
		return
	}
	c.log.Warn("northbound: the NB schema has no Chassis_Template_Var table (OVN older than 22.12): NodePorts get per-node load balancers instead of templates",
		"schema", schema.Version)
	c.params.LB.PerNodeLBs = true
}

// writeNB writes cs's rows to the NB, the EgressIPs' make-before-break:
// with --sb-address, a step giving gateway routers new SNATs waits for
// their chassis before the next. An owner the server refuses (e.g.
// GR_<node> missing) is an event on its object and an error, so the pass
// is retried with backoff; the others are written.
func (c *clusterWork) writeNB(ctx context.Context, s desired.Snapshot, cs *desired.ClusterState) ([]event.Event, error) {
	if c.sb == nil && len(c.cfg.SBAddress) > 0 {
		w, err := c.dialSB(ctx)
		if err != nil {
			c.nb.Postpone(cs.Dirty)
			return nil, fmt.Errorf("southbound: %w", err)
		}
		c.sb = w
	}
	cl := c.nb.Client()
	c.fitSchema(cl, cs)
	d := ovsdbnb.Desired{Stepped: cs.Egress, Plain: cs.LB, Dirty: cs.Dirty, Keep: cs.Keep}
	if c.sb != nil {
		d.Settle = func(ctx context.Context, routers []string) { c.waitChassis(ctx, cl, s, routers) }
		d.Drain = func(ctx context.Context, routers []string) { c.drainChassis(ctx, cl, s, routers) }
	}
	res, err := c.nb.Write(ctx, d)
	var events []event.Event
	for _, oe := range res.Refused {
		events = append(events, ownerEvent(s, oe))
	}
	return events, err
}

// silenced reports whether router is the gateway router of a node the
// reachability checks find down.
func (c *clusterWork) silenced(router string) bool {
	node, ok := strings.CutPrefix(router, "GR_")
	return ok && c.hooks.reachable != nil && !c.hooks.reachable(node)
}

// waitChassis waits, up to chassisWait, until the chassis of routers
// (gateway routers, GR_<node>) have applied the NB as just written, so a
// new egress node's SNAT is installed before the next step moves the
// reroute to it: otherwise the first packets of a connection take the
// node-wide SNAT and conntrack keeps that source for its whole life. A
// chassis that does not confirm in time (dead, or slow) is logged and
// the next step goes ahead.
func (c *clusterWork) waitChassis(ctx context.Context, cl *ovsdbnb.Client, s desired.Snapshot, routers []string) {
	chassis := desired.GatewayChassis(s, routers)
	took, err := c.sb.Confirm(ctx, cl.NextCfg, chassisWait, chassis...)
	if err != nil {
		c.log.Warn("northbound: the new egress nodes' chassis did not confirm their SNATs in time; moving the reroute anyway",
			"chassis", chassis, "err", err)
		return
	}
	c.log.Debug("northbound: chassis confirmed the SNATs", "chassis", chassis, "took", took)
}

// chassisWait bounds waitChassis.
const chassisWait = 2 * time.Second

// drainChassis waits, up to drainWait, until the chassis of routers
// (gateway routers that just lost egress IPs' SNATs: nodes found down)
// have applied the NB as just written. A node cut off from the leader
// alone (its chassis alive) still answers ARP for the egress IP from its
// gateway router until its ovn-controller removes the SNAT; the new
// owner's SNAT comes in the next step. A dead chassis never confirms:
// the wait is short.
func (c *clusterWork) drainChassis(ctx context.Context, cl *ovsdbnb.Client, s desired.Snapshot, routers []string) {
	chassis := desired.GatewayChassis(s, routers)
	took, err := c.sb.Confirm(ctx, cl.NextCfg, drainWait, chassis...)
	c.log.Debug("northbound: chassis of the silenced gateway routers", "chassis", chassis, "took", took, "err", err)
}

// drainWait bounds drainChassis: the time a dead node's egress IPs wait
// for its chassis.
const drainWait = 100 * time.Millisecond

// dialSB connects the make-before-break waiter to the Southbound.
func (c *clusterWork) dialSB(ctx context.Context) (*sbwait.Waiter, error) {
	cfg, err := sbTLS(c.cfg)
	if err != nil {
		return nil, err
	}
	return sbwait.Dial(ctx, c.cfg.SBAddress, cfg)
}

// fitSchema leaves out of cs the rows the NB's schema cannot hold.
// OVN-Kubernetes marks the replies of EgressIP pods' connections with a
// QoS action (mark=42) that the NB schema of OVN before 24.03 lacks:
// there the owner gets the per-port policies instead
// (desired.ClusterState.WithoutQoSMark), with one warning (the 102
// policy matching the mark stays, as harmless as OVN-Kubernetes' own).
func (c *clusterWork) fitSchema(cl *ovsdbnb.Client, cs *desired.ClusterState) {
	if cl.SupportsKey(nbdb.QoSTable, "action", "mark") {
		return
	}
	if cs.WithoutQoSMark() && !c.noReplyQoS {
		c.log.Warn("northbound: the NB schema has no QoS mark action (OVN older than 24.03): EgressIP reply traffic is kept from the reroute by per-port policies instead",
			"owner", egress.ReplyQoSOwner.String())
		c.noReplyQoS = true
	}
}

// ownerEvent is the Warning event of an owner whose rows the server
// refused, on the object that owns them.
func ownerEvent(s desired.Snapshot, oe *ovsdbnb.OwnerError) event.Event {
	ref := corev1.ObjectReference{Kind: oe.Owner.Type, Name: oe.Owner.Name}
	switch oe.Owner.Type {
	case egress.OwnerEgressIP:
		ref = corev1.ObjectReference{APIVersion: egressv1.SchemeGroupVersion.String(), Kind: egressv1.Kind, Name: oe.Owner.Name}
		for _, u := range s.EgressIPs {
			if u.GetName() == oe.Owner.Name {
				ref = event.Ref(egressv1.SchemeGroupVersion.String(), egressv1.Kind, u)
			}
		}
	case lbsvc.OwnerService:
		ns, name, _ := strings.Cut(oe.Owner.Name, "/")
		ref = corev1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: name}
	case egress.OwnerNode:
		ref = corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: oe.Owner.Name}
	}
	return event.Warningf(ref, ReasonNBSyncFailed, "northbound rows not written (retrying): %v", oe)
}

// verify reports whether a second NB sync of s would send nothing.
func (c *clusterWork) verify(ctx context.Context, s desired.Snapshot) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nb == nil || c.nb.Client() == nil {
		return nil
	}
	cl := c.nb.Client()
	s.EgressIPs, _ = c.status.OverlayWritten(s.EgressIPs) // as the pass reads them
	cs, err := desired.ComputeCluster(s, c.params, c.hooks.reachable, c.lastNodes)
	if err != nil {
		return err
	}
	c.fitSchema(cl, &cs)
	res, err := cl.Sync(ctx, cs.NB())
	if err != nil {
		return fmt.Errorf("northbound: %w", err)
	}
	if res.Ops() > 0 {
		return fmt.Errorf("northbound did not match: %d operations were still needed", res.Ops())
	}
	return nil
}
