package reach

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// ServiceName is the health service every node reports SERVING.
const ServiceName = "Service_Egress_IP"

// TLSFiles are PEM files for the gRPC session, the same OVN-Kubernetes
// uses for its Northbound connection. A zero TLSFiles means an insecure
// session.
type TLSFiles struct {
	// CertFile and KeyFile are this side's certificate; CAFile verifies
	// the peer (the server then requires client certificates).
	CertFile, KeyFile, CAFile string
	// ServerName is the name the client expects in the server's
	// certificate; empty accepts any name signed by the CA.
	ServerName string
}

func (f TLSFiles) enabled() bool { return f.CertFile != "" || f.KeyFile != "" || f.CAFile != "" }

func (f TLSFiles) config(server bool) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CertFile != "" || f.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load certificate %s: %w", f.CertFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA %s: no PEM certificate", f.CAFile)
		}
		if server {
			cfg.ClientCAs = pool
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		} else {
			cfg.RootCAs = pool
		}
	}
	if server && len(cfg.Certificates) == 0 {
		return nil, fmt.Errorf("tls server: a certificate and key are required")
	}
	if !server && f.CAFile != "" && f.ServerName == "" {
		// Verify the chain but not the name: nodes are dialled by IP.
		cfg.InsecureSkipVerify = true
		cfg.VerifyPeerCertificate = verifyChain(cfg.RootCAs)
	}
	cfg.ServerName = f.ServerName
	return cfg, nil
}

func verifyChain(roots *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return fmt.Errorf("tls: no server certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return fmt.Errorf("tls: server certificate: %w", err)
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err != nil {
			return fmt.Errorf("tls: server certificate: %w", err)
		}
		return nil
	}
}

// NewServer returns a gRPC server with the health service reporting
// ServiceName (and the server as a whole) SERVING; serve it on
// <management IP>:<egressip-node-healthcheck-port> (Serve does, with a
// status). With TLS files set the server speaks TLS only, and with a CA
// it requires client certificates signed by it.
func NewServer(files TLSFiles) (*grpc.Server, error) { return newServer(files, nil) }

