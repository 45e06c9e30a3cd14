package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// Speaker is a running BGP speaker. Its methods are safe for concurrent use.
type Speaker struct {
	cfg Config
	log *slog.Logger
	lvl *slog.LevelVar
	srv *server.BgpServer

	stopWatch context.CancelFunc

	mu        sync.Mutex
	peers     map[netip.Addr]Peer
	announced map[netip.Prefix]string // prefix -> its attributes' key
	closed    bool

	updates atomic.Uint64
	// established holds the peers whose last reported state is
	// established (under emu): the session count follows the events
	// themselves, not a ListPeer that can lag the event it is called for.
	emu         sync.Mutex
	established map[netip.Addr]bool
}

// PeerStatus is the state of one session.
type PeerStatus struct {
	Address netip.Addr
	ASN     uint32
	// State is the FSM state: "idle", "connect", "active", "opensent",
	// "openconfirm" or "established".
	State       string
	Established bool
	// BFD is the BFD session state ("up", "down", "init", "admin_down"),
	// "" without BFD.
	BFD string
	// Advertised is the number of routes sent on the session.
	Advertised uint64
}

// Stats are a speaker's counters.
type Stats struct {
	// Announced is the number of prefixes announced now.
	Announced int
	// Updates counts prefix announcements and withdrawals since start.
	Updates uint64
	// Sessions is the number of established sessions.
	Sessions int
}

// Start validates cfg, starts a speaker and opens its sessions. log may be
// nil (slog.Default()). The speaker runs until Close.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Speaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "bgp")
	lvl := &slog.LevelVar{}
	lvl.Set(slog.LevelWarn) // GoBGP logs every session event at info
	s := &Speaker{cfg: cfg, log: log, lvl: lvl, peers: map[netip.Addr]Peer{}, announced: map[netip.Prefix]string{}}
	s.srv = server.NewBgpServer(server.LoggerOption(log, lvl))
	go s.srv.Serve()

	port := int32(-1)
	if cfg.ListenPort > 0 {
		port = int32(cfg.ListenPort)
	}
	var listen []string
	for _, a := range cfg.ListenAddresses {
		listen = append(listen, a.String())
	}
	if err := s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: cfg.ASN, RouterId: cfg.RouterID.String(), ListenPort: port, ListenAddresses: listen,
	}}); err != nil {
		s.srv.Stop()
		return nil, fmt.Errorf("bgp: start: %w", err)
	}
	// The speaker only originates: routes learned from one peer are never
	// passed on to another (a node is no transit between routers).
	if err := s.localOnly(ctx); err != nil {
		s.srv.Stop()
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.stopWatch = cancel
	if err := s.srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{OnPeerUpdate: s.onPeer}, server.WatchPeer()); err != nil {
		cancel()
		s.srv.Stop()
		return nil, fmt.Errorf("bgp: watch peers: %w", err)
	}
	if err := s.SetPeers(ctx, cfg.Peers); err != nil {
		_ = s.Close(false)
		return nil, err
	}
	return s, nil
}

// localOnly sets the export policy: local routes only.
func (s *Speaker) localOnly(ctx context.Context) error {
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: "ovnedge-local-only",
		Statements: []*api.Statement{{Name: "local",
			Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT}}}}}); err != nil {
		return fmt.Errorf("bgp: export policy: %w", err)
	}
	if err := s.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_EXPORT,
		Policies:      []*api.Policy{{Name: "ovnedge-local-only"}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}}); err != nil {
		return fmt.Errorf("bgp: export policy: %w", err)
	}
	return nil
}

