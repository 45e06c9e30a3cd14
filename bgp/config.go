package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Config is a speaker's configuration.
type Config struct {
	// ASN is the local autonomous system number.
	ASN uint32
	// RouterID is the BGP identifier, an IPv4 address (usually the
	// node's).
	RouterID netip.Addr
	// ListenPort is the TCP port the speaker accepts sessions on; 0 does
	// not listen: the speaker opens every session itself.
	ListenPort int
	// ListenAddresses restricts the listener to these addresses (all when
	// empty).
	ListenAddresses []netip.Addr
	// Peers are the BGP neighbours.
	Peers []Peer
	// GracefulRestart is the restart time advertised to peers (RFC 4724):
	// how long they keep this speaker's routes after it went away without
	// a notification. 0 disables graceful restart.
	GracefulRestart time.Duration
	// Restarting sets the Restart State and Forwarding State bits: this
	// speaker has restarted and its dataplane kept forwarding, so peers
	// keep its stale routes until its End-of-RIB (then drop those it did
	// not announce again).
	Restarting bool
	// Pools give the routes of their prefixes communities and a local
	// preference; a route takes the attributes of the first pool that
	// contains it.
	Pools []Pool
	// OnPeerState, when set, is called on every session state change.
	OnPeerState func(PeerStatus)
}

// Peer is a BGP neighbour.
type Peer struct {
	Address netip.Addr
	ASN     uint32
	// LocalASN is the AS this speaker uses with the peer; 0 is the
	// speaker's (Config.ASN).
	LocalASN uint32
	// Port is the peer's TCP port; 0 means 179.
	Port uint16
	// LocalAddress is the source of the session; invalid picks one.
	LocalAddress netip.Addr
	// HoldTime is the proposed hold time (default 90 s, at least 3 s);
	// keepalives are sent every third of it.
	HoldTime time.Duration
	// Keepalive is the keepalive interval; 0 is a third of the hold time.
	Keepalive time.Duration
	// ConnectRetry is the time between connection attempts (default 1 s).
	ConnectRetry time.Duration
	// Password enables TCP MD5 authentication.
	Password string
	// Multihop is the TTL of an eBGP multihop session; 0 for a directly
	// connected peer.
	Multihop uint8
	BFD      BFD
	// DisableGracefulRestart does not negotiate graceful restart with
	// this peer even when the speaker has it (Config.GracefulRestart).
	DisableGracefulRestart bool
}

// BFD is a peer's single-hop BFD session (RFC 5880/5881): a control
// packet every Interval, the peer down after Multiplier missed ones.
type BFD struct {
	Enabled bool
	// Interval is the desired transmit interval (default 300 ms), and
	// the required receive interval unless ReceiveInterval is set.
	Interval        time.Duration
	ReceiveInterval time.Duration
	// Multiplier is the detection multiplier (default 3).
	Multiplier int
}

// Pool is the routing policy of an address pool.
type Pool struct {
	Name     string
	Prefixes []netip.Prefix
	// Communities are attached to the pool's routes.
	Communities []Community
	// LocalPref is the LOCAL_PREF of the pool's routes (iBGP only); 0
	// sends none.
	LocalPref uint32
}

// Community is a standard BGP community (RFC 1997), AS:value.
type Community uint32

// ParseCommunity parses "AS:value" (each 0-65535) or a 32-bit number.
func ParseCommunity(s string) (Community, error) {
	s = strings.TrimSpace(s)
	if as, v, ok := strings.Cut(s, ":"); ok {
		hi, err1 := strconv.ParseUint(as, 10, 16)
		lo, err2 := strconv.ParseUint(v, 10, 16)
		if err := errors.Join(err1, err2); err != nil {
			return 0, fmt.Errorf("community %q: %w", s, err)
		}
		return Community(hi<<16 | lo), nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("community %q: %w", s, err)
	}
	return Community(n), nil
}

// String returns "AS:value".
func (c Community) String() string { return fmt.Sprintf("%d:%d", c>>16, c&0xffff) }

