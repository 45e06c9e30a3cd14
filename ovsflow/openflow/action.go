package openflow

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Action is one OpenFlow action this package encodes: [Output], [SetField],
// [PopVLAN], [Group], and the Nicira [Resubmit], [RegLoad], [Conntrack]
// and [NAT].
type Action interface {
	appendAction(b []byte) []byte
}

// OpenFlow action types and the Nicira vendor action.
const (
	actOutput       uint16 = 0
	actPopVLAN      uint16 = 18
	actGroup        uint16 = 22
	actSetField     uint16 = 25
	actExperimenter uint16 = 0xffff

	// NiciraID is the Nicira vendor (experimenter) id.
	NiciraID uint32 = 0x00002320

	nxastResubmit      uint16 = 1
	nxastRegLoad       uint16 = 7
	nxastResubmitTable uint16 = 14
	nxastCT            uint16 = 35
	nxastNAT           uint16 = 36
)

// Reserved OpenFlow 1.1+ ports.
const (
	PortInPort uint32 = 0xfffffff8
	PortNormal uint32 = 0xfffffffa
	PortLocal  uint32 = 0xfffffffe
	PortAny    uint32 = 0xffffffff
	// PortInPort16 is the 16-bit OpenFlow 1.0 IN_PORT that Nicira
	// resubmit uses for "the packet's own in_port".
	PortInPort16 uint16 = 0xfff8
)

// Output sends the packet to a port.
type Output struct{ Port uint32 }

func (a Output) appendAction(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, actOutput)
	b = binary.BigEndian.AppendUint16(b, 16)
	b = binary.BigEndian.AppendUint32(b, a.Port)
	return append(b, 0, 0, 0, 0, 0, 0, 0, 0) // max_len 0, pad
}

// PopVLAN removes the outer VLAN tag.
type PopVLAN struct{}

func (PopVLAN) appendAction(b []byte) []byte { return append(b, 0, byte(actPopVLAN), 0, 8, 0, 0, 0, 0) }

// Group sends the packet to a group.
type Group struct{ ID uint32 }

func (a Group) appendAction(b []byte) []byte {
	b = append(b, 0, byte(actGroup), 0, 8)
	return binary.BigEndian.AppendUint32(b, a.ID)
}

// SetField writes a whole field (OFPAT_SET_FIELD).
type SetField struct{ Field OXM }