// onPeer turns GoBGP's peer events into PeerStatus callbacks.
func (s *Speaker) onPeer(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	st := PeerStatus{Address: ev.Peer.Conf.NeighborAddress, ASN: ev.Peer.Conf.PeerASN,
		State: fsmState(ev.Peer.State.SessionState), Established: ev.Peer.State.SessionState == gobgp.BGP_FSM_ESTABLISHED}
	s.emu.Lock()
	if s.established == nil {
		s.established = map[netip.Addr]bool{}
	}
	if st.Established {
		s.established[st.Address] = true
	} else {
		delete(s.established, st.Address)
	}
	n := len(s.established)
	s.emu.Unlock()
	s.log.Info("bgp session", "peer", st.Address, "state", st.State, "established", n)
	if s.cfg.OnPeerState != nil {
		s.cfg.OnPeerState(st)
	}
}

func fsmState(st gobgp.FSMState) string {
	switch st {
	case gobgp.BGP_FSM_IDLE:
		return "idle"
	case gobgp.BGP_FSM_CONNECT:
		return "connect"
	case gobgp.BGP_FSM_ACTIVE:
		return "active"
	case gobgp.BGP_FSM_OPENSENT:
		return "opensent"
	case gobgp.BGP_FSM_OPENCONFIRM:
		return "openconfirm"
	case gobgp.BGP_FSM_ESTABLISHED:
		return "established"
	}
	return "unknown"
}

// SetPeers makes the speaker's neighbours exactly peers: new ones are
// added, missing ones deleted (with a notification), changed ones
// reconfigured. Sessions of unchanged peers are left alone.
func (s *Speaker) SetPeers(ctx context.Context, peers []Peer) error {
	want := map[netip.Addr]Peer{}
	for _, p := range peers {
		if err := p.validate(); err != nil {
			return err
		}
		want[p.Address] = p.withDefaults()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("bgp: speaker closed")
	}
	var errs []error
	for _, addr := range slices.SortedFunc(maps.Keys(s.peers), netip.Addr.Compare) {
		if _, ok := want[addr]; !ok {
			if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
				errs = append(errs, fmt.Errorf("bgp: delete peer %v: %w", addr, err))
				continue
			}
			delete(s.peers, addr)
			s.emu.Lock()
			delete(s.established, addr)
			s.emu.Unlock()
		}
	}
	for _, addr := range slices.SortedFunc(maps.Keys(want), netip.Addr.Compare) {
		p := want[addr]
		old, ok := s.peers[addr]
		switch {
		case !ok:
			if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: s.apiPeer(p)}); err != nil {
				errs = append(errs, fmt.Errorf("bgp: add peer %v: %w", addr, err))
				continue
			}
		case old != p:
			if _, err := s.srv.UpdatePeer(ctx, &api.UpdatePeerRequest{Peer: s.apiPeer(p)}); err != nil {
				errs = append(errs, fmt.Errorf("bgp: update peer %v: %w", addr, err))
				continue
			}
		}
		s.peers[addr] = p
	}
	return errors.Join(errs...)
}

// apiPeer is GoBGP's configuration of p (defaults applied).
func (s *Speaker) apiPeer(p Peer) *api.Peer {
	fam := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if p.Address.Is6() && !p.Address.Is4In6() {
		fam.Afi = api.Family_AFI_IP6
	}
	gr := s.cfg.GracefulRestart > 0 && !p.DisableGracefulRestart
	hold := uint64(p.HoldTime / time.Second)
	keepalive := max(hold/3, 1)
	if p.Keepalive > 0 {
		keepalive = max(uint64(p.Keepalive/time.Second), 1)
	}
	out := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.ASN, LocalAsn: p.LocalASN, AuthPassword: p.Password},
		Timers: &api.Timers{Config: &api.TimersConfig{HoldTime: hold, KeepaliveInterval: keepalive,
			ConnectRetry: uint64(max(p.ConnectRetry/time.Second, 1)),
			// After a reset (BFD down, a notification) try again within a
			// second, not GoBGP's default 30 s.
			IdleHoldTimeAfterReset: 1}},
		Transport: &api.Transport{RemotePort: uint32(p.Port)},
		AfiSafis: []*api.AfiSafi{{
			Config:            &api.AfiSafiConfig{Family: fam, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: gr}},
		}},
	}
	if p.LocalAddress.IsValid() {
		out.Transport.LocalAddress = p.LocalAddress.String()
	}
	if p.Multihop > 0 {
		out.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.Multihop)}
	}
	if gr {
		out.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(s.cfg.GracefulRestart / time.Second),
			LocalRestarting: s.cfg.Restarting, DeferralTime: uint32(max(s.cfg.GracefulRestart/time.Second, 1))}
	}
	if p.BFD.Enabled {
		out.Bfd = &api.BfdPeerConfig{Enabled: true, DesiredMinimumTxInterval: uint32(p.BFD.Interval / time.Microsecond),
			RequiredMinimumReceive: uint32(p.BFD.ReceiveInterval / time.Microsecond),
			DetectionMultiplier:    uint32(p.BFD.Multiplier)}
	}
	return out
}

