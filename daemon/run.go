package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/handoff"
	"github.com/ovnedge/ovnedge/kubewatch"
	"github.com/ovnedge/ovnedge/metrics"
	"github.com/ovnedge/ovnedge/readiness"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

// relay calls f on every receive from c (none when c is nil) until ctx
// ends.
func relay[T any](ctx context.Context, c <-chan T, f func()) {
	if c == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c:
			f()
		}
	}
}

// fullRecompute is how often the leader recomputes its whole desired
// state from the informers' caches, whatever changed, by default
// (runEnv.FullRecompute): the safety net of the incremental path (see the
// package doc).
const fullRecompute = 10 * time.Minute

// reconcilers are the daemon's two jobs, each given the informers' current
// view of the cluster.
type reconcilers struct {
	// Cluster does the cluster-wide work (EgressIP assignment and status,
	// Northbound sync, LB IPAM); it runs on the elected leader only.
	Cluster func(ctx context.Context, s desired.Snapshot) error
	// Node does this node's work (bridge flows, host addresses and rules,
	// ARP/NDP); it runs on every instance. nil: none (an instance without
	// a node).
	Node func(ctx context.Context, s desired.Snapshot) error
	// Audit, when not nil, makes the periodic full recompute on the
	// leader, off the cluster loop: it checks the leader's incremental
	// state against a full recompute of list's Snapshot (see
	// Dataplane.Audit) and returns an error when the cluster loop must
	// recompute everything itself instead (as it does every
	// runEnv.FullRecompute without an Audit): the states differ, or it
	// could not tell.
	Audit func(ctx context.Context, list func() (desired.Snapshot, error)) error
}

// runEnv is what run needs from its caller besides the Config.
type runEnv struct {
	Log     *slog.Logger
	Metrics *Metrics
	// Lease elects the leader; its Identity defaults to the node name and
	// the host name.
	Lease Lease
	// ManifestPoll is how often the manifests directory is checked for
	// changes (default 500 ms).
	ManifestPoll time.Duration
	// FullRecompute is how often the leader recomputes its whole desired
	// state (default 10 minutes).
	FullRecompute time.Duration
	// Wake, when not nil, asks for a cluster reconcile on every receive
	// (e.g. when an egress node's reachability changes).
	Wake <-chan struct{}
	// NodeWake, when not nil, asks for a node reconcile on every receive
	// (e.g. when a node's heartbeat liveness or this node's host lease
	// changes).
	NodeWake <-chan struct{}
	// Leading, when not nil, is told when this instance starts and stops
	// leading.
	Leading func(bool)
	// Ready, when not nil, is told every change of the instance's
	// readiness (besides /readyz): the Pod's condition and events.
	Ready func(readiness.State)
	// Unidle, when not nil, runs unidling while leading
	// (--ovn-empty-lb-events).
	Unidle *unidling
}

// Clients are the API clients the daemon watches through.
type Clients struct {
	Typed   kubernetes.Interface
	Dynamic dynamic.Interface
	// FromManifests is true when the clients serve a manifests directory:
	// events and status then go to the log only.
	FromManifests bool
	// Source is the manifests source (a *manifests.Source), nil for an
	// API server.
	Source ManifestSource
}

// ManifestSource is a manifests directory the clients serve: Reload
// loads it again, Watch reloads it on changes until ctx ends.
type ManifestSource interface {
	Reload() error
	Watch(ctx context.Context, interval time.Duration)
}

// connectManifests is Connect for a manifests directory; nil in a binary
// built with -tags nomanifests (daemon/manifests.go).
var connectManifests func(dir string, log *slog.Logger) (*Clients, error)

// watchOptions are the kinds watched beyond the built-in ones: with
// --enable-lb-svc what Kube-OVN's LoadBalancer Services need (kubewatch.WatchLBSvc),
// with --underlay-lb-mode the Subnets;
// the manifests always hold Kube-OVN's Subnets and
// NetworkAttachmentDefinitions when they have any.
// With --bgp-peer-crds on a node instance, MetalLB's BGP peers too.
func (c *Clients) watchOptions(cfg *Config) []kubewatch.WatchOption {
	var out []kubewatch.WatchOption
	switch {
	case cfg.EnableLBSvc:
		out = append(out, kubewatch.WatchLBSvc())
	case c.FromManifests:
		out = append(out, kubewatch.WatchKubeOVN())
	}
	if cfg.UnderlayLBMode != "" && cfg.UnderlayLBMode != UnderlayOff {
		out = append(out, kubewatch.WatchSubnets())
	}
	if cfg.EnableEgressService {
		out = append(out, kubewatch.WatchEgressServices())
	}
	if cfg.EnableBGP && cfg.BGPPeerCRDs && cfg.NodeName != "" {
		out = append(out, kubewatch.WatchBGPPeers(cfg.BGPCRDNamespace))
	}
	return out
}

