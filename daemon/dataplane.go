package daemon

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/arp"
	"github.com/ovnedge/ovnedge/bgp"
	"github.com/ovnedge/ovnedge/bgp/metallb"
	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/internal/sbwait"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/ovsflow"
)

// Dataplane is the I/O edge of the daemon: it computes the desired state
// of a Snapshot (ComputeCluster, ComputeNode) and writes it to the
// Northbound database, the bridge, the ARP responder and the API server.
// Its cluster and node halves may run at the same time.
type Dataplane struct {
	cfg     *Config
	params  Params
	clients *Clients
	rec     record.EventRecorder
	log     *slog.Logger
	m       *Metrics

	gc *gcAhead // nil: --gc-ahead=false

	// Reachable says whether an egress node answers its reachability
	// checks; nil means every node does.
	Reachable func(node string) bool
	// Targets, when not nil, is given the egress-assignable nodes to
	// check on every cluster reconcile.
	Targets func([]reach.Target)
	// NodeTargets, when not nil, is given the other nodes on every node
	// reconcile (the node's heartbeat among nodes).
	NodeTargets func([]reach.Target)
	// Alive, when not nil, is Params.Alive of the node work.
	Alive func(node string) bool
	// Fenced, when not nil, says whether this node has lost its host
	// lease: its egress IPs on host interfaces are then withdrawn.
	Fenced func() bool
	// HostChanged, when not nil, is called on every change of a host
	// link (the node work runs again).
	HostChanged func()
	// Requeue, when not nil, asks for the cluster work to run again
	// after a while (a held egress IP's hold runs out).
	Requeue func(after time.Duration)
	// Kick, when not nil, asks for another node reconcile (the provider
	// bridge's steering flows wait for a patch port ovn-controller has
	// not made yet).
	Kick func()

	// Wake, when not nil, asks the cluster loop for a reconcile (the NB
	// drift repair does when owners it cannot repair alone changed).
	Wake func()

	cmu    sync.Mutex // the cluster half
	nb     *ovsdbnb.Client
	nbStop context.CancelFunc // stops the NB drift repair
	sb     *sbwait.Waiter     // nil without --sb-address
	// lastEIP are the egress rows last synced: on connecting, those
	// read back from the NB (the first make-before-break steps start
	// from them).
	lastEIP   map[ovsdbnb.Owner]ovsdbnb.State
	lbOwners  map[ovsdbnb.Owner]bool // load balancer owners last synced
	lastNodes []egress.Node          // egress nodes last computed
	// index is the leader's incremental desired state (nil: computed
	// anew next time); pending the owners it marked dirty that the NB
	// sync has not taken yet.
	index   *clusterIndex
	pending map[ovsdbnb.Owner]bool
	// audit is the periodic check of index against a full recompute
	// under way (see Audit), nil when none is.
	audit *auditRun
	// passing counts the cluster passes running or waiting for cmu (an
	// audit gives way to them: giveWay).
	passing atomic.Int32
	// targetNodes are the nodes the reachability targets were last set
	// from (ClusterState.Nodes).
	targetNodes []egress.Node
	// statusChecked are the EgressIPs found holding their status.
	statusChecked map[string]checkedStatus
	// written are the EgressIPs whose status this leader wrote while its
	// informer still shows the object written over (by name). The
	// assignment takes an EgressIP's current status as the one to keep,
	// so it reads the written object instead: from the stale one, a node
	// back in service just after its egress IPs moved away would get
	// them back (e2e TestFastFailover/UplinkDown).
	written map[string]writtenStatus
	// synced is each owner's desired state as last written; after the
	// first sync only owners whose state differs are synced (rows changed
	// behind our back are the NB repair's).
	synced map[ovsdbnb.Owner]ovsdbnb.State
	// refusedOwners are the owners whose last write the server refused
	// (taken out of synced, and never in it while here): every pass after
	// the first full sync sends them again, without a look at every owner
	// for the unwritten ones.
	refusedOwners map[ovsdbnb.Owner]bool
	// stale holds the owners found in the NB when the client connected
	// (rows of a previous run); those no longer wanted are deleted by the
	// first sync, so objects deleted while the daemon was down lose
	// their rows too.
	stale []ovsdbnb.Owner
	// repairing is why the NB drift repair asked for this reconcile
	// (logged with what the reconcile writes), "" when it did not.
	repairing repairReason
	// reread is set when a sync's outcome is unknown (syncLost): the
	// next sync starts its make-before-break from the NB's rows.
	reread bool
	// resigned is set once this instance stopped leading (Leading):
	// its cluster work writes nothing until it leads again.
	resigned bool
	emitted  map[string]bool // events already recorded
	// noReplyQoS is set once the NB turned out not to take the
	// reply-traffic QoS rules (logged once).
	noReplyQoS bool

	nmu       sync.Mutex // the node half
	ports     *ovsflow.OVSDBPorts
	transport *ovsflow.NativeTransport
	applier   *ovsflow.Applier
	program   ovsflow.Program
	// lastSelf is this node's last good parse of its k8s.ovn.org
	// annotations (Params.LastGood).
	lastSelf *egress.Node
	// fence silences the OVN-hosted egress IPs the node lost for a while
	// (egress.Fence); fenceTimer asks for the reconcile that lifts the
	// next fence.
	fence      egress.Fence
	fenceTimer *time.Timer
	responder  *arp.Responder
	// The provider bridge (seed 003): its applier and program, and the
	// responder of the underlay VIPs on the underlay interface.
	provPorts   *ovsflow.OVSDBPorts // its own monitor: an Applier consumes its ports' Changed
	provApplier *ovsflow.Applier
	provProgram ovsflow.Program
	uresponder  *arp.Responder
	kickArmed   atomic.Bool
	speaker     *bgp.Speaker
	bgpPeers    []bgp.Peer  // the speaker's peers
	leaving     atomic.Bool // this node is cordoned, being deleted or out of service
	hostnet     *hostnet.Manager
	announcer   *arp.Announcer // the hostnet Manager's
	// refused are the host egress IPs this node refused, kept while
	// their requirements fail.
	refused map[netip.Addr]egress.HostAssignment
	// hosted are the host egress IPs on the node's links after the last
	// converge.
	hosted   []netip.Addr
	nemitted map[string]bool
	// hosting is whether the node was last asked to host egress IPs on
	// host interfaces.
	hosting atomic.Bool

	bgStop []context.CancelFunc // stop the background goroutines
	bg     sync.WaitGroup
}

// NewDataplane returns a Dataplane for cfg writing through clients;
// events go to rec (see NewRecorder). Connections are opened on first use.
func NewDataplane(cfg *Config, clients *Clients, rec record.EventRecorder, m *Metrics, log *slog.Logger) *Dataplane {
	p := ParamsFrom(cfg)
	p.LBCache = &lbsvc.Cache{} // used under cmu only
	p.Hold = &egress.HostHold{Lease: cfg.HostLease}
	var gc *gcAhead
	if cfg.GCAhead {
		gc = newGCAhead(log)
	}
	return &Dataplane{cfg: cfg, params: p, clients: clients, rec: rec, log: log, m: m, gc: gc,
		lastEIP: map[ovsdbnb.Owner]ovsdbnb.State{}, lbOwners: map[ovsdbnb.Owner]bool{},
		emitted: map[string]bool{}, nemitted: map[string]bool{}}
}

// Reconcilers returns the Dataplane's cluster and node work for Run. The
// node work is skipped when cfg.NodeName is empty, the NB sync when
// cfg.NBAddress is.
func (d *Dataplane) Reconcilers() Reconcilers {
	if d.cfg.NodeName == "" {
		return Reconcilers{Cluster: d.Cluster, Audit: d.Audit} // no node work (see Node)
	}
	return Reconcilers{Cluster: d.Cluster, Node: d.Node, Audit: d.Audit}
}

// Close closes the Dataplane's connections. It changes nothing in the
// dataplane.
func (d *Dataplane) Close() {
	d.gc.stop()
	d.cmu.Lock()
	d.closeNB()
	if d.sb != nil {
		d.sb.Close()
		d.sb = nil
	}
	d.cmu.Unlock()
	d.nmu.Lock()
	if d.fenceTimer != nil {
		d.fenceTimer.Stop()
	}
	if d.speaker != nil {
		d.stopSpeaker()
	}
	for _, stop := range d.bgStop {
		stop()
	}
	d.bg.Wait()
	if d.ports != nil {
		d.ports.Close()
	}
	if d.provPorts != nil {
		d.provPorts.Close()
	}
	if d.transport != nil {
		_ = d.transport.Close()
	}
	if d.hostnet != nil {
		_ = d.hostnet.Close()
	}
	if d.announcer != nil {
		d.announcer.Close()
	}
	d.nmu.Unlock()
}

