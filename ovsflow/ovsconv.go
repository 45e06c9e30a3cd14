package ovsflow

import (
	"fmt"
	"strings"

	"github.com/digitalocean/go-openvswitch/ovs"
)

// ToOVS converts f to go-openvswitch's ovs.Flow, for CNIs built on
// go-openvswitch. Resolve f first ([Flow.Resolve]): an ovs.Flow names
// ports by number only, so a resolved port becomes its number and
// [FromOVS] gives it back without the name it was resolved from (which
// the bridge does not hold either). What go-openvswitch cannot hold is a
// [*FieldError] naming the field, never dropped: a port name (in_port,
// output, resubmit), a reserved port other than LOCAL as in_port or in a
// resubmit, resubmit to table 0 (go-openvswitch writes "resubmit(port,)",
// which is the current table), a group action and ct() without
// arguments. pkt_mark, which go-openvswitch has no typed match for, goes
// into an ovs.FieldMatch; go-openvswitch's own parser (ovs.Flow's
// UnmarshalText, DumpFlows) drops that field, [FromOVS] keeps it.
func ToOVS(f Flow) (*ovs.Flow, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	in, err := ovsInPort(f.Match.InPort)
	if err != nil {
		return nil, err
	}
	of := &ovs.Flow{
		Table:    int(f.Table),
		Priority: int(f.Priority),
		Cookie:   f.Cookie,
		Protocol: ovs.Protocol(f.Match.Proto.String()),
		InPort:   in,
		Matches:  ovsMatches(&f.Match),
	}
	if len(f.Actions) == 0 {
		of.Actions = []ovs.Action{ovs.Drop()}
		return of, nil
	}
	for _, a := range f.Actions {
		oa, err := ovsAction(a)
		if err != nil {
			return nil, err
		}
		of.Actions = append(of.Actions, oa)
	}
	return of, nil
}

func ovsInPort(p Port) (int, error) {
	switch {
	case p.IsZero():
		return 0, nil
	case p == LOCAL:
		return ovs.PortLOCAL, nil
	case p.named():
		return 0, fieldErr("in_port", "port %q is not resolved: an ovs.Flow names ports by number", p.name)
	case p.reserved():
		return 0, fieldErr("in_port", "an ovs.Flow holds no in_port=%s", p.name)
	}
	return int(p.num), nil
}

// ovsMatches converts the fields of m but its protocol and in_port, in
// the order ovs-ofctl prints them.
func ovsMatches(m *Match) []ovs.Match {
	var out []ovs.Match
	add := func(x ovs.Match) { out = append(out, x) }
	if m.PktMark.IsSet() {
		add(ovs.FieldMatch("pkt_mark", string(appendMaskedValue(nil, m.PktMark))))
	}
	if m.CtState.On|m.CtState.Off != 0 {
		add(ovs.ConnectionTrackingState(ovsCtStates(m.CtState)...))
	}
	if m.CtZone != 0 {
		add(ovs.ConnectionTrackingZone(m.CtZone))
	}
	if m.CtMark.IsSet() {
		mask := m.CtMark.Mask
		if mask == ^uint32(0) {
			mask = 0 // go-openvswitch: no mask is an exact match
		}
		add(ovs.ConnectionTrackingMark(m.CtMark.Value&m.CtMark.Mask, mask))
	}
	if m.DlVLAN != 0 {
		add(ovs.DataLinkVLAN(int(m.DlVLAN)))
	}
	if len(m.DlSrc) > 0 {
		add(ovs.DataLinkSource(m.DlSrc.String()))
	}
	if len(m.DlDst) > 0 {
		add(ovs.DataLinkDestination(m.DlDst.String()))
	}
	if m.ARPSpa.IsValid() {
		add(ovs.ARPSourceProtocolAddress(string(appendPrefixValue(nil, m.ARPSpa))))
	}
	if m.ARPTpa.IsValid() {
		add(ovs.ARPTargetProtocolAddress(string(appendPrefixValue(nil, m.ARPTpa))))
	}
	if m.ARPOp != 0 {
		add(ovs.ARPOperation(m.ARPOp))
	}
	return append(out, ovsL3L4Matches(m)...)
}