// Announce makes the announced routes exactly prefixes: new prefixes are
// announced, the ones no longer listed withdrawn, in one batch each. It
// returns once GoBGP holds the change (sending to peers follows at once).
func (s *Speaker) Announce(prefixes []netip.Prefix) error {
	want := make(map[netip.Prefix]string, len(prefixes))
	for _, p := range prefixes {
		if !p.IsValid() {
			return errors.New("bgp: announce: invalid prefix")
		}
		p = p.Masked()
		want[p] = s.attrKey(p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("bgp: speaker closed")
	}
	var add, del []*apiutil.Path
	var addP, delP []netip.Prefix
	for p, key := range want {
		if old, ok := s.announced[p]; !ok || old != key {
			path, err := s.path(p, false)
			if err != nil {
				return err
			}
			add, addP = append(add, path), append(addP, p)
		}
	}
	for p := range s.announced {
		if _, ok := want[p]; !ok {
			path, err := s.path(p, true)
			if err != nil {
				return err
			}
			del, delP = append(del, path), append(delP, p)
		}
	}
	if len(del) > 0 {
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: del}); err != nil {
			return fmt.Errorf("bgp: withdraw %d prefixes: %w", len(del), err)
		}
		for _, p := range delP {
			delete(s.announced, p)
		}
		s.updates.Add(uint64(len(del)))
	}
	if len(add) > 0 {
		if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: add}); err != nil {
			return fmt.Errorf("bgp: announce %d prefixes: %w", len(add), err)
		}
		for _, p := range addP {
			s.announced[p] = want[p]
		}
		s.updates.Add(uint64(len(add)))
	}
	if len(add)+len(del) > 0 {
		s.log.Debug("bgp routes", "announced", len(add), "withdrawn", len(del), "total", len(s.announced))
	}
	return nil
}

// attrKey identifies the attributes of p's route, so a pool change
// re-announces it.
func (s *Speaker) attrKey(p netip.Prefix) string {
	pool := s.cfg.pool(p)
	if pool == nil {
		return ""
	}
	return fmt.Sprint(pool.Communities, pool.LocalPref)
}

