package ovsflow

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// Proto is the protocol shorthand of a match (ip, arp, tcp6, ...): it fixes
// the Ethernet type and, for L4 shorthands, the IP protocol.
type Proto uint8

// Protocol shorthands, named as ovs-ofctl names them.
const (
	ProtoAny Proto = iota
	ProtoIP
	ProtoIPv6
	ProtoARP
	ProtoTCP
	ProtoTCP6
	ProtoUDP
	ProtoUDP6
	ProtoSCTP
	ProtoSCTP6
	ProtoICMP
	ProtoICMP6
)

var protoNames = [...]string{"", "ip", "ipv6", "arp", "tcp", "tcp6", "udp", "udp6", "sctp", "sctp6", "icmp", "icmp6"}

func (p Proto) String() string {
	if int(p) < len(protoNames) {
		return protoNames[p]
	}
	return "proto(" + strconv.Itoa(int(p)) + ")"
}

// Family returns the shorthand of p's protocol for IPv6 (v6) or IPv4:
// ProtoTCP6 for ProtoTCP and v6, and so on.
func (p Proto) Family(v6 bool) Proto {
	pairs := [...][2]Proto{{ProtoTCP, ProtoTCP6}, {ProtoUDP, ProtoUDP6}, {ProtoSCTP, ProtoSCTP6}, {ProtoICMP, ProtoICMP6}, {ProtoIP, ProtoIPv6}}
	for _, pr := range pairs {
		if p == pr[0] || p == pr[1] {
			if v6 {
				return pr[1]
			}
			return pr[0]
		}
	}
	return p
}

// IsIPv4 reports whether p is an IPv4 shorthand (ip, tcp, udp, sctp, icmp).
func (p Proto) IsIPv4() bool {
	switch p {
	case ProtoIP, ProtoTCP, ProtoUDP, ProtoSCTP, ProtoICMP:
		return true
	}
	return false
}

// IsIPv6 reports whether p is an IPv6 shorthand (ipv6, tcp6, udp6,
// sctp6, icmp6).
func (p Proto) IsIPv6() bool {
	switch p {
	case ProtoIPv6, ProtoTCP6, ProtoUDP6, ProtoSCTP6, ProtoICMP6:
		return true
	}
	return false
}

// HasPorts reports whether p has transport ports (tcp, udp, sctp and
// their IPv6 shorthands).
func (p Proto) HasPorts() bool {
	switch p {
	case ProtoTCP, ProtoTCP6, ProtoUDP, ProtoUDP6, ProtoSCTP, ProtoSCTP6:
		return true
	}
	return false
}

// Masked is a value matched under a mask. The zero Masked matches anything.
type Masked struct {
	Value, Mask uint32
}

// Exact matches v exactly.
func Exact(v uint32) Masked { return Masked{Value: v, Mask: ^uint32(0)} }

// IsSet reports whether m constrains anything.
func (m Masked) IsSet() bool { return m.Mask != 0 }

// CtFlags are conntrack state bits, in the order OVS prints them.
type CtFlags uint8

// Conntrack states.
const (
	CtNew CtFlags = 1 << iota
	CtEst
	CtRel
	CtRpl
	CtInv
	CtTrk
	CtSNAT
	CtDNAT
)

var ctFlagNames = [...]string{"new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"}

// CtState matches conntrack state: every flag in On set, every flag in Off
// clear. The zero CtState matches anything.
type CtState struct {
	On, Off CtFlags
}

// ICMP matches an ICMP or ICMPv6 type and code.
type ICMP struct {
	Type, Code uint8
}

// Match is the match part of a flow. The zero value of every field matches
// anything. Addresses are prefixes: use [Host] for a single address. The
// family of NwSrc and NwDst follows Proto (nw_* for IPv4, ipv6_* for IPv6).
type Match struct {
	PktMark Masked
	CtState CtState
	CtZone  uint16
	CtMark  Masked
	Proto   Proto
	InPort  Port
	DlVLAN  uint16 // 1-4095
	DlSrc   net.HardwareAddr
	DlDst   net.HardwareAddr
	NwSrc   netip.Prefix
	NwDst   netip.Prefix
	ARPSpa  netip.Prefix
	ARPTpa  netip.Prefix
	ARPOp   uint16
	TpSrc   uint16
	TpDst   uint16
	ICMP    *ICMP
	// NDTarget is the target of an IPv6 neighbour solicitation or
	// advertisement (Proto ICMP6 with ICMP type 135 or 136).
	NDTarget netip.Addr
}