// stopSpeaker stops the BGP speaker as --bgp-shutdown says. A restart
// leaves without a notification: the peers keep the routes for the
// graceful restart time while ovnedge restarts. A node that is leaving
// withdraws its routes and closes the sessions with a Cease, so the
// routers stop sending it traffic at once instead of after the restart
// time.
func (d *Dataplane) stopSpeaker() {
	withdraw := d.cfg.BGPShutdown == "withdraw" || (d.cfg.BGPShutdown != "restart" && d.leaving.Load())
	if withdraw {
		if err := d.speaker.Announce(nil); err != nil {
			d.log.Warn("bgp: withdrawing the routes", "err", err)
		}
	}
	d.log.Info("bgp speaker stopping", "withdraw", withdraw, "leaving", d.leaving.Load(), "shutdown", d.cfg.BGPShutdown)
	if err := d.speaker.Close(!withdraw); err != nil {
		d.log.Warn("bgp speaker", "err", err)
	}
	d.speaker = nil
}

// Cluster is the leader's work: EgressIP assignment and status, LB IPAM
// and the Northbound rows of the EgressIPs and load balancers.
func (d *Dataplane) Cluster(ctx context.Context, s Snapshot) (retErr error) {
	d.passing.Add(1)
	defer d.passing.Add(-1)
	d.cmu.Lock()
	defer d.cmu.Unlock()
	defer d.gc.after()
	if d.resigned || ctx.Err() != nil {
		return ctx.Err() // no longer leading, or stopping: nothing is written
	}
	// Connected before the desired state is computed: whether the NB has
	// load balancer templates decides its NodePort rows. An NB that cannot
	// be reached fails the NB sync alone (the statuses are still written).
	var nbErr error
	if len(d.cfg.NBAddress) > 0 {
		nbErr = d.connectNB(ctx)
	}
	// The statuses this leader wrote and its informer does not show yet
	// are read as written (see written).
	var shown map[string]*unstructured.Unstructured
	s.EgressIPs, shown = d.overlayWritten(s.EgressIPs)
	if s.Changed != nil {
		d.injectWritten(s.Changed, shown)
	}
	cs, err := d.computeCluster(s)
	if err != nil {
		return err
	}
	d.lastNodes = cs.Nodes
	events := cs.Events
	if cs.HoldWake > 0 {
		for _, h := range d.params.Hold.Held() {
			d.log.Info("egress IP on a host interface held until its old node lets it go", "egressIP", h.IP,
				"node", h.Node, "released", h.At.Format(time.RFC3339Nano), "for", cs.HoldWake.Round(time.Millisecond))
		}
		if d.Requeue != nil {
			d.Requeue(cs.HoldWake)
		}
	}
	// The reachability checks' targets change only with the nodes: a
	// pass whose nodes are those of the last one (the same slice: the
	// incremental path replaces it when a node changes) leaves them.
	if d.Targets != nil && !sameSlice(cs.Nodes, d.targetNodes) {
		d.Targets(targetsOf(cs.Nodes, true, ""))
		d.targetNodes = cs.Nodes
	}
	var errs []error
	// The EgressIP statuses never delay the NB: a node going NotReady
	// moves its egress IPs in the NB without first waiting for a round
	// trip to the apiserver per status (the statuses and the NB rows are
	// the same assignment, and neither needs the other). A pass that
	// syncs only the owners that changed writes them once the NB is
	// synced: a few tens of milliseconds later, and the apiserver's work
	// for them (and the client's) no longer competes for the CPU with
	// the NB transactions on a small control-plane machine, which made
	// a NotReady's first step 3 times slower; an NB sync still going
	// after statusDelay (the NB down, its transaction being retried)
	// no longer holds them back. A full pass (start, the periodic
	// resync) writes them while the NB is synced, which takes seconds
	// there.
	statusErr := make(chan error, 1)
	var statusOnce sync.Once
	startStatus := func() {
		statusOnce.Do(func() { go func() { statusErr <- d.writeEgressStatus(ctx, s, cs.Status) }() })
	}
	syncsNB := nbErr == nil && len(d.cfg.NBAddress) > 0
	statusLater := syncsNB && !d.nbSyncFull(cs)
	if statusLater {
		t := time.AfterFunc(statusDelay, startStatus)
		defer t.Stop()
	} else {
		startStatus()
	}
	defer func() {
		if err := <-statusErr; err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	if err := d.writeIngress(ctx, s, cs.Ingress); err != nil {
		errs = append(errs, err)
	}
	if cs.LBSvc != nil {
		lbEvents, err := d.syncLBSvc(ctx, cs.LBSvc, s.LBSvcDeployments)
		events = append(events, lbEvents...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if nbErr != nil {
		errs = append(errs, nbErr)
	}
	if syncsNB {
		nbEvents, err := d.syncNB(ctx, s, &cs)
		events = append(events, nbEvents...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if statusLater {
		startStatus()
	}
	d.record(d.emitted, events)
	return errors.Join(errs...)
}

// computeCluster is the leader's desired state of s: from the
// incremental index when s says what changed and the index is up to
// date, else computed anew (ComputeCluster, or with a new index). The
// owners the NB sync has not taken yet stay dirty.
func (d *Dataplane) computeCluster(s Snapshot) (ClusterState, error) {
	x := d.index
	mode := "incremental"
	ch := s.Changed
	if ch == nil || ch.Other || x == nil || !incrementalSupported(d.params) || !reflect.DeepEqual(x.p.LB, d.params.LB) {
		d.audit = nil // computed anew here: nothing left to check
		s, err := s.WithPods()
		if err != nil {
			return ClusterState{}, err
		}
		if !incrementalSupported(d.params) {
			d.index = nil
			return ComputeCluster(s, d.params, d.Reachable, d.lastNodes)
		}
		mode = "full"
		x = newClusterIndex(d.params, d.Reachable, d.lastNodes)
		ch = SnapshotChanges(s)
	}
	start := time.Now()
	cs, err := x.apply(ch)
	d.m.Reconcile.WithLabelValues("compute-"+mode, map[bool]string{true: "ok", false: "error"}[err == nil]).Observe(time.Since(start).Seconds())
	if err != nil {
		d.index, d.audit = nil, nil // computed anew next time
		return cs, err
	}
	d.index = x
	if d.audit != nil && mode == "incremental" {
		d.audit.seeChanges(ch)
	}
	if cs.Dirty != nil {
		for o := range d.pending {
			cs.Dirty[o] = true
		}
	}
	d.pending = cs.Dirty
	if d.log.Enabled(context.Background(), slog.LevelDebug) {
		args := []any{"mode", mode, "changes", ch.Len(), "dirty", len(cs.Dirty), "duration", time.Since(start)}
		if !ch.Since.IsZero() {
			// From the informers' delivery of the first change to
			// this computation's start: a pass late after its event
			// shows here whether the event came late or the loop did.
			args = append(args, "queued", start.Sub(ch.Since))
		}
		d.log.Debug("cluster state computed", args...)
	}
	return cs, nil
}

// record records events not recorded before: a reconcile recomputes
// everything, and an event repeated on every pass would flood.
func (d *Dataplane) record(seen map[string]bool, events []event.Event) {
	now := map[string]bool{}
	for _, e := range events {
		k := e.String()
		now[k] = true
		if !seen[k] {
			ref := e.Object
			d.rec.Event(&ref, e.Type, e.Reason, e.Message)
		}
	}
	clear(seen)
	maps.Copy(seen, now)
}

// writeEgressStatus writes the EgressIPs' new status items. In manifests
// mode they are logged (and kept in the in-memory API, so the assignment
// sticks). A conflict is returned: the reconcile is retried on the fresh
// object.
func (d *Dataplane) writeEgressStatus(ctx context.Context, s Snapshot, status map[string][]egressv1.EgressIPStatusItem) error {
	var errs []error
	seen := make(map[string]checkedStatus, len(d.statusChecked))
	defer func() { d.statusChecked = seen }()
	var updates []*unstructured.Unstructured
	bases := map[string]*unstructured.Unstructured{} // the informer's objects the updates write over
	for _, u := range s.EgressIPs {
		name := u.GetName() // a lookup in the object's maps: once
		items, ok := status[name]
		if !ok {
			continue
		}
		// An object already found holding these items is not read
		// again (a reconcile costs no EgressIP's parse but those that
		// changed).
		if c, ok := d.statusChecked[name]; ok && c.obj == u && slices.Equal(c.items, items) {
			seen[name] = c
			continue
		}
		old, err := egressv1.FromUnstructured(u)
		if err != nil {
			continue // recorded as an event by ComputeCluster
		}
		if slices.Equal(old.Status.Items, items) {
			seen[name] = checkedStatus{obj: u, items: items}
			continue
		}
		d.m.Failovers.Add(float64(failovers(old.Status.Items, items)))
		n := old.DeepCopy()
		n.Status.Items = items
		obj, err := egressv1.ToUnstructured(n)
		if err != nil {
			errs = append(errs, fmt.Errorf("status of EgressIP %s: %w", n.Name, err))
			continue
		}
		d.log.Info("EgressIP status", "egressip", n.Name, "items", fmt.Sprint(items), "manifests", d.clients.FromManifests)
		updates = append(updates, obj)
		over := u
		if w, ok := d.written[name]; ok && w.obj == u {
			over = w.over // a second write before the informer showed the first
		}
		bases[name] = over
	}
	// The CRD has no status subresource (as in OVN-Kubernetes): the
	// status is written with the object. The writes go statusWriters at
	// a time (within the client's --kube-api-qps): one after the other, a
	// leader starting on a thousand unassigned EgressIPs spent 14 s
	// writing them before its first NB row.
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan *unstructured.Unstructured)
	for range min(statusWriters, len(updates)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for obj := range next {
				res, err := d.clients.Dynamic.Resource(EgressIPResource).Update(ctx, obj, metav1.UpdateOptions{})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("status of EgressIP %s: %w", obj.GetName(), err))
				} else if res != nil {
					if d.written == nil {
						d.written = map[string]writtenStatus{}
					}
					d.written[obj.GetName()] = writtenStatus{over: bases[obj.GetName()], obj: res}
				}
				mu.Unlock()
			}
		}()
	}
	for _, obj := range updates {
		next <- obj
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// writtenStatus is an EgressIP status write the informer does not show
// yet: the informer's object written over (the store keeps handing out
// that very object until the echo or another change replaces it) and the
// server's answer; injected once the incremental index has been given
// the answer.
type writtenStatus struct {
	over     *unstructured.Unstructured
	obj      *unstructured.Unstructured
	injected bool
}

// overlayWritten returns objs with every object the leader wrote over
// replaced by what it wrote, and forgets the writes the informer shows.
//
// shown are the informer's objects of the writes it forgot: the
// incremental path gives them to its index, which may not have been given
// them (the informer can show a write between the cluster loop's taking
// of the changes and its listing of the objects: the change is then in
// the next pass's changes, and without shown this pass would read the
// EgressIP as it was before the write, with no status).
func (d *Dataplane) overlayWritten(objs []*unstructured.Unstructured) (out []*unstructured.Unstructured, shown map[string]*unstructured.Unstructured) {
	if len(d.written) == 0 {
		return objs, nil
	}
	out = slices.Clone(objs)
	over := map[string]bool{}
	current := map[string]*unstructured.Unstructured{}
	for i, u := range out {
		w, ok := d.written[u.GetName()]
		switch {
		case ok && u == w.over:
			out[i] = w.obj
			over[u.GetName()] = true
		case ok:
			current[u.GetName()] = u
		}
	}
	for name := range d.written {
		if !over[name] {
			delete(d.written, name) // the write is in, or a later change, or a deletion
			if u := current[name]; u != nil {
				if shown == nil {
					shown = map[string]*unstructured.Unstructured{}
				}
				shown[objectKey("", name)] = u
			}
		}
	}
	return out, shown
}

// injectWritten puts into ch, for the incremental index, each written
// object it has not been given, the written object in place of every
// changed object it wrote over, and the objects of shown (overlayWritten's
// forgotten writes) that ch lacks. It runs after overlayWritten.
func (d *Dataplane) injectWritten(ch *Changes, shown map[string]*unstructured.Unstructured) {
	set := func(k string, u *unstructured.Unstructured) {
		if ch.EgressIPs == nil {
			ch.EgressIPs = map[string]*unstructured.Unstructured{}
		}
		ch.EgressIPs[k] = u
	}
	for k, u := range shown {
		if _, ok := ch.EgressIPs[k]; !ok {
			set(k, u)
		}
	}
	for name, w := range d.written {
		k := objectKey("", name)
		u, changed := ch.EgressIPs[k]
		switch {
		case changed && u != w.over:
			continue // deleted or changed since: the informer's object rules
		case changed || !w.injected:
			set(k, w.obj)
			w.injected = true
			d.written[name] = w
		}
	}
}

// statusWriters is how many EgressIP status writes are in flight at once.
const statusWriters = 8

// checkedStatus is an EgressIP object found holding the status items
// the leader wants.
type checkedStatus struct {
	obj   *unstructured.Unstructured
	items []egressv1.EgressIPStatusItem
}

// failovers counts the egress IPs of old that now have another node.
func failovers(old, items []egressv1.EgressIPStatusItem) int {
	n := 0
	for _, o := range old {
		for _, i := range items {
			if i.EgressIP == o.EgressIP && i.Node != o.Node {
				n++
			}
		}
	}
	return n
}

// writeIngress writes the LoadBalancer Services' ingress addresses.
func (d *Dataplane) writeIngress(ctx context.Context, s Snapshot, ingress map[string][]corev1.LoadBalancerIngress) error {
	if len(ingress) == 0 {
		return nil // most passes: no Service's ingress changed
	}
	var errs []error
	for _, svc := range s.Services {
		ing, ok := ingress[svc.Namespace+"/"+svc.Name]
		if !ok {
			continue
		}
		c := svc.DeepCopy()
		c.Status.LoadBalancer.Ingress = ing
		d.log.Info("Service load balancer ingress", "service", svc.Namespace+"/"+svc.Name, "ingress", fmt.Sprint(ing),
			"manifests", d.clients.FromManifests)
		if _, err := d.clients.Typed.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("status of Service %s/%s: %w", svc.Namespace, svc.Name, err))
		}
	}
	return errors.Join(errs...)
}

// ReasonLBSvcNotOwned is the Warning event of a Service whose
// lb-svc-<service> Deployment exists but is not ovnedge's (Kube-OVN's own,
// say): it is left alone.
const ReasonLBSvcNotOwned = "LBServiceDeploymentNotOwned"

// syncLBSvc makes the cluster's lb-svc Deployments those of plan:
// creates, updates (on the resourceVersion the informer saw: a conflict
// is retried) and deletes of orphans (on their UID). A
// Deployment of the name that ovnedge does not manage is an event.
func (d *Dataplane) syncLBSvc(ctx context.Context, plan *kubeovn.Plan, existing []*appsv1.Deployment) ([]event.Event, error) {
	create, update, del := plan.Changes(existing)
	api := d.clients.Typed.AppsV1()
	var events []event.Event
	var errs []error
	for _, dp := range create {
		_, err := api.Deployments(dp.Namespace).Create(ctx, dp, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cur, gerr := api.Deployments(dp.Namespace).Get(ctx, dp.Name, metav1.GetOptions{})
			if gerr == nil && cur.Labels[kubeovn.LabelManagedBy] == kubeovn.ManagedBy {
				continue // created by an earlier pass the informer has not shown yet
			}
			if gerr == nil {
				owner := dp.OwnerReferences[0]
				events = append(events, event.Warningf(corev1.ObjectReference{APIVersion: "v1", Kind: "Service",
					Namespace: dp.Namespace, Name: owner.Name, UID: owner.UID}, ReasonLBSvcNotOwned,
					"Deployment %s/%s exists without the label %s=%s: it is not ovnedge's and is left alone",
					dp.Namespace, dp.Name, kubeovn.LabelManagedBy, kubeovn.ManagedBy))
				continue
			}
			err = gerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("create Deployment %s/%s: %w", dp.Namespace, dp.Name, err))
			continue
		}
		d.log.Info("lb-svc Deployment created", "deployment", dp.Namespace+"/"+dp.Name, "manifests", d.clients.FromManifests)
	}
	for _, dp := range update {
		if _, err := api.Deployments(dp.Namespace).Update(ctx, dp, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("update Deployment %s/%s: %w", dp.Namespace, dp.Name, err))
			continue
		}
		d.log.Info("lb-svc Deployment updated", "deployment", dp.Namespace+"/"+dp.Name, "manifests", d.clients.FromManifests)
	}
	for _, dp := range del {
		err := api.Deployments(dp.Namespace).Delete(ctx, dp.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &dp.UID}, PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete Deployment %s/%s: %w", dp.Namespace, dp.Name, err))
			continue
		}
		d.log.Info("lb-svc Deployment deleted: its Service is gone or no longer an lb-svc one", "deployment", dp.Namespace+"/"+dp.Name,
			"manifests", d.clients.FromManifests)
	}
	return events, errors.Join(errs...)
}

