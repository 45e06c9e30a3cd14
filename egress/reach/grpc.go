package reach

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
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

	mu    sync.Mutex
	conns map[netip.Addr]*grpc.ClientConn
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
	return &Client{port: port, creds: creds, dial: dial, conns: map[netip.Addr]*grpc.ClientConn{}}, nil
}

// Check reports whether addr serves ServiceName within timeout. A failure
// on a session that existed is retried once on a fresh session in the
// remaining time (half the timeout is kept for it): a bounced session does
// not mark the node down, a dead node is down after one timeout.
func (c *Client) Check(ctx context.Context, addr netip.Addr, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, existed, err := c.conn(addr)
	if err != nil {
		return false, err
	}
	first := ctx
	if existed {
		var cancelFirst context.CancelFunc
		first, cancelFirst = context.WithTimeout(ctx, timeout/2)
		defer cancelFirst()
	}
	err = check(first, conn)
	if err == nil {
		return true, nil
	}
	c.drop(addr, conn)
	if !existed || ctx.Err() != nil {
		return false, fmt.Errorf("health check %s: %w", addr, err)
	}
	if conn, _, err = c.conn(addr); err != nil {
		return false, err
	}
	if err := check(ctx, conn); err != nil {
		c.drop(addr, conn)
		return false, fmt.Errorf("health check %s (on a new session): %w", addr, err)
	}
	return true, nil
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
	c.mu.Unlock()
	for _, conn := range stale {
		conn.Close()
	}
}

// Close closes every session.
func (c *Client) Close() { c.Forget(nil) }
