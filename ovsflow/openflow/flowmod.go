package openflow

import (
	"encoding/binary"
	"fmt"
)

// Flow-mod commands (OFPFC_*).
const (
	FlowAdd          uint8 = 0
	FlowModify       uint8 = 1
	FlowModifyStrict uint8 = 2
	FlowDelete       uint8 = 3
	FlowDeleteStrict uint8 = 4
)

// Wildcards of flow-mods and requests.
const (
	TableAll uint8  = 0xff
	GroupAny uint32 = 0xffffffff
	noBuffer uint32 = 0xffffffff
)

// flowModFixed is the length of ofp_flow_mod before its match.
const flowModFixed = HeaderLen + 40

// FlowMod is a FLOW_MOD: a command on the flows of Table (TableAll for a
// non-strict delete of every table) matching Priority and Match.
type FlowMod struct {
	Command            uint8
	Table              uint8
	Priority           uint16
	Cookie, CookieMask uint64
	Match              []OXM
	Actions            []Action
}

// Append appends the FLOW_MOD message.
func (f *FlowMod) Append(b []byte, version uint8, xid uint32) []byte {
	start := len(b)
	b = appendHeader(b, version, TypeFlowMod, xid)
	b = binary.BigEndian.AppendUint64(b, f.Cookie)
	b = binary.BigEndian.AppendUint64(b, f.CookieMask)
	b = append(b, f.Table, f.Command, 0, 0, 0, 0) // idle and hard timeouts 0
	b = binary.BigEndian.AppendUint16(b, f.Priority)
	b = binary.BigEndian.AppendUint32(b, noBuffer)
	b = binary.BigEndian.AppendUint32(b, PortAny)
	b = binary.BigEndian.AppendUint32(b, GroupAny)
	b = append(b, 0, 0, 0, 0) // flags, importance
	b = AppendMatch(b, f.Match)
	b = AppendInstructions(b, f.Actions)
	return finishLen(b, start)
}

// DecodeFlowMod decodes a FLOW_MOD message (as found in an error's data or
// a bundle).
func DecodeFlowMod(m Message) (FlowMod, error) {
	b := m.Body
	if m.Type != TypeFlowMod {
		return FlowMod{}, fmt.Errorf("flow_mod: message type %d", m.Type)
	}
	if len(b) < flowModFixed-HeaderLen {
		return FlowMod{}, fmt.Errorf("flow_mod: %w (%d bytes)", errShort, len(b))
	}
	f := FlowMod{Cookie: binary.BigEndian.Uint64(b), CookieMask: binary.BigEndian.Uint64(b[8:]),
		Table: b[16], Command: b[17], Priority: binary.BigEndian.Uint16(b[22:])}
	var n int
	var err error
	if f.Match, n, err = DecodeMatch(b[40:]); err != nil {
		return FlowMod{}, fmt.Errorf("flow_mod: %w", err)
	}
	if f.Actions, err = DecodeInstructions(b[40+n:]); err != nil {
		return FlowMod{}, fmt.Errorf("flow_mod: %w", err)
	}
	return f, nil
}

// Multipart types and flags.
const (
	multipartFlow uint16 = 1
	// MultipartMore is set on every part of a multipart reply but the last.
	MultipartMore uint16 = 1
)

// AppendFlowStatsRequest appends a MULTIPART_REQUEST for every flow of
// every table.
func AppendFlowStatsRequest(b []byte, version uint8, xid uint32) []byte {
	start := len(b)
	b = appendHeader(b, version, TypeMultipartRequest, xid)
	b = binary.BigEndian.AppendUint16(b, multipartFlow)
	b = append(b, 0, 0, 0, 0, 0, 0) // flags, pad
	b = append(b, TableAll, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, PortAny)
	b = binary.BigEndian.AppendUint32(b, GroupAny)
	b = append(b, 0, 0, 0, 0)
	b = append(b, make([]byte, 16)...) // cookie, cookie_mask
	b = AppendMatch(b, nil)
	return finishLen(b, start)
}

// FlowStats is one flow of a flow-stats reply, without its counters.
type FlowStats struct {
	Table                    uint8
	Priority                 uint16
	IdleTimeout, HardTimeout uint16
	Flags                    uint16
	Cookie                   uint64
	Match                    []OXM
	Actions                  []Action
	// MatchErr and ActionsErr say why the match or the instructions of
	// a well-framed entry did not decode (another controller's field,
	// action or instruction); Match or Actions is then empty. A reply
	// with such entries still decodes whole.
	MatchErr, ActionsErr error
}

// DecodeFlowStatsReply decodes one MULTIPART_REPLY of flow statistics in
// the layout of version and reports whether more parts follow.
func DecodeFlowStatsReply(version uint8, body []byte) ([]FlowStats, bool, error) {
	if len(body) < 8 {
		return nil, false, fmt.Errorf("multipart reply: %w (%d bytes)", errShort, len(body))
	}
	if t := binary.BigEndian.Uint16(body); t != multipartFlow {
		return nil, false, fmt.Errorf("multipart reply type %d, want flow stats", t)
	}
	more := binary.BigEndian.Uint16(body[2:])&MultipartMore != 0
	var flows []FlowStats
	for b := body[8:]; len(b) > 0; {
		if len(b) < 2 {
			return nil, false, fmt.Errorf("flow stats: %w", errShort)
		}
		n := int(binary.BigEndian.Uint16(b))
		if n > len(b) {
			return nil, false, fmt.Errorf("flow stats entry of %d bytes: %w (%d bytes)", n, errShort, len(b))
		}
		f, err := decodeFlowStats(version, b[:n])
		if err != nil {
			return nil, false, err
		}
		flows = append(flows, f)
		b = b[n:]
	}
	return flows, more, nil
}