// ovsL3L4Matches converts the IP, transport, ICMP and ND fields of m.
func ovsL3L4Matches(m *Match) []ovs.Match {
	var out []ovs.Match
	src, dst := ovs.NetworkSource, ovs.NetworkDestination
	if m.Proto.IsIPv6() {
		src, dst = ovs.IPv6Source, ovs.IPv6Destination
	}
	if m.NwSrc.IsValid() {
		out = append(out, src(string(appendPrefixValue(nil, m.NwSrc))))
	}
	if m.NwDst.IsValid() {
		out = append(out, dst(string(appendPrefixValue(nil, m.NwDst))))
	}
	if m.TpSrc != 0 {
		out = append(out, ovs.TransportSourcePort(m.TpSrc))
	}
	if m.TpDst != 0 {
		out = append(out, ovs.TransportDestinationPort(m.TpDst))
	}
	if m.ICMP != nil && m.Proto == ProtoICMP6 {
		out = append(out, ovs.ICMP6Type(m.ICMP.Type), ovs.ICMP6Code(m.ICMP.Code))
	} else if m.ICMP != nil {
		out = append(out, ovs.ICMPType(m.ICMP.Type), ovs.ICMPCode(m.ICMP.Code))
	}
	if m.NDTarget.IsValid() {
		out = append(out, ovs.NeighborDiscoveryTarget(m.NDTarget.String()))
	}
	return out
}

func ovsCtStates(s CtState) []string {
	var out []string
	for i, name := range ctFlagNames {
		switch f := CtFlags(1 << i); {
		case s.On&f != 0:
			out = append(out, ovs.SetState(ovs.CTState(name)))
		case s.Off&f != 0:
			out = append(out, ovs.UnsetState(ovs.CTState(name)))
		}
	}
	return out
}

func ovsAction(a Action) (ovs.Action, error) {
	switch a := a.(type) {
	case output:
		return ovsOutput(a.port)
	case popVLAN:
		return ovs.StripVLAN(), nil
	case setField:
		return ovs.SetField(a.value, string(a.field)), nil
	case load:
		return ovs.Load(string(appendHex(nil, uint64(a.value))), nxmNames[a.field]+"[]"), nil
	case resubmit:
		return ovsResubmit(a)
	case CT:
		text := a.appendText(nil)
		args := string(text[len("ct(") : len(text)-1])
		if args == "" {
			return nil, fieldErr("ct", "go-openvswitch refuses ct() without arguments")
		}
		return ovs.ConnectionTracking(args), nil
	case group:
		return nil, fieldErr("group", "go-openvswitch has no group action")
	}
	return nil, fieldErr(fmt.Sprintf("%T", a), "unknown action")
}

func ovsOutput(p Port) (ovs.Action, error) {
	switch p {
	case LOCAL:
		return ovs.Local(), nil
	case NORMAL:
		return ovs.Normal(), nil
	case FLOOD:
		return ovs.Flood(), nil
	case InPort:
		return ovs.InPort(), nil
	}
	if p.named() {
		return nil, fieldErr("output", "port %q is not resolved: an ovs.Flow names ports by number", p.name)
	}
	return ovs.Output(int(p.num)), nil
}

func ovsResubmit(a resubmit) (ovs.Action, error) {
	switch {
	case a.table == 0:
		return nil, fieldErr("resubmit", "go-openvswitch writes table 0 as resubmit(port,), the current table")
	case a.port.named():
		return nil, fieldErr("resubmit", "port %q is not resolved: an ovs.Flow names ports by number", a.port.name)
	case a.port.reserved():
		return nil, fieldErr("resubmit", "go-openvswitch resubmits to port numbers only, not %s", a.port.name)
	}
	return ovs.Resubmit(int(a.port.num), int(a.table)), nil
}

// FromOVS converts a go-openvswitch flow to a Flow. Each match and action
// is read from the text go-openvswitch renders for it, so a flow made with
// ovs.FieldMatch or a free-form ovs.ConnectionTracking converts as ovs-ofctl
// would read it. What a Flow cannot hold is a [*FieldError] naming the
// field, never dropped: idle_timeout, a match or action outside this
// package's model (tun_id, metadata, reg0, mod_vlan_vid, learn, ...), a
// field matched twice, a port given by name, drop with other actions.
// Stats, the counters of a dumped flow, are not part of a flow and are
// not carried.
func FromOVS(of *ovs.Flow) (Flow, error) {
	if of == nil {
		return Flow{}, fieldErr("flow", "nil ovs.Flow")
	}
	f, err := fromOVSHeader(of)
	if err != nil {
		return Flow{}, err
	}
	seen := map[string]bool{"in_port": of.InPort != 0}
	for _, m := range of.Matches {
		if err := f.fromOVSMatch(m, seen); err != nil {
			return Flow{}, err
		}
	}
	if f.Actions, err = fromOVSActions(of.Actions); err != nil {
		return Flow{}, err
	}
	if field := namedPort(&f); field != "" {
		return Flow{}, fieldErr(field, "a port given by name: an ovs.Flow names ports by number")
	}
	if err := f.Validate(); err != nil {
		return Flow{}, err
	}
	return f, nil
}