func newServer(files TLSFiles, ok StatusFunc) (*grpc.Server, error) {
	var opts []grpc.ServerOption
	if files.enabled() {
		cfg, err := files.config(true)
		if err != nil {
			return nil, fmt.Errorf("egress health server: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	s := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(s, healthService{ok: ok})
	return s, nil
}

// Client checks the health service of egress nodes over one session per
// node, kept between checks. It is safe for concurrent use.
type Client struct {
	port  int
	creds credentials.TransportCredentials
	dial  DialFunc
	grace time.Duration

	mu    sync.Mutex
	conns map[netip.Addr]*grpc.ClientConn
	// refused is when each node's health port began refusing
	// connections (see RestartGrace).
	refused map[netip.Addr]time.Time
}

// DefaultRestartGrace is the restart grace ovnedge's daemon gives
// (--egressip-agent-restart-grace): a node agent restarted by its kubelet,
// or replaced by a rolling update, listens again within seconds.
const DefaultRestartGrace = 30 * time.Second

// SetRestartGrace sets how long a node whose health port refuses
// connections still counts as up: its host answers (the path to its
// management address works, as the DISCARD probe counts a refusal) while
// its agent does not listen, restarting or being replaced, which moves no
// egress IP. A node refusing longer is down; 0 counts it down at once, as
// OVN-Kubernetes' gRPC check does (the default).
func (c *Client) SetRestartGrace(d time.Duration) {
	c.mu.Lock()
	c.grace = d
	c.mu.Unlock()
}

// NewClient returns a client for the nodes' health port. dial nil uses a
// net.Dialer.
func NewClient(port int, files TLSFiles, dial DialFunc) (*Client, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("egress health client: port %d out of range", port)
	}
	creds := insecure.NewCredentials()
	if files.enabled() {
		cfg, err := files.config(false)
		if err != nil {
			return nil, fmt.Errorf("egress health client: %w", err)
		}
		creds = credentials.NewTLS(cfg)
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return &Client{port: port, creds: creds, dial: dial,
		conns: map[netip.Addr]*grpc.ClientConn{}, refused: map[netip.Addr]time.Time{}}, nil
}

// Check reports whether addr serves ServiceName within timeout. A failure
// on a session that existed is retried once on a fresh session in the
// remaining time (half the timeout is kept for it): a bounced session does
// not mark the node down, a dead node is down after one timeout. A fresh
// session first connects by hand: a refused connection is the node's
// host answering while its agent does not listen, up for RestartGrace
// (SetRestartGrace).
func (c *Client) Check(ctx context.Context, addr netip.Addr, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, existed, err := c.conn(addr)
	if err != nil {
		return false, err
	}
	if existed {
		first, cancelFirst := context.WithTimeout(ctx, timeout/2)
		err = check(first, conn)
		cancelFirst()
		if err == nil {
			return true, nil
		}
		c.drop(addr, conn)
		if ctx.Err() != nil {
			return false, fmt.Errorf("health check %s: %w", addr, err)
		}
		if conn, _, err = c.conn(addr); err != nil {
			return false, err
		}
	}
	if up, refusing, err := c.connect(ctx, addr); refusing || err != nil {
		c.drop(addr, conn)
		return up, err
	}
	if err := check(ctx, conn); err != nil {
		c.drop(addr, conn)
		return false, fmt.Errorf("health check %s: %w", addr, err)
	}
	c.mu.Lock()
	delete(c.refused, addr)
	c.mu.Unlock()
	return true, nil
}

// connect dials the node's health port: refusing says it refused (up
// says whether that is still within the restart grace), err that it
// could not be reached at all.
func (c *Client) connect(ctx context.Context, addr netip.Addr) (up, refusing bool, err error) {
	target := hostPort(addr, c.port)
	conn, err := c.dial(ctx, "tcp", target)
	if err == nil {
		conn.Close()
		return true, false, nil
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return false, false, fmt.Errorf("health check %s: %w", target, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	since, ok := c.refused[addr]
	if !ok {
		since = time.Now()
		c.refused[addr] = since
	}
	if d := time.Since(since); d >= c.grace {
		return false, true, fmt.Errorf("health check %s: refused for %v: %w", target, d.Round(time.Millisecond), err)
	}
	return true, true, nil
}

func check(ctx context.Context, conn *grpc.ClientConn) error {
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: ServiceName}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service %s is %s", ServiceName, s)
	}
	return nil
}

// conn returns the node's session, creating it (existed false) if needed.
func (c *Client) conn(addr netip.Addr) (*grpc.ClientConn, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.conns[addr]; ok {
		return conn, true, nil
	}
	dial := c.dial
	conn, err := grpc.NewClient("passthrough:///"+hostPort(addr, c.port),
		grpc.WithTransportCredentials(c.creds),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return dial(ctx, "tcp", a) }))
	if err != nil {
		return nil, false, fmt.Errorf("health client for %s: %w", addr, err)
	}
	c.conns[addr] = conn
	return conn, false, nil
}

func (c *Client) drop(addr netip.Addr, conn *grpc.ClientConn) {
	c.mu.Lock()
	if c.conns[addr] == conn {
		delete(c.conns, addr)
	}
	c.mu.Unlock()
	conn.Close()
}

// Forget closes the sessions of nodes not in keep.
func (c *Client) Forget(keep map[netip.Addr]bool) {
	c.mu.Lock()
	var stale []*grpc.ClientConn
	for a, conn := range c.conns {
		if !keep[a] {
			stale = append(stale, conn)
			delete(c.conns, a)
		}
	}
	for a := range c.refused {
		if !keep[a] {
			delete(c.refused, a)
		}
	}
	c.mu.Unlock()
	for _, conn := range stale {
		conn.Close()
	}
}

// Close closes every session.
func (c *Client) Close() { c.Forget(nil) }