func decodeFlowStats(version uint8, b []byte) (FlowStats, error) {
	var f FlowStats
	var rest []byte
	if version >= Version15 {
		// length, pad, table_id, reason, priority, idle, hard, flags,
		// importance, cookie; then match, OXS stats, instructions.
		if len(b) < 24 {
			return f, fmt.Errorf("flow stats entry: %w (%d bytes)", errShort, len(b))
		}
		f.Table, f.Priority = b[4], binary.BigEndian.Uint16(b[6:])
		f.IdleTimeout, f.HardTimeout = binary.BigEndian.Uint16(b[8:]), binary.BigEndian.Uint16(b[10:])
		f.Flags, f.Cookie = binary.BigEndian.Uint16(b[12:]), binary.BigEndian.Uint64(b[16:])
		rest = b[24:]
	} else {
		// length, table_id, pad, duration (8), priority, idle, hard,
		// flags, importance/pad (4), cookie, packets, bytes; then match
		// and instructions.
		if len(b) < 48 {
			return f, fmt.Errorf("flow stats entry: %w (%d bytes)", errShort, len(b))
		}
		f.Table, f.Priority = b[2], binary.BigEndian.Uint16(b[12:])
		f.IdleTimeout, f.HardTimeout = binary.BigEndian.Uint16(b[14:]), binary.BigEndian.Uint16(b[16:])
		f.Flags, f.Cookie = binary.BigEndian.Uint16(b[18:]), binary.BigEndian.Uint64(b[24:])
		rest = b[48:]
	}
	if len(rest) < matchHeaderLen {
		return f, fmt.Errorf("flow stats entry: match: %w", errShort)
	}
	n := (int(binary.BigEndian.Uint16(rest[2:])) + 7) / 8 * 8
	if n < matchHeaderLen || n > len(rest) {
		return f, fmt.Errorf("flow stats entry: match of %d bytes: %w (%d bytes)", n, errShort, len(rest))
	}
	var err error
	if f.Match, _, err = DecodeMatch(rest[:n]); err != nil {
		f.MatchErr = err
	}
	rest = rest[n:]
	if version >= Version15 { // skip ofp_stats
		if len(rest) < 4 {
			return f, fmt.Errorf("flow stats entry: stats: %w", errShort)
		}
		k := (int(binary.BigEndian.Uint16(rest[2:])) + 7) / 8 * 8
		if k < 4 || k > len(rest) {
			return f, fmt.Errorf("flow stats entry: stats of %d bytes: %w", k, errShort)
		}
		rest = rest[k:]
	}
	if f.Actions, err = DecodeInstructions(rest); err != nil {
		f.ActionsErr = err
	}
	return f, nil
}

// Bundle control types (OFPBCT_*) and flags (OFPBF_*).
const (
	BundleOpen          uint16 = 0
	BundleOpenReply     uint16 = 1
	BundleCommit        uint16 = 4
	BundleCommitReply   uint16 = 5
	BundleDiscard       uint16 = 6
	BundleDiscardReply  uint16 = 7
	BundleAtomic        uint16 = 1
	BundleOrdered       uint16 = 2
	onfExperimenter     uint32 = 0x4f4e4600
	onfBundleControl    uint32 = 2300
	onfBundleAdd        uint32 = 2301
	bundleControlFixed         = HeaderLen + 8
	onfExperimenterHead        = HeaderLen + 8
)

// appendBundleHeader appends the header of a bundle control or add
// message: OpenFlow 1.4+ has its own types; OpenFlow 1.3 carries the same
// bodies in ONF experimenter messages.
func appendBundleHeader(b []byte, version uint8, add bool, xid uint32) []byte {
	if version >= Version14 {
		t := TypeBundleControl
		if add {
			t = TypeBundleAdd
		}
		return appendHeader(b, version, t, xid)
	}
	b = appendHeader(b, version, TypeExperimenter, xid)
	b = binary.BigEndian.AppendUint32(b, onfExperimenter)
	if add {
		return binary.BigEndian.AppendUint32(b, onfBundleAdd)
	}
	return binary.BigEndian.AppendUint32(b, onfBundleControl)
}

// AppendBundleControl appends a bundle control message.
func AppendBundleControl(b []byte, version uint8, xid, id uint32, typ, flags uint16) []byte {
	start := len(b)
	b = appendBundleHeader(b, version, false, xid)
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, flags)
	return finishLen(b, start)
}

// AppendBundleAdd appends a bundle add message carrying f; the inner
// FLOW_MOD has the same xid, as OVS requires.
func AppendBundleAdd(b []byte, version uint8, xid, id uint32, flags uint16, f *FlowMod) []byte {
	start := len(b)
	b = appendBundleHeader(b, version, true, xid)
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(b, 0, 0)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = f.Append(b, version, xid)
	return finishLen(b, start)
}

// BundleReply is a bundle control message from the switch.
type BundleReply struct {
	ID   uint32
	Type uint16
}

// DecodeBundleControl decodes a bundle control message (OpenFlow 1.4+ or
// the ONF experimenter form); ok is false for any other message.
func DecodeBundleControl(m Message) (r BundleReply, ok bool, err error) {
	body := m.Body
	switch {
	case m.Type == TypeBundleControl && m.Version >= Version14:
	case m.Type == TypeExperimenter && len(body) >= 8 &&
		binary.BigEndian.Uint32(body) == onfExperimenter && binary.BigEndian.Uint32(body[4:]) == onfBundleControl:
		body = body[8:]
	default:
		return r, false, nil
	}
	if len(body) < 8 {
		return r, true, fmt.Errorf("bundle control: %w (%d bytes)", errShort, len(body))
	}
	return BundleReply{ID: binary.BigEndian.Uint32(body), Type: binary.BigEndian.Uint16(body[4:])}, true, nil
}
