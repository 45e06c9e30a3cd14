package ovsflow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"strconv"

	"github.com/ovnedge/ovnedge/ovsflow/openflow"
)

// Ethernet types and IP protocols a Proto stands for.
const (
	ethIPv4 = 0x0800
	ethARP  = 0x0806
	ethIPv6 = 0x86dd
)

var protoWire = map[Proto]struct {
	eth   uint16
	proto uint8
}{
	ProtoIP: {ethIPv4, 0}, ProtoIPv6: {ethIPv6, 0}, ProtoARP: {ethARP, 0},
	ProtoTCP: {ethIPv4, 6}, ProtoTCP6: {ethIPv6, 6}, ProtoUDP: {ethIPv4, 17}, ProtoUDP6: {ethIPv6, 17},
	ProtoSCTP: {ethIPv4, 132}, ProtoSCTP6: {ethIPv6, 132}, ProtoICMP: {ethIPv4, 1}, ProtoICMP6: {ethIPv6, 58},
}

// The OXM fields of each transport protocol's ports.
var portFields = map[uint8][2]uint8{
	6:   {openflow.OXMTCPSrc, openflow.OXMTCPDst},
	17:  {openflow.OXMUDPSrc, openflow.OXMUDPDst},
	132: {openflow.OXMSCTPSrc, openflow.OXMSCTPDst},
}

// nxmFields are the Nicira fields the model sets or loads.
var nxmFields = map[Field]uint8{FieldPktMark: openflow.NXMPktMark, FieldCtMark: openflow.NXMCtMark}

func basic(field uint8, v []byte) openflow.OXM {
	return openflow.OXM{Class: openflow.ClassOpenFlow, Field: field, Value: v}
}

