package ovsdbnb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// Defaults of Options.
const (
	DefaultConnectTimeout  = 10 * time.Second
	DefaultInactivityProbe = 15 * time.Second
	DefaultMaxBackoff      = 5 * time.Second
)

// Options configure Dial.
type Options struct {
	// Endpoints are the NB remotes, "unix:/path", "tcp:host:port" or
	// "ssl:host:port"; give every member of a RAFT cluster.
	Endpoints []string
	// PrivateKey, Certificate and CACert are PEM files for ssl: endpoints.
	PrivateKey, Certificate, CACert string
	// AllowFollower lets the client stay on a RAFT follower. By default it
	// only talks to the leader and moves when the leader changes.
	AllowFollower bool
	// ConnectTimeout bounds each connection attempt (DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// InactivityProbe is how often an echo is sent; an echo not
	// answered within ConnectTimeout reconnects (DefaultInactivityProbe).
	// It must exceed ConnectTimeout.
	InactivityProbe time.Duration
	// MaxBackoff caps the exponential backoff between reconnection
	// attempts (DefaultMaxBackoff).
	MaxBackoff time.Duration
	// Logger receives the client's logs (slog.Default() when nil).
	Logger *slog.Logger
}

// Client is a connection to the OVN Northbound database with a cache of
// the tables this package uses (see Tables). It reconnects by itself;
// transactions issued while disconnected wait for the reconnection.
type Client struct {
	nb  client.Client
	log *slog.Logger
	// done is closed by Close; probed once the prober has stopped.
	done, probed chan struct{}
	closeOnce    sync.Once
	shared       shared // the index of the cached shared rows
	// bo is the reconnection backoff; libovsdb resets it when the
	// connection is lost.
	bo *watchedBackoff
	// changes are the monitor's news of owned rows, for TakeChanges.
	changes changes
	// records are the template records the NB may hold (templates.go).
	records templateRecords
}

// Tables are the NB tables the client monitors and caches.
var Tables = []string{
	nbdb.LoadBalancerTable, nbdb.LoadBalancerGroupTable, nbdb.LogicalRouterPolicyTable,
	nbdb.NATTable, nbdb.AddressSetTable, nbdb.LogicalRouterTable, nbdb.LogicalSwitchTable,
	nbdb.QoSTable, nbdb.ACLTable, nbdb.ChassisTemplateVarTable,
}

// monitored are the columns of Tables the client monitors: those this
// package reads (the rows it plans, reads back with Current and watches
// for drift; the routers, switches and groups only for their names,
// marks and the references it manages). The others, the routers' and
// switches' ports and static routes above all (tens of thousands of
// UUIDs on a large cluster), are neither sent nor decoded nor cached;
// logical ports and static routes are not monitored at all, and of the
// ACLs (OVN-Kubernetes' network policies) only those marked KeyACL. The
// switches' acls column is monitored (the references to ovnedge's ACLs
// are told from the others' in the index).
var monitored = map[string][]string{
	nbdb.LoadBalancerTable:        {"name", "protocol", "vips", "options", "selection_fields", "external_ids"},
	nbdb.LoadBalancerGroupTable:   {"name", "load_balancer"},
	nbdb.LogicalRouterPolicyTable: {"priority", "match", "action", "nexthops", "options", "external_ids"},
	nbdb.NATTable:                 {"type", "external_ip", "logical_ip", "logical_port", "options", "external_ids"},
	nbdb.AddressSetTable:          {"name", "addresses", "external_ids"},
	nbdb.LogicalRouterTable:       {"name", "policies", "nat", "load_balancer", "load_balancer_group", "external_ids"},
	nbdb.LogicalSwitchTable:       {"name", "load_balancer", "load_balancer_group", "qos_rules", "acls", "external_ids"},
	nbdb.QoSTable:                 {"priority", "direction", "match", "action", "bandwidth", "external_ids"},
	nbdb.ACLTable:                 {"priority", "direction", "match", "action", "name", "external_ids"},
	nbdb.ChassisTemplateVarTable:  {"chassis", "variables", "external_ids"},
}

