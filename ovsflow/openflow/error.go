package openflow

import (
	"encoding/binary"
	"fmt"
)

// Error is an OpenFlow ERROR message from the switch.
type Error struct {
	Type, Code uint16
	// Data is the start of the message that failed.
	Data []byte
}

// errorTypes names the OFPET_* error types (OpenFlow 1.3 to 1.5).
var errorTypes = map[uint16]string{
	0: "hello_failed", 1: "bad_request", 2: "bad_action", 3: "bad_instruction",
	4: "bad_match", 5: "flow_mod_failed", 6: "group_mod_failed", 7: "port_mod_failed",
	8: "table_mod_failed", 9: "queue_op_failed", 10: "switch_config_failed",
	11: "role_request_failed", 12: "meter_mod_failed", 13: "table_features_failed",
	14: "bad_property", 15: "async_config_failed", 16: "flow_monitor_failed",
	17: "bundle_failed", 0xffff: "experimenter",
}

// errorCodes names the codes of the error types a flow program can meet.
var errorCodes = map[uint16][]string{
	1: {"bad_version", "bad_type", "bad_multipart", "bad_experimenter", "bad_exp_type", "eperm",
		"bad_len", "buffer_empty", "buffer_unknown", "bad_table_id", "is_slave", "bad_port",
		"bad_packet", "multipart_buffer_overflow", "multipart_request_timeout",
		"multipart_reply_timeout", "multipart_bad_sched", "pipeline_fields_only",
		"unknown"},
	2: {"bad_type", "bad_len", "bad_experimenter", "bad_exp_type", "bad_out_port", "bad_argument",
		"eperm", "too_many", "bad_queue", "bad_out_group", "match_inconsistent", "unsupported_order",
		"bad_tag", "bad_set_type", "bad_set_len", "bad_set_argument", "bad_set_mask"},
	3: {"unknown_inst", "unsup_inst", "bad_table_id", "unsup_metadata", "unsup_metadata_mask",
		"bad_experimenter", "bad_exp_type", "bad_len", "eperm", "dup_inst"},
	4: {"bad_type", "bad_len", "bad_tag", "bad_dl_addr_mask", "bad_nw_addr_mask", "bad_wildcards",
		"bad_field", "bad_value", "bad_mask", "bad_prereq", "dup_field", "eperm"},
	5: {"unknown", "table_full", "bad_table_id", "overlap", "eperm", "bad_timeout", "bad_command",
		"bad_flags", "cant_sync", "bad_priority", "is_sync"},
	17: {"unknown", "eperm", "bad_id", "bundle_exist", "bundle_closed", "out_of_bundles",
		"bad_type", "bad_flags", "msg_bad_len", "msg_bad_xid", "msg_unsup", "msg_conflict",
		"msg_too_many", "msg_failed", "timeout", "bundle_in_progress", "sched_not_supported",
		"sched_future", "sched_past"},
}

func (e *Error) Error() string {
	typ, ok := errorTypes[e.Type]
	if !ok {
		typ = fmt.Sprintf("type %d", e.Type)
	}
	code := fmt.Sprintf("code %d", e.Code)
	if names := errorCodes[e.Type]; int(e.Code) < len(names) {
		code = names[e.Code]
	}
	return "openflow error " + typ + ": " + code
}

// DecodeError decodes an ERROR body.
func DecodeError(body []byte) (*Error, error) {
	if len(body) < 4 {
		return nil, fmt.Errorf("error message: %w (%d bytes)", errShort, len(body))
	}
	return &Error{Type: binary.BigEndian.Uint16(body), Code: binary.BigEndian.Uint16(body[2:]), Data: body[4:]}, nil
}
