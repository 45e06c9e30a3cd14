package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/egress/hostnet"
	"github.com/ovnedge/ovnedge/egress/reach"
)

// mgmtTargets are the management port addresses (the second address of
// the node subnet, ovn-k8s-mp0) of nodes, the egress-assignable ones
// only with assignable, except skip: OVN-Kubernetes probes these, reached
// through the cluster network whatever the node's external network does.
func mgmtTargets(nodes []*corev1.Node, assignable bool, skip string) []reach.Target {
	parsed, _ := egress.ParseNodes(nodes)
	return targetsOf(parsed, assignable, skip)
}

// targetsOf is mgmtTargets of nodes already parsed (the leader's
// ClusterState.Nodes: parsing 2,000 nodes' annotations again took 7-10
// ms of every pass).
func targetsOf(parsed []egress.Node, assignable bool, skip string) []reach.Target {
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

func mgmtIP(n *egress.Node) (netip.Addr, bool) {
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
// uplink, and whether it can still see the other nodes), the other nodes'
// (the heartbeat, with --egressip-fast-failover and L2 announce) and its
// host lease (the last heartbeat from the leader or answer from the API
// server).
type nodeLiveness struct {
	self   string
	uplink string
	hb     *reach.Heartbeat // nil: no heartbeat among nodes
	lease  time.Duration
	// hosting, when not nil, says whether the node hosts egress IPs on
	// host interfaces: only then is the API server asked (a cluster of
	// nodes asking it every lease/4 for nothing would load it).
	hosting func() bool
	// lastLeader and lastAPI are UnixNano times.
	lastLeader, lastAPI atomic.Int64
}

// serving is the node's status for the leader's checks: its uplink is up.
func (l *nodeLiveness) serving() bool { return uplinkUp(l.uplink) }

// Alive is Params.Alive: the node itself is alive while its uplink is
// up and it hears at least half of the other nodes (a node that hears
// none of them is the one cut off: it stops announcing rather than
// taking every VIP); another node while it answers its heartbeats.
func (l *nodeLiveness) Alive(node string) bool {
	if node == l.self {
		if !l.serving() {
			return false
		}
		if l.hb != nil {
			total, up := l.hb.Count()
			return total < 2 || 2*up >= total
		}
		return true
	}
	return l.hb == nil || l.hb.Reachable(node)
}

// Fenced reports whether the node has heard neither the leader nor the
// API server for longer than its lease: it can no longer prove it still
// owns its egress IPs on host interfaces.
func (l *nodeLiveness) Fenced() bool {
	if l.lease <= 0 {
		return false
	}
	last := max(l.lastLeader.Load(), l.lastAPI.Load())
	return time.Since(time.Unix(0, last)) > l.lease
}

// watchAPI records every answer of the API server's /readyz, asked every
// lease/4 (each within the same time) while the node hosts egress IPs on
// host interfaces, until ctx ends; fence changes wake. It also looks when
// the lease would run out, so the node withdraws right then: the leader
// counts on it (egress.HostHold waits the lease plus
// egress.HostReleaseMargin).
func (l *nodeLiveness) watchAPI(ctx context.Context, c *Clients, log *slog.Logger, wake chan<- struct{}) {
	l.lastAPI.Store(time.Now().UnixNano())
	if l.lease <= 0 {
		return
	}
	every := max(l.lease/4, 50*time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	fenced := false
	asked := time.Time{}
	for {
		switch {
		case c.FromManifests || (l.hosting != nil && !l.hosting()):
			asked = time.Now()
			l.lastAPI.Store(asked.UnixNano()) // nothing to fence
		case time.Since(asked) < every:
			// woken for the lease's end: no new question yet
		default:
			asked = time.Now()
			rctx, cancel := context.WithTimeout(ctx, every)
			err := c.Typed.Discovery().RESTClient().Get().AbsPath("/readyz").Do(rctx).Error()
			cancel()
			if err == nil {
				l.lastAPI.Store(time.Now().UnixNano())
			}
		}
		if f := l.Fenced(); f != fenced {
			fenced = f
			if f {
				log.Warn("host egress lease lost: neither the leader nor the API server heard; egress IPs on host interfaces are withdrawn", "lease", l.lease)
			} else {
				log.Info("host egress lease back")
			}
			poke(wake)
		}
		next := every - time.Since(asked)
		if !fenced {
			last := max(l.lastLeader.Load(), l.lastAPI.Load())
			next = min(next, time.Until(time.Unix(0, last).Add(l.lease))+time.Millisecond)
		}
		t.Reset(max(next, time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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
func serveNode(ctx context.Context, cfg *Config, c *Clients, l *nodeLiveness, key []byte, log *slog.Logger) {
	for ctx.Err() == nil {
		err := func() error {
			n, err := c.Typed.CoreV1().Nodes().Get(ctx, cfg.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			parsed, err := egress.ParseNode(n)
			if err != nil {
				return err
			}
			ip, ok := mgmtIP(&parsed)
			if !ok {
				return errors.New("no management IP (no node subnet)")
			}
			sc := reach.ServerConfig{Addr: ip, Port: cfg.HealthCheckPort, TLS: cfg.HealthTLS(), Status: l.serving, Logger: log,
				OnLeader: func() { l.lastLeader.Store(time.Now().UnixNano()) }}
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

// newHostSNAT opens the SNAT backend of egress IPs on host interfaces
// named by --egressip-host-backend. auto is nftables, programmed through
// netlink (no binary, so it works from the ovnedge image), unless the
// kernel's nftables API does not answer: then iptables, if its commands
// are installed.
func newHostSNAT(backend, netns string, log *slog.Logger) (hostnet.SNAT, error) {
	switch backend {
	case "iptables":
		return hostnet.NewIPTables(netns)
	case "nftables":
		return hostnet.NewNFTables(netns)
	case "auto":
		nft, err := hostnet.NewNFTables(netns)
		if err == nil {
			return nft, nil
		}
		ipt, err2 := hostnet.NewIPTables(netns)
		if err2 != nil {
			return nil, fmt.Errorf("egressip-host-backend auto: %w", errors.Join(err, err2))
		}
		log.Warn("nftables unavailable: egress IPs on host interfaces use iptables", "err", err)
		return ipt, nil
	}
	return nil, fmt.Errorf("egressip-host-backend %q: want iptables, nftables or auto", backend)
}
