package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mdlayher/arp"

	"github.com/ovnedge/ovnedge/testbed"
)

// Arrival is one probe packet as the receiver saw it.
type Arrival struct {
	Seq  uint64
	At   time.Time
	From netip.Addr
}

// Stream sends a numbered UDP packet every Interval from a namespace to
// a receiver in another and records what arrives, with the source
// address each packet had on arrival: a packet-loss window (failover gap)
// and the egress address a host saw, measured from real packets.
type Stream struct {
	// Interval between packets (default 10 ms).
	Interval time.Duration

	mu       sync.Mutex
	arrivals []Arrival
	sent     uint64
	stop     context.CancelFunc
	done     sync.WaitGroup
}

// StartStream starts sending from src to dst:port (UDP) every interval,
// received in dstNS, until Stop.
func StartStream(src, dstNS *testbed.Netns, dst netip.AddrPort, interval time.Duration) (*Stream, error) {
	s := &Stream{Interval: interval}
	if s.Interval <= 0 {
		s.Interval = 10 * time.Millisecond
	}
	var rx, tx net.PacketConn
	if err := dstNS.Do(func() (err error) {
		rx, err = net.ListenPacket("udp", netip.AddrPortFrom(netip.IPv4Unspecified(), dst.Port()).String())
		return err
	}); err != nil {
		return nil, fmt.Errorf("stream receiver: %w", err)
	}
	if err := src.Do(func() (err error) { tx, err = net.ListenPacket("udp", ":0"); return err }); err != nil {
		rx.Close()
		return nil, fmt.Errorf("stream sender: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.done.Add(2)
	go func() {
		defer s.done.Done()
		buf := make([]byte, 64)
		for {
			n, from, err := rx.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 8 {
				continue
			}
			a, _ := netip.ParseAddrPort(from.String())
			s.mu.Lock()
			s.arrivals = append(s.arrivals, Arrival{Seq: binary.BigEndian.Uint64(buf), At: time.Now(), From: a.Addr().Unmap()})
			s.mu.Unlock()
		}
	}()
	go func() {
		defer s.done.Done()
		defer rx.Close()
		defer tx.Close()
		t := time.NewTicker(s.Interval)
		defer t.Stop()
		to := net.UDPAddrFromAddrPort(dst)
		buf := make([]byte, 64)
		for seq := uint64(1); ; seq++ {
			binary.BigEndian.PutUint64(buf, seq)
			_, _ = tx.WriteTo(buf, to)
			s.mu.Lock()
			s.sent = seq
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				time.Sleep(200 * time.Millisecond) // the last packets' way
				return
			case <-t.C:
			}
		}
	}()
	return s, nil
}

// Stop stops sending and receiving.
func (s *Stream) Stop() {
	s.stop()
	s.done.Wait()
}

// Arrivals returns what arrived so far, in order of arrival.
func (s *Stream) Arrivals() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Arrival(nil), s.arrivals...)
}

// Sent is the number of packets sent so far.
func (s *Stream) Sent() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// Sources counts arrivals by source address.
func (s *Stream) Sources() map[netip.Addr]int {
	out := map[netip.Addr]int{}
	for _, a := range s.Arrivals() {
		out[a.From]++
	}
	return out
}

// LastFrom returns the last arrival's source address.
func (s *Stream) LastFrom() netip.Addr {
	as := s.Arrivals()
	if len(as) == 0 {
		return netip.Addr{}
	}
	return as[len(as)-1].From
}