// dbModel is the partial NB model of Tables, with client indexes on the
// ownership key so an owner's rows are found without a scan.
func dbModel() (model.ClientDBModel, error) {
	m, err := model.NewClientDBModel("OVN_Northbound", map[string]model.Model{
		nbdb.LoadBalancerTable:        &nbdb.LoadBalancer{},
		nbdb.LoadBalancerGroupTable:   &nbdb.LoadBalancerGroup{},
		nbdb.LogicalRouterPolicyTable: &nbdb.LogicalRouterPolicy{},
		nbdb.NATTable:                 &nbdb.NAT{},
		nbdb.AddressSetTable:          &nbdb.AddressSet{},
		nbdb.LogicalRouterTable:       &nbdb.LogicalRouter{},
		nbdb.LogicalSwitchTable:       &nbdb.LogicalSwitch{},
		nbdb.QoSTable:                 &nbdb.QoS{},
		nbdb.ACLTable:                 &nbdb.ACL{},
		nbdb.ChassisTemplateVarTable:  &nbdb.ChassisTemplateVar{},
	})
	if err != nil {
		return m, err
	}
	byOwner := []model.ClientIndex{{Columns: []model.ColumnKey{{Column: "external_ids", Key: KeyOwnedBy}}}}
	byName := model.ClientIndex{Columns: []model.ColumnKey{{Column: "name"}}}
	m.SetIndexes(map[string][]model.ClientIndex{
		nbdb.LoadBalancerTable:        append(byOwner, byName),
		nbdb.LogicalRouterPolicyTable: byOwner,
		nbdb.NATTable:                 byOwner,
		nbdb.AddressSetTable:          byOwner,
		nbdb.QoSTable:                 byOwner,
		nbdb.ACLTable:                 byOwner,
	})
	return m, nil
}

// monitor is the client's monitor: the monitored columns of the tables of
// the model the server's schema has (Chassis_Template_Var is absent
// before OVN 22.12).
func monitor(nb client.Client) *client.Monitor {
	m := nb.NewMonitor()
	schema := nb.Schema()
	for _, t := range Tables {
		if ts := schema.Table(t); ts != nil {
			var cols []string
			for _, c := range monitored[t] {
				if ts.Column(c) != nil {
					cols = append(cols, c)
				}
			}
			tm := client.TableMonitor{Table: t, Fields: cols}
			if t == nbdb.ACLTable { // only ovnedge's (see KeyACL)
				tm.Conditions = []ovsdb.Condition{{Column: "external_ids", Function: ovsdb.ConditionIncludes,
					Value: stringMap(map[string]string{KeyACL: "true"})}}
			}
			m.Tables = append(m.Tables, tm)
		}
	}
	return m
}

// Dial connects to the first reachable endpoint (the RAFT leader unless
// AllowFollower), monitors Tables and returns once the cache holds them.
func Dial(ctx context.Context, opts Options) (*Client, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("ovsdbnb: dial: no endpoints")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	connect := opts.ConnectTimeout
	if connect <= 0 {
		connect = DefaultConnectTimeout
	}
	probe := opts.InactivityProbe
	if probe <= 0 {
		probe = DefaultInactivityProbe
	}
	maxBackoff := opts.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = DefaultMaxBackoff
	}
	exp := backoff.NewExponentialBackOff()
	exp.InitialInterval = 50 * time.Millisecond
	exp.MaxInterval = maxBackoff
	exp.MaxElapsedTime = 0 // retry forever; Close stops it
	bo := &watchedBackoff{BackOff: exp, lost: make(chan struct{}, 1)}
	// libovsdb logs its connection news at V(0) and dumps every
	// transaction at V(4): one step down makes the first Debug and the
	// second invisible even at Debug.
	lg := logr.FromSlogHandler(log.Handler()).V(1)
	if probe <= connect {
		return nil, fmt.Errorf("ovsdbnb: dial: inactivity probe %v must exceed the connect timeout %v", probe, connect)
	}
	// Not client.WithInactivityCheck: in libovsdb v0.8.1 a disconnect
	// racing a transaction can panic (send on closed channel,
	// libovsdb#464, fixed after v0.8.1 by #488). Client.probe does the
	// same job through Echo and Disconnect.
	copts := []client.Option{
		client.WithLeaderOnly(!opts.AllowFollower),
		client.WithReconnect(connect, bo),
		client.WithLogger(&lg),
	}
	ssl := false
	for _, ep := range opts.Endpoints {
		if !strings.HasPrefix(ep, "unix:") && !strings.HasPrefix(ep, "tcp:") && !strings.HasPrefix(ep, "ssl:") {
			return nil, fmt.Errorf("ovsdbnb: dial: endpoint %q: want a unix, tcp or ssl scheme", ep)
		}
		ssl = ssl || strings.HasPrefix(ep, "ssl:")
		copts = append(copts, client.WithEndpoint(ep))
	}
	if ssl {
		cfg, err := tlsConfig(opts)
		if err != nil {
			return nil, fmt.Errorf("ovsdbnb: dial: %w", err)
		}
		copts = append(copts, client.WithTLSConfig(cfg))
	}
	m, err := dbModel()
	if err != nil {
		return nil, fmt.Errorf("ovsdbnb: dial: model: %w", err)
	}
	nb, err := client.NewOVSDBClient(m, copts...)
	if err != nil {
		return nil, fmt.Errorf("ovsdbnb: dial: %w", err)
	}
	c := &Client{nb: nb, log: log, done: make(chan struct{}), probed: make(chan struct{}), bo: bo,
		changes: changes{signal: make(chan struct{}, 1)}}
	cctx, cancel := context.WithTimeout(ctx, connect)
	defer cancel()
	if err := nb.Connect(cctx); err != nil {
		return nil, fmt.Errorf("ovsdbnb: dial %s: %w", strings.Join(opts.Endpoints, ","), err)
	}
	// The cache exists once connected; the handler sees every row
	// from the first monitor reply on.
	nb.Cache().AddEventHandler(c.changes.handler())
	if _, err := nb.Monitor(cctx, monitor(nb)); err != nil {
		nb.Close()
		return nil, fmt.Errorf("ovsdbnb: monitor %s: %w", nb.CurrentEndpoint(), err)
	}
	endpoint := nb.CurrentEndpoint()
	log.Info("ovsdbnb: connected", "endpoint", endpoint)
	go c.probe(probe, connect, endpoint)
	return c, nil
}

