//go:build linux

package arp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// etherTypeARP is the protocol the ARP socket is bound to.
const etherTypeARP = int(ethernet.EtherTypeARP)

// nsFilter passes only ICMPv6 neighbour solicitations with hop limit 255
// (without extension headers, as NDP sends them) to the IPv6 socket.
var nsFilter = mustAssemble([]bpf.Instruction{
	bpf.LoadAbsolute{Off: ethHeaderLen + 6, Size: 1}, // next header
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: protoICMPv6, SkipTrue: 5},
	bpf.LoadAbsolute{Off: ethHeaderLen + 7, Size: 1}, // hop limit
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ndpHopLimit, SkipTrue: 3},
	bpf.LoadAbsolute{Off: icmpTypeOffset, Size: 1}, // ICMPv6 type
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmpTypeNS, SkipTrue: 1},
	bpf.RetConstant{Val: 0xffff},
	bpf.RetConstant{Val: 0},
})

// mustAssemble assembles a constant BPF program.
func mustAssemble(prog []bpf.Instruction) []bpf.RawInstruction {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		panic(fmt.Sprintf("arp: assemble BPF filter: %v", err)) // a bug in the constant program
	}
	return raw
}

// attachment is a Responder bound to one incarnation of its interface.
// Both protocols use raw AF_PACKET sockets bound to the interface's index:
// ARP then needs no IPv4 address on the link (arp.Dial refuses such a
// link), NDP sees unicast solicitations for addresses the kernel does not
// own (reachability probes) as well as multicast ones, and nothing depends
// on the namespace of the thread that sends. Advertisements come from the
// target address itself, as the Linux kernel sends them for its own
// addresses, so no link-local address is needed either. A UDP socket holds the
// solicited-node group memberships, so the kernel programs the NIC filter
// and sends MLD reports for snooping switches. Each reader takes what is
// queued on its socket a batch at a time and sends the batch's replies
// with one system call (batch), so a flood costs far fewer than two
// system calls a request.
type attachment struct {
	r    *Responder
	ifi  *net.Interface
	arpc *packet.Conn
	ndpc *packet.Conn     // IPv6 neighbour solicitations
	grp  *ipv6.PacketConn // nil when IPv6 is disabled on the link

	mu      sync.Mutex
	groups  map[netip.Addr]bool // solicited-node groups joined
	pending []netip.Addr        // taken over, to announce at once
	wake    chan struct{}       // signals pending (capacity 1)
	errc    chan error          // a reader's fatal error (capacity 2)
	stop    chan struct{}       // closed by close
	wg      sync.WaitGroup      // the goroutines serve started
}

// attach opens the sockets on the interface as it is now and registers
// the attachment with r; it runs on Run's goroutine.
func attach(r *Responder) (*attachment, error) {
	ifi, err := interfaceByName(r.cfg.Interface)
	if err != nil {
		return nil, err
	}
	arpc, err := packet.Listen(ifi, packet.Raw, etherTypeARP, nil)
	if err != nil {
		return nil, fmt.Errorf("open ARP socket on %s: %w", ifi.Name, err)
	}
	ndpc, err := packet.Listen(ifi, packet.Raw, int(ethernet.EtherTypeIPv6), &packet.Config{Filter: nsFilter})
	if err != nil {
		_ = arpc.Close() // the error reported is the one above
		return nil, fmt.Errorf("open NDP socket on %s: %w", ifi.Name, err)
	}
	for _, c := range []*packet.Conn{arpc, ndpc} {
		if err := ignoreOutgoing(c); err != nil {
			r.log.Debug("arp: own frames reach the sockets (readers drop them)", "err", err)
		}
	}
	a := &attachment{
		r:      r,
		ifi:    ifi,
		arpc:   arpc,
		ndpc:   ndpc,
		groups: map[netip.Addr]bool{},
		wake:   make(chan struct{}, 1),
		errc:   make(chan error, 2),
		stop:   make(chan struct{}),
	}
	if c, err := net.ListenPacket("udp6", "[::]:0"); err != nil {
		r.log.Warn("arp: no IPv6 socket for multicast groups", "err", err)
	} else {
		a.grp = ipv6.NewPacketConn(c)
	}
	r.mu.Lock()
	r.att = a
	set := *r.owned.Load()
	a.mu.Lock()
	a.syncGroups(set)
	for addr := range set {
		a.pending = append(a.pending, addr) // (re)announce what we own
	}
	a.mu.Unlock()
	r.mu.Unlock()
	a.signal()
	return a, nil
}