// fromOVSHeader converts the table, priority, cookie, idle_timeout,
// protocol and in_port of of.
func fromOVSHeader(of *ovs.Flow) (Flow, error) {
	f := Flow{Cookie: of.Cookie}
	switch {
	case of.Table < 0 || of.Table > 0xff:
		return f, fieldErr("table", "%d is not a table number", of.Table)
	case of.Priority < 0 || of.Priority > 0xffff:
		return f, fieldErr("priority", "%d is out of range 0-65535", of.Priority)
	case of.IdleTimeout != 0:
		return f, fieldErr("idle_timeout", "a Flow has no timeouts")
	case of.InPort < ovs.PortLOCAL || int64(of.InPort) >= int64(ofppMax):
		return f, fieldErr("in_port", "%d is not a port number", of.InPort)
	}
	f.Table, f.Priority = uint8(of.Table), uint16(of.Priority)
	if of.Protocol != "" {
		p, ok := parseProto(string(of.Protocol))
		if !ok {
			return f, fieldErr("protocol", "%q is not a protocol a Flow matches", of.Protocol)
		}
		f.Match.Proto = p
	}
	if of.InPort == ovs.PortLOCAL {
		f.Match.InPort = LOCAL
	} else if of.InPort > 0 {
		f.Match.InPort = PortNumber(uint32(of.InPort))
	}
	return f, nil
}

// matchAliases are the match keys that set the same field as another key.
var matchAliases = map[string]string{
	"eth_src": "dl_src", "eth_dst": "dl_dst", "ipv6_src": "nw_src", "ipv6_dst": "nw_dst",
	"icmpv6_type": "icmp_type", "icmpv6_code": "icmp_code",
}

// fromOVSMatch sets the field m renders to; seen holds the fields already
// set, by their canonical key.
func (f *Flow) fromOVSMatch(m ovs.Match, seen map[string]bool) error {
	text, err := m.MarshalText()
	if err != nil {
		return fieldErr(m.GoString(), "go-openvswitch does not render it: %v", err)
	}
	k, _, ok := strings.Cut(string(text), "=")
	key := k
	if alias, isAlias := matchAliases[k]; isAlias {
		key = alias
	}
	switch {
	case !ok:
		return fieldErr(string(text), "not a field=value match")
	case statKeys[k] || k == "cookie" || k == "table" || k == "priority" || k == "idle_timeout":
		return fieldErr(k, "not a match field")
	case seen[key]:
		return fieldErr(k, "matched twice")
	}
	seen[key] = true
	if err := f.parseField(string(text)); err != nil {
		return fieldErr(k, "%v", err)
	}
	return nil
}

func fromOVSActions(as []ovs.Action) ([]Action, error) {
	var out []Action
	for _, a := range as {
		text, err := a.MarshalText()
		if err != nil {
			return nil, fieldErr(a.GoString(), "go-openvswitch does not render it: %v", err)
		}
		s := string(text)
		if s == "" {
			return nil, fieldErr(a.GoString(), "renders no action")
		}
		if s == "drop" {
			if len(as) > 1 {
				return nil, fieldErr("drop", "with other actions")
			}
			continue
		}
		acts, err := parseActions(s)
		if err != nil {
			return nil, fieldErr(actionName(s), "%v", err)
		}
		out = append(out, acts...)
	}
	return out, nil
}

// actionName is the keyword of an action's text: "mod_vlan_vid" of
// "mod_vlan_vid:10", "learn" of "learn(...)".
func actionName(s string) string {
	if i := strings.IndexAny(s, ":("); i >= 0 {
		return s[:i]
	}
	return s
}

// namedPort names the field of f that gives a port by name, "" if none.
func namedPort(f *Flow) string {
	if f.Match.InPort.named() {
		return "in_port"
	}
	for _, a := range f.Actions {
		switch a := a.(type) {
		case output:
			if a.port.named() {
				return "output"
			}
		case resubmit:
			if a.port.named() {
				return "resubmit"
			}
		}
	}
	return ""
}