// watchedBackoff is the reconnection backoff. libovsdb resets it at the
// start of every reconnection and tells nobody else that the connection
// was lost: Reset is how the client learns it.
type watchedBackoff struct {
	backoff.BackOff
	lost     chan struct{} // one pending signal
	attempts atomic.Int64  // failed attempts of the reconnection under way
	losses   atomic.Uint64 // connections lost so far
}

func (b *watchedBackoff) Reset() {
	b.losses.Add(1)
	b.attempts.Store(0)
	b.BackOff.Reset()
	select {
	case b.lost <- struct{}{}:
	default:
	}
}

func (b *watchedBackoff) NextBackOff() time.Duration {
	b.attempts.Add(1)
	return b.BackOff.NextBackOff()
}

// probe sends an echo every interval and drops the connection when the
// server does not answer within timeout, so that the client reconnects
// (to the leader of the moment). It logs a lost connection and the
// reconnection that ends it, and reports the reconnection to
// TakeChanges (the database may have been replaced meanwhile). It returns
// once Close is called.
func (c *Client) probe(interval, timeout time.Duration, endpoint string) {
	defer close(c.probed)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-c.bo.lost:
			if !c.reconnected(endpoint) {
				return
			}
			endpoint = c.nb.CurrentEndpoint()
			continue
		case <-tick.C:
		}
		// While libovsdb reconnects, Connected stays true (it clears it
		// only on Disconnect and Close) but there is no endpoint: an
		// echo then fails at once and says nothing about the server.
		ep := c.nb.CurrentEndpoint()
		if ep == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := c.nb.Echo(ctx)
		cancel()
		if err != nil && !errors.Is(err, client.ErrNotConnected) && c.nb.CurrentEndpoint() == ep {
			c.log.Warn("ovsdbnb: inactivity probe failed, reconnecting", "endpoint", ep, "timeout", timeout, "err", err)
			c.nb.Disconnect()
		}
	}
}

// reconnected logs the loss of the connection to endpoint, waits until
// libovsdb has reconnected (its monitors restarted and the cache
// reloaded) and logs that too. It returns false when Close was called
// first.
func (c *Client) reconnected(endpoint string) bool {
	lost := time.Now()
	c.log.Warn("ovsdbnb: connection lost, reconnecting", "endpoint", endpoint)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for c.nb.CurrentEndpoint() == "" {
		select {
		case <-c.done:
			return false
		case <-tick.C:
		}
	}
	c.log.Info("ovsdbnb: reconnected", "endpoint", c.nb.CurrentEndpoint(), "previous", endpoint,
		"down", time.Since(lost).Round(time.Millisecond), "failed-attempts", c.bo.attempts.Load())
	c.changes.reconnect()
	return true
}

// conn identifies the connection of the moment: it changes once that
// connection is lost.
func (c *Client) conn() uint64 { return c.bo.losses.Load() }

// tlsConfig loads the key pair and CA of opts.
func tlsConfig(opts Options) (*tls.Config, error) {
	return TLSConfig(opts.PrivateKey, opts.Certificate, opts.CACert)
}

// TLSConfig is the client TLS configuration of an OVSDB ssl: endpoint
// from a private key, its certificate and the CA certificate (files), as
// Dial uses it; other OVSDB clients (a Southbound one) can share it.
func TLSConfig(privateKey, certificate, caCert string) (*tls.Config, error) {
	if privateKey == "" || certificate == "" || caCert == "" {
		return nil, errors.New("ssl: endpoint needs PrivateKey, Certificate and CACert")
	}
	cert, err := tls.LoadX509KeyPair(certificate, privateKey)
	if err != nil {
		return nil, fmt.Errorf("load key pair: %w", err)
	}
	ca, err := os.ReadFile(caCert)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("CA %s: no PEM certificate", caCert)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Endpoint returns the endpoint the client is connected to, "" when
// disconnected.
func (c *Client) Endpoint() string { return c.nb.CurrentEndpoint() }

// Connected reports whether the client has a live connection.
func (c *Client) Connected() bool { return c.nb.Connected() }

// Close disconnects for good.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		close(c.done)
		<-c.probed
		c.nb.Close()
	})
}