// Connect returns clients for the API server of cfg.Kubeconfig (in-cluster
// when empty) or, with cfg.Manifests set, for the manifests directory,
// loaded once.
func Connect(cfg *Config, log *slog.Logger) (*Clients, error) {
	if cfg.Manifests != "" {
		if connectManifests == nil {
			return nil, fmt.Errorf("--manifests %s: this ovnedge was built without the manifests mode (-tags nomanifests, as the image is); use one built without that tag", cfg.Manifests)
		}
		return connectManifests(cfg.Manifests, log)
	}
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.UserAgent = "ovnedge"
	rc.QPS, rc.Burst = cfg.KubeAPIQPS, cfg.KubeAPIBurst
	// No content type is set: the typed client then carries the built-in
	// kinds as protobuf (client-go's generated clients' default), the
	// dynamic client the custom resources as JSON, their only format
	// (TestConnectContentTypes).
	typed, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return &Clients{Typed: typed, Dynamic: dyn}, nil
}

// run watches the cluster through c and runs r until ctx ends: Node on
// every change, Cluster on every change while this instance leads. It
// serves metrics and health (serveMetrics). On return the dataplane is
// left as it was: nothing is torn down on shutdown.
func run(ctx context.Context, cfg *Config, c *Clients, r reconcilers, env runEnv) error {
	stop, err := serveMetrics(cfg, c, env)
	if err != nil {
		return err
	}
	defer stop()
	defer env.Metrics.SetReady(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.Source != nil {
		go c.Source.Watch(ctx, cmp.Or(env.ManifestPoll, 500*time.Millisecond))
	}
	opts := c.watchOptions(cfg)
	if r.Node != nil && !cfg.LeaderElect && !c.FromManifests {
		// A node instance: the pods its host-interface egress IPs
		// serve only (Watcher.NodeSnapshot). Manifests' fake API
		// does not filter watches by label: they keep every pod.
		// Of other nodes' endpoints it keeps which nodes have one.
		// An EgressService's host SNATs endpoints of every node: its
		// slices stay whole.
		opts = append(opts, kubewatch.PodsOnDemand())
		if !cfg.EnableEgressService {
			opts = append(opts, kubewatch.ForNode(cfg.NodeName))
		}
	}
	l := &loops{cfg: cfg, r: r, env: env, log: env.Log,
		w: kubewatch.NewWatcher(c.Typed, c.Dynamic, env.Log, opts...)}
	l.ready = readiness.NewTracker(r.Node != nil, l.publish)
	l.nodeQ, l.clusterQ = l.w.Queue("node"), l.w.Queue("cluster")
	if u := env.Unidle; u != nil {
		if err := l.w.OnServiceUpdate(func(old, cur *corev1.Service) {
			if l.leading.Load() {
				u.serviceUpdated(ctx, old, cur)
			}
		}); err != nil {
			return err
		}
	}
	if err := l.w.Start(ctx); err != nil {
		return err
	}
	l.log.Info("informers synced", "node", cfg.NodeName, "manifests", cfg.Manifests)
	l.ready.SetSynced()
	var done sync.WaitGroup
	done.Go(func() { kubewatch.RunLoop(ctx, l.nodeQ, "node", l.log, l.node, l.observe("node")) })
	done.Go(func() { kubewatch.RunLoop(ctx, l.clusterQ, "cluster", l.log, l.cluster, l.observe("cluster")) })
	// A wake may change the EgressIPs' assignment without an object
	// changing (an egress node's reachability, a hold running out).
	go relay(ctx, env.Wake, func() {
		l.w.RequestReassign()
		l.clusterQ.Add("cluster")
	})
	go relay(ctx, env.NodeWake, func() { l.nodeQ.Add("node") })
	// The full recompute stays, as a safety net, every fullRecompute: an
	// audit off the cluster loop, or (without an Audit, when it cannot
	// audit, or when it finds the incremental state wrong) a full pass.
	full := time.NewTicker(cmp.Or(env.FullRecompute, fullRecompute))
	defer full.Stop()
	go relay(ctx, full.C, func() { l.recompute(ctx) })
	done.Go(func() { l.elect(ctx, c) })
	<-ctx.Done()
	done.Wait()
	l.log.Info("stopped; the dataplane is left as programmed")
	return nil
}

// serveMetrics serves metrics, health and profiles as cfg says (see
// metrics.ServeOptions) until stop. Secure metrics ask the API server of
// c about every scraper (cached: metrics.TokenCacheTTL, AllowCacheTTL,
// DenyCacheTTL).
func serveMetrics(cfg *Config, c *Clients, env runEnv) (stop func(), err error) {
	o := metrics.ServeOptions{MetricsAddr: cfg.MetricsAddr, HealthAddr: cfg.HealthAddr, Pprof: cfg.Pprof, PprofAddr: cfg.PprofAddr,
		Log: env.Log}
	if cfg.MetricsSecure && cfg.MetricsAddr != "" {
		if c.FromManifests {
			return nil, errors.New("--metrics-secure needs an API server to authenticate scrapers, not manifests")
		}
		host, _ := os.Hostname()
		if o.TLS, err = metrics.TLSConfig(cfg.MetricsCertFile, cfg.MetricsKeyFile, cmp.Or(cfg.NodeName, host, "localhost"), env.Log); err != nil {
			return nil, err
		}
		if o.Auth, err = metrics.NewKubeAuth(c.Typed, env.Log); err != nil {
			return nil, err
		}
	}
	if cfg.MetricsSecure && cfg.HealthAddr == "" {
		env.Log.Warn("no /healthz and /readyz: --metrics-secure serves them only on --health-address")
	}
	return env.Metrics.Serve(o)
}

// loops are run's node and cluster loops over one Watcher.
type loops struct {
	cfg             *Config
	r               reconcilers
	env             runEnv
	log             *slog.Logger
	w               *kubewatch.Watcher
	nodeQ, clusterQ workqueue.TypedRateLimitingInterface[string]
	leading         atomic.Bool
	ready           *readiness.Tracker
	// handOffs finds a handoff.Successor, spacing the hand-overs that did
	// not take.
	handOffs handoff.Checker
}

// publish makes the readiness known: /readyz always, a change of it or of
// its reason to the log and env.Ready.
func (l *loops) publish(s readiness.State, changed bool) {
	l.env.Metrics.SetReadiness(s.Ready, s.Why())
	if !changed {
		return
	}
	if s.Ready {
		l.log.Info("ready", "reason", s.Reason)
	} else {
		l.log.Warn("not ready", "reason", s.Reason, "err", s.Message)
	}
	if l.env.Ready != nil {
		l.env.Ready(s)
	}
}

// observe records a loop's reconciles in the metrics.
func (l *loops) observe(loop string) func(time.Duration, string) {
	return func(d time.Duration, result string) {
		l.env.Metrics.Reconcile.WithLabelValues(loop, result).Observe(d.Seconds())
	}
}

// node is the node loop's reconcile.
func (l *loops) node(ctx context.Context) error {
	if l.r.Node == nil {
		return nil // a leader-only instance: no listing of every object per change
	}
	s, err := l.w.NodeSnapshot(ctx, l.cfg.NodeName)
	if err == nil {
		err = l.r.Node(ctx, s)
	}
	if ctx.Err() == nil {
		l.ready.NodeDone(err)
	}
	return err
}

// cluster is the cluster loop's reconcile: on the leader only, with the
// changes since the last one.
func (l *loops) cluster(ctx context.Context) error {
	// Taken first: a change coming meanwhile is in the Snapshot and taken
	// again next time.
	changed := l.w.TakeChanges()
	if !l.leading.Load() {
		return nil // a follower computes nothing cluster-wide
	}
	s, err := l.w.SnapshotFor(changed)
	if err != nil {
		l.w.RequestFull()
	} else {
		err = l.r.Cluster(ctx, s)
	}
	if ctx.Err() == nil && l.leading.Load() {
		l.ready.ClusterDone(err)
	}
	return err
}

// recompute is the periodic safety net: the audit, or a full pass.
func (l *loops) recompute(ctx context.Context) {
	if l.r.Audit != nil && l.leading.Load() {
		err := l.r.Audit(ctx, func() (desired.Snapshot, error) {
			s, err := l.w.SnapshotFor(nil)
			if err != nil {
				return s, err
			}
			return s.WithPods()
		})
		switch {
		case err == nil:
			return
		case !errors.Is(err, errNoIndex) && !errors.Is(err, errDiverged) && ctx.Err() == nil:
			l.log.Warn("audit failed: the cluster loop recomputes everything", "err", err)
		}
	}
	l.w.RequestFull()
	l.clusterQ.Add("cluster")
}

// elect campaigns for the Lease until ctx ends (with leader election on)
// and runs the cluster loop's work while leading.
func (l *loops) elect(ctx context.Context, c *Clients) {
	if !l.cfg.LeaderElect {
		l.log.Info("leader election off: node work only")
		return
	}
	lease := l.env.Lease
	if lease.Identity == "" {
		// Unique per process (as client-go advises): two candidates
		// sharing a host name (one network and UTS namespace, a pod
		// restarted under its old name) must not both think they hold
		// the Lease.
		host, _ := os.Hostname()
		lease = DefaultLease(leaseIdentity(l.cfg.NodeName, cmp.Or(os.Getenv("POD_NAME"), host), rand.Text()[:8]))
		if l.cfg.CheckLease() == nil { // a Config not parsed has none: the defaults
			lease.Duration, lease.RenewDeadline, lease.RetryPeriod = l.cfg.LeaseDuration, l.cfg.LeaseRenewDeadline, l.cfg.LeaseRetryPeriod
		}
	}
	// The hand-overs' backoff guards only a Lease nobody else took: one
	// that came back after another's term may be handed on again.
	lease.OnOtherHolder = func(string) { l.handOffs.Taken() }
	err := RunLeader(ctx, c.Typed, lease, l.log, func(lctx context.Context) time.Duration {
		l.lead(true)
		defer l.lead(false)
		l.w.RequestFull() // what changed while following was not kept
		l.clusterQ.Add("cluster")
		if u := l.env.Unidle; u != nil {
			go u.run(lctx, l.w.Services)
		}
		return l.leadUntil(lctx, c.Typed, lease.HandOffPause())
	})
	if err != nil {
		l.log.Error("leader election stopped", "err", err)
	}
}

// leadUntil returns when ctx ends or when this leader steps down
// (stepDown): RunLeader then releases the Lease for another candidate, and
// campaigns again after the pause it returns: a lease duration (0) after
// failing passes, handOff after handing the Lease to a handoff.Successor (if the
// successor did not take it, this one takes it back and tries again as
// handoff.Backoff allows).
func (l *loops) leadUntil(ctx context.Context, cs kubernetes.Interface, handOff time.Duration) time.Duration {
	if l.cfg.LeaderStepDown <= 0 && !l.cfg.LeaderAvoidEgressNodes {
		<-ctx.Done()
		return 0
	}
	tick := time.NewTicker(max(time.Second, min(3*time.Second, cmp.Or(l.cfg.LeaderStepDown/10, 3*time.Second))))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-tick.C:
			if failing, yield := l.stepDown(ctx, cs); failing {
				return 0
			} else if yield {
				return handOff
			}
		}
	}
}