// ignoreOutgoing stops c receiving the frames this host sends (the
// responder's own replies and announcements): no wake-up for each of them.
// Kernels before 4.20 lack the option; the readers drop such frames by
// their source address anyway.
func ignoreOutgoing(c *packet.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	}); err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("set PACKET_IGNORE_OUTGOING: %w", serr)
	}
	return nil
}

// ownedChanged joins and leaves solicited-node groups for set and
// schedules the announcement of added; r.mu is held.
func (a *attachment) ownedChanged(set ownedSet, added []netip.Addr) {
	a.mu.Lock()
	a.syncGroups(set)
	a.pending = append(a.pending, added...)
	a.mu.Unlock()
	a.signal()
}

// syncGroups makes the joined solicited-node groups those of the IPv6
// addresses in set; a.mu is held.
func (a *attachment) syncGroups(set ownedSet) {
	if a.grp == nil {
		return
	}
	want := map[netip.Addr]bool{}
	for addr := range set {
		if addr.Is6() {
			g, err := ndp.SolicitedNodeMulticast(addr)
			if err == nil {
				want[g] = true
			}
		}
	}
	for g := range want {
		if a.groups[g] {
			continue
		}
		if err := a.grp.JoinGroup(a.ifi, &net.UDPAddr{IP: g.AsSlice()}); err != nil {
			a.r.log.Warn("arp: join solicited-node group", "group", g, "err", err)
			continue
		}
		a.groups[g] = true
	}
	for g := range a.groups {
		if want[g] {
			continue
		}
		if err := a.grp.LeaveGroup(a.ifi, &net.UDPAddr{IP: g.AsSlice()}); err != nil {
			a.r.log.Warn("arp: leave solicited-node group", "group", g, "err", err)
		}
		delete(a.groups, g)
	}
}

// signal wakes the announcer.
func (a *attachment) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// serve answers until ctx is done (nil) or the interface vanishes, is
// replaced, or a socket fails (the reason).
func (a *attachment) serve(ctx context.Context) error {
	a.wg.Add(3)
	go a.readARP()
	go a.readNDP()
	go a.announce()
	t := time.NewTicker(a.r.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-a.errc:
			return err
		case <-t.C:
			ifi, err := interfaceByName(a.ifi.Name)
			if err != nil {
				return fmt.Errorf("interface gone or down: %w", err)
			}
			if ifi.Index != a.ifi.Index || ifi.HardwareAddr.String() != a.ifi.HardwareAddr.String() {
				return fmt.Errorf("interface replaced (ifindex %d -> %d, mac %s -> %s)",
					a.ifi.Index, ifi.Index, a.ifi.HardwareAddr, ifi.HardwareAddr)
			}
		}
	}
}

// close stops the goroutines and closes the sockets.
func (a *attachment) close() {
	close(a.stop)
	// Closing unblocks the readers; there is nothing useful to do on error.
	_ = a.arpc.Close()
	_ = a.ndpc.Close()
	if a.grp != nil {
		_ = a.grp.Close()
	}
	a.wg.Wait()
}

// stopped reports whether close has begun.
func (a *attachment) stopped() bool {
	select {
	case <-a.stop:
		return true
	default:
		return false
	}
}

// fail reports a reader's fatal error to serve.
func (a *attachment) fail(err error) {
	select {
	case a.errc <- err:
	default:
	}
}

// readARP answers ARP requests until the socket is closed or fails.
func (a *attachment) readARP() {
	mac := a.ifi.HardwareAddr
	owns := func(addr netip.Addr) bool { _, ok := a.r.owns(addr); return ok }
	a.answerFrames(a.arpc, etherTypeARP, "ARP", func(f []byte) ([]byte, net.HardwareAddr, netip.Addr, bool) {
		v, target, reply, dst := arpReply(f, mac, owns)
		return reply, dst, target, v == answer
	})
}

// readNDP answers neighbour solicitations until the socket is closed or
// fails.
func (a *attachment) readNDP() {
	mac := a.ifi.HardwareAddr
	owns := func(addr netip.Addr) bool { _, ok := a.r.owns(addr); return ok }
	a.answerFrames(a.ndpc, int(ethernet.EtherTypeIPv6), "NDP", func(f []byte) ([]byte, net.HardwareAddr, netip.Addr, bool) {
		s, ok := parseNDP(f)
		if !ok || bytes.Equal(s.srcMAC, mac) {
			return nil, nil, netip.Addr{}, false
		}
		v, target, na, dst := ndpAnswer(s.msg, s.src, mac, owns)
		if v != answer {
			return nil, nil, netip.Addr{}, false
		}
		frame, err := ndpFrame(na, mac, s.srcMAC, target, dst)
		if err != nil {
			a.r.log.Debug("arp: build neighbour advertisement", "addr", target, "err", err)
			return nil, nil, netip.Addr{}, false
		}
		return frame, frame[0:6], target, true
	})
}

