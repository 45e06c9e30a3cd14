package arp

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

var (
	ourMAC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	theirMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	theirIP  = netip.MustParseAddr("192.0.2.1")
)

func ownsOnly(addrs ...netip.Addr) func(netip.Addr) bool {
	return func(a netip.Addr) bool { return slices.Contains(addrs, a) }
}

// arpFrame builds an Ethernet frame from src carrying p, with an optional
// 802.1Q tag.
func arpFrame(t *testing.T, p *arp.Packet, src net.HardwareAddr, vlan *ethernet.VLAN) []byte {
	t.Helper()
	b, err := marshalARP(p, ethernet.Broadcast, src, nil, vlan)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustPacket(t testing.TB, op arp.Operation, sender netip.Addr, target netip.Addr) *arp.Packet {
	t.Helper()
	p, err := arp.NewPacket(op, theirMAC, sender, ethernet.Broadcast, target)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestARPReply(t *testing.T) {
	request := arpFrame(t, mustPacket(t, arp.OperationRequest, theirIP, vip4), theirMAC, nil)
	nonEthernet := slices.Clone(request)
	nonEthernet[15] = 6 // hardware type IEEE 802
	ipv6Proto := slices.Clone(request)
	ipv6Proto[16], ipv6Proto[17] = 0x86, 0xdd
	ipPayload := slices.Clone(request)
	ipPayload[12], ipPayload[13] = 0x08, 0x00
	for _, tc := range []struct {
		name   string
		frame  []byte
		want   verdict
		target netip.Addr
	}{
		{"request for an owned address", request, answer, vip4},
		{"request for a foreign address", arpFrame(t, mustPacket(t, arp.OperationRequest, theirIP, netip.MustParseAddr("192.0.2.99")), theirMAC, nil), foreign, netip.MustParseAddr("192.0.2.99")},
		{"probe from 0.0.0.0 (RFC 5227) is defended", arpFrame(t, mustPacket(t, arp.OperationRequest, netip.IPv4Unspecified(), vip4), theirMAC, nil), answer, vip4},
		{"reply", arpFrame(t, mustPacket(t, arp.OperationReply, theirIP, vip4), theirMAC, nil), ignored, netip.Addr{}},
		{"gratuitous request", arpFrame(t, mustPacket(t, arp.OperationRequest, vip4, vip4), theirMAC, nil), ignored, netip.Addr{}},
		{"our own request", arpFrame(t, mustPacket(t, arp.OperationRequest, theirIP, vip4), ourMAC, nil), ignored, netip.Addr{}},
		{"empty", nil, ignored, netip.Addr{}},
		{"Ethernet header only", request[:14], ignored, netip.Addr{}},
		{"truncated ARP payload", request[:30], ignored, netip.Addr{}},
		{"huge address lengths", append(slices.Clone(request[:18]), 0xff, 0xff, 0, 1), ignored, netip.Addr{}},
		{"not Ethernet hardware", nonEthernet, ignored, netip.Addr{}},
		{"not IPv4 protocol", ipv6Proto, ignored, netip.Addr{}},
		{"not an ARP frame", ipPayload, ignored, netip.Addr{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, target, reply, dst := arpReply(tc.frame, ourMAC, ownsOnly(vip4))
			if v != tc.want || target != tc.target {
				t.Fatalf("verdict %v target %v, want %v %v", v, target, tc.want, tc.target)
			}
			if v != answer {
				if reply != nil {
					t.Errorf("reply without an answer verdict")
				}
				return
			}
			if !bytes.Equal(dst, theirMAC) {
				t.Errorf("reply to %s, want %s", dst, theirMAC)
			}
			var f ethernet.Frame
			if err := f.UnmarshalBinary(reply); err != nil {
				t.Fatal(err)
			}
			var p arp.Packet
			if err := p.UnmarshalBinary(f.Payload); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(f.Destination, theirMAC) || !bytes.Equal(f.Source, ourMAC) || p.Operation != arp.OperationReply ||
				p.SenderIP != vip4 || !bytes.Equal(p.SenderHardwareAddr, ourMAC) || !bytes.Equal(p.TargetHardwareAddr, theirMAC) {
				t.Errorf("reply %+v in frame %s -> %s", p, f.Source, f.Destination)
			}
		})
	}
}

func TestARPReplyKeepsVLAN(t *testing.T) {
	vlan := &ethernet.VLAN{ID: 42}
	req := arpFrame(t, mustPacket(t, arp.OperationRequest, theirIP, vip4), theirMAC, vlan)
	v, _, reply, _ := arpReply(req, ourMAC, ownsOnly(vip4))
	if v != answer {
		t.Fatalf("verdict %v", v)
	}
	var f ethernet.Frame
	if err := f.UnmarshalBinary(reply); err != nil {
		t.Fatal(err)
	}
	if f.VLAN == nil || f.VLAN.ID != 42 {
		t.Errorf("reply VLAN %+v, want ID 42", f.VLAN)
	}
}

func TestGratuitousARP(t *testing.T) {
	frames, err := gratuitousARP(vip4, ourMAC)
	if err != nil {
		t.Fatal(err)
	}
	var ops []arp.Operation
	for _, b := range frames {
		var f ethernet.Frame
		if err := f.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		var p arp.Packet
		if err := p.UnmarshalBinary(f.Payload); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.Destination, ethernet.Broadcast) || p.SenderIP != vip4 || p.TargetIP != vip4 || !bytes.Equal(p.SenderHardwareAddr, ourMAC) {
			t.Errorf("gratuitous %v: %+v to %s", p.Operation, p, f.Destination)
		}
		ops = append(ops, p.Operation)
	}
	if want := []arp.Operation{arp.OperationRequest, arp.OperationReply}; !slices.Equal(ops, want) {
		t.Errorf("operations %v, want %v", ops, want)
	}
	if _, err := gratuitousARP(vip6, ourMAC); err == nil {
		t.Error("gratuitous ARP for an IPv6 address: no error")
	}
}

// nsFrame builds the frame of a neighbour solicitation for target from
// src, as a client's kernel sends it.
func nsFrame(t *testing.T, src, target netip.Addr) []byte {
	t.Helper()
	snm, err := ndp.SolicitedNodeMulticast(target)
	if err != nil {
		t.Fatal(err)
	}
	ns := &ndp.NeighborSolicitation{TargetAddress: target}
	if !src.IsUnspecified() {
		ns.Options = []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: theirMAC}}
	}
	b, err := ndpFrame(ns, theirMAC, nil, src, snm)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNDPAnswer(t *testing.T) {
	client := netip.MustParseAddr("2001:db8::1")
	valid := nsFrame(t, client, vip6)
	badSum := slices.Clone(valid)
	badSum[len(badSum)-1] ^= 0xff
	lowHop := slices.Clone(valid)
	lowHop[ethHeaderLen+7] = 64
	for _, tc := range []struct {
		name     string
		frame    []byte
		parsed   bool
		want     verdict
		dst      netip.Addr
		solicitd bool
	}{
		{"solicitation for an owned address", valid, true, answer, client, true},
		{"duplicate address detection", nsFrame(t, netip.IPv6Unspecified(), vip6), true, answer, netip.IPv6LinkLocalAllNodes(), false},
		{"solicitation for a foreign address", nsFrame(t, client, netip.MustParseAddr("2001:db8::99")), true, foreign, netip.Addr{}, false},
		{"bad checksum", badSum, false, ignored, netip.Addr{}, false},
		{"hop limit below 255", lowHop, false, ignored, netip.Addr{}, false},
		{"truncated", valid[:60], false, ignored, netip.Addr{}, false},
		{"empty", nil, false, ignored, netip.Addr{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := parseNDP(tc.frame)
			if ok != tc.parsed {
				t.Fatalf("parsed %v, want %v", ok, tc.parsed)
			}
			if !ok {
				return
			}
			if !bytes.Equal(s.srcMAC, theirMAC) {
				t.Errorf("source MAC %s", s.srcMAC)
			}
			v, _, na, dst := ndpAnswer(s.msg, s.src, ourMAC, ownsOnly(vip6))
			if v != tc.want || dst != tc.dst {
				t.Fatalf("verdict %v to %v, want %v to %v", v, dst, tc.want, tc.dst)
			}
			if v != answer {
				return
			}
			if na.TargetAddress != vip6 || !na.Override || na.Solicited != tc.solicitd || na.Router {
				t.Errorf("advertisement %+v", na)
			}
			// The frame carrying it parses back with a valid checksum.
			b, err := ndpFrame(na, ourMAC, s.srcMAC, vip6, dst)
			if err != nil {
				t.Fatal(err)
			}
			back, ok := parseNDP(b)
			if !ok {
				t.Fatal("advertisement frame does not parse back")
			}
			if lla, ok := back.msg.(*ndp.NeighborAdvertisement).Options[0].(*ndp.LinkLayerAddress); !ok || !bytes.Equal(lla.Addr, ourMAC) {
				t.Errorf("target link-layer option %+v", back.msg)
			}
			if wantMAC := s.srcMAC; dst.IsMulticast() {
				if !bytes.Equal(b[0:6], multicastMAC(dst)) {
					t.Errorf("Ethernet destination %x, want %s", b[0:6], multicastMAC(dst))
				}
			} else if !bytes.Equal(b[0:6], wantMAC) {
				t.Errorf("Ethernet destination %x, want %s", b[0:6], wantMAC)
			}
		})
	}
	if v, _, _, _ := ndpAnswer(unsolicitedNA(vip6, theirMAC), client, ourMAC, ownsOnly(vip6)); v != ignored {
		t.Errorf("an advertisement got verdict %v", v)
	}
}

func FuzzARPReply(f *testing.F) {
	p, err := arp.NewPacket(arp.OperationRequest, theirMAC, theirIP, ethernet.Broadcast, vip4)
	if err != nil {
		f.Fatal(err)
	}
	seed, err := marshalARP(p, ethernet.Broadcast, theirMAC, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		v, target, reply, _ := arpReply(b, ourMAC, ownsOnly(vip4))
		if v == answer && (target != vip4 || reply == nil) {
			t.Errorf("answer for %v with reply %x", target, reply)
		}
	})
}

func FuzzParseNDP(f *testing.F) {
	ns := &ndp.NeighborSolicitation{TargetAddress: vip6}
	seed, err := ndpFrame(ns, theirMAC, nil, netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("ff02::1:ff00:50"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, ok := parseNDP(b); ok {
			_, _, _, _ = ndpAnswer(s.msg, s.src, ourMAC, ownsOnly(vip6))
		}
	})
}