// stepDown says whether to release the Lease: failing with
// --leader-step-down-after, once the cluster pass has failed that long (for
// a candidate that reaches the NB, say); yield with
// --leader-avoid-egress-nodes, for a handoff.Successor off the egress nodes, as
// l.handOffs allows.
func (l *loops) stepDown(ctx context.Context, cs kubernetes.Interface) (failing, yield bool) {
	if d := l.ready.ClusterFailing(); l.cfg.LeaderStepDown > 0 && d >= l.cfg.LeaderStepDown {
		l.log.Warn("the cluster pass has failed too long", "for", d.Round(time.Millisecond), "limit", l.cfg.LeaderStepDown)
		return true, false
	}
	if !l.cfg.LeaderAvoidEgressNodes {
		return false, false
	}
	to, err := l.handOffs.Check(ctx, cs, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"), time.Now())
	if err != nil && ctx.Err() == nil {
		l.log.Info("keeping the Lease on an egress-assignable node", "err", err) // once per reason
	}
	if to != "" {
		l.log.Info("handing the Lease to a candidate off the egress-assignable nodes: this leader's node is one", "to", to)
	}
	return false, to != ""
}

// leaseIdentity joins the non-empty parts of a candidate's identity with
// "_": node_pod_random, pod_random for a leader without a node (the Pod's
// name from POD_NAME, else the host name: a hostNetwork Pod's host name is
// the node's).
func leaseIdentity(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), "_")
}

func (l *loops) lead(leading bool) {
	l.leading.Store(leading)
	l.ready.SetLeading(leading)
	if l.env.Leading != nil {
		l.env.Leading(leading)
	}
}