func (a SetField) appendAction(b []byte) []byte {
	start := len(b)
	b = append(b, 0, byte(actSetField), 0, 0)
	b = appendOXM(b, a.Field)
	b = pad8(b, start)
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

// Resubmit is the Nicira resubmit: look the packet up again in Table
// (0xff: the current table) as if it came in on Port (a 16-bit port,
// [PortInPort16] for its own).
type Resubmit struct {
	Port  uint16
	Table uint8
}

func (a Resubmit) appendAction(b []byte) []byte {
	b = appendNXHeader(b, 16, nxastResubmitTable)
	b = binary.BigEndian.AppendUint16(b, a.Port)
	return append(b, a.Table, 0, 0, 0)
}

// RegLoad is the Nicira reg_load: write Value to Bits bits of the field
// Dst (an NXM header, see [OXM.Header]) from bit Ofs.
type RegLoad struct {
	Dst       uint32
	Ofs, Bits uint8
	Value     uint64
}

func (a RegLoad) appendAction(b []byte) []byte {
	b = appendNXHeader(b, 24, nxastRegLoad)
	b = binary.BigEndian.AppendUint16(b, uint16(a.Ofs)<<6|uint16(a.Bits-1))
	b = binary.BigEndian.AppendUint32(b, a.Dst)
	return binary.BigEndian.AppendUint64(b, a.Value)
}

// Conntrack flags.
const (
	CTCommit uint16 = 1 << 0
	CTForce  uint16 = 1 << 1
)

// CTNoTable is Conntrack.Table for "no recirculation".
const CTNoTable uint8 = 0xff

// Conntrack is the Nicira ct action with an immediate zone; Actions are
// its nested actions (a NAT, then the exec actions).
type Conntrack struct {
	Flags   uint16
	Zone    uint16
	Table   uint8
	Actions []Action
}

func (a Conntrack) appendAction(b []byte) []byte {
	start := len(b)
	b = appendNXHeader(b, 0, nxastCT)
	b = binary.BigEndian.AppendUint16(b, a.Flags)
	b = append(b, 0, 0, 0, 0) // zone_src: immediate
	b = binary.BigEndian.AppendUint16(b, a.Zone)
	b = append(b, a.Table, 0, 0, 0, 0, 0) // pad, alg 0
	for _, n := range a.Actions {
		b = n.appendAction(b)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

// NAT flags and range bits.
const (
	NATSrc uint16 = 1 << 0
	NATDst uint16 = 1 << 1

	natIPv4Min  uint16 = 1 << 0
	natIPv4Max  uint16 = 1 << 1
	natIPv6Min  uint16 = 1 << 2
	natIPv6Max  uint16 = 1 << 3
	natProtoMin uint16 = 1 << 4
	natProtoMax uint16 = 1 << 5
)

// NAT is the Nicira nat action, nested in a [Conntrack]. With no flags it
// restores the connection's translation; with [NATSrc] or [NATDst] it
// translates to the range AddrMin-AddrMax, ports PortMin-PortMax (zero
// values are absent).
type NAT struct {
	Flags            uint16
	AddrMin, AddrMax netip.Addr
	PortMin, PortMax uint16
}

func (a NAT) appendAction(b []byte) []byte {
	start := len(b)
	b = appendNXHeader(b, 0, nxastNAT)
	b = append(b, 0, 0)
	b = binary.BigEndian.AppendUint16(b, a.Flags)
	var present uint16
	var rng []byte
	if a.AddrMin.IsValid() {
		present |= pick(a.AddrMin.Is4(), natIPv4Min, natIPv6Min)
	}
	if a.AddrMax.IsValid() {
		present |= pick(a.AddrMax.Is4(), natIPv4Max, natIPv6Max)
	}
	// Parameters follow in bit order: v4 min, v4 max, v6 min, v6 max,
	// proto min, proto max.
	if present&natIPv4Min != 0 {
		rng = append(rng, a.AddrMin.AsSlice()...)
	}
	if present&natIPv4Max != 0 {
		rng = append(rng, a.AddrMax.AsSlice()...)
	}
	if present&natIPv6Min != 0 {
		rng = append(rng, a.AddrMin.AsSlice()...)
	}
	if present&natIPv6Max != 0 {
		rng = append(rng, a.AddrMax.AsSlice()...)
	}
	if a.PortMin != 0 {
		present |= natProtoMin
		rng = binary.BigEndian.AppendUint16(rng, a.PortMin)
	}
	if a.PortMax != 0 {
		present |= natProtoMax
		rng = binary.BigEndian.AppendUint16(rng, a.PortMax)
	}
	b = binary.BigEndian.AppendUint16(b, present)
	b = append(b, rng...)
	b = pad8(b, start)
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

func pick(v4 bool, a, b uint16) uint16 {
	if v4 {
		return a
	}
	return b
}

func appendNXHeader(b []byte, n int, subtype uint16) []byte {
	b = binary.BigEndian.AppendUint16(b, actExperimenter)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	b = binary.BigEndian.AppendUint32(b, NiciraID)
	return binary.BigEndian.AppendUint16(b, subtype)
}

// AppendActions appends actions, back to back.
func AppendActions(b []byte, actions []Action) []byte {
	for _, a := range actions {
		b = a.appendAction(b)
	}
	return b
}

// DecodeActions decodes a list of actions. An action this package does not
// know is an error naming its type (and Nicira subtype).
func DecodeActions(b []byte) ([]Action, error) {
	var acts []Action
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, fmt.Errorf("action header: %w (%d bytes)", errShort, len(b))
		}
		typ := binary.BigEndian.Uint16(b)
		n := int(binary.BigEndian.Uint16(b[2:]))
		if n < 8 || n%8 != 0 || n > len(b) {
			return nil, fmt.Errorf("action type %d: bad length %d (%d bytes left)", typ, n, len(b))
		}
		a, err := decodeAction(typ, b[:n])
		if err != nil {
			return nil, err
		}
		acts = append(acts, a)
		b = b[n:]
	}
	return acts, nil
}

func decodeAction(typ uint16, b []byte) (Action, error) {
	n := len(b)
	switch typ {
	case actOutput:
		if n != 16 {
			return nil, fmt.Errorf("output action: length %d, want 16", n)
		}
		return Output{Port: binary.BigEndian.Uint32(b[4:])}, nil
	case actPopVLAN:
		return PopVLAN{}, nil
	case actGroup:
		return Group{ID: binary.BigEndian.Uint32(b[4:])}, nil
	case actSetField:
		o, k, err := decodeOXM(b[4:])
		if err != nil {
			return nil, fmt.Errorf("set_field action: %w", err)
		}
		if o.Mask != nil || 4+k > n {
			return nil, fmt.Errorf("set_field action: masked or overlong field %v", o)
		}
		return SetField{Field: o}, nil
	case actExperimenter:
		return decodeNX(b)
	}
	return nil, fmt.Errorf("action type %d is not supported", typ)
}

func decodeNX(b []byte) (Action, error) {
	n := len(b)
	if n < 16 {
		return nil, fmt.Errorf("experimenter action: %w (%d bytes)", errShort, n)
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != NiciraID {
		return nil, fmt.Errorf("experimenter action of vendor %#x is not supported", v)
	}
	sub := binary.BigEndian.Uint16(b[8:])
	switch sub {
	case nxastResubmit, nxastResubmitTable:
		a := Resubmit{Port: binary.BigEndian.Uint16(b[10:]), Table: b[12]}
		if sub == nxastResubmit {
			a.Table = CTNoTable
		}
		return a, nil
	case nxastRegLoad:
		if n != 24 {
			return nil, fmt.Errorf("reg_load action: length %d, want 24", n)
		}
		on := binary.BigEndian.Uint16(b[10:])
		return RegLoad{Ofs: uint8(on >> 6), Bits: uint8(on&0x3f) + 1,
			Dst: binary.BigEndian.Uint32(b[12:]), Value: binary.BigEndian.Uint64(b[16:])}, nil
	case nxastCT:
		if n < 24 {
			return nil, fmt.Errorf("ct action: %w (%d bytes)", errShort, n)
		}
		if src := binary.BigEndian.Uint32(b[12:]); src != 0 {
			return nil, fmt.Errorf("ct action: zone from field %#x is not supported", src)
		}
		if alg := binary.BigEndian.Uint16(b[22:]); alg != 0 {
			return nil, fmt.Errorf("ct action: alg %d is not supported", alg)
		}
		a := Conntrack{Flags: binary.BigEndian.Uint16(b[10:]), Zone: binary.BigEndian.Uint16(b[16:]), Table: b[18]}
		var err error
		if a.Actions, err = DecodeActions(b[24:]); err != nil {
			return nil, fmt.Errorf("ct action: %w", err)
		}
		return a, nil
	case nxastNAT:
		return decodeNAT(b)
	}
	return nil, fmt.Errorf("nicira action subtype %d is not supported", sub)
}

func decodeNAT(b []byte) (Action, error) {
	a := NAT{Flags: binary.BigEndian.Uint16(b[12:])}
	present := binary.BigEndian.Uint16(b[14:])
	rest := b[16:]
	take := func(k int) ([]byte, error) {
		if len(rest) < k {
			return nil, fmt.Errorf("nat action: range %#x: %w", present, errShort)
		}
		v := rest[:k]
		rest = rest[k:]
		return v, nil
	}
	for _, f := range []struct {
		bit  uint16
		size int
		dst  *netip.Addr
	}{{natIPv4Min, 4, &a.AddrMin}, {natIPv4Max, 4, &a.AddrMax}, {natIPv6Min, 16, &a.AddrMin}, {natIPv6Max, 16, &a.AddrMax}} {
		if present&f.bit == 0 {
			continue
		}
		v, err := take(f.size)
		if err != nil {
			return nil, err
		}
		*f.dst, _ = netip.AddrFromSlice(v)
	}
	for _, f := range []struct {
		bit uint16
		dst *uint16
	}{{natProtoMin, &a.PortMin}, {natProtoMax, &a.PortMax}} {
		if present&f.bit == 0 {
			continue
		}
		v, err := take(2)
		if err != nil {
			return nil, err
		}
		*f.dst = binary.BigEndian.Uint16(v)
	}
	if present&^(natProtoMax<<1-1) != 0 {
		return nil, fmt.Errorf("nat action: unknown range bits %#x", present)
	}
	return a, nil
}

// Instruction types.
const instApplyActions uint16 = 4

// AppendInstructions appends an APPLY_ACTIONS instruction holding actions;
// nothing for no action (drop).
func AppendInstructions(b []byte, actions []Action) []byte {
	if len(actions) == 0 {
		return b
	}
	start := len(b)
	b = append(b, 0, byte(instApplyActions), 0, 0, 0, 0, 0, 0)
	b = AppendActions(b, actions)
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

// DecodeInstructions decodes instructions; only APPLY_ACTIONS is supported
// and its actions are returned.
func DecodeInstructions(b []byte) ([]Action, error) {
	var acts []Action
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, fmt.Errorf("instruction header: %w (%d bytes)", errShort, len(b))
		}
		typ := binary.BigEndian.Uint16(b)
		n := int(binary.BigEndian.Uint16(b[2:]))
		if n < 8 || n > len(b) {
			return nil, fmt.Errorf("instruction type %d: bad length %d (%d bytes left)", typ, n, len(b))
		}
		if typ != instApplyActions {
			return nil, fmt.Errorf("instruction type %d is not supported (only apply_actions)", typ)
		}
		a, err := DecodeActions(b[8:n])
		if err != nil {
			return nil, err
		}
		acts = append(acts, a...)
		b = b[n:]
	}
	return acts, nil
}
