package arp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

// verdict is what the responder makes of one received frame.
type verdict int

const (
	// ignored: not an ARP request, malformed, sent by this interface, or
	// a gratuitous announcement; nothing is counted.
	ignored verdict = iota
	// foreign: a well-formed request for an address this node does not
	// own now.
	foreign
	// answer: a request for an owned address; the reply is to be sent.
	answer
)

// arpReply examines one received Ethernet frame. For an ARP request whose
// target IP owns reports true it returns the reply frame (sender = the
// target with mac, addressed to the requester, with the request's 802.1Q
// tags) and its destination hardware address. target is set for foreign
// and answer verdicts.
func arpReply(b []byte, mac net.HardwareAddr, owns func(netip.Addr) bool) (v verdict, target netip.Addr, reply []byte, dst net.HardwareAddr) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil || f.EtherType != ethernet.EtherTypeARP {
		return ignored, netip.Addr{}, nil, nil
	}
	if bytes.Equal(f.Source, mac) {
		return ignored, netip.Addr{}, nil, nil // our own frame, seen as outgoing
	}
	var req arp.Packet
	if err := req.UnmarshalBinary(f.Payload); err != nil {
		return ignored, netip.Addr{}, nil, nil
	}
	if req.Operation != arp.OperationRequest || req.HardwareType != 1 ||
		req.ProtocolType != uint16(ethernet.EtherTypeIPv4) || req.HardwareAddrLength != 6 ||
		!req.TargetIP.Is4() || !req.SenderIP.Is4() || req.SenderIP == req.TargetIP {
		return ignored, netip.Addr{}, nil, nil
	}
	if !owns(req.TargetIP) {
		return foreign, req.TargetIP, nil, nil
	}
	// The requester's hardware address is the one in the ARP payload
	// (RFC 826); the Ethernet source is the same for any sane sender.
	rep, err := arp.NewPacket(arp.OperationReply, mac, req.TargetIP, req.SenderHardwareAddr, req.SenderIP)
	if err != nil {
		return ignored, netip.Addr{}, nil, nil
	}
	out, err := marshalARP(rep, req.SenderHardwareAddr, mac, f.ServiceVLAN, f.VLAN)
	if err != nil {
		return ignored, netip.Addr{}, nil, nil
	}
	return answer, req.TargetIP, out, req.SenderHardwareAddr
}

// marshalARP wraps p in an Ethernet frame from src to dst with the given
// 802.1ad and 802.1Q tags (nil for none).
func marshalARP(p *arp.Packet, dst, src net.HardwareAddr, svlan, vlan *ethernet.VLAN) ([]byte, error) {
	pb, err := p.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("marshal ARP packet: %w", err)
	}
	f := ethernet.Frame{Destination: dst, Source: src, ServiceVLAN: svlan, VLAN: vlan, EtherType: ethernet.EtherTypeARP, Payload: pb}
	fb, err := f.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("marshal Ethernet frame: %w", err)
	}
	return fb, nil
}

// gratuitousARP returns the two broadcast frames that announce addr at
// mac: a request and a reply, both with sender = target = addr.
func gratuitousARP(addr netip.Addr, mac net.HardwareAddr) ([][]byte, error) {
	var frames [][]byte
	for _, op := range []arp.Operation{arp.OperationRequest, arp.OperationReply} {
		p, err := arp.NewPacket(op, mac, addr, ethernet.Broadcast, addr)
		if err != nil {
			return nil, fmt.Errorf("gratuitous ARP for %s: %w", addr, err)
		}
		b, err := marshalARP(p, ethernet.Broadcast, mac, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("gratuitous ARP for %s: %w", addr, err)
		}
		frames = append(frames, b)
	}
	return frames, nil
}

// ndpAnswer examines one received NDP message from src. For a neighbour
// solicitation whose target owns reports true it returns the solicited
// advertisement (Solicited and Override set, target link-layer address
// mac) and where to send it: the solicitor, or all nodes when it solicited
// from the unspecified address (duplicate address detection).
func ndpAnswer(m ndp.Message, src netip.Addr, mac net.HardwareAddr, owns func(netip.Addr) bool) (v verdict, target netip.Addr, na *ndp.NeighborAdvertisement, dst netip.Addr) {
	ns, ok := m.(*ndp.NeighborSolicitation)
	if !ok || !ns.TargetAddress.Is6() || ns.TargetAddress.Is4In6() {
		return ignored, netip.Addr{}, nil, netip.Addr{}
	}
	target = ns.TargetAddress.WithZone("")
	if !owns(target) {
		return foreign, target, nil, netip.Addr{}
	}
	na = &ndp.NeighborAdvertisement{
		Solicited:     true,
		Override:      true,
		TargetAddress: target,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac}},
	}
	dst = src
	if src.Unmap().IsUnspecified() {
		na.Solicited = false // RFC 4861 7.2.4: answer DAD to all nodes, unsolicited
		dst = netip.IPv6LinkLocalAllNodes()
	}
	return answer, target, na, dst
}