// sameSlice reports whether a and b are the same slice (the same
// elements in the same memory), not merely equal.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// statusDelay is the longest a pass that syncs only the owners that
// changed holds its EgressIP statuses back for the NB sync.
const statusDelay = 100 * time.Millisecond

// fullDue reports whether the next NB sync compares every owner: none
// has completed (or one was lost). The periodic full resync is the NB
// repair's (watchNB, every fullResync, without the cluster lock): done
// here, it fell on whichever event's pass came next and made it compare
// all 13,005 owners of the scale benchmark's 150,000-pod cluster (a node
// NotReady taking 1.4 s instead of ~27 ms). The incremental desired
// States are checked against a full recompute by the periodic audit
// (Audit), the States written are kept to them by every pass (refused
// owners retried), and the NB to those written by that repair.
func (d *Dataplane) fullDue() bool {
	return d.synced == nil
}

// nbSyncFull reports whether the NB sync of cs compares every owner: a
// full sync is due (fullDue) or cs was computed anew, not incrementally.
func (d *Dataplane) nbSyncFull(cs ClusterState) bool {
	return cs.Dirty == nil || d.fullDue()
}

// syncNB writes the NB rows: the EgressIP rows make-before-break from the
// last synced ones, the load balancers with them. Owners gone since the
// last sync get an empty State, which deletes their rows. An owner the
// server refuses (e.g. GR_<node> missing) is an event on its object and
// an error, so the reconcile is retried with backoff; the others are
// written. The events say which owners were refused.
func (d *Dataplane) syncNB(ctx context.Context, s Snapshot, cs *ClusterState) ([]event.Event, error) {
	if err := d.connectNB(ctx); err != nil {
		return nil, err
	}
	if err := d.startFromNB(); err != nil {
		return nil, err
	}
	if d.sb == nil && len(d.cfg.SBAddress) > 0 {
		w, err := d.dialSB(ctx)
		if err != nil {
			return nil, fmt.Errorf("southbound: %w", err)
		}
		d.sb = w
	}
	d.fitSchema(cs)
	full := d.fullDue()
	// dirty, when not nil, are the only owners whose state may have
	// changed (the incremental path's): the others are not looked at,
	// unless not written yet.
	dirty := cs.Dirty
	if full {
		dirty = nil
	}
	var lb map[ovsdbnb.Owner]ovsdbnb.State
	if dirty == nil {
		lb = maps.Clone(cs.LB)
		for o := range d.lbOwners {
			if _, ok := lb[o]; !ok {
				lb[o] = ovsdbnb.State{}
			}
		}
	} else {
		lb = map[ovsdbnb.Owner]ovsdbnb.State{}
		for o := range dirty {
			if st, ok := cs.LB[o]; ok {
				lb[o] = st
			} else if d.lbOwners[o] {
				lb[o] = ovsdbnb.State{}
			}
		}
		// An owner whose write was refused (never in synced) is sent
		// again.
		for o := range d.refusedOwners {
			if st, ok := cs.LB[o]; ok && !isEmpty(st) {
				lb[o] = st
			}
		}
	}
	for _, o := range d.stale {
		_, wanted := cs.Egress[o]
		_, wantedLB := cs.LB[o]
		// An egress owner read back into lastEIP goes in the last
		// make-before-break step instead.
		_, stepped := d.lastEIP[o]
		if _, ok := lb[o]; !ok && !wanted && !wantedLB && !stepped && !slices.Contains(cs.Keep, o) {
			lb[o] = ovsdbnb.State{}
		}
	}
	if len(cs.Keep) > 0 {
		cs.Egress = maps.Clone(cs.Egress) // maybe the index's: read only
		for _, o := range cs.Keep {
			if st, ok := d.lastEIP[o]; ok {
				cs.Egress[o] = st
			}
		}
	}
	if full {
		d.synced, d.refusedOwners = map[ovsdbnb.Owner]ovsdbnb.State{}, map[ovsdbnb.Owner]bool{}
	}
	// The make-before-break steps of the EgressIP owners that changed
	// (all of them on a full sync: fullDue): an unchanged owner is not
	// sent.
	oldEIP, newEIP := d.lastEIP, cs.Egress
	if !full {
		oldEIP, newEIP = map[ovsdbnb.Owner]ovsdbnb.State{}, map[ovsdbnb.Owner]ovsdbnb.State{}
		consider := func(o ovsdbnb.Owner) {
			prev, had := d.lastEIP[o]
			st, wanted := cs.Egress[o]
			// An owner not written (refused) is sent even if unchanged.
			_, written := d.synced[o]
			switch {
			case !wanted && had:
				oldEIP[o] = prev
			case wanted && (!had || !prev.Equal(st) || !written):
				newEIP[o] = st
				if had {
					oldEIP[o] = prev
				}
			}
		}
		if dirty == nil {
			for o := range cs.Egress {
				consider(o)
			}
			for o := range d.lastEIP {
				if _, ok := cs.Egress[o]; !ok {
					consider(o)
				}
			}
		} else {
			// Only the owners that may have changed: the dirty ones
			// (an owner gone from cs.Egress is one), those kept, and
			// those refused (the only owners of cs.Egress not in synced
			// between full syncs). Looking every EgressIP's owner up in
			// synced cost a pass half a millisecond at 1,000 EgressIPs.
			for o := range dirty {
				consider(o)
			}
			for _, o := range cs.Keep {
				consider(o)
			}
			for o := range d.refusedOwners {
				consider(o)
			}
		}
	}
	// A down node's SNATs go first, in a step of their own: its gateway
	// router stops answering ARP for the egress IP before the new
	// owner's SNAT (and gratuitous ARP) exists.
	steps := egress.SilenceFirst(oldEIP, newEIP, d.silenced)
	if len(steps) == 0 {
		steps = []map[ovsdbnb.Owner]ovsdbnb.State{{}}
	}
	maps.Copy(steps[0], lb)
	// After the first full sync only the owners whose desired rows changed
	// are sent: one Service or pod change costs one owner's sync, not
	// every owner's. Each step's owners are found against what the steps
	// before it write (ahead). The steps go to the NB in runs that end
	// where the chassis of a new SNAT are waited for: within a run,
	// SyncSteps sends a step behind the one before when it can, its
	// commit still after that one's.
	type stepSend struct {
		send  map[ovsdbnb.Owner]ovsdbnb.State
		added []string // the routers given new SNATs
		wait  bool     // their chassis are waited for after the step
	}
	ahead := map[ovsdbnb.Owner]ovsdbnb.State{}
	var sends []stepSend
	for i, step := range steps {
		send, before := map[ovsdbnb.Owner]ovsdbnb.State{}, map[ovsdbnb.Owner]ovsdbnb.State{}
		for o, st := range step {
			prev, ok := ahead[o]
			if !ok {
				prev, ok = d.synced[o]
			}
			if !ok || !prev.Equal(st) {
				send[o], before[o] = st, prev
			}
		}
		if len(send) == 0 {
			continue
		}
		maps.Copy(ahead, send)
		added := natRouters(send, before)
		sends = append(sends, stepSend{send: send, added: added, wait: d.sb != nil && len(added) > 0 && i < len(steps)-1})
	}
	var events []event.Event
	var syncErr error
	var total ovsdbnb.Result
	for len(sends) > 0 {
		n := 1 + slices.IndexFunc(sends, func(ss stepSend) bool { return ss.wait })
		if n == 0 {
			n = len(sends)
		}
		run := sends[:n]
		sends = sends[n:]
		sets := make([]map[ovsdbnb.Owner]ovsdbnb.State, len(run))
		for j, ss := range run {
			sets[j] = ss.send
		}
		for j, r := range d.nb.SyncSteps(ctx, sets) {
			err := r.Err
			if !errors.Is(err, ovsdbnb.ErrNotStarted) {
				d.m.NBSyncs.Inc()
				d.countNB(r.Result)
				total.Add(r.Result)
			}
			var se *ovsdbnb.SyncError
			if err != nil && !errors.As(err, &se) {
				d.syncLost() // unknown: resend everything, from the NB's rows
				return nil, fmt.Errorf("northbound sync: %w", err)
			}
			for o, st := range run[j].send {
				_, wantedEIP := cs.Egress[o]
				_, wantedLB := cs.LB[o]
				if isEmpty(st) && !wantedEIP && !wantedLB {
					delete(d.synced, o) // gone
				} else {
					// An owner still desired with no rows (the reply
					// fallback with no ETP=Local Service) is written too:
					// it is not sent again on every pass.
					d.synced[o] = st
				}
				delete(d.refusedOwners, o)
			}
			if se != nil {
				for _, oe := range se.Owners {
					d.refuse(oe.Owner) // retried
					events = append(events, ownerEvent(s, oe))
				}
				syncErr = err
			}
			if err == nil && run[j].wait {
				d.waitChassis(ctx, s, run[j].added)
			}
		}
	}
	if full {
		d.lastEIP = maps.Clone(cs.Egress)
	} else { // the owners that may have changed only: copying a thousand EgressIPs' states cost every pass 2 ms
		for o := range newEIP {
			d.lastEIP[o] = cs.Egress[o]
		}
		for o := range oldEIP {
			if st, ok := cs.Egress[o]; ok {
				d.lastEIP[o] = st
			} else {
				delete(d.lastEIP, o)
			}
		}
	}
	d.loggedRepair(total, syncErr)
	if syncErr == nil {
		d.stale = nil
	}
	if dirty == nil {
		clear(d.lbOwners)
		for o, st := range cs.LB {
			if !isEmpty(st) {
				d.lbOwners[o] = true
			}
		}
	} else {
		for o := range lb {
			if st, ok := cs.LB[o]; ok && !isEmpty(st) {
				d.lbOwners[o] = true
			} else {
				delete(d.lbOwners, o)
			}
		}
	}
	d.pending = nil // taken
	if syncErr != nil {
		return events, fmt.Errorf("northbound sync: %w", syncErr)
	}
	return events, nil
}

