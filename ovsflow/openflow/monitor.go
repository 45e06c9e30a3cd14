package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// multipartFlowMonitor is OFPMP_FLOW_MONITOR (OpenFlow 1.4+).
const multipartFlowMonitor uint16 = 16

// Flow monitor request flags (OFPFMF_*) and command.
const (
	monitorInitial uint16 = 1 << 0
	monitorAdd     uint16 = 1 << 1
	monitorRemoved uint16 = 1 << 2
	monitorModify  uint16 = 1 << 3
	monitorAddCmd  uint8  = 0 // OFPFMC_ADD
)

// Flow update events (OFPFME_*).
const (
	EventInitial  uint16 = 0
	EventAdded    uint16 = 1
	EventRemoved  uint16 = 2
	EventModified uint16 = 3
	// EventAbbrev reports a change this connection made itself.
	EventAbbrev uint16 = 4
	// EventPaused says the switch stopped reporting (the connection fell
	// behind) until EventResumed: what changed meanwhile is unknown.
	EventPaused  uint16 = 5
	EventResumed uint16 = 6
)

// FlowUpdate is one flow monitor event: a flow another connection
// added, modified or removed. Match is left raw when it does not decode
// ([DecodeMatch]'s error in MatchErr).
type FlowUpdate struct {
	Event    uint16
	Table    uint8
	Reason   uint8
	Priority uint16
	Cookie   uint64
	Match    []OXM
	MatchErr error
}

// EventName is the name ovs-ofctl prints for a flow update event.
func EventName(e uint16) string {
	switch e {
	case EventInitial:
		return "INITIAL"
	case EventAdded:
		return "ADDED"
	case EventRemoved:
		return "DELETED"
	case EventModified:
		return "MODIFIED"
	case EventAbbrev:
		return "ABBREV"
	case EventPaused:
		return "PAUSED"
	case EventResumed:
		return "RESUMED"
	}
	return fmt.Sprintf("event(%d)", e)
}

// ErrNoMonitor is returned by [Client.MonitorFlows] on an OpenFlow 1.3
// connection: flow monitoring is an OpenFlow 1.4 message.
var ErrNoMonitor = errors.New("flow monitoring needs OpenFlow 1.4 or later")

// AppendFlowMonitorRequest appends an OFPMP_FLOW_MONITOR request for
// monitor id: every table, every flow, additions, modifications and
// removals by other connections, without their instructions and without
// the initial flows.
func AppendFlowMonitorRequest(b []byte, version uint8, xid, id uint32) []byte {
	start := len(b)
	b = appendHeader(b, version, TypeMultipartRequest, xid)
	b = binary.BigEndian.AppendUint16(b, multipartFlowMonitor)
	b = append(b, 0, 0, 0, 0, 0, 0) // flags, pad
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint32(b, PortAny)
	b = binary.BigEndian.AppendUint32(b, GroupAny)
	b = binary.BigEndian.AppendUint16(b, monitorAdd|monitorRemoved|monitorModify)
	b = append(b, TableAll, monitorAddCmd)
	b = AppendMatch(b, nil)
	return finishLen(b, start)
}

// IsFlowMonitorReply reports whether m is a flow monitor reply or
// update (a MULTIPART_REPLY of type OFPMP_FLOW_MONITOR).
func IsFlowMonitorReply(m Message) bool {
	return m.Type == TypeMultipartReply && len(m.Body) >= 2 && binary.BigEndian.Uint16(m.Body) == multipartFlowMonitor
}

// DecodeFlowMonitorReply decodes the flow updates of a flow monitor reply.
func DecodeFlowMonitorReply(body []byte) ([]FlowUpdate, error) {
	if len(body) < 8 || binary.BigEndian.Uint16(body) != multipartFlowMonitor {
		return nil, fmt.Errorf("flow monitor reply: %w (%d bytes)", errShort, len(body))
	}
	var out []FlowUpdate
	for b := body[8:]; len(b) > 0; {
		if len(b) < 4 {
			return out, fmt.Errorf("flow update: %w", errShort)
		}
		n := int(binary.BigEndian.Uint16(b))
		if n < 4 || n > len(b) {
			return out, fmt.Errorf("flow update of %d bytes: %w (%d bytes)", n, errShort, len(b))
		}
		u := FlowUpdate{Event: binary.BigEndian.Uint16(b[2:])}
		if u.Event <= EventModified {
			// length, event, table_id, reason, idle, hard, priority,
			// pad(4), cookie; then the match and instructions.
			if n < 24+matchHeaderLen {
				return out, fmt.Errorf("flow update: %w (%d bytes)", errShort, n)
			}
			u.Table, u.Reason = b[4], b[5]
			u.Priority = binary.BigEndian.Uint16(b[10:])
			u.Cookie = binary.BigEndian.Uint64(b[16:])
			u.Match, _, u.MatchErr = DecodeMatch(b[24:n])
		}
		out = append(out, u)
		b = b[n:]
	}
	return out, nil
}
