package ovsflow

import (
	"fmt"
	"slices"
	"strconv"
)

// DefaultPriority is the priority OpenFlow gives a flow that names none;
// ovs-ofctl leaves it out when printing.
const DefaultPriority = 32768

// Flow is one OpenFlow flow entry.
type Flow struct {
	Table    uint8
	Priority uint16
	Cookie   uint64
	Match    Match
	// Actions run in order; no action drops the packet.
	Actions []Action
}

// Validate checks that the flow can be rendered and that OVS would accept
// its match and actions together.
func (f *Flow) Validate() error {
	if err := f.Match.validate(); err != nil {
		return err
	}
	for _, a := range f.Actions {
		if err := a.validate(); err != nil {
			return err
		}
		if c, ok := a.(CT); ok && c.NAT != nil && c.NAT.Kind != NATRestore {
			if !f.Match.Proto.IsIPv4() && !f.Match.Proto.IsIPv6() {
				return fieldErr("ct(nat)", "needs an IP match, match is %q", f.Match.Proto)
			}
			if c.NAT.Addr.Is6() != f.Match.Proto.IsIPv6() {
				return fieldErr("ct(nat)", "address %s does not fit a %s match", c.NAT.Addr, f.Match.Proto)
			}
		}
	}
	return nil
}

// Resolve returns a copy of f whose named ports are replaced by their
// ofports from ports.
func (f Flow) Resolve(ports PortMap) (Flow, error) {
	var err error
	if f.Match.InPort, err = f.Match.InPort.resolve(ports); err != nil {
		return f, err
	}
	var acts []Action // copied on the first action that changes
	for i, a := range f.Actions {
		r, err := a.resolve(ports)
		if err != nil {
			return f, err
		}
		if r == nil {
			continue
		}
		if acts == nil {
			acts = slices.Clone(f.Actions)
		}
		acts[i] = r
	}
	if acts != nil {
		f.Actions = acts
	}
	return f, nil
}

// Key is what identifies the flow in its bridge: table, priority and
// match, as ovs-ofctl prints them. Two flows with one key are one flow
// of the bridge.
func (f *Flow) Key() string { return string(f.appendKey(nil)) }

// appendKey appends f's Key to b.
func (f *Flow) appendKey(b []byte) []byte {
	if f.Table != 0 {
		b = append(b, "table="...)
		b = strconv.AppendUint(b, uint64(f.Table), 10)
		b = append(b, ", "...)
	}
	start := len(b)
	if f.Priority != DefaultPriority {
		b = append(b, "priority="...)
		b = strconv.AppendUint(b, uint64(f.Priority), 10)
		b = append(b, ',')
	}
	b = f.Match.appendText(b)
	if len(b) > start {
		b = b[:len(b)-1] // the trailing comma
	}
	return b
}

func (f *Flow) appendActions(b []byte) []byte {
	if len(f.Actions) == 0 {
		return append(b, "drop"...)
	}
	for i, a := range f.Actions {
		if i > 0 {
			b = append(b, ',')
		}
		b = a.appendText(b)
	}
	return b
}

// AppendText appends the flow as `ovs-ofctl -O OpenFlow13 --no-stats
// dump-flows` prints it (without the leading space).
func (f *Flow) AppendText(b []byte) []byte {
	b = appendCookie(b, f.Cookie)
	b = f.appendKey(b)
	b = append(b, " actions="...)
	return f.appendActions(b)
}

// String renders the flow as AppendText does.
func (f Flow) String() string { return string(f.AppendText(nil)) }

// appendCookie appends "cookie=0x.., " as dump-flows prints a non-zero
// cookie.
func appendCookie(b []byte, cookie uint64) []byte {
	if cookie == 0 {
		return b
	}
	b = append(b, "cookie="...)
	b = appendHex(b, cookie)
	return append(b, ", "...)
}

// FlowError ties an error to the flow (and its owner) that caused it.
type FlowError struct {
	Owner string
	Flow  string
	Err   error
}

func (e *FlowError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("flow %q: %v", e.Flow, e.Err)
	}
	return fmt.Sprintf("owner %q: flow %q: %v", e.Owner, e.Flow, e.Err)
}

func (e *FlowError) Unwrap() error { return e.Err }