// refuse takes o out of synced: its write was refused, and the next pass
// sends it again.
func (d *Dataplane) refuse(o ovsdbnb.Owner) {
	delete(d.synced, o)
	if d.refusedOwners == nil {
		d.refusedOwners = map[ovsdbnb.Owner]bool{}
	}
	d.refusedOwners[o] = true
}

// connectNB dials the NB once, notes the owners of a previous run and
// fits the load balancers to the NB's schema (fitTemplates).
func (d *Dataplane) connectNB(ctx context.Context) error {
	if d.nb != nil {
		return nil
	}
	if err := d.dialNB(ctx); err != nil {
		return err
	}
	d.fitTemplates(d.nb.Schema())
	return nil
}

// fitTemplates turns the template load balancers of NodePorts
// (--lb-templates) into per-node ones on an NB whose schema has no
// Chassis_Template_Var table (OVN before 22.12), with one warning, as
// OVN-Kubernetes disables its template support there.
func (d *Dataplane) fitTemplates(schema ovsdb.DatabaseSchema) {
	if d.params.LB.PerNodeLBs || ovsdbnb.SupportsTemplates(schema) {
		return
	}
	d.log.Warn("northbound: the NB schema has no Chassis_Template_Var table (OVN older than 22.12): NodePorts get per-node load balancers instead of templates",
		"schema", schema.Version)
	d.params.LB.PerNodeLBs = true
}

