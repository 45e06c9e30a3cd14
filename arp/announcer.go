//go:build linux

package arp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
)

// nothing is a socket filter that passes no frame.
var nothing = []bpf.Instruction{bpf.RetConstant{Val: 0}}

// AnnouncerConfig configures an Announcer.
type AnnouncerConfig struct {
	// Interval and Duration are the repeat schedule after the first
	// announcement, as Config's (defaults DefaultInterval and
	// DefaultDuration); a Duration shorter than Interval sends once.
	Interval, Duration time.Duration
	Logger             *slog.Logger
}

// Announcer announces addresses the host's own kernel owns (and answers
// for) on a link, as the new owner of an egress IP on a host interface
// does: a gratuitous ARP request and reply for IPv4, an unsolicited
// neighbour advertisement with Override for IPv6, at once and then on
// the schedule, from the link's MAC. It answers nothing: the kernel
// does. It implements egress/hostnet's Announcer.
type Announcer struct {
	cfg    AnnouncerConfig
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	repeats map[announced]context.CancelFunc
}

// announced is an address announced on a link.
type announced struct {
	link string
	ip   netip.Addr
}

// NewAnnouncer returns an Announcer; Close stops its repeats.
func NewAnnouncer(cfg AnnouncerConfig) (*Announcer, error) {
	if cfg.Interval < 0 || cfg.Duration < 0 {
		return nil, fmt.Errorf("arp: announcer: negative interval or duration")
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Duration == 0 {
		cfg.Duration = DefaultDuration
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Announcer{cfg: cfg, ctx: ctx, cancel: cancel, repeats: map[announced]context.CancelFunc{}}, nil
}

// Announce sends the first announcement of ip on link before it returns
// and the repeats in the background. The socket is opened in the
// caller's network namespace (hostnet calls it on a thread that has
// entered the node's), bound to the link: the repeats need no namespace.
func (a *Announcer) Announce(link string, ip netip.Addr) error {
	if err := checkAddr(ip); err != nil {
		return fmt.Errorf("arp: announce on %s: %w", link, err)
	}
	ifi, err := interfaceByName(link)
	if err != nil {
		return fmt.Errorf("arp: announce %s: %w", ip, err)
	}
	proto := etherTypeARP
	if ip.Is6() {
		proto = int(ethernet.EtherTypeIPv6)
	}
	c, err := packet.Listen(ifi, packet.Raw, proto, nil)
	if err != nil {
		return fmt.Errorf("arp: announce %s: open socket on %s: %w", ip, link, err)
	}
	// Nothing is read from it: a filter that passes nothing keeps the
	// link's traffic from queueing on the socket.
	_ = c.SetBPF(mustAssemble(nothing))
	if err := sendAnnouncement(c, ifi, ip); err != nil {
		_ = c.Close()
		return fmt.Errorf("arp: announce %s on %s: %w", ip, link, err)
	}
	ctx, stop := context.WithCancel(a.ctx)
	key := announced{link, ip}
	a.mu.Lock()
	if prev := a.repeats[key]; prev != nil {
		prev()
	}
	a.repeats[key] = stop
	a.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer c.Close()
		defer stop()
		t := time.NewTicker(a.cfg.Interval)
		defer t.Stop()
		until := time.Now().Add(a.cfg.Duration)
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if now.After(until) {
					return
				}
				if err := sendAnnouncement(c, ifi, ip); err != nil {
					a.cfg.Logger.Debug("arp: repeat announcement", "interface", link, "addr", ip, "err", err)
					return
				}
			}
		}
	}()
	a.cfg.Logger.Debug("arp: announced", "interface", link, "addr", ip)
	return nil
}

// Withdraw stops the repeated announcements of ip on link: the host no
// longer owns it (hostnet calls it before it removes the address), and a
// late gratuitous ARP would point the link's hosts back at this node
// after another took the address over.
func (a *Announcer) Withdraw(link string, ip netip.Addr) {
	key := announced{link, ip}
	a.mu.Lock()
	defer a.mu.Unlock()
	if stop := a.repeats[key]; stop != nil {
		stop()
		delete(a.repeats, key)
	}
}

// Close stops the repeats and waits for them.
func (a *Announcer) Close() {
	a.cancel()
	a.wg.Wait()
}

// sendAnnouncement sends one announcement of ip from ifi's MAC on c.
func sendAnnouncement(c *packet.Conn, ifi *net.Interface, ip netip.Addr) error {
	if ip.Is4() {
		frames, err := gratuitousARP(ip, ifi.HardwareAddr)
		if err != nil {
			return err
		}
		for _, f := range frames {
			if _, err := c.WriteTo(f, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
				return err
			}
		}
		return nil
	}
	all := netip.IPv6LinkLocalAllNodes()
	frame, err := ndpFrame(unsolicitedNA(ip, ifi.HardwareAddr), ifi.HardwareAddr, nil, ip, all)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(frame, &packet.Addr{HardwareAddr: multicastMAC(all)}); err != nil {
		return fmt.Errorf("send unsolicited advertisement: %w", err)
	}
	return nil
}
