package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/ovnedge/ovnedge/internal/testbed"
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