const (
	defaultHoldTime     = 90 * time.Second
	defaultConnectRetry = time.Second
	defaultBFDInterval  = 300 * time.Millisecond
	defaultBFDMult      = 3
)

// withDefaults returns the peer with its zero fields defaulted.
func (p Peer) withDefaults() Peer {
	if p.HoldTime == 0 {
		p.HoldTime = defaultHoldTime
	}
	if p.ConnectRetry == 0 {
		p.ConnectRetry = defaultConnectRetry
	}
	if p.BFD.Enabled {
		if p.BFD.Interval == 0 {
			p.BFD.Interval = defaultBFDInterval
		}
		if p.BFD.Multiplier == 0 {
			p.BFD.Multiplier = defaultBFDMult
		}
		if p.BFD.ReceiveInterval == 0 {
			p.BFD.ReceiveInterval = p.BFD.Interval
		}
	}
	return p
}

// Validate reports the first problem of the configuration.
func (c *Config) Validate() error {
	if c.ASN == 0 {
		return errors.New("bgp: local ASN is 0")
	}
	if !c.RouterID.Is4() {
		return fmt.Errorf("bgp: router ID %v is not an IPv4 address", c.RouterID)
	}
	if c.ListenPort < 0 || c.ListenPort > 65535 {
		return fmt.Errorf("bgp: listen port %d out of range", c.ListenPort)
	}
	if c.GracefulRestart < 0 || c.GracefulRestart > 4095*time.Second {
		return fmt.Errorf("bgp: graceful restart time %v out of range 0-4095s", c.GracefulRestart)
	}
	seen := map[netip.Addr]bool{}
	for _, p := range c.Peers {
		if err := p.validate(); err != nil {
			return err
		}
		if seen[p.Address] {
			return fmt.Errorf("bgp: peer %v listed twice", p.Address)
		}
		seen[p.Address] = true
	}
	for _, p := range c.Pools {
		for _, pfx := range p.Prefixes {
			if !pfx.IsValid() {
				return fmt.Errorf("bgp: pool %q: invalid prefix", p.Name)
			}
		}
	}
	return nil
}

func (p Peer) validate() error {
	if !p.Address.IsValid() {
		return errors.New("bgp: peer without an address")
	}
	if p.ASN == 0 {
		return fmt.Errorf("bgp: peer %v: ASN is 0", p.Address)
	}
	if p.HoldTime != 0 && (p.HoldTime < 3*time.Second || p.HoldTime > 65535*time.Second) {
		return fmt.Errorf("bgp: peer %v: hold time %v out of range 3s-65535s", p.Address, p.HoldTime)
	}
	if p.Keepalive < 0 || (p.Keepalive > 0 && p.HoldTime > 0 && p.Keepalive > p.HoldTime) {
		return fmt.Errorf("bgp: peer %v: keepalive %v longer than the hold time %v", p.Address, p.Keepalive, p.HoldTime)
	}
	if p.ConnectRetry < 0 {
		return fmt.Errorf("bgp: peer %v: negative connect retry", p.Address)
	}
	if p.BFD.Enabled {
		if p.BFD.Interval < 0 || p.BFD.Interval > time.Hour || p.BFD.ReceiveInterval < 0 || p.BFD.ReceiveInterval > time.Hour {
			return fmt.Errorf("bgp: peer %v: BFD interval %v/%v out of range", p.Address, p.BFD.Interval, p.BFD.ReceiveInterval)
		}
		if p.BFD.Multiplier < 0 || p.BFD.Multiplier > 255 {
			return fmt.Errorf("bgp: peer %v: BFD multiplier %d out of range 1-255", p.Address, p.BFD.Multiplier)
		}
	}
	return nil
}

// attrs returns the policy of a prefix: the first pool containing it.
func (c *Config) pool(p netip.Prefix) *Pool {
	for i := range c.Pools {
		for _, pp := range c.Pools[i].Prefixes {
			if pp.Bits() <= p.Bits() && pp.Contains(p.Addr()) {
				return &c.Pools[i]
			}
		}
	}
	return nil
}
