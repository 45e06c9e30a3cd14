package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/ovnknode"
)

// mgmtTargets are the management port addresses (the second address of
// the node subnet, ovn-k8s-mp0) of nodes, the egress-assignable ones
// only with assignable, except skip: OVN-Kubernetes probes these, reached
// through the cluster network whatever the node's external network does.
func mgmtTargets(nodes []*corev1.Node, assignable bool, skip string) []reach.Target {
	parsed, _ := ovnknode.ParseAll(nodes)
	return targetsOf(parsed, assignable, skip)
}

// targetsOf is mgmtTargets of nodes already parsed (the leader's
// ClusterState.Nodes: parsing 2,000 nodes' annotations again took 7-10
// ms of every pass).
func targetsOf(parsed []ovnknode.Node, assignable bool, skip string) []reach.Target {
	var out []reach.Target
	for _, n := range parsed {
		if (assignable && !n.Assignable) || n.Name == skip {
			continue
		}
		if ip, ok := mgmtIP(&n); ok {
			out = append(out, reach.Target{Node: n.Name, Addr: ip})
		}
	}
	return out
}

func mgmtIP(n *ovnknode.Node) (netip.Addr, bool) {
	for _, v6 := range []bool{false, true} {
		if ip, ok := n.MgmtIP(v6); ok {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// uplinkUp reports whether the node's uplink is administratively and
// operationally up. A link it cannot find counts as up: the check is for
// a NIC that died, not for a configuration it cannot see.
func uplinkUp(name string) bool {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return true
	}
	return ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagRunning != 0
}

// nodeLiveness is a node instance's view of liveness: its own (its
// uplink, and whether it can still see the other nodes) and the other
// nodes' (the heartbeat, with --egressip-fast-failover and L2 announce).
type nodeLiveness struct {
	self   string
	uplink func() string    // the uplink the node's last pass used
	hb     *reach.Heartbeat // nil: no heartbeat among nodes
	// joined delays the node's own liveness after it (re)joins, with the
	// heartbeat: its peers see it before it claims what it wins.
	joined reach.Joined
}

// serving is the node's status for the leader's checks: its uplink is up.
func (l *nodeLiveness) serving() bool { return uplinkUp(l.uplink()) }

// Alive is Params.Alive: the node itself is alive while its uplink is
// up, no other node that answers its heartbeats has stopped hearing it,
// and at least half of the others answer and hear it
// (reach.Heartbeat.Hearing: a node cut off, in either direction, stops
// announcing at least one heartbeat interval before the others count it
// down, rather than taking every VIP), from reach.JoinDelay after it
// (re)joined on (the others stop answering for what it wins before it
// starts); another node while it answers its heartbeats.
func (l *nodeLiveness) Alive(node string) bool {
	if node == l.self {
		if l.hb == nil {
			return l.serving()
		}
		total, heard, deaf := l.hb.Hearing()
		return l.joined.Alive(l.serving() && deaf == 0 && (total < 2 || 2*heard >= total))
	}
	return l.hb == nil || l.hb.Reachable(node)
}

// hostLease is the node's lease on its egress IPs on host interfaces
// (reach.Lease): renewed by the leader's heartbeats and the API server's
// /readyz, while it hosts some.
func hostLease(cfg *Config, c *Clients, hosting func() bool, log *slog.Logger) *reach.Lease {
	l := &reach.Lease{Duration: cfg.HostLease, Active: hosting, Logger: log}
	if !c.FromManifests {
		l.Check = func(ctx context.Context) error {
			return c.Typed.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		}
	}
	return l
}

func poke(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// serveNode runs the node's health server and heartbeat responder on its
// management IP, found in its Node object (retried until it is there),
// until ctx ends.
func serveNode(ctx context.Context, cfg *Config, c *Clients, l *nodeLiveness, lease *reach.Lease, key []byte, log *slog.Logger) {
	for ctx.Err() == nil {
		err := func() error {
			n, err := c.Typed.CoreV1().Nodes().Get(ctx, cfg.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			parsed, err := ovnknode.Parse(n)
			if err != nil {
				return err
			}
			ip, ok := mgmtIP(&parsed)
			if !ok {
				return errors.New("no management IP (no node subnet)")
			}
			sc := reach.ServerConfig{Addr: ip, Port: cfg.HealthCheckPort, TLS: cfg.HealthTLS(), Status: l.serving, Logger: log,
				OnLeader: lease.Renew}
			if l.hb != nil {
				sc.Hears = l.hb.Age
			}
			if cfg.FastFailover {
				sc.HeartbeatPort, sc.HeartbeatKey = cfg.HeartbeatPort, key
			}
			s, err := reach.NewNodeServer(ctx, sc)
			if err != nil {
				return err
			}
			return s.Run(ctx)
		}()
		if err != nil && ctx.Err() == nil {
			log.Warn("egress health server not serving; retrying", "node", cfg.NodeName, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
}

// wireReachability starts what the egress reachability needs: on a node
// instance its health server and heartbeat responder, its liveness (the
// heartbeat among nodes with fast failover and L2 announce) and its host
// lease; on a leader candidate the checker (with the [ovnnorth] TLS files
// for gRPC) and, with fast failover, the heartbeat of the egress nodes,
// sent while leading.
func wireReachability(ctx context.Context, cfg *Config, c *Clients, d *Dataplane, env *runEnv, log *slog.Logger) error {
	h := d.hooks
	wake, nodeWake := make(chan struct{}, 1), make(chan struct{}, 1)
	env.Wake, env.NodeWake = wake, nodeWake
	h.wake = func() { poke(wake) }
	var key []byte
	if cfg.FastFailover && cfg.HeartbeatKeyFile != "" {
		var err error
		if key, err = reach.ReadHeartbeatKey(cfg.HeartbeatKeyFile); err != nil {
			return err
		}
	}

	requeue := time.AfterFunc(time.Hour, func() { poke(wake) })
	requeue.Stop()
	h.after = func(after time.Duration) { requeue.Reset(after) }
	if cfg.NodeName != "" {
		if err := wireNode(ctx, cfg, c, d, nodeWake, key, log); err != nil {
			return err
		}
	}
	if !cfg.LeaderElect || !cfg.EnableEgressIP {
		return nil
	}
	return wireLeader(ctx, cfg, d, env, wake, key, log)
}

// wireNode starts a node instance's side: its liveness (the heartbeat
// among nodes with fast failover and L2 announce), its host lease, its
// health server and heartbeat responder.
func wireNode(ctx context.Context, cfg *Config, c *Clients, d *Dataplane, nodeWake chan struct{}, key []byte, log *slog.Logger) error {
	h := d.hooks
	l := &nodeLiveness{self: cfg.NodeName, uplink: d.uplink}
	h.kick = func() { poke(nodeWake) }
	if cfg.FastFailover && (cfg.EnableL2Announce || cfg.UnderlayLBMode == UnderlayStandalone) {
		wake := func(string) { poke(nodeWake) }
		hb, err := reach.NewHeartbeat(reach.HeartbeatConfig{Interval: cfg.HeartbeatInterval, Misses: cfg.HeartbeatMisses,
			Port: cfg.HeartbeatPort, AskHeard: true, OnHearing: wake, Key: key, Logger: log},
			func(node string, _ bool) { wake(node) })
		if err != nil {
			return fmt.Errorf("node heartbeat: %w", err)
		}
		l.hb = hb
		l.joined = reach.Joined{Delay: reach.JoinDelay(cfg.HeartbeatInterval), Wake: func() { poke(nodeWake) }}
		h.nodeTargets = hb.SetTargets
		go func() {
			if err := hb.Run(ctx); err != nil {
				log.Error("node heartbeat stopped", "err", err)
			}
		}()
	}
	if cfg.EnableEgressIP {
		lease := hostLease(cfg, c, d.Hosting, log)
		lease.Expired = d.node.host.Leftover()
		h.fenced = lease.Fenced
		go lease.Run(ctx, func(fenced bool) {
			if poke(nodeWake); fenced {
				d.node.host.WithdrawLeftover(ctx)
			}
		})
		if cfg.HealthCheckPort != 0 || cfg.FastFailover {
			go serveNode(ctx, cfg, c, l, lease, key, log)
		}
	}
	h.alive = l.Alive
	return nil
}

// wireLeader starts a leader candidate's checks: the checker (with the
// [ovnnorth] TLS files for gRPC) and, with fast failover, the heartbeat
// of the egress nodes, sent while leading; their verdicts combine in a
// reach.Combined (while every egress node is lost at once, nothing
// moves).
func wireLeader(ctx context.Context, cfg *Config, d *Dataplane, env *runEnv, wake chan struct{}, key []byte, log *slog.Logger) error {
	h := d.hooks
	verdict := reach.NewCombined()
	changed := func(what string) func(string, bool) {
		return func(node string, up bool) {
			log.Info("egress node reachability", "node", node, "reachable", up, "by", what)
			if down, flipped := verdict.Changed(); flipped && down {
				log.Warn("every egress node is unreachable: this leader (or the network to them all) is the likelier fault; no egress IP moves on reachability until one answers")
			} else if flipped {
				log.Info("an egress node is reachable again")
			}
			poke(wake)
		}
	}
	var targets []func([]reach.Target)
	var chk *reach.Checker
	if cfg.ReachabilityTotalTimeout > 0 {
		var err error
		chk, err = reach.NewChecker(reach.Config{Interval: cfg.CheckInterval,
			Timeout: time.Duration(cfg.ReachabilityTotalTimeout) * time.Second, Port: cfg.HealthCheckPort,
			TLS: cfg.HealthTLS(), RestartGrace: cfg.AgentRestartGrace, Logger: log}, changed("check"))
		if err != nil {
			return fmt.Errorf("reachability checker: %w", err)
		}
		verdict.Add(chk.Reachable)
		targets = append(targets, chk.SetTargets)
		go chk.Run(ctx)
	}
	if cfg.FastFailover {
		onHB := changed("heartbeat")
		// The leader's heartbeat renews a node's host lease only while the
		// checks find it reachable and none of its host egress IPs is
		// held (egress.HostHold counts on that lease running out).
		renew := func(node string) bool {
			return !d.cluster.params.Hold.Holding(node) && (chk == nil || chk.Reachable(node))
		}
		hb, err := reach.NewHeartbeat(reach.HeartbeatConfig{Interval: cfg.HeartbeatInterval, Misses: cfg.HeartbeatMisses,
			Port: cfg.HeartbeatPort, Leader: true, Renew: renew, Key: key, Logger: log}, func(node string, up bool) {
			if up && chk != nil {
				chk.Heard(node) // checked now, not an interval later; a probe begun before is stale
			}
			onHB(node, up)
		})
		if err != nil {
			return fmt.Errorf("egress heartbeat: %w", err)
		}
		verdict.Add(hb.Reachable)
		// Heartbeats go out while leading only: a node takes them as
		// the leader's word that it still owns its egress IPs.
		targets = append(targets, hb.SetTargets)
		env.Leading = func(leading bool) {
			if !leading {
				hb.SetTargets(nil)
			}
		}
		go func() {
			if err := hb.Run(ctx); err != nil {
				log.Error("egress heartbeat stopped", "err", err)
			}
		}()
	}
	if len(targets) == 0 {
		return nil
	}
	h.reachable = verdict.Reachable
	h.targets = func(t []reach.Target) {
		for _, set := range targets {
			set(t)
		}
		verdict.SetTargets(t)
	}
	return nil
}
