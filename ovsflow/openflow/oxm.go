package openflow

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// OXM classes.
const (
	ClassNXM0      uint16 = 0x0000 // Nicira NXM_OF_* fields
	ClassNXM1      uint16 = 0x0001 // Nicira NXM_NX_* fields
	ClassOpenFlow  uint16 = 0x8000 // OFPXMC_OPENFLOW_BASIC
	matchTypeOXM   uint16 = 1      // OFPMT_OXM
	matchHeaderLen        = 4
)

// OpenFlow basic OXM fields (OFPXMT_OFB_*).
const (
	OXMInPort     uint8 = 0
	OXMEthDst     uint8 = 3
	OXMEthSrc     uint8 = 4
	OXMEthType    uint8 = 5
	OXMVlanVID    uint8 = 6
	OXMIPProto    uint8 = 10
	OXMIPv4Src    uint8 = 11
	OXMIPv4Dst    uint8 = 12
	OXMTCPSrc     uint8 = 13
	OXMTCPDst     uint8 = 14
	OXMUDPSrc     uint8 = 15
	OXMUDPDst     uint8 = 16
	OXMSCTPSrc    uint8 = 17
	OXMSCTPDst    uint8 = 18
	OXMICMPv4Type uint8 = 19
	OXMICMPv4Code uint8 = 20
	OXMARPOp      uint8 = 21
	OXMARPSpa     uint8 = 22
	OXMARPTpa     uint8 = 23
	OXMIPv6Src    uint8 = 26
	OXMIPv6Dst    uint8 = 27
	OXMICMPv6Type uint8 = 29
	OXMICMPv6Code uint8 = 30
	OXMNDTarget   uint8 = 31
)

// Nicira extension fields (class [ClassNXM1]).
const (
	NXMPktMark uint8 = 33
	NXMCtState uint8 = 105
	NXMCtZone  uint8 = 106
	NXMCtMark  uint8 = 107
)

// VlanPresent is the OFPVID_PRESENT bit of a VLAN_VID value.
const VlanPresent uint16 = 0x1000

// OXM is one match field (or a SET_FIELD target): class, field number and
// value, with a mask when the match is not exact.
type OXM struct {
	Class uint16
	Field uint8
	Value []byte
	Mask  []byte // nil: exact
}

// Header is the 32-bit OXM/NXM header of the field without a mask, as
// Nicira actions (reg_load) name their destination.
func (o OXM) Header() uint32 {
	return uint32(o.Class)<<16 | uint32(o.Field)<<9 | uint32(len(o.Value))
}

func (o OXM) String() string {
	if o.Mask != nil {
		return fmt.Sprintf("oxm(%#04x:%d=%x/%x)", o.Class, o.Field, o.Value, o.Mask)
	}
	return fmt.Sprintf("oxm(%#04x:%d=%x)", o.Class, o.Field, o.Value)
}

// Equal reports whether o and p are the same field, value and mask.
func (o OXM) Equal(p OXM) bool {
	return o.Class == p.Class && o.Field == p.Field && bytes.Equal(o.Value, p.Value) &&
		(o.Mask == nil) == (p.Mask == nil) && bytes.Equal(o.Mask, p.Mask)
}

// appendOXM appends one TLV.
func appendOXM(b []byte, o OXM) []byte {
	hdr := uint32(o.Class)<<16 | uint32(o.Field)<<9
	n := len(o.Value)
	if o.Mask != nil {
		hdr |= 1 << 8
		n += len(o.Mask)
	}
	b = binary.BigEndian.AppendUint32(b, hdr|uint32(n))
	b = append(b, o.Value...)
	return append(b, o.Mask...)
}

// decodeOXM decodes the TLV at the start of b.
func decodeOXM(b []byte) (OXM, int, error) {
	if len(b) < 4 {
		return OXM{}, 0, fmt.Errorf("oxm header: %w", errShort)
	}
	hdr := binary.BigEndian.Uint32(b)
	o := OXM{Class: uint16(hdr >> 16), Field: uint8(hdr>>9) & 0x7f}
	n := int(hdr & 0xff)
	if o.Class == 0xffff {
		return OXM{}, 0, fmt.Errorf("oxm experimenter class is not supported")
	}
	if 4+n > len(b) {
		return OXM{}, 0, fmt.Errorf("oxm %#04x:%d of %d bytes: %w", o.Class, o.Field, n, errShort)
	}
	v := b[4 : 4+n]
	if hdr&(1<<8) != 0 {
		if n%2 != 0 || n == 0 {
			return OXM{}, 0, fmt.Errorf("oxm %#04x:%d: odd masked length %d", o.Class, o.Field, n)
		}
		o.Value, o.Mask = v[:n/2], v[n/2:]
	} else {
		o.Value = v
	}
	return o, 4 + n, nil
}

// AppendMatch appends an OXM ofp_match holding fields, padded to 8 bytes.
func AppendMatch(b []byte, fields []OXM) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint16(b, matchTypeOXM)
	b = append(b, 0, 0)
	for _, f := range fields {
		b = appendOXM(b, f)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return pad8(b, start)
}

// DecodeMatch decodes the OXM ofp_match at the start of b and returns its
// fields and its padded length.
func DecodeMatch(b []byte) ([]OXM, int, error) {
	if len(b) < matchHeaderLen {
		return nil, 0, fmt.Errorf("match: %w", errShort)
	}
	if t := binary.BigEndian.Uint16(b); t != matchTypeOXM {
		return nil, 0, fmt.Errorf("match type %d is not OXM", t)
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	padded := (n + 7) / 8 * 8
	if n < matchHeaderLen || padded > len(b) {
		return nil, 0, fmt.Errorf("match of %d bytes: %w (%d bytes)", n, errShort, len(b))
	}
	var fields []OXM
	for rest := b[matchHeaderLen:n]; len(rest) > 0; {
		o, k, err := decodeOXM(rest)
		if err != nil {
			return nil, 0, fmt.Errorf("match: %w", err)
		}
		fields = append(fields, o)
		rest = rest[k:]
	}
	return fields, padded, nil
}
