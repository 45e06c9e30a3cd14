package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// OpenFlow wire versions.
const (
	Version13 uint8 = 4
	Version14 uint8 = 5
	Version15 uint8 = 6
)

// VersionName is the protocol name of a wire version ("OpenFlow13").
func VersionName(v uint8) string {
	switch v {
	case Version13:
		return "OpenFlow13"
	case Version14:
		return "OpenFlow14"
	case Version15:
		return "OpenFlow15"
	}
	return fmt.Sprintf("OpenFlow(wire 0x%02x)", v)
}

// Message types (OpenFlow 1.3 to 1.5 share these numbers).
const (
	TypeHello            uint8 = 0
	TypeError            uint8 = 1
	TypeEchoRequest      uint8 = 2
	TypeEchoReply        uint8 = 3
	TypeExperimenter     uint8 = 4
	TypeFeaturesRequest  uint8 = 5
	TypeFeaturesReply    uint8 = 6
	TypeFlowMod          uint8 = 14
	TypeMultipartRequest uint8 = 18
	TypeMultipartReply   uint8 = 19
	TypeBarrierRequest   uint8 = 20
	TypeBarrierReply     uint8 = 21
	TypeBundleControl    uint8 = 33 // OpenFlow 1.4+
	TypeBundleAdd        uint8 = 34 // OpenFlow 1.4+
)

// HeaderLen is the length of the OpenFlow header.
const HeaderLen = 8

// Message is one OpenFlow message: its header fields and body.
type Message struct {
	Version uint8
	Type    uint8
	Xid     uint32
	Body    []byte
}

// errShort is wrapped by every decoding error about truncated input.
var errShort = errors.New("truncated")

// DecodeMessage decodes the message at the start of b and returns it with
// the number of bytes it took. Body aliases b.
func DecodeMessage(b []byte) (Message, int, error) {
	if len(b) < HeaderLen {
		return Message{}, 0, fmt.Errorf("openflow header: %w (%d bytes)", errShort, len(b))
	}
	n := int(binary.BigEndian.Uint16(b[2:4]))
	if n < HeaderLen {
		return Message{}, 0, fmt.Errorf("openflow header: length %d below %d", n, HeaderLen)
	}
	if len(b) < n {
		return Message{}, 0, fmt.Errorf("openflow message of %d bytes: %w (%d bytes)", n, errShort, len(b))
	}
	return Message{Version: b[0], Type: b[1], Xid: binary.BigEndian.Uint32(b[4:8]), Body: b[HeaderLen:n]}, n, nil
}

// ReadMessage reads one message from r.
func ReadMessage(r io.Reader) (Message, error) {
	var hdr [HeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Message{}, err
	}
	n := int(binary.BigEndian.Uint16(hdr[2:4]))
	if n < HeaderLen {
		return Message{}, fmt.Errorf("openflow header: length %d below %d", n, HeaderLen)
	}
	m := Message{Version: hdr[0], Type: hdr[1], Xid: binary.BigEndian.Uint32(hdr[4:8]), Body: make([]byte, n-HeaderLen)}
	if _, err := io.ReadFull(r, m.Body); err != nil {
		return Message{}, fmt.Errorf("openflow message body: %w", err)
	}
	return m, nil
}

// Append appends the encoded message to b.
func (m Message) Append(b []byte) []byte {
	b = appendHeader(b, m.Version, m.Type, m.Xid)
	start := len(b) - HeaderLen
	b = append(b, m.Body...)
	return finishLen(b, start)
}

func appendHeader(b []byte, version, typ uint8, xid uint32) []byte {
	b = append(b, version, typ, 0, 0)
	return binary.BigEndian.AppendUint32(b, xid)
}

// finishLen writes the length of the message that starts at b[start:].
func finishLen(b []byte, start int) []byte {
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

// pad8 appends zeros up to a multiple of 8 bytes counted from start.
func pad8(b []byte, start int) []byte {
	for (len(b)-start)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// AppendHello appends a HELLO for versions up to maxVersion down to
// Version13, with a version bitmap element.
func AppendHello(b []byte, maxVersion uint8, xid uint32) []byte {
	start := len(b)
	b = appendHeader(b, maxVersion, TypeHello, xid)
	var bitmap uint32
	for v := Version13; v <= maxVersion; v++ {
		bitmap |= 1 << v
	}
	b = binary.BigEndian.AppendUint16(b, 1) // OFPHET_VERSIONBITMAP
	b = binary.BigEndian.AppendUint16(b, 8)
	b = binary.BigEndian.AppendUint32(b, bitmap)
	return finishLen(b, start)
}

// Negotiate returns the highest version both the peer's HELLO and a
// client supporting Version13..maxVersion speak.
func Negotiate(peer Message, maxVersion uint8) (uint8, error) {
	if peer.Type != TypeHello {
		return 0, fmt.Errorf("negotiate: got message type %d, want HELLO", peer.Type)
	}
	ours := uint32(0)
	for v := Version13; v <= maxVersion; v++ {
		ours |= 1 << v
	}
	theirs := uint32(0)
	body := peer.Body
	for len(body) >= 4 {
		typ := binary.BigEndian.Uint16(body)
		n := int(binary.BigEndian.Uint16(body[2:]))
		if n < 4 || n > len(body) {
			return 0, fmt.Errorf("negotiate: bad hello element length %d", n)
		}
		if typ == 1 && n >= 8 {
			theirs = binary.BigEndian.Uint32(body[4:])
		}
		body = body[min((n+7)/8*8, len(body)):]
	}
	if theirs == 0 { // no bitmap: the peer speaks every version up to its own
		for v := uint8(1); v <= peer.Version && v < 32; v++ {
			theirs |= 1 << v
		}
	}
	for v := maxVersion; v >= Version13; v-- {
		if ours&theirs&(1<<v) != 0 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("negotiate: no common version (switch offers bitmap %#x, we speak %s to %s)",
		theirs, VersionName(Version13), VersionName(maxVersion))
}

// Features is the part of a FEATURES_REPLY the client keeps.
type Features struct {
	DatapathID uint64
	NTables    uint8
}

// DecodeFeatures decodes a FEATURES_REPLY body.
func DecodeFeatures(body []byte) (Features, error) {
	if len(body) < 24 {
		return Features{}, fmt.Errorf("features reply: %w (%d bytes)", errShort, len(body))
	}
	return Features{DatapathID: binary.BigEndian.Uint64(body), NTables: body[12]}, nil
}