// Gap is the longest time between two consecutive arrivals after since
// (the loss window of a failover that happened at since), and the
// number of sequence numbers missing in the whole stream.
func (s *Stream) Gap(since time.Time) (gap time.Duration, lost uint64) {
	as := s.Arrivals()
	seqs := make([]uint64, 0, len(as))
	var prev time.Time
	for _, a := range as {
		seqs = append(seqs, a.Seq)
		if !a.At.Before(since) && !prev.IsZero() && a.At.Sub(prev) > gap {
			gap = a.At.Sub(prev)
		}
		prev = a.At
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	if len(seqs) > 0 {
		lost = seqs[len(seqs)-1] - uint64(len(seqs))
	}
	return gap, lost
}

// ArrivedAfter returns nil once a packet sent after sequence number seq
// (see Sent) has arrived from src (from anywhere when src is the zero
// Addr), and an error saying what arrived otherwise.
func (s *Stream) ArrivedAfter(seq uint64, src netip.Addr) error {
	for _, a := range s.Arrivals() {
		if a.Seq > seq && (!src.IsValid() || a.From == src) {
			return nil
		}
	}
	return fmt.Errorf("no packet sent after #%d arrived from %v (last from %v)", seq, src, s.LastFrom())
}

// ARPReply is one ARP reply for the watched address.
type ARPReply struct {
	At  time.Time
	MAC string
	// Request is the number of the last request sent before it.
	Request int
}

// ARPWatch asks for an address every interval (a broadcast ARP request
// from a namespace's interface) and records every reply: which MACs
// answered, when, and to which request. Overlap tells whether two nodes
// ever answered at once.
type ARPWatch struct {
	mu      sync.Mutex
	replies []ARPReply
	sent    int
	stop    context.CancelFunc
	done    sync.WaitGroup
}

// StartARPWatch starts asking for ip on ns's interface iface.
func StartARPWatch(ns *testbed.Netns, iface string, ip netip.Addr, interval time.Duration) (*ARPWatch, error) {
	var c *arp.Client
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		c, err = arp.Dial(ifi)
		return err
	}); err != nil {
		return nil, fmt.Errorf("arp watch: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &ARPWatch{stop: cancel}
	w.done.Add(2)
	go func() {
		defer w.done.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			w.mu.Lock()
			w.sent++
			w.mu.Unlock()
			_ = c.Request(ip)
			select {
			case <-ctx.Done():
				c.Close()
				return
			case <-t.C:
			}
		}
	}()
	go func() {
		defer w.done.Done()
		for {
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			p, _, err := c.Read()
			if ctx.Err() != nil {
				return
			}
			if err != nil || p.Operation != arp.OperationReply || p.SenderIP != ip {
				continue
			}
			w.mu.Lock()
			w.replies = append(w.replies, ARPReply{At: time.Now(), MAC: p.SenderHardwareAddr.String(), Request: w.sent})
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// Stop stops asking.
func (w *ARPWatch) Stop() { w.stop(); w.done.Wait() }

// Replies returns the replies so far, in arrival order.
func (w *ARPWatch) Replies() []ARPReply {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.replies)
}

// Owners returns the MACs that answered, in the order they took over.
func (w *ARPWatch) Owners() []string {
	var out []string
	for _, r := range w.Replies() {
		if len(out) == 0 || out[len(out)-1] != r.MAC {
			out = append(out, r.MAC)
		}
	}
	return out
}

// Overlap returns an error when two MACs answered one request, or a MAC
// answered again after another had taken over: at some moment two nodes
// answered for the address.
func (w *ARPWatch) Overlap() error {
	if err := w.Simultaneous(); err != nil {
		return err
	}
	owners := w.Owners()
	seen := map[string]bool{}
	for _, m := range owners {
		if seen[m] {
			return fmt.Errorf("answers went back and forth: %v", owners)
		}
		seen[m] = true
	}
	return nil
}

// Simultaneous returns an error when two MACs answered one request: an
// address that may move back (an L2 VIP returns to its elected owner)
// must still never have two owners at once.
func (w *ARPWatch) Simultaneous() error {
	replies := w.Replies()
	byReq := map[int]string{}
	first, twice := -1, 0
	for i, r := range replies {
		if m, ok := byReq[r.Request]; ok && m != r.MAC {
			twice++
			if first < 0 {
				first = i
			}
		}
		byReq[r.Request] = r.MAC
	}
	if first < 0 {
		return nil
	}
	return fmt.Errorf("%d requests answered by two MACs, the first %d: %s", twice, replies[first].Request,
		replyTimeline(replies[max(first-4, 0):min(first+5, len(replies))]))
}

// replyTimeline is replies as "request MAC +ms" from the first's time.
func replyTimeline(replies []ARPReply) string {
	var parts []string
	for _, r := range replies {
		parts = append(parts, fmt.Sprintf("#%d %s +%dms", r.Request, r.MAC, r.At.Sub(replies[0].At).Milliseconds()))
	}
	return strings.Join(parts, ", ")
}