// silenced reports whether router is the gateway router of a node the
// reachability checks find down.
func (d *Dataplane) silenced(router string) bool {
	node, ok := strings.CutPrefix(router, "GR_")
	return ok && d.Reachable != nil && !d.Reachable(node)
}

// natRouters are the routers that send gives a NAT synced does not hold.
func natRouters(send, synced map[ovsdbnb.Owner]ovsdbnb.State) []string {
	var out []string
	for o, st := range send {
		had := map[string]bool{}
		for _, n := range synced[o].NATs {
			had[n.Router+"/"+n.ExternalIP+"/"+n.LogicalIP] = true
		}
		for _, n := range st.NATs {
			if !had[n.Router+"/"+n.ExternalIP+"/"+n.LogicalIP] && !slices.Contains(out, n.Router) {
				out = append(out, n.Router)
			}
		}
	}
	slices.Sort(out)
	return out
}

// waitChassis waits, up to chassisWait, until the chassis of routers
// (gateway routers, GR_<node>) have applied the NB as just written, so a
// new egress node's SNAT is installed before the next step moves the
// reroute to it: otherwise the first packets of a connection take the
// node-wide SNAT and conntrack keeps that source for its whole life. A
// chassis that does not confirm in time (dead, or slow) is logged and
// the next step goes ahead. Without --sb-address nothing is waited for.
func (d *Dataplane) waitChassis(ctx context.Context, s Snapshot, routers []string) {
	if d.sb == nil || len(routers) == 0 {
		return
	}
	var chassis []string
	for _, r := range routers {
		node, ok := strings.CutPrefix(r, lbsvc.GatewayRouter(""))
		if !ok {
			continue
		}
		name := node
		for _, n := range s.Nodes {
			if n.Name == node && n.Annotations[annotationChassisID] != "" {
				name = n.Annotations[annotationChassisID]
			}
		}
		chassis = append(chassis, name)
	}
	begin := time.Now()
	cfg, err := d.nb.NextCfg(ctx)
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, chassisWait)
		err = d.sb.Wait(wctx, cfg, chassis...)
		cancel()
	}
	if err != nil {
		d.log.Warn("northbound: the new egress nodes' chassis did not confirm their SNATs in time; moving the reroute anyway",
			"chassis", chassis, "err", err)
		return
	}
	d.log.Debug("northbound: chassis confirmed the SNATs", "chassis", chassis, "took", time.Since(begin))
}

// chassisWait bounds waitChassis.
const chassisWait = 2 * time.Second

// annotationChassisID is OVN-Kubernetes' node annotation naming the
// node's chassis (its system-id).
const annotationChassisID = "k8s.ovn.org/node-chassis-id"

