package reach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Listen listens on addr (TCP for "tcp", UDP for "udp") with IP_FREEBIND
// set, so the socket is bound before the address exists: the management
// port ovn-k8s-mp0 is made by ovs-vswitchd and disappears and comes back
// with it, and the node's health server keeps answering on it without a
// restart.
func Listen(ctx context.Context, network string, addr netip.AddrPort) (net.Listener, net.PacketConn, error) {
	lc := net.ListenConfig{Control: freebind}
	switch network {
	case "tcp":
		l, err := lc.Listen(ctx, "tcp", addr.String())
		if err != nil {
			return nil, nil, fmt.Errorf("listen tcp %s: %w", addr, err)
		}
		return l, nil, nil
	case "udp":
		c, err := lc.ListenPacket(ctx, "udp", addr.String())
		if err != nil {
			return nil, nil, fmt.Errorf("listen udp %s: %w", addr, err)
		}
		return nil, c, nil
	}
	return nil, nil, fmt.Errorf("listen %s: network %q: want tcp or udp", addr, network)
}

// StatusFunc reports whether the node can serve egress traffic now; nil
// means always. The daemon's says no while the node's uplink is down: a
// node whose management port answers but whose NIC is dead would
// otherwise keep its egress IPs.
type StatusFunc func() bool

// healthService is grpc.health.v1 reporting ServiceName (and the server,
// service "") SERVING while ok says so, NOT_SERVING otherwise; any other
// service is NOT_FOUND, as grpc-go's health server answers.
type healthService struct {
	healthpb.UnimplementedHealthServer
	ok StatusFunc
}

func (h healthService) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if s := req.GetService(); s != ServiceName && s != "" {
		return nil, status.Errorf(codes.NotFound, "unknown service %q", s)
	}
	if h.ok != nil && !h.ok() {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// ServerConfig is the node side of the reachability checks.
type ServerConfig struct {
	// Addr is the node's management IP (the .2 of its subnet, on
	// ovn-k8s-mp0); Port the egressip-node-healthcheck-port (gRPC over
	// TCP), 0 for none; HeartbeatPort the UDP port of the fast failover
	// heartbeat (Responder), 0 for none.
	Addr                netip.Addr
	Port, HeartbeatPort int
	// TLS are the node's files for the gRPC server (the [ovnnorth]
	// client certificate, key and CA, as OVN-Kubernetes uses them).
	TLS TLSFiles
	// Status, when not nil, is asked on every check and heartbeat.
	Status StatusFunc
	// OnLeader, when not nil, is called on every heartbeat from a
	// leader (see Responder).
	OnLeader func()
	// Hears, when not nil, answers the node monitors that ask whether
	// they are heard (Responder.Hears): the node's own monitor's
	// Heartbeat.Age.
	Hears func(from netip.Addr) (age time.Duration, ok bool)
	// HeartbeatKey, when set, authenticates the heartbeats
	// (Responder.Key).
	HeartbeatKey []byte
	Logger       *slog.Logger
}

// NodeServer is a node's side of the checks: the gRPC health service
// and the heartbeat responder, bound by NewNodeServer and served by Run.
type NodeServer struct {
	cfg  ServerConfig
	log  *slog.Logger
	grpc *grpc.Server
	l    net.Listener
	hb   net.PacketConn
}

// NewNodeServer binds cfg's sockets (IP_FREEBIND: the management IP need
// not exist yet) in the caller's network namespace and loads the
// certificates; nothing is served before Run.
func NewNodeServer(ctx context.Context, cfg ServerConfig) (*NodeServer, error) {
	s := &NodeServer{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	if cfg.Port != 0 {
		g, err := newServer(cfg.TLS, cfg.Status)
		if err != nil {
			return nil, err
		}
		if s.l, _, err = Listen(ctx, "tcp", netip.AddrPortFrom(cfg.Addr, uint16(cfg.Port))); err != nil {
			return nil, fmt.Errorf("egress health server: %w", err)
		}
		s.grpc = g
	}
	if cfg.HeartbeatPort != 0 {
		var err error
		if _, s.hb, err = Listen(ctx, "udp", netip.AddrPortFrom(cfg.Addr, uint16(cfg.HeartbeatPort))); err != nil {
			if s.l != nil {
				s.l.Close()
			}
			return nil, fmt.Errorf("egress heartbeat responder: %w", err)
		}
	}
	return s, nil
}

// Run serves until ctx ends or a server fails.
func (s *NodeServer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	if s.grpc != nil {
		s.log.Info("serving the egress IP health check", "address", s.l.Addr().String(), "tls", s.cfg.TLS.enabled())
		wg.Go(func() {
			if err := s.grpc.Serve(s.l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("egress health server: %w", err)
			}
		})
		wg.Go(func() { <-ctx.Done(); s.grpc.Stop() })
	}
	if s.hb != nil {
		s.log.Info("answering egress heartbeats", "address", s.hb.LocalAddr().String())
		r := &Responder{Conn: s.hb, Status: s.cfg.Status, OnLeader: s.cfg.OnLeader, Hears: s.cfg.Hears,
			Key: s.cfg.HeartbeatKey, Addr: s.cfg.Addr}
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				errc <- err
			}
		})
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

// Serve is NewNodeServer then Run.
func Serve(ctx context.Context, cfg ServerConfig) error {
	s, err := NewNodeServer(ctx, cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
