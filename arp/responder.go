package arp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	DefaultInterval = 1100 * time.Millisecond
	DefaultDuration = 5 * time.Second
	DefaultPoll     = 500 * time.Millisecond
)

// Config configures a Responder.
type Config struct {
	// Interface is the name of the link to answer on, e.g. "br-ex". It
	// needs no IPv4 address of its own.
	Interface string
	// Interval is the time between gratuitous announcements after a
	// takeover; zero means DefaultInterval.
	Interval time.Duration
	// Duration is how long announcements repeat after a takeover (the
	// first goes out at once); zero means DefaultDuration.
	Duration time.Duration
	// Poll is how often Run checks that the interface is still the same
	// link, and looks for it while it is missing; zero means DefaultPoll.
	Poll time.Duration
	// Logger receives the responder's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Stats counts what a Responder did for one address while it owned it.
type Stats struct {
	// RequestsSeen counts ARP requests and neighbour solicitations for it.
	RequestsSeen uint64
	// RepliesSent counts ARP replies and solicited advertisements sent.
	RepliesSent uint64
	// GratuitousSent counts gratuitous ARP frames (a request and a reply
	// per round) and unsolicited advertisements sent.
	GratuitousSent uint64
}

// counters are the live Stats of one address.
type counters struct {
	seen, replied, gratuitous atomic.Uint64
}

// ownedSet maps each owned address to its counters; a set is never
// changed once published, it is replaced.
type ownedSet map[netip.Addr]*counters

// Responder answers ARP requests and IPv6 neighbour solicitations for the
// addresses it owns on one interface, and announces an address
// gratuitously when it takes it over. Its methods are safe for concurrent
// use; the set of owned addresses changes at run time without reopening a
// socket.
type Responder struct {
	cfg Config
	log *slog.Logger

	owned atomic.Pointer[ownedSet] // read for every received frame

	mu      sync.Mutex
	stats   map[netip.Addr]*counters // every address ever owned
	att     *attachment              // nil while detached
	running bool
}

// New returns a Responder for cfg.Interface owning no address. Run makes
// it answer.
func New(cfg Config) (*Responder, error) {
	if cfg.Interface == "" {
		return nil, errors.New("arp: config: empty interface name")
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"interval", &cfg.Interval, DefaultInterval}, {"duration", &cfg.Duration, DefaultDuration}, {"poll", &cfg.Poll, DefaultPoll}} {
		switch {
		case *d.v < 0:
			return nil, fmt.Errorf("arp: config for %s: negative %s %v", cfg.Interface, d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Responder{
		cfg:   cfg,
		log:   cfg.Logger.With("interface", cfg.Interface),
		stats: map[netip.Addr]*counters{},
	}
	r.owned.Store(&ownedSet{})
	return r, nil
}

// Interface returns the name of the interface r answers on.
func (r *Responder) Interface() string { return r.cfg.Interface }

// checkAddr rejects what cannot be answered for on a link.
func checkAddr(a netip.Addr) error {
	switch {
	case !a.IsValid():
		return errors.New("invalid address")
	case a.Zone() != "":
		return fmt.Errorf("address %s has a zone", a)
	case a.Is4In6():
		return fmt.Errorf("address %s is IPv4-mapped; use the IPv4 form", a)
	case a.IsUnspecified(), a.IsMulticast(), a.IsLoopback(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("address %s cannot be owned on a link", a)
	}
	return nil
}

// SetAddresses makes addrs the owned set: addresses not in it stop being
// answered at once, new ones are announced at once and then on the
// schedule. Invalid input leaves the set unchanged.
func (r *Responder) SetAddresses(addrs []netip.Addr) error {
	next := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		if err := checkAddr(a); err != nil {
			return fmt.Errorf("arp: set addresses on %s: %w", r.cfg.Interface, err)
		}
		next[a] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.apply(next)
	return nil
}

// Add makes r own addr too.
func (r *Responder) Add(addr netip.Addr) error {
	if err := checkAddr(addr); err != nil {
		return fmt.Errorf("arp: add address on %s: %w", r.cfg.Interface, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.current()
	next[addr] = true
	r.apply(next)
	return nil
}

// Remove stops r answering for addr at once.
func (r *Responder) Remove(addr netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.current()
	delete(next, addr)
	r.apply(next)
}

// Addresses returns the owned addresses, sorted.
func (r *Responder) Addresses() []netip.Addr {
	return slices.SortedFunc(maps.Keys(*r.owned.Load()), netip.Addr.Compare)
}

// Stats returns the counters of every address r has owned since New.
func (r *Responder) Stats() map[netip.Addr]Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[netip.Addr]Stats, len(r.stats))
	for a, c := range r.stats {
		out[a] = Stats{RequestsSeen: c.seen.Load(), RepliesSent: c.replied.Load(), GratuitousSent: c.gratuitous.Load()}
	}
	return out
}

// current returns a copy of the owned set as a set of addresses; r.mu is
// held.
func (r *Responder) current() map[netip.Addr]bool {
	cur := *r.owned.Load()
	out := make(map[netip.Addr]bool, len(cur))
	for a := range cur {
		out[a] = true
	}
	return out
}

// apply publishes next as the owned set and tells the attachment which
// addresses were taken over; r.mu is held.
func (r *Responder) apply(next map[netip.Addr]bool) {
	cur := *r.owned.Load()
	set := make(ownedSet, len(next))
	var added []netip.Addr
	for a := range next {
		c := r.stats[a]
		if c == nil {
			c = &counters{}
			r.stats[a] = c
		}
		set[a] = c
		if cur[a] == nil {
			added = append(added, a)
		}
	}
	r.owned.Store(&set)
	for a := range cur {
		if !next[a] {
			r.log.Info("arp: released address", "addr", a)
		}
	}
	for _, a := range added {
		r.log.Info("arp: took over address", "addr", a)
	}
	if r.att != nil {
		r.att.ownedChanged(set, added)
	}
}

// owns reports whether addr is in the owned set, and its counters.
func (r *Responder) owns(addr netip.Addr) (*counters, bool) {
	c, ok := (*r.owned.Load())[addr]
	return c, ok
}

// Run attaches to the interface and answers until ctx is done, then
// returns nil. While the interface is missing it waits for it; when the
// interface vanishes or is replaced it reattaches and announces the owned
// addresses again. All socket and interface look-ups happen on the
// calling goroutine, so a caller may lock it to an OS thread inside
// another network namespace. Run must not be called twice at once.
func (r *Responder) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return fmt.Errorf("arp: responder for %s is already running", r.cfg.Interface)
	}
	r.running = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running = false
		r.mu.Unlock()
	}()

	waiting := false
	for {
		a, err := attach(r)
		if errors.Is(err, errors.ErrUnsupported) {
			return err
		}
		if err != nil {
			if !waiting {
				r.log.Warn("arp: cannot attach, retrying", "err", err)
				waiting = true
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(r.cfg.Poll):
			}
			continue
		}
		waiting = false
		r.log.Info("arp: attached", "ifindex", a.ifi.Index, "mac", a.ifi.HardwareAddr.String())
		err = a.serve(ctx)
		r.mu.Lock()
		r.att = nil
		r.mu.Unlock()
		a.close()
		if ctx.Err() != nil {
			return nil
		}
		r.log.Warn("arp: detached, reattaching", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.cfg.Poll):
		}
	}
}

// interfaceByName looks the interface up and checks that it is an
// Ethernet link and up (a packet socket on a down link fails at once).
func interfaceByName(name string) (*net.Interface, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("look up interface %s: %w", name, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("interface %s has no Ethernet address (%q)", name, ifi.HardwareAddr)
	}
	if ifi.Flags&net.FlagUp == 0 {
		return nil, fmt.Errorf("interface %s is down", name)
	}
	return ifi, nil
}