// unsolicitedNA returns the advertisement that announces addr at mac to
// all nodes, overriding their cached entries.
func unsolicitedNA(addr netip.Addr, mac net.HardwareAddr) *ndp.NeighborAdvertisement {
	return &ndp.NeighborAdvertisement{
		Override:      true,
		TargetAddress: addr,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac}},
	}
}

// IPv6 header fields the NDP frames use.
const (
	ipv6HeaderLen  = 40
	protoICMPv6    = 58
	ndpHopLimit    = 255 // RFC 4861: NDP messages never cross a router
	ethHeaderLen   = 14
	icmpTypeNS     = 135
	icmpTypeOffset = ethHeaderLen + ipv6HeaderLen // of an untagged frame
)

// solicitation is a neighbour solicitation received in an Ethernet frame.
type solicitation struct {
	srcMAC   net.HardwareAddr
	src, dst netip.Addr
	msg      ndp.Message
}

// parseNDP parses an untagged Ethernet frame carrying an IPv6 NDP message
// with hop limit 255 and a valid ICMPv6 checksum; it reports false for
// anything else.
func parseNDP(b []byte) (solicitation, bool) {
	if len(b) < icmpTypeOffset || ethernet.EtherType(binary.BigEndian.Uint16(b[12:14])) != ethernet.EtherTypeIPv6 {
		return solicitation{}, false
	}
	ip := b[ethHeaderLen:]
	plen := int(binary.BigEndian.Uint16(ip[4:6]))
	if ip[0]>>4 != 6 || ip[6] != protoICMPv6 || ip[7] != ndpHopLimit || len(ip) < ipv6HeaderLen+plen {
		return solicitation{}, false
	}
	src := netip.AddrFrom16([16]byte(ip[8:24]))
	dst := netip.AddrFrom16([16]byte(ip[24:40]))
	body := ip[ipv6HeaderLen : ipv6HeaderLen+plen]
	if icmpv6Checksum(src, dst, body) != 0 {
		return solicitation{}, false
	}
	m, err := ndp.ParseMessage(body)
	if err != nil {
		return solicitation{}, false
	}
	return solicitation{srcMAC: net.HardwareAddr(b[6:12]), src: src, dst: dst, msg: m}, true
}

// icmpv6Checksum returns the ones' complement checksum of body under the
// IPv6 pseudo-header: zero when body's own checksum field is right.
func icmpv6Checksum(src, dst netip.Addr, body []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			sum += uint32(binary.BigEndian.Uint16(b))
			b = b[2:]
		}
		if len(b) == 1 {
			sum += uint32(b[0]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	sum += uint32(len(body)) + protoICMPv6
	add(body)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// multicastMAC returns the Ethernet group address of an IPv6 multicast
// address (RFC 2464 7).
func multicastMAC(a netip.Addr) net.HardwareAddr {
	b := a.As16()
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// ndpFrame wraps m from src (at srcMAC) to dst in IPv6 and Ethernet, with
// hop limit 255 and the ICMPv6 checksum; the Ethernet destination is
// dstMAC, or dst's group address when dst is multicast.
func ndpFrame(m ndp.Message, srcMAC, dstMAC net.HardwareAddr, src, dst netip.Addr) ([]byte, error) {
	body, err := ndp.MarshalMessageChecksum(m, src, dst)
	if err != nil {
		return nil, fmt.Errorf("marshal %v: %w", m.Type(), err)
	}
	if dst.IsMulticast() {
		dstMAC = multicastMAC(dst)
	}
	b := make([]byte, icmpTypeOffset+len(body))
	copy(b[0:6], dstMAC)
	copy(b[6:12], srcMAC)
	binary.BigEndian.PutUint16(b[12:14], uint16(ethernet.EtherTypeIPv6))
	ip := b[ethHeaderLen:]
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(body)))
	ip[6] = protoICMPv6
	ip[7] = ndpHopLimit
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	copy(ip[ipv6HeaderLen:], body)
	return b, nil
}