// dialSB connects the make-before-break waiter to the Southbound.
func (d *Dataplane) dialSB(ctx context.Context) (*sbwait.Waiter, error) {
	var cfg *tls.Config
	if slices.ContainsFunc(d.cfg.SBAddress, func(a string) bool { return strings.HasPrefix(a, "ssl:") }) {
		c, err := ovsdbnb.TLSConfig(d.cfg.NBPrivKey, d.cfg.NBCert, d.cfg.NBCA)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	return sbwait.Dial(ctx, d.cfg.SBAddress, cfg)
}

// fitSchema leaves out of cs the rows the NB's schema cannot hold.
// OVN-Kubernetes marks the replies of EgressIP pods' connections with a
// QoS action (mark=42) that the NB schema of OVN before 24.03 lacks:
// there, those rules are left out, with one warning (the 102 policy
// matching the mark stays, as harmless as OVN-Kubernetes' own).
//
// Instead, the owner gets egress.ReplyPortPolicies (ClusterState's
// ReplyFallback): the replies of served pods backing an
// externalTrafficPolicy=Local Service are kept from the reroute by their
// source port.
func (d *Dataplane) fitSchema(cs *ClusterState) {
	if d.nb.SupportsKey(nbdb.QoSTable, "action", "mark") {
		return
	}
	if _, ok := cs.Egress[egress.ReplyQoSOwner]; ok && !d.noReplyQoS {
		d.log.Warn("northbound: the NB schema has no QoS mark action (OVN older than 24.03): EgressIP reply traffic is kept from the reroute by per-port policies instead",
			"owner", egress.ReplyQoSOwner.String())
		d.noReplyQoS = true
	}
	if _, ok := cs.Egress[egress.ReplyQoSOwner]; ok {
		// cs.Egress may be the incremental index's map, which keeps
		// the fallback then: the owner's rows as they are written, until
		// the index computes them again and this replaces them again.
		// Copying the map for it cost every pass half a millisecond.
		cs.Egress[egress.ReplyQoSOwner] = cs.ReplyFallback
		if cs.Dirty != nil {
			cs.Dirty[egress.ReplyQoSOwner] = true // the fallback is not tracked apart
		}
	}
}

// fullResync is how often the leader's NB repair compares every owner's
// rows with the State last written, so that rows another writer changed
// or deleted come back even if the monitor's report of that change was
// lost.
const fullResync = 5 * time.Minute

func isEmpty(s ovsdbnb.State) bool {
	return len(s.LoadBalancers)+len(s.Groups)+len(s.Policies)+len(s.NATs)+len(s.AddressSets)+len(s.QoSRules)+len(s.TemplateVars) == 0
}

func (d *Dataplane) countNB(r ovsdbnb.Result) {
	for op, n := range map[string]int{"insert": r.Inserts, "update": r.Updates, "mutate": r.Mutates, "delete": r.Deletes} {
		if n > 0 {
			d.m.NBOps.WithLabelValues(op).Add(float64(n))
		}
	}
}

// ownerEvent is the Warning event of an owner whose rows the server
// refused, on the object that owns them.
func ownerEvent(s Snapshot, oe *ovsdbnb.OwnerError) event.Event {
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

// Node is this node's work: the bridge's flows and, with L2 announce
// enabled, the ARP/NDP responder of the VIPs this node owns.
func (d *Dataplane) Node(ctx context.Context, s Snapshot) error {
	if d.cfg.NodeName == "" {
		return nil
	}
	d.nmu.Lock()
	defer d.nmu.Unlock()
	p := d.params
	p.Alive = d.Alive
	if d.NodeTargets != nil {
		d.NodeTargets(mgmtTargets(s.Nodes, false, d.cfg.NodeName))
	}
	if p.GatewayFlows && p.BridgeMAC == nil {
		// Read on every pass from the monitored database: a bridge
		// created again gets a new MAC.
		if err := d.openBridge(ctx); err != nil {
			return err
		}
		mac, err := d.ports.MAC(ctx, d.cfg.Bridge)
		if err != nil {
			return fmt.Errorf("bridge %s MAC for the gateway flows: %w", d.cfg.Bridge, err)
		}
		p.BridgeMAC = mac
	}
	if d.provider() {
		if err := d.openProvider(ctx); err != nil {
			return err
		}
		ports, err := d.provPorts.Ports(ctx)
		if err != nil {
			return fmt.Errorf("provider bridge %s ports: %w", d.cfg.ProviderBridge, err)
		}
		p.ProviderPorts = func(name string) bool { return ports[name] != 0 }
	}
	p.LastGood = d.lastSelf
	ns, err := ComputeNode(s, p, d.cfg.NodeName)
	if ns.Self != nil {
		d.lastSelf = ns.Self
	}
	if errors.Is(err, ErrUnknownNode) {
		d.log.Warn("this node is not (yet) known; its flows stay as they are", "node", d.cfg.NodeName)
		return nil
	}
	if err != nil {
		return err
	}
	if p.EnableEgressIP {
		d.fenceLost(&ns, p.Patch)
	}
	// Each part runs whatever the others did: a bad egress IP on a host
	// interface blocks neither the flows nor the L2 announcements.
	var errs []error
	if err := d.applyFlows(ctx, &ns); err != nil {
		errs = append(errs, err)
	}
	hostEvents, report, err := d.convergeHost(ctx, ns.Host)
	if err != nil {
		errs = append(errs, err)
	}
	if err := d.reportHost(ctx, s, report); err != nil {
		errs = append(errs, err)
	}
	var bgpCfg bgp.Config
	if d.cfg.EnableBGP {
		self := s.Nodes[slices.IndexFunc(s.Nodes, func(n *corev1.Node) bool { return n.Name == d.cfg.NodeName })]
		if l := leaving(self); d.leaving.Swap(l) != l {
			d.log.Info("node service state changed: a stopping ovnedge withdraws its BGP routes while the node is leaving",
				"leaving", l, "shutdown", d.cfg.BGPShutdown)
		}
		var peerEvents []event.Event
		if bgpCfg, peerEvents, err = d.bgpConfig(s, self, &ns); err != nil {
			errs = append(errs, err)
		}
		hostEvents = append(hostEvents, peerEvents...)
	}
	d.record(d.nemitted, append(ns.Events, hostEvents...))
	if d.cfg.EnableL2Announce {
		if err := d.announce(ctx, ns.Announce); err != nil {
			errs = append(errs, err)
		}
	}
	if d.provider() {
		if err := d.applyProvider(ctx, &ns); err != nil {
			errs = append(errs, err)
		}
	}
	if d.cfg.UnderlayLBMode == UnderlayStandalone {
		if err := d.announceUnderlay(ctx, ns.UnderlayAnnounce); err != nil {
			errs = append(errs, err)
		}
	}
	if d.cfg.EnableBGP && bgpCfg.ASN != 0 {
		if err := d.advertise(ctx, bgpCfg, &ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fenceLost adds to ns the fence flows of the OVN-hosted egress IPs the
// node lost in the last egress.FenceHold and arms the reconcile that lifts
// the next fence. A fence that cannot be built is logged, never in the way
// of the rest.
func (d *Dataplane) fenceLost(ns *NodeState, patch string) {
	fenced, next := d.fence.Update(time.Now(), ns.Held)
	if err := ns.Fence(patch, fenced); err != nil {
		d.log.Warn("egress IPs this node lost are not fenced", "ips", fenced, "err", err)
	}
	if next.IsZero() || d.Kick == nil {
		return
	}
	wait := time.Until(next) + 10*time.Millisecond
	if d.fenceTimer == nil {
		d.fenceTimer = time.AfterFunc(wait, d.Kick)
	} else {
		d.fenceTimer.Reset(wait)
	}
}

// Event reasons of the BGP sessions, on the node's object.
const (
	ReasonBGPSessionUp   = "BGPSessionEstablished"
	ReasonBGPSessionDown = "BGPSessionDown"
	ReasonBGPConfig      = "BGPConfigInvalid"
)

// bgpConfig is the node's speaker configuration: the flags' peers and,
// with --bgp-peer-crds, MetalLB's BGPPeers that select the node (a peer
// address given by a flag keeps the flag's settings).
func (d *Dataplane) bgpConfig(s Snapshot, self *corev1.Node, ns *NodeState) (bgp.Config, []event.Event, error) {
	cfg, err := d.cfg.BGP(ns.RouterID)
	if err != nil {
		return bgp.Config{}, nil, fmt.Errorf("bgp: %w", err)
	}
	if !d.cfg.BGPPeerCRDs {
		return cfg, nil, nil
	}
	peers, profiles, evs := metallb.FromUnstructured(s.BGPPeers, s.BFDProfiles)
	crd, more := metallb.Peers(self, cfg.RouterID, peers, profiles)
	evs = append(evs, more...)
	for _, p := range crd {
		if !slices.ContainsFunc(cfg.Peers, func(q bgp.Peer) bool { return q.Address == p.Address }) {
			cfg.Peers = append(cfg.Peers, p)
		}
	}
	return cfg, evs, nil
}

// leaving reports whether node is being taken out of service: cordoned,
// being deleted, or tainted out-of-service or for deletion by the
// cluster autoscaler. Its BGP routes are then withdrawn when ovnedge
// stops (--bgp-shutdown=auto) instead of kept for a graceful restart.
func leaving(node *corev1.Node) bool {
	if node.Spec.Unschedulable || node.DeletionTimestamp != nil {
		return true
	}
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeOutOfService || t.Key == "ToBeDeletedByClusterAutoscaler"
	})
}

// advertise makes the node's BGP speaker (configured as cfg) announce
// exactly ns.Routes, starting it on first use and following changes of
// its peers without touching the sessions of unchanged ones.
func (d *Dataplane) advertise(ctx context.Context, cfg bgp.Config, ns *NodeState) error {
	if d.speaker == nil {
		node := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: d.cfg.NodeName}
		up := map[netip.Addr]bool{}
		var mu sync.Mutex
		cfg.OnPeerState = func(ps bgp.PeerStatus) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ps.Established && !up[ps.Address]:
				d.rec.Eventf(&node, corev1.EventTypeNormal, ReasonBGPSessionUp, "BGP session with %v (AS %d) established", ps.Address, ps.ASN)
			case !ps.Established && up[ps.Address]:
				d.rec.Eventf(&node, corev1.EventTypeWarning, ReasonBGPSessionDown, "BGP session with %v (AS %d) down: %s", ps.Address, ps.ASN, ps.State)
			}
			up[ps.Address] = ps.Established
		}
		// The speaker outlives this reconcile: it stops on Close.
		sp, err := bgp.Start(context.WithoutCancel(ctx), cfg, d.log)
		if err != nil {
			return err
		}
		d.speaker, d.bgpPeers = sp, cfg.Peers
		if d.m != nil {
			d.m.SetBGPStats(sp.Stats)
		}
		d.log.Info("bgp speaker started", "asn", cfg.ASN, "router-id", cfg.RouterID, "peers", len(cfg.Peers),
			"graceful-restart", d.cfg.BGPGracefulRestart, "bfd", d.cfg.BGPBFD)
	} else if !slices.Equal(cfg.Peers, d.bgpPeers) {
		if err := d.speaker.SetPeers(ctx, cfg.Peers); err != nil {
			return err
		}
		d.log.Info("bgp peers changed", "peers", len(cfg.Peers))
		d.bgpPeers = cfg.Peers
	}
	before := d.speaker.Stats().Updates
	if err := d.speaker.Announce(ns.Routes); err != nil {
		return err
	}
	if n := d.speaker.Stats().Updates - before; n > 0 {
		d.log.Info("bgp routes changed", "updates", n, "announced", len(ns.Routes))
	}
	return nil
}