// answerFrames reads the frames arriving on c (bound to the Ethernet
// protocol proto) a batch at a time, asks answer for each one's reply,
// its Ethernet destination and the owned address it answers for, and
// sends the batch's replies together; until c is closed or fails.
func (a *attachment) answerFrames(c *packet.Conn, proto int, what string, answer func(frame []byte) (reply []byte, dst net.HardwareAddr, target netip.Addr, ok bool)) {
	defer a.wg.Done()
	b, err := newBatch(c, a.ifi.Index, proto)
	if err != nil {
		a.fail(fmt.Errorf("%s socket: %w", what, err))
		return
	}
	var credit [batchSize]*counters // of the queued replies
	for {
		n, err := b.read()
		if err != nil {
			if !a.stopped() {
				a.fail(fmt.Errorf("read %s socket: %w", what, err))
			}
			return
		}
		for i := range n {
			reply, dst, target, ok := answer(b.frame(i))
			if !ok {
				continue
			}
			cnt, ok := a.r.owns(target)
			if !ok {
				continue // released between the check and now
			}
			cnt.seen.Add(1)
			if b.queue(reply, dst) {
				credit[b.queued-1] = cnt
			}
		}
		queued := b.queued
		sent, err := b.flush()
		for _, cnt := range credit[:sent] {
			cnt.replied.Add(1)
		}
		if err != nil {
			a.r.log.Debug("arp: send replies", "protocol", what, "sent", sent, "dropped", queued-sent, "err", err)
		}
		clear(credit[:queued])
	}
}

// schedule is when an address is next announced, and until when.
type schedule struct{ next, until time.Time }

// announce sends the gratuitous announcements of taken-over addresses:
// at once, then every Interval until Duration has passed, as long as the
// address stays owned.
func (a *attachment) announce() {
	defer a.wg.Done()
	plan := map[netip.Addr]schedule{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-a.wake:
		case <-timer.C:
		}
		now := time.Now()
		a.mu.Lock()
		for _, addr := range a.pending {
			plan[addr] = schedule{next: now, until: now.Add(a.r.cfg.Duration)}
		}
		a.pending = a.pending[:0]
		a.mu.Unlock()
		var next time.Time
		for addr, s := range plan {
			c, ok := a.r.owns(addr)
			if !ok {
				delete(plan, addr)
				continue
			}
			if !s.next.After(now) {
				a.sendGratuitous(addr, c)
				s.next = s.next.Add(a.r.cfg.Interval)
				if s.next.After(s.until) {
					delete(plan, addr)
					continue
				}
				plan[addr] = s
			}
			if next.IsZero() || s.next.Before(next) {
				next = s.next
			}
		}
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
	}
}

// sendGratuitous announces addr once: a gratuitous ARP request and reply
// for IPv4, an unsolicited advertisement with Override for IPv6.
func (a *attachment) sendGratuitous(addr netip.Addr, c *counters) {
	if addr.Is4() {
		frames, err := gratuitousARP(addr, a.ifi.HardwareAddr)
		if err != nil {
			a.r.log.Warn("arp: build gratuitous ARP", "err", err)
			return
		}
		for _, f := range frames {
			if _, err := a.arpc.WriteTo(f, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
				if !a.stopped() {
					a.r.log.Warn("arp: send gratuitous ARP", "addr", addr, "err", err)
				}
				return
			}
			c.gratuitous.Add(1)
		}
		return
	}
	all := netip.IPv6LinkLocalAllNodes()
	frame, err := ndpFrame(unsolicitedNA(addr, a.ifi.HardwareAddr), a.ifi.HardwareAddr, nil, addr, all)
	if err == nil {
		_, err = a.ndpc.WriteTo(frame, &packet.Addr{HardwareAddr: multicastMAC(all)})
	}
	if err != nil {
		if !a.stopped() {
			a.r.log.Warn("arp: send unsolicited advertisement", "addr", addr, "err", err)
		}
		return
	}
	c.gratuitous.Add(1)
}