// Host is the single-address prefix of a.
func Host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// FieldError reports a match field or action that cannot be rendered.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

func (m *Match) validate() error {
	checkPrefix := func(name string, p netip.Prefix, v6 bool) error {
		if !p.IsValid() {
			return nil
		}
		if p.Addr().Is4In6() {
			return fieldErr(name, "IPv4-mapped IPv6 address %s", p)
		}
		if p.Addr().Is6() != v6 {
			if v6 {
				return fieldErr(name, "%s is not IPv6 but the match is %s", p, m.Proto)
			}
			return fieldErr(name, "%s is not IPv4 but the match is %s", p, m.Proto)
		}
		if p.Addr().Zone() != "" {
			return fieldErr(name, "zoned address %s", p)
		}
		return nil
	}
	if m.NwSrc.IsValid() || m.NwDst.IsValid() {
		if !m.Proto.IsIPv4() && !m.Proto.IsIPv6() {
			return fieldErr("nw_src/nw_dst", "needs an IP protocol, match is %q", m.Proto)
		}
		if err := checkPrefix("nw_src", m.NwSrc, m.Proto.IsIPv6()); err != nil {
			return err
		}
		if err := checkPrefix("nw_dst", m.NwDst, m.Proto.IsIPv6()); err != nil {
			return err
		}
	}
	if m.ARPSpa.IsValid() || m.ARPTpa.IsValid() || m.ARPOp != 0 {
		if m.Proto != ProtoARP {
			return fieldErr("arp_spa/arp_tpa/arp_op", "needs arp, match is %q", m.Proto)
		}
		if err := checkPrefix("arp_spa", m.ARPSpa, false); err != nil {
			return err
		}
		if err := checkPrefix("arp_tpa", m.ARPTpa, false); err != nil {
			return err
		}
	}
	if (m.TpSrc != 0 || m.TpDst != 0) && !m.Proto.HasPorts() {
		return fieldErr("tp_src/tp_dst", "needs tcp, udp or sctp, match is %q", m.Proto)
	}
	if m.ICMP != nil && m.Proto != ProtoICMP && m.Proto != ProtoICMP6 {
		return fieldErr("icmp_type", "needs icmp or icmp6, match is %q", m.Proto)
	}
	if m.NDTarget.IsValid() {
		if m.Proto != ProtoICMP6 || m.ICMP == nil || (m.ICMP.Type != 135 && m.ICMP.Type != 136) {
			return fieldErr("nd_target", "needs icmp6 with icmp_type 135 or 136")
		}
		if !m.NDTarget.Is6() || m.NDTarget.Is4In6() {
			return fieldErr("nd_target", "%s is not IPv6", m.NDTarget)
		}
	}
	if m.DlVLAN > 4095 {
		return fieldErr("dl_vlan", "%d out of range 1-4095", m.DlVLAN)
	}
	for _, mac := range []struct {
		name string
		v    net.HardwareAddr
	}{{"dl_src", m.DlSrc}, {"dl_dst", m.DlDst}} {
		if mac.v != nil && len(mac.v) != 6 {
			return fieldErr(mac.name, "%q is not a 6-byte MAC address", mac.v)
		}
	}
	if m.CtState.On&m.CtState.Off != 0 {
		return fieldErr("ct_state", "a flag is both set and clear")
	}
	return nil
}