// provider reports whether the node programs a provider bridge.
func (d *Dataplane) provider() bool {
	return d.cfg.ProviderBridge != "" && d.params.underlayOn()
}

// openProvider connects to the provider bridge once.
func (d *Dataplane) openProvider(ctx context.Context) error {
	if err := d.openBridge(ctx); err != nil { // the transport
		return err
	}
	if d.provApplier != nil {
		return nil
	}
	ports, err := ovsflow.DialOVSDBPorts(ctx, d.cfg.OVSDB)
	if err != nil {
		return fmt.Errorf("open_vswitch database: %w", err)
	}
	d.provPorts = ports
	d.provApplier = ovsflow.NewApplier(d.cfg.ProviderBridge, d.transport, ports,
		ovsflow.ApplierOptions{KeepForeign: true, Logger: d.log})
	a := d.provApplier
	d.m.SetFlowRepairs(d.cfg.ProviderBridge, a.Repairs)
	d.background(ctx, func(ctx context.Context) {
		if err := a.Run(ctx); err != nil && ctx.Err() == nil {
			d.log.Error("provider bridge replay stopped", "bridge", d.cfg.ProviderBridge, "err", err)
		}
	})
	return nil
}

// applyProvider makes the provider bridge hold the node's steering flows
// (other controllers' flows, the bridge's NORMAL among them, are left
// alone). While a patch port is missing the node work is asked again a
// second later.
func (d *Dataplane) applyProvider(ctx context.Context, ns *NodeState) error {
	if d.cfg.ProviderNIC == "" {
		return fmt.Errorf("provider bridge %s: --provider-nic is not set", d.cfg.ProviderBridge)
	}
	if len(ns.ProviderMissing) > 0 && d.Kick != nil && d.kickArmed.CompareAndSwap(false, true) {
		d.log.Info("provider bridge: waiting for patch ports", "bridge", d.cfg.ProviderBridge, "ports", ns.ProviderMissing)
		time.AfterFunc(time.Second, func() { d.kickArmed.Store(false); d.Kick() })
	}
	return d.applyProgram(ctx, d.provApplier, &d.provProgram, d.cfg.ProviderBridge, ns.UpdateProvider)
}

// announceUnderlay makes the underlay interface's responder own addrs.
func (d *Dataplane) announceUnderlay(ctx context.Context, addrs []netip.Addr) error {
	if d.uresponder == nil {
		iface := cmp.Or(d.cfg.UnderlayInterface, d.cfg.ProviderBridge)
		if iface == "" {
			return errors.New("underlay responder: neither --underlay-interface nor --provider-bridge is set")
		}
		r, err := arp.New(arp.Config{Interface: iface, Logger: d.log})
		if err != nil {
			return fmt.Errorf("underlay responder: %w", err)
		}
		d.uresponder = r
		d.background(ctx, func(ctx context.Context) {
			if err := r.Run(ctx); err != nil {
				d.log.Error("underlay responder stopped", "interface", iface, "err", err)
			}
		})
	}
	if err := d.uresponder.SetAddresses(addrs); err != nil {
		return fmt.Errorf("underlay responder: %w", err)
	}
	return nil
}

// openBridge connects to the Open_vSwitch database and the bridge once.
func (d *Dataplane) openBridge(ctx context.Context) error {
	if d.applier != nil {
		return nil
	}
	ports, err := ovsflow.DialOVSDBPorts(ctx, d.cfg.OVSDB)
	if err != nil {
		return fmt.Errorf("open_vswitch database: %w", err)
	}
	d.ports = ports
	d.transport = ovsflow.NewNativeTransport(d.cfg.OVSRunDir, ovsflow.NativeOptions{Logger: d.log})
	// Owns: flows a previous process left for owners gone meanwhile (a
	// Service deleted while the daemon was down) are removed by the first
	// apply; unchanged ones are left as they are. Drift (flows deleted or
	// changed by hand) is repaired by the applier's Run as soon as the
	// flow monitor reports it, and by a dump every bridgeVerify.
	d.applier = ovsflow.NewApplier(d.cfg.Bridge, d.transport, ports, ovsflow.ApplierOptions{
		KeepForeign: true, Owns: ovsflow.OwnedCookie, VerifyInterval: bridgeVerify, Logger: d.log})
	d.m.SetFlowRepairs(d.cfg.Bridge, d.applier.Repairs)
	d.background(ctx, func(ctx context.Context) {
		if err := d.applier.Run(ctx); err != nil && ctx.Err() == nil {
			d.log.Error("bridge replay stopped", "bridge", d.cfg.Bridge, "err", err)
		}
	})
	return nil
}

// bridgeVerify is how often the node's bridge is dumped and compared with
// its program, besides the repairs the flow monitor triggers.
const bridgeVerify = 30 * time.Second

// applyFlows makes the bridge hold the node's flows, sending only the
// difference in one bundle. Flows of other controllers are left alone
// (KeepForeign), except the bridge's default priority-0 NORMAL flow, which
// the base flows, when on, replace with their own (same key).
func (d *Dataplane) applyFlows(ctx context.Context, ns *NodeState) error {
	if err := d.openBridge(ctx); err != nil {
		return err
	}
	return d.applyProgram(ctx, d.applier, &d.program, d.cfg.Bridge, ns.Update)
}

// applyProgram makes update bring the bridge's program p up to date in
// place and sends the bridge the difference from what its Applier last
// applied. Set leaves an owner whose flows did not change as it is, so
// the Applier resolves and diffs only the owners that changed, not the
// whole program. When update fails nothing is sent; p may then hold
// part of the update, which the next pass completes (the Applier diffs
// against what it applied, not against p).
func (d *Dataplane) applyProgram(ctx context.Context, a *ovsflow.Applier, p *ovsflow.Program, bridge string,
	update func(*ovsflow.Program) error) error {
	if err := update(p); err != nil {
		return err
	}
	res, err := a.Apply(ctx, p)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	for op, n := range map[string]int{"add": res.Added, "modify": res.Modified, "delete": res.Deleted} {
		if n > 0 {
			d.m.FlowOps.WithLabelValues(op).Add(float64(n))
		}
	}
	if res.Changed() {
		d.log.Info("bridge flows applied", "bridge", bridge, "added", res.Added, "modified", res.Modified,
			"deleted", res.Deleted, "flows", p.Len())
	}
	return nil
}

// convergeHost makes the node's host links hold its egress IPs on
// secondary host networks (addresses, ip rules, SNAT). Nothing is opened
// until the node has one. An assignment the node cannot host (no link
// for its network, a requirement of hostnet not met) is a Warning event
// on its EgressIP, is left out (the others converge) and is refused in
// the node's report, so the leader moves it; it stays refused while the
// requirement still fails. While the node is fenced (its host lease lost)
// it hosts none. The error is a failure to apply only.
func (d *Dataplane) convergeHost(ctx context.Context, host []egress.HostAssignment) ([]event.Event, egress.HostReport, error) {
	var report egress.HostReport
	var mine []egress.HostAssignment
	for _, h := range host {
		if h.Node == d.cfg.NodeName {
			mine = append(mine, h)
		}
	}
	d.hosting.Store(len(mine) > 0)
	if len(mine) > 0 && d.Fenced != nil && d.Fenced() {
		mine = nil
	}
	if d.hostnet == nil && len(mine) == 0 {
		return nil, report, nil
	}
	if d.hostnet == nil {
		if err := d.openHostnet(ctx); err != nil {
			return nil, report, err
		}
	}
	mine, confirmErr := d.confirmHost(ctx, mine)
	state, events := egress.HostState(d.cfg.NodeName, mine, d.hostnet.LinkOf)
	res, err := d.hostnet.Converge(ctx, state)
	events = append(events, egress.HostEvents(d.cfg.NodeName, mine, res.Rejected)...)
	if res.Changes() > 0 {
		d.log.Info("host egress converged", "addresses+", res.AddrsAdded, "addresses-", res.AddrsRemoved,
			"rules+", res.RulesAdded, "rules-", res.RulesRemoved, "snat+", res.SNATAdded, "snat-", res.SNATRemoved,
			"rejected", len(res.Rejected))
	}
	report = d.hostReport(mine, state, res.Rejected)
	d.hosted = report.Hosted
	if err = errors.Join(applyErrors(err), confirmErr); err != nil {
		return events, report, fmt.Errorf("host egress: %w", err)
	}
	return events, report, nil
}