func nx32(field uint8, m Masked) openflow.OXM {
	o := openflow.OXM{Class: openflow.ClassNXM1, Field: field, Value: binary.BigEndian.AppendUint32(nil, m.Value&m.Mask)}
	if m.Mask != ^uint32(0) {
		o.Mask = binary.BigEndian.AppendUint32(nil, m.Mask)
	}
	return o
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func prefixOXM(field uint8, p netip.Prefix) openflow.OXM {
	p = p.Masked()
	o := basic(field, p.Addr().AsSlice())
	if p.Bits() != p.Addr().BitLen() {
		o.Mask = cidrMask(p.Addr().BitLen()/8, p.Bits())
	}
	return o
}

// cidrMask is the mask of an n-bit prefix of a size-byte address.
func cidrMask(size, n int) []byte {
	m := make([]byte, size)
	for i := range n {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}

// encodeMatch turns a resolved match into OXM fields, prerequisites first.
func encodeMatch(m *Match) ([]openflow.OXM, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	var f []openflow.OXM
	if !m.InPort.IsZero() {
		if m.InPort.Number() == 0 {
			return nil, fieldErr("in_port", "port %q is not resolved to an ofport", m.InPort.Name())
		}
		f = append(f, basic(openflow.OXMInPort, binary.BigEndian.AppendUint32(nil, m.InPort.Number())))
	}
	if m.DlDst != nil {
		f = append(f, basic(openflow.OXMEthDst, []byte(m.DlDst)))
	}
	if m.DlSrc != nil {
		f = append(f, basic(openflow.OXMEthSrc, []byte(m.DlSrc)))
	}
	w, hasProto := protoWire[m.Proto]
	if m.Proto != ProtoAny && !hasProto {
		return nil, fieldErr("proto", "unknown protocol %s", m.Proto)
	}
	if hasProto {
		f = append(f, basic(openflow.OXMEthType, u16(w.eth)))
	}
	if m.DlVLAN != 0 {
		f = append(f, basic(openflow.OXMVlanVID, u16(openflow.VlanPresent|m.DlVLAN)))
	}
	if w.proto != 0 {
		f = append(f, basic(openflow.OXMIPProto, []byte{w.proto}))
	}
	src, dst := openflow.OXMIPv4Src, openflow.OXMIPv4Dst
	if m.Proto.IsIPv6() {
		src, dst = openflow.OXMIPv6Src, openflow.OXMIPv6Dst
	}
	if m.NwSrc.IsValid() {
		f = append(f, prefixOXM(src, m.NwSrc))
	}
	if m.NwDst.IsValid() {
		f = append(f, prefixOXM(dst, m.NwDst))
	}
	if pf, ok := portFields[w.proto]; ok {
		if m.TpSrc != 0 {
			f = append(f, basic(pf[0], u16(m.TpSrc)))
		}
		if m.TpDst != 0 {
			f = append(f, basic(pf[1], u16(m.TpDst)))
		}
	}
	if m.ICMP != nil {
		t, c := openflow.OXMICMPv4Type, openflow.OXMICMPv4Code
		if m.Proto == ProtoICMP6 {
			t, c = openflow.OXMICMPv6Type, openflow.OXMICMPv6Code
		}
		f = append(f, basic(t, []byte{m.ICMP.Type}), basic(c, []byte{m.ICMP.Code}))
	}
	if m.ARPOp != 0 {
		f = append(f, basic(openflow.OXMARPOp, u16(m.ARPOp)))
	}
	if m.ARPSpa.IsValid() {
		f = append(f, prefixOXM(openflow.OXMARPSpa, m.ARPSpa))
	}
	if m.ARPTpa.IsValid() {
		f = append(f, prefixOXM(openflow.OXMARPTpa, m.ARPTpa))
	}
	if m.NDTarget.IsValid() {
		f = append(f, basic(openflow.OXMNDTarget, m.NDTarget.AsSlice()))
	}
	if m.PktMark.IsSet() {
		f = append(f, nx32(openflow.NXMPktMark, m.PktMark))
	}
	if st := m.CtState; st.On|st.Off != 0 {
		f = append(f, nx32(openflow.NXMCtState, Masked{Value: uint32(st.On), Mask: uint32(st.On | st.Off)}))
	}
	if m.CtZone != 0 {
		f = append(f, openflow.OXM{Class: openflow.ClassNXM1, Field: openflow.NXMCtZone, Value: u16(m.CtZone)})
	}
	if m.CtMark.IsSet() {
		f = append(f, nx32(openflow.NXMCtMark, m.CtMark))
	}
	return f, nil
}

// encodeActions turns resolved actions into OpenFlow actions.
func encodeActions(acts []Action, version uint8) ([]openflow.Action, error) {
	out := make([]openflow.Action, 0, len(acts))
	for _, a := range acts {
		if err := a.validate(); err != nil {
			return nil, err
		}
		w, err := encodeAction(a, version)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func encodeAction(a Action, version uint8) (openflow.Action, error) {
	switch a := a.(type) {
	case output:
		if a.port.Number() == 0 {
			return nil, fieldErr("output", "port %q is not resolved to an ofport", a.port.Name())
		}
		return openflow.Output{Port: a.port.Number()}, nil
	case popVLAN:
		return openflow.PopVLAN{}, nil
	case group:
		return openflow.Group{ID: a.id}, nil
	case setField:
		o, err := setFieldOXM(a)
		if err != nil {
			return nil, err
		}
		return openflow.SetField{Field: o}, nil
	case load:
		if version >= openflow.Version15 {
			return nil, fieldErr("load:"+string(a.field), "OpenFlow 1.5 has no Nicira load (OVS refuses it): use SetField or OpenFlow 1.4")
		}
		nx, ok := nxmFields[a.field]
		if !ok {
			return nil, fieldErr("load:"+string(a.field), "unsupported field")
		}
		dst := openflow.OXM{Class: openflow.ClassNXM1, Field: nx, Value: make([]byte, 4)}.Header()
		return openflow.RegLoad{Dst: dst, Bits: 32, Value: uint64(a.value)}, nil
	case resubmit:
		return encodeResubmit(a)
	case CT:
		return encodeCT(a, version)
	}
	return nil, fieldErr(fmt.Sprintf("%T", a), "action has no OpenFlow encoding")
}

func setFieldOXM(a setField) (openflow.OXM, error) {
	name := "set_field:" + string(a.field)
	switch a.field {
	case FieldEthSrc, FieldEthDst:
		mac, err := net.ParseMAC(a.value)
		if err != nil {
			return openflow.OXM{}, fieldErr(name, "%v", err)
		}
		if a.field == FieldEthSrc {
			return basic(openflow.OXMEthSrc, mac), nil
		}
		return basic(openflow.OXMEthDst, mac), nil
	case FieldIPSrc, FieldIPDst, FieldIPv6Src, FieldIPv6Dst:
		ip, err := netip.ParseAddr(a.value)
		if err != nil {
			return openflow.OXM{}, fieldErr(name, "%v", err)
		}
		field := map[Field]uint8{FieldIPSrc: openflow.OXMIPv4Src, FieldIPDst: openflow.OXMIPv4Dst,
			FieldIPv6Src: openflow.OXMIPv6Src, FieldIPv6Dst: openflow.OXMIPv6Dst}[a.field]
		return basic(field, ip.AsSlice()), nil
	case FieldPktMark, FieldCtMark:
		v, err := strconv.ParseUint(a.value, 0, 32)
		if err != nil {
			return openflow.OXM{}, fieldErr(name, "%v", err)
		}
		return nx32(nxmFields[a.field], Exact(uint32(v))), nil
	}
	return openflow.OXM{}, fieldErr(name, "unsupported field")
}

// 16-bit port numbers of Nicira resubmit.
var resubmitPorts = map[uint32]uint16{ofppInPort: 0xfff8, ofppNormal: 0xfffa, ofppLocal: 0xfffe}

func encodeResubmit(a resubmit) (openflow.Action, error) {
	if a.table == openflow.CTNoTable {
		return nil, fieldErr("resubmit", "table 255 cannot be expressed (it means no table)")
	}
	r := openflow.Resubmit{Port: openflow.PortInPort16, Table: a.table}
	switch n := a.port.Number(); {
	case a.port.IsZero():
	case n == 0:
		return nil, fieldErr("resubmit", "port %q is not resolved to an ofport", a.port.Name())
	case n >= ofppMax:
		r.Port = resubmitPorts[n]
	case n >= 0xff00:
		return nil, fieldErr("resubmit", "port %d does not fit the 16-bit resubmit port", n)
	default:
		r.Port = uint16(n)
	}
	return r, nil
}

func encodeCT(c CT, version uint8) (openflow.Action, error) {
	ct := openflow.Conntrack{Zone: c.Zone, Table: openflow.CTNoTable}
	if c.Commit {
		ct.Flags |= openflow.CTCommit
	}
	if c.Table != nil {
		if *c.Table == openflow.CTNoTable {
			return nil, fieldErr("ct", "table 255 cannot be expressed")
		}
		ct.Table = *c.Table
	}
	if n := c.NAT; n != nil {
		nat := openflow.NAT{AddrMin: n.Addr, AddrMax: n.AddrMax, PortMin: n.Port, PortMax: n.PortMax}
		switch n.Kind {
		case NATSrc:
			nat.Flags = openflow.NATSrc
		case NATDst:
			nat.Flags = openflow.NATDst
		default:
			nat = openflow.NAT{}
		}
		ct.Actions = append(ct.Actions, nat)
	}
	for _, e := range c.Exec {
		w, err := encodeAction(e, version)
		if err != nil {
			return nil, fmt.Errorf("ct(exec): %w", err)
		}
		ct.Actions = append(ct.Actions, w)
	}
	return ct, nil
}

// encodeFlowMod encodes one modification of a resolved flow for an
// OpenFlow version.
func encodeFlowMod(op ModOp, f *Flow, version uint8) (openflow.FlowMod, error) {
	fm := openflow.FlowMod{Table: f.Table, Priority: f.Priority, Cookie: f.Cookie}
	switch op {
	case ModAdd:
		fm.Command = openflow.FlowAdd
	case ModModifyStrict:
		fm.Command = openflow.FlowModifyStrict
	case ModDeleteStrict:
		fm.Command, fm.Cookie = openflow.FlowDeleteStrict, 0
	default:
		return fm, fmt.Errorf("unknown flow-mod op %d", op)
	}
	var err error
	if fm.Match, err = encodeMatch(&f.Match); err != nil {
		return fm, err
	}
	if op != ModDeleteStrict {
		if fm.Actions, err = encodeActions(f.Actions, version); err != nil {
			return fm, err
		}
	}
	return fm, nil
}

// portOf is the model's port for an OpenFlow 1.1+ port number.
func portOf(n uint32) Port {
	switch n {
	case ofppLocal:
		return LOCAL
	case ofppNormal:
		return NORMAL
	case ofppFlood:
		return FLOOD
	case ofppInPort:
		return InPort
	}
	return PortNumber(n)
}

// decodeFlow turns a dumped flow back into the model; a field or action
// the model cannot hold is an error, never dropped.
func decodeFlow(s *openflow.FlowStats) (Flow, error) {
	f := Flow{Table: s.Table, Priority: s.Priority, Cookie: s.Cookie}
	if err := errors.Join(s.MatchErr, s.ActionsErr); err != nil {
		return f, err
	}
	if s.IdleTimeout != 0 || s.HardTimeout != 0 || s.Flags != 0 {
		return f, fmt.Errorf("timeouts and flags (idle %d, hard %d, flags %#x) are not in the model",
			s.IdleTimeout, s.HardTimeout, s.Flags)
	}
	var err error
	if f.Match, err = decodeMatch(s.Match); err != nil {
		return f, err
	}
	if f.Actions, err = decodeActions(s.Actions); err != nil {
		return f, err
	}
	if err := f.Validate(); err != nil {
		return f, err
	}
	return f, nil
}

// prefixOf is the prefix an address field matches: a CIDR mask or none.
func prefixOf(o openflow.OXM) (netip.Prefix, error) {
	a, ok := netip.AddrFromSlice(o.Value)
	if !ok {
		return netip.Prefix{}, fmt.Errorf("field %v: %d bytes is no address", o, len(o.Value))
	}
	n := len(o.Value) * 8
	if o.Mask != nil {
		n = 0
		for _, b := range o.Mask {
			n += bits.OnesCount8(b)
		}
		if !bytes.Equal(o.Mask, cidrMask(len(o.Value), n)) {
			return netip.Prefix{}, fmt.Errorf("field %v: mask is not a CIDR prefix", o)
		}
	}
	p := netip.PrefixFrom(a, n)
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("field %v: address has bits outside its mask", o)
	}
	return p, nil
}

// exact returns the value of an unmasked field of size bytes.
func exact(o openflow.OXM, size int) ([]byte, error) {
	if o.Mask != nil || len(o.Value) != size {
		return nil, fmt.Errorf("field %v: want an exact %d-byte value", o, size)
	}
	return o.Value, nil
}

func exact16(o openflow.OXM) (uint16, error) {
	v, err := exact(o, 2)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(v), nil
}

func masked32(o openflow.OXM) (Masked, error) {
	if len(o.Value) != 4 {
		return Masked{}, fmt.Errorf("field %v: want 4 bytes", o)
	}
	m := Exact(binary.BigEndian.Uint32(o.Value))
	if o.Mask != nil {
		m.Mask = binary.BigEndian.Uint32(o.Mask)
	}
	return m, nil
}

// decodeMatch turns OXM fields back into a Match.
func decodeMatch(fields []openflow.OXM) (Match, error) {
	var m Match
	var ethType uint16
	var ipProto uint8
	var icmpType, icmpCode bool
	for _, o := range fields {
		var err error
		var v []byte
		var n uint16
		switch o.Class {
		case openflow.ClassOpenFlow:
			switch o.Field {
			case openflow.OXMInPort:
				if v, err = exact(o, 4); err == nil {
					m.InPort = portOf(binary.BigEndian.Uint32(v))
				}
			case openflow.OXMEthDst, openflow.OXMEthSrc:
				if v, err = exact(o, 6); err == nil {
					mac := net.HardwareAddr(bytes.Clone(v))
					if o.Field == openflow.OXMEthDst {
						m.DlDst = mac
					} else {
						m.DlSrc = mac
					}
				}
			case openflow.OXMEthType:
				ethType, err = exact16(o)
			case openflow.OXMVlanVID:
				if len(o.Value) == 2 && (o.Mask == nil || bytes.Equal(o.Mask, []byte{0x1f, 0xff})) {
					n = binary.BigEndian.Uint16(o.Value)
				}
				if n&openflow.VlanPresent == 0 || n&0xfff == 0 {
					err = fmt.Errorf("field %v: only dl_vlan 1-4095 is in the model", o)
				}
				m.DlVLAN = n & 0xfff
			case openflow.OXMIPProto:
				if v, err = exact(o, 1); err == nil {
					ipProto = v[0]
				}
			case openflow.OXMIPv4Src, openflow.OXMIPv6Src:
				m.NwSrc, err = prefixOf(o)
			case openflow.OXMIPv4Dst, openflow.OXMIPv6Dst:
				m.NwDst, err = prefixOf(o)
			case openflow.OXMTCPSrc, openflow.OXMUDPSrc, openflow.OXMSCTPSrc:
				m.TpSrc, err = exact16(o)
			case openflow.OXMTCPDst, openflow.OXMUDPDst, openflow.OXMSCTPDst:
				m.TpDst, err = exact16(o)
			case openflow.OXMICMPv4Type, openflow.OXMICMPv6Type, openflow.OXMICMPv4Code, openflow.OXMICMPv6Code:
				if v, err = exact(o, 1); err == nil {
					if m.ICMP == nil {
						m.ICMP = &ICMP{}
					}
					if o.Field == openflow.OXMICMPv4Type || o.Field == openflow.OXMICMPv6Type {
						m.ICMP.Type, icmpType = v[0], true
					} else {
						m.ICMP.Code, icmpCode = v[0], true
					}
				}
			case openflow.OXMARPOp:
				m.ARPOp, err = exact16(o)
			case openflow.OXMARPSpa:
				m.ARPSpa, err = prefixOf(o)
			case openflow.OXMARPTpa:
				m.ARPTpa, err = prefixOf(o)
			case openflow.OXMNDTarget:
				if v, err = exact(o, 16); err == nil {
					m.NDTarget = netip.AddrFrom16([16]byte(v))
				}
			default:
				err = fmt.Errorf("match field %v is not in the model", o)
			}
		case openflow.ClassNXM1:
			switch o.Field {
			case openflow.NXMPktMark:
				m.PktMark, err = masked32(o)
			case openflow.NXMCtMark:
				m.CtMark, err = masked32(o)
			case openflow.NXMCtState:
				var st Masked
				if st, err = masked32(o); err == nil {
					if st.Mask > 0xff {
						err = fmt.Errorf("field %v: ct_state flags beyond dnat are not in the model", o)
					}
					m.CtState = CtState{On: CtFlags(st.Value & st.Mask), Off: CtFlags(st.Mask &^ st.Value)}
				}
			case openflow.NXMCtZone:
				m.CtZone, err = exact16(o)
			default:
				err = fmt.Errorf("match field %v is not in the model", o)
			}
		default:
			err = fmt.Errorf("match field %v is not in the model", o)
		}
		if err != nil {
			return m, err
		}
	}
	if icmpType != icmpCode {
		return m, fmt.Errorf("match has only one of icmp_type and icmp_code: the model holds both")
	}
	if ethType != 0 || ipProto != 0 {
		found := false
		for p, w := range protoWire {
			if w.eth == ethType && w.proto == ipProto {
				m.Proto, found = p, true
			}
		}
		if !found {
			return m, fmt.Errorf("eth_type %#04x with ip_proto %d is not in the model", ethType, ipProto)
		}
	}
	return m, nil
}

func fieldOf(o openflow.OXM) (Field, bool) {
	for f, nx := range nxmFields {
		if o.Class == openflow.ClassNXM1 && o.Field == nx {
			return f, true
		}
	}
	return "", false
}

// decodeActions turns OpenFlow actions back into the model's.
func decodeActions(acts []openflow.Action) ([]Action, error) {
	var out []Action
	for _, a := range acts {
		d, err := decodeAction(a)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func decodeAction(a openflow.Action) (Action, error) {
	switch a := a.(type) {
	case openflow.Output:
		return Output(portOf(a.Port)), nil
	case openflow.PopVLAN:
		return PopVLAN(), nil
	case openflow.Group:
		return Group(a.ID), nil
	case openflow.SetField:
		return decodeSetField(a.Field)
	case openflow.RegLoad:
		f, ok := fieldOf(openflow.OXM{Class: uint16(a.Dst >> 16), Field: uint8(a.Dst>>9) & 0x7f})
		if !ok || a.Dst&0x1ff != 4 || a.Ofs != 0 || a.Bits != 32 {
			return nil, fmt.Errorf("load to NXM header %#x bits %d-%d is not in the model", a.Dst, a.Ofs, int(a.Ofs)+int(a.Bits)-1)
		}
		return Load(f, uint32(a.Value)), nil
	case openflow.Resubmit:
		if a.Table == openflow.CTNoTable {
			return nil, fmt.Errorf("resubmit without a table is not in the model")
		}
		p := PortNumber(uint32(a.Port))
		for n32, n16 := range resubmitPorts {
			if a.Port == n16 {
				p = portOf(n32)
			}
		}
		if a.Port == openflow.PortInPort16 {
			p = Port{}
		}
		return Resubmit(p, a.Table), nil
	case openflow.Conntrack:
		return decodeCT(a)
	}
	return nil, fmt.Errorf("action %T is not in the model", a)
}

func decodeSetField(o openflow.OXM) (Action, error) {
	if f, ok := fieldOf(o); ok && len(o.Value) == 4 {
		return SetField(f, binary.BigEndian.Uint32(o.Value)), nil
	}
	if o.Class == openflow.ClassOpenFlow {
		switch o.Field {
		case openflow.OXMEthSrc, openflow.OXMEthDst:
			if len(o.Value) == 6 {
				f := map[uint8]Field{openflow.OXMEthSrc: FieldEthSrc, openflow.OXMEthDst: FieldEthDst}[o.Field]
				return SetEth(f, net.HardwareAddr(bytes.Clone(o.Value))), nil
			}
		case openflow.OXMIPv4Src, openflow.OXMIPv4Dst, openflow.OXMIPv6Src, openflow.OXMIPv6Dst:
			if ip, ok := netip.AddrFromSlice(o.Value); ok {
				f := map[uint8]Field{openflow.OXMIPv4Src: FieldIPSrc, openflow.OXMIPv4Dst: FieldIPDst,
					openflow.OXMIPv6Src: FieldIPv6Src, openflow.OXMIPv6Dst: FieldIPv6Dst}[o.Field]
				return SetIP(f, ip), nil
			}
		}
	}
	return nil, fmt.Errorf("set_field of %v is not in the model", o)
}

func decodeCT(a openflow.Conntrack) (Action, error) {
	if a.Flags&^openflow.CTCommit != 0 {
		return nil, fmt.Errorf("ct flags %#x beyond commit are not in the model", a.Flags)
	}
	c := CT{Commit: a.Flags&openflow.CTCommit != 0, Zone: a.Zone}
	if a.Table != openflow.CTNoTable {
		c.Table = ToTable(a.Table)
	}
	for i, n := range a.Actions {
		nat, ok := n.(openflow.NAT)
		if !ok {
			e, err := decodeAction(n)
			if err != nil {
				return nil, fmt.Errorf("ct(exec): %w", err)
			}
			c.Exec = append(c.Exec, e)
			continue
		}
		if i != 0 {
			return nil, fmt.Errorf("ct: nat after exec actions is not in the model")
		}
		m := &NAT{Addr: nat.AddrMin, AddrMax: nat.AddrMax, Port: nat.PortMin, PortMax: nat.PortMax}
		switch nat.Flags {
		case 0:
			if m.Addr.IsValid() || m.AddrMax.IsValid() || m.Port != 0 || m.PortMax != 0 {
				return nil, fmt.Errorf("ct: nat with a range but neither src nor dst")
			}
		case openflow.NATSrc:
			m.Kind = NATSrc
		case openflow.NATDst:
			m.Kind = NATDst
		default:
			return nil, fmt.Errorf("ct: nat flags %#x are not in the model", nat.Flags)
		}
		c.NAT = m
	}
	return c, nil
}