// appendText appends the match in ovs-ofctl's canonical field order,
// each field followed by a comma.
func (m *Match) appendText(b []byte) []byte {
	b = appendMasked(b, "pkt_mark", m.PktMark)
	if m.CtState.On|m.CtState.Off != 0 {
		b = append(b, "ct_state="...)
		for i, name := range ctFlagNames {
			f := CtFlags(1 << i)
			switch {
			case m.CtState.On&f != 0:
				b = append(b, '+')
			case m.CtState.Off&f != 0:
				b = append(b, '-')
			default:
				continue
			}
			b = append(b, name...)
		}
		b = append(b, ',')
	}
	if m.CtZone != 0 {
		b = appendUint(b, "ct_zone", uint64(m.CtZone))
	}
	b = appendMasked(b, "ct_mark", m.CtMark)
	if m.Proto != ProtoAny {
		b = append(b, m.Proto.String()...)
		b = append(b, ',')
	}
	if !m.InPort.IsZero() {
		b = append(b, "in_port="...)
		b = append(b, m.InPort.String()...)
		b = append(b, ',')
	}
	if m.DlVLAN != 0 {
		b = appendUint(b, "dl_vlan", uint64(m.DlVLAN))
	}
	b = appendMAC(b, "dl_src", m.DlSrc)
	b = appendMAC(b, "dl_dst", m.DlDst)
	b = appendPrefix(b, "arp_spa", m.ARPSpa)
	b = appendPrefix(b, "arp_tpa", m.ARPTpa)
	if m.ARPOp != 0 {
		b = appendUint(b, "arp_op", uint64(m.ARPOp))
	}
	if m.Proto.IsIPv6() {
		b = appendPrefix(b, "ipv6_src", m.NwSrc)
		b = appendPrefix(b, "ipv6_dst", m.NwDst)
	} else {
		b = appendPrefix(b, "nw_src", m.NwSrc)
		b = appendPrefix(b, "nw_dst", m.NwDst)
	}
	if m.TpSrc != 0 {
		b = appendUint(b, "tp_src", uint64(m.TpSrc))
	}
	if m.TpDst != 0 {
		b = appendUint(b, "tp_dst", uint64(m.TpDst))
	}
	if m.ICMP != nil {
		b = appendUint(b, "icmp_type", uint64(m.ICMP.Type))
		b = appendUint(b, "icmp_code", uint64(m.ICMP.Code))
	}
	if m.NDTarget.IsValid() {
		b = append(b, "nd_target="...)
		b = m.NDTarget.AppendTo(b)
		b = append(b, ',')
	}
	return b
}

func appendUint(b []byte, name string, v uint64) []byte {
	b = append(b, name...)
	b = append(b, '=')
	b = strconv.AppendUint(b, v, 10)
	return append(b, ',')
}

func appendHex(b []byte, v uint64) []byte {
	b = append(b, "0x"...)
	return strconv.AppendUint(b, v, 16)
}

func appendMasked(b []byte, name string, m Masked) []byte {
	if !m.IsSet() {
		return b
	}
	b = append(b, name...)
	b = append(b, '=')
	b = appendMaskedValue(b, m)
	return append(b, ',')
}

// appendMaskedValue appends m as value[/mask] in hex, the mask only when
// not exact.
func appendMaskedValue(b []byte, m Masked) []byte {
	b = appendHex(b, uint64(m.Value&m.Mask))
	if m.Mask != ^uint32(0) {
		b = append(b, '/')
		b = appendHex(b, uint64(m.Mask))
	}
	return b
}

func appendMAC(b []byte, name string, mac net.HardwareAddr) []byte {
	if len(mac) == 0 {
		return b
	}
	b = append(b, name...)
	b = append(b, '=')
	b = append(b, mac.String()...)
	return append(b, ',')
}

func appendPrefix(b []byte, name string, p netip.Prefix) []byte {
	if !p.IsValid() {
		return b
	}
	b = append(b, name...)
	b = append(b, '=')
	b = appendPrefixValue(b, p)
	return append(b, ',')
}

// appendPrefixValue appends p as ovs-ofctl prints it: the address alone
// for a single host, address/bits otherwise.
func appendPrefixValue(b []byte, p netip.Prefix) []byte {
	p = p.Masked()
	b = p.Addr().AppendTo(b)
	if p.Bits() != p.Addr().BitLen() {
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(p.Bits()), 10)
	}
	return b
}