// confirmHost returns the assignments of mine the node may host: those
// it hosts already, and new ones whose EgressIP, read from the API server
// now (not from the informer's cache), still names this node. A node
// back from a partition (its lease regained) may see a stale status
// until its watch catches up; adding the address then would make two
// nodes answer ARP for it. One not confirmed waits for the next pass
// (the error, when the API server could not be asked, retries it).
func (d *Dataplane) confirmHost(ctx context.Context, mine []egress.HostAssignment) ([]egress.HostAssignment, error) {
	if d.clients.FromManifests || d.clients.Dynamic == nil {
		return mine, nil
	}
	var out []egress.HostAssignment
	var errs []error
	for _, h := range mine {
		if slices.Contains(d.hosted, h.EgressIP) {
			out = append(out, h)
			continue
		}
		u, err := d.clients.Dynamic.Resource(EgressIPResource).Get(ctx, h.EgressIPName, metav1.GetOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("confirm egress IP %s of EgressIP %s: %w", h.EgressIP, h.EgressIPName, err))
			continue
		}
		e, err := egressv1.FromUnstructured(u)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(e.Status.Items, func(it egressv1.EgressIPStatusItem) bool {
			a, err := netip.ParseAddr(it.EgressIP)
			return err == nil && a.Unmap() == h.EgressIP && it.Node == d.cfg.NodeName
		}) {
			out = append(out, h)
		} else {
			d.log.Info("host egress IP not added: the API server's status no longer names this node", "egressIP", h.EgressIP, "egressip", h.EgressIPName)
		}
	}
	return out, errors.Join(errs...)
}

// openHostnet opens the host egress Manager, its announcer and the watch
// of its links.
func (d *Dataplane) openHostnet(ctx context.Context) error {
	snat, err := newHostSNAT(d.cfg.HostBackend, d.cfg.HostNetns, d.log)
	if err != nil {
		return fmt.Errorf("host egress: %w", err)
	}
	// The new owner of an egress IP tells the link's hosts at once
	// (gratuitous ARP, unsolicited NA) rather than when their cache of
	// the old owner's MAC runs out.
	ann, err := arp.NewAnnouncer(arp.AnnouncerConfig{Logger: d.log})
	if err != nil {
		return fmt.Errorf("host egress: %w", err)
	}
	m, err := hostnet.New(hostnet.Config{Netns: d.cfg.HostNetns, SNAT: snat, Announcer: ann, Logger: d.log})
	if err != nil {
		ann.Close()
		return fmt.Errorf("host egress: %w", err)
	}
	d.hostnet, d.announcer = m, ann
	if d.HostChanged != nil {
		d.background(ctx, func(ctx context.Context) {
			if err := m.WatchLinks(ctx, d.HostChanged); err != nil && ctx.Err() == nil {
				d.log.Error("host egress: link watch stopped; link changes are seen at the next reconcile", "err", err)
			}
		})
	}
	return nil
}

// hostReport is the node's report after a converge of mine to state:
// what it hosts, and what it refuses (rejected now, no link for the
// network, or refused before and still failing its requirements).
func (d *Dataplane) hostReport(mine []egress.HostAssignment, state hostnet.State, rejected []*hostnet.RequirementError) egress.HostReport {
	refused := map[netip.Addr]string{}
	asked := map[netip.Addr]bool{}
	for _, h := range mine {
		asked[h.EgressIP] = true
		if !slices.ContainsFunc(state, func(a hostnet.Assignment) bool { return a.EgressIP == h.EgressIP }) {
			refused[h.EgressIP] = fmt.Sprintf("%s: no link in network %s", hostnet.ReasonLinkNotFound, h.Network)
		}
	}
	for _, r := range rejected {
		refused[r.EgressIP] = r.Error()
	}
	// Refused before and not asked now (the leader moved it): still
	// refused while its requirements fail, so the leader does not give
	// it back.
	for ip, h := range d.refused {
		if asked[ip] {
			continue
		}
		link, err := d.hostnet.LinkOf(h.Network)
		if err == nil {
			err = d.hostnet.Check(hostnet.Assignment{Link: link, EgressIP: h.EgressIP, PodIPs: h.PodIPs})
		}
		if err != nil {
			refused[ip] = err.Error()
		}
	}
	next := map[netip.Addr]egress.HostAssignment{}
	for _, h := range mine {
		if _, ok := refused[h.EgressIP]; ok {
			next[h.EgressIP] = h
		}
	}
	for ip, h := range d.refused {
		if _, ok := refused[ip]; ok && !asked[ip] {
			next[ip] = h
		}
	}
	d.refused = next
	var r egress.HostReport
	for _, a := range state {
		if _, ok := refused[a.EgressIP]; !ok {
			r.Hosted = append(r.Hosted, a.EgressIP)
		}
	}
	if len(refused) > 0 {
		r.Refused = refused
	}
	return r
}

// reportHost writes the node's report to its Node object (annotation
// egress.AnnotationHostEgress) when it differs from what the object
// holds; an empty report removes the annotation. In manifests mode
// nothing is written.
func (d *Dataplane) reportHost(ctx context.Context, s Snapshot, r egress.HostReport) error {
	if d.clients.FromManifests {
		return nil
	}
	var cur *corev1.Node
	for _, n := range s.Nodes {
		if n.Name == d.cfg.NodeName {
			cur = n
		}
	}
	if cur == nil {
		return nil
	}
	old, had := cur.Annotations[egress.AnnotationHostEgress]
	var value any
	if !r.Empty() {
		value = r.String()
	}
	if (value == nil && !had) || (had && value == old) {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{egress.AnnotationHostEgress: value}}})
	if _, err := d.clients.Typed.CoreV1().Nodes().Patch(ctx, d.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("report host egress IPs on node %s: %w", d.cfg.NodeName, err)
	}
	d.log.Info("host egress IPs reported", "node", d.cfg.NodeName, "report", value)
	return nil
}

// applyErrors is err without the hostnet.RequirementErrors it joins
// (those are events, not failures).
func applyErrors(err error) error {
	if err == nil {
		return nil
	}
	var rest []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if rest = append(rest, applyErrors(e)); rest[len(rest)-1] == nil {
				rest = rest[:len(rest)-1]
			}
		}
		return errors.Join(rest...)
	}
	var re *hostnet.RequirementError
	if errors.As(err, &re) {
		return nil
	}
	return err
}

// background runs f until ctx ends or Close is called.
func (d *Dataplane) background(ctx context.Context, f func(context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	d.bgStop = append(d.bgStop, cancel)
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		f(ctx)
	}()
}

// announce makes the bridge's responder own addrs.
func (d *Dataplane) announce(ctx context.Context, addrs []netip.Addr) error {
	if d.responder == nil {
		r, err := arp.New(arp.Config{Interface: d.cfg.Bridge, Logger: d.log})
		if err != nil {
			return fmt.Errorf("arp responder: %w", err)
		}
		d.responder = r
		if d.m != nil {
			d.m.SetARPStats(r.Stats)
		}
		d.background(ctx, func(ctx context.Context) {
			if err := r.Run(ctx); err != nil {
				d.log.Error("arp responder stopped", "interface", d.cfg.Bridge, "err", err)
			}
		})
	}
	if err := d.responder.SetAddresses(addrs); err != nil {
		return fmt.Errorf("arp responder: %w", err)
	}
	return nil
}

// Hosting reports whether the node was last asked to host egress IPs on
// host interfaces (whether or not it is fenced).
func (d *Dataplane) Hosting() bool { return d.hosting.Load() }

// Verify reports whether the dataplane holds what was last written: a
// second NB sync sends nothing and the bridge holds the program.
func (d *Dataplane) Verify(ctx context.Context, s Snapshot) error {
	errs := []error{d.verifyNB(ctx, s)}
	if d.applier != nil {
		res, err := d.applier.Resync(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("bridge %s: %w", d.cfg.Bridge, err))
		} else if res.Changed() {
			errs = append(errs, fmt.Errorf("bridge %s did not match: %d added, %d modified, %d deleted",
				d.cfg.Bridge, res.Added, res.Modified, res.Deleted))
		}
	}
	return errors.Join(errs...)
}

// verifyNB reports whether a second NB sync sends nothing.
func (d *Dataplane) verifyNB(ctx context.Context, s Snapshot) error {
	d.cmu.Lock()
	defer d.cmu.Unlock()
	if d.nb == nil {
		return nil
	}
	s.EgressIPs, _ = d.overlayWritten(s.EgressIPs) // as the reconcile reads them
	cs, err := ComputeCluster(s, d.params, d.Reachable, d.lastNodes)
	if err != nil {
		return err
	}
	d.fitSchema(&cs)
	res, err := d.nb.Sync(ctx, cs.NB())
	if err != nil {
		return fmt.Errorf("northbound: %w", err)
	}
	if res.Ops() > 0 {
		return fmt.Errorf("northbound did not match: %d operations were still needed", res.Ops())
	}
	return nil
}