// path is p's route: origin IGP, next-hop self (the unspecified address,
// which GoBGP replaces with the session's local address), the pool's
// communities and local preference.
func (s *Speaker) path(p netip.Prefix, withdraw bool) (*apiutil.Path, error) {
	nlri, err := gobgp.NewIPAddrPrefix(p)
	if err != nil {
		return nil, fmt.Errorf("bgp: prefix %v: %w", p, err)
	}
	attrs := []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(gobgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	family := gobgp.RF_IPv4_UC
	if p.Addr().Is4() {
		nh, err := gobgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
		if err != nil {
			return nil, fmt.Errorf("bgp: next hop: %w", err)
		}
		attrs = append(attrs, nh)
	} else {
		family = gobgp.RF_IPv6_UC
		mp, err := gobgp.NewPathAttributeMpReachNLRI(family, []gobgp.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
		if err != nil {
			return nil, fmt.Errorf("bgp: next hop: %w", err)
		}
		attrs = append(attrs, mp)
	}
	if pool := s.cfg.pool(p); pool != nil {
		if len(pool.Communities) > 0 {
			cs := make([]uint32, len(pool.Communities))
			for i, c := range pool.Communities {
				cs[i] = uint32(c)
			}
			attrs = append(attrs, gobgp.NewPathAttributeCommunities(cs))
		}
		if pool.LocalPref > 0 {
			attrs = append(attrs, gobgp.NewPathAttributeLocalPref(pool.LocalPref))
		}
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Attrs: attrs, Withdrawal: withdraw}, nil
}

// Announced returns the announced prefixes, sorted.
func (s *Speaker) Announced() []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Collect(maps.Keys(s.announced))
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return out
}

// Stats returns the speaker's counters.
func (s *Speaker) Stats() Stats {
	s.mu.Lock()
	n := len(s.announced)
	s.mu.Unlock()
	s.emu.Lock()
	sessions := len(s.established)
	s.emu.Unlock()
	return Stats{Announced: n, Updates: s.updates.Load(), Sessions: sessions}
}

// Peers returns the state of every session, by address.
func (s *Speaker) Peers(ctx context.Context) ([]PeerStatus, error) {
	var out []PeerStatus
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		if p.Conf == nil || p.State == nil {
			return
		}
		addr, _ := netip.ParseAddr(p.Conf.NeighborAddress)
		st := PeerStatus{Address: addr, ASN: p.Conf.PeerAsn,
			State:       sessionState(p.State.SessionState),
			Established: p.State.SessionState == api.PeerState_SESSION_STATE_ESTABLISHED}
		if p.Bfd != nil && p.Bfd.Enabled && p.State.BfdState != nil {
			st.BFD = bfdState(p.State.BfdState.SessionState)
		}
		for _, a := range p.AfiSafis {
			if a.State != nil {
				st.Advertised += a.State.Advertised
			}
		}
		out = append(out, st)
	})
	if err != nil {
		return nil, fmt.Errorf("bgp: list peers: %w", err)
	}
	slices.SortFunc(out, func(a, b PeerStatus) int { return a.Address.Compare(b.Address) })
	return out, nil
}

func sessionState(st api.PeerState_SessionState) string {
	switch st {
	case api.PeerState_SESSION_STATE_IDLE:
		return "idle"
	case api.PeerState_SESSION_STATE_CONNECT:
		return "connect"
	case api.PeerState_SESSION_STATE_ACTIVE:
		return "active"
	case api.PeerState_SESSION_STATE_OPENSENT:
		return "opensent"
	case api.PeerState_SESSION_STATE_OPENCONFIRM:
		return "openconfirm"
	case api.PeerState_SESSION_STATE_ESTABLISHED:
		return "established"
	}
	return "unknown"
}

func bfdState(st api.BfdSessionState) string {
	switch st {
	case api.BfdSessionState_BFD_SESSION_STATE_UP:
		return "up"
	case api.BfdSessionState_BFD_SESSION_STATE_DOWN:
		return "down"
	case api.BfdSessionState_BFD_SESSION_STATE_INIT:
		return "init"
	case api.BfdSessionState_BFD_SESSION_STATE_ADMIN_DOWN:
		return "admin_down"
	}
	return "unknown(" + strconv.Itoa(int(st)) + ")"
}

// Close stops the speaker. With graceful (and graceful restart
// configured) the sessions are dropped without a notification, so peers
// keep the routes for the restart time while a new speaker comes up;
// otherwise peers get a Cease and withdraw the routes at once.
func (s *Speaker) Close(graceful bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stopWatch()
	err := s.srv.StopBgp(context.Background(), &api.StopBgpRequest{AllowGracefulRestart: graceful && s.cfg.GracefulRestart > 0})
	// Stop closes the BFD socket; its own StopBgp then fails (already
	// stopped) and would log that as an error.
	s.lvl.Set(slog.LevelError + 4)
	s.srv.Stop()
	if err != nil {
		return fmt.Errorf("bgp: stop: %w", err)
	}
	return nil
}
