package ovsflow

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// statKeys are the counters and timers dump-flows prints without
// --no-stats; the parser skips them.
var statKeys = map[string]bool{
	"duration": true, "n_packets": true, "n_bytes": true, "idle_age": true,
	"hard_age": true, "reset_counts": true, "n_offload_packets": true, "n_offload_bytes": true,
}

// ParseFlow parses one flow as `ovs-ofctl -O OpenFlow13 dump-flows` prints
// it (with or without statistics), as [Flow.String] renders it, or as
// go-openvswitch's ovs.Flow.MarshalText writes it (",actions=", an
// explicit idle_timeout=0). Every field and action this package can emit
// round-trips; anything else is an error, never silently dropped.
func ParseFlow(s string) (Flow, error) {
	var f Flow
	head, acts, ok := cutActions(strings.TrimSpace(s))
	if !ok {
		return f, fmt.Errorf("parse flow %q: no actions", s)
	}
	f.Priority = DefaultPriority
	for _, tok := range strings.Split(head, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		if err := f.parseField(tok); err != nil {
			return Flow{}, fmt.Errorf("parse flow %q: %w", s, err)
		}
	}
	var err error
	if f.Actions, err = parseActions(acts); err != nil {
		return Flow{}, fmt.Errorf("parse flow %q: %w", s, err)
	}
	return f, nil
}

// ParseFlows parses a dump-flows listing, one flow per line. Reply headers
// (lines starting with "OFPST_FLOW" or "NXST_FLOW") and blank lines are
// skipped.
func ParseFlows(dump []byte) ([]Flow, error) {
	var flows []Flow
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || isReplyHeader(line) {
			continue
		}
		f, err := ParseFlow(line)
		if err != nil {
			return nil, err
		}
		flows = append(flows, f)
	}
	return flows, sc.Err()
}

// cutActions splits a flow at "actions=", which starts the flow or follows
// a space (dump-flows) or a comma (ovs-ofctl's input, go-openvswitch).
func cutActions(s string) (head, acts string, ok bool) {
	i := strings.Index(s, "actions=")
	if i < 0 || (i > 0 && s[i-1] != ' ' && s[i-1] != ',') {
		return "", "", false
	}
	return s[:i], s[i+len("actions="):], true
}

func isReplyHeader(line string) bool {
	return strings.HasPrefix(line, "OFPST_") || strings.HasPrefix(line, "NXST_")
}

func (f *Flow) parseField(tok string) error {
	k, v, hasValue := strings.Cut(tok, "=")
	if !hasValue {
		p, ok := parseProto(k)
		if !ok {
			return fmt.Errorf("unknown match keyword %q", k)
		}
		f.Match.Proto = p
		return nil
	}
	if statKeys[k] {
		return nil
	}
	m := &f.Match
	var err error
	switch k {
	case "cookie":
		f.Cookie, err = strconv.ParseUint(v, 0, 64)
	case "table":
		var n uint64
		n, err = strconv.ParseUint(v, 10, 8)
		f.Table = uint8(n)
	case "priority":
		var n uint64
		n, err = strconv.ParseUint(v, 10, 16)
		f.Priority = uint16(n)
	case "idle_timeout":
		if v != "0" {
			err = fmt.Errorf("%q: a Flow has no timeouts", v)
		}
	case "pkt_mark":
		m.PktMark, err = parseMasked(v)
	case "ct_mark":
		m.CtMark, err = parseMasked(v)
	case "ct_state":
		m.CtState, err = parseCtState(v)
	case "ct_zone":
		m.CtZone, err = parseUint16(v)
	case "in_port":
		m.InPort, err = parsePort(v)
	case "dl_vlan":
		m.DlVLAN, err = parseUint16(v)
	case "dl_src", "eth_src":
		m.DlSrc, err = parseMAC(v)
	case "dl_dst", "eth_dst":
		m.DlDst, err = parseMAC(v)
	case "arp_spa":
		m.ARPSpa, err = parsePrefix(v)
	case "arp_tpa":
		m.ARPTpa, err = parsePrefix(v)
	case "arp_op":
		m.ARPOp, err = parseUint16(v)
	case "nw_src", "ipv6_src":
		m.NwSrc, err = parsePrefix(v)
	case "nw_dst", "ipv6_dst":
		m.NwDst, err = parsePrefix(v)
	case "tp_src":
		m.TpSrc, err = parseUint16(v)
	case "tp_dst":
		m.TpDst, err = parseUint16(v)
	case "icmp_type", "icmpv6_type":
		var n uint16
		n, err = parseUint16(v)
		if m.ICMP == nil {
			m.ICMP = &ICMP{}
		}
		m.ICMP.Type = uint8(n)
	case "icmp_code", "icmpv6_code":
		var n uint16
		n, err = parseUint16(v)
		if m.ICMP == nil {
			m.ICMP = &ICMP{}
		}
		m.ICMP.Code = uint8(n)
	case "nd_target":
		m.NDTarget, err = netip.ParseAddr(v)
	default:
		return fmt.Errorf("unknown match field %q", k)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	return nil
}

// parseProto reads a protocol shorthand (ip, tcp6, ...; ip6 for ipv6).
func parseProto(s string) (Proto, bool) {
	if s == "ip6" {
		return ProtoIPv6, true
	}
	if i := indexOf(protoNames[1:], s); i >= 0 {
		return Proto(i + 1), true
	}
	return ProtoAny, false
}

func parseUint16(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 0, 16)
	return uint16(n), err
}

func parseMasked(s string) (Masked, error) {
	v, mask, hasMask := strings.Cut(s, "/")
	val, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return Masked{}, err
	}
	if !hasMask {
		return Exact(uint32(val)), nil
	}
	mk, err := strconv.ParseUint(mask, 0, 32)
	if err != nil {
		return Masked{}, err
	}
	return Masked{Value: uint32(val), Mask: uint32(mk)}, nil
}

func parseCtState(s string) (CtState, error) {
	var st CtState
	for s != "" {
		sign := s[0]
		if sign != '+' && sign != '-' {
			return st, fmt.Errorf("flag %q lacks + or -", s)
		}
		s = s[1:]
		end := strings.IndexAny(s, "+-")
		if end < 0 {
			end = len(s)
		}
		name := s[:end]
		s = s[end:]
		i := indexOf(ctFlagNames[:], name)
		if i < 0 {
			return st, fmt.Errorf("unknown flag %q", name)
		}
		if sign == '+' {
			st.On |= 1 << i
		} else {
			st.Off |= 1 << i
		}
	}
	return st, nil
}

func indexOf(names []string, s string) int {
	for i, n := range names {
		if n == s {
			return i
		}
	}
	return -1
}

func parseMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err == nil && len(mac) != 6 {
		err = fmt.Errorf("%q is not a 6-byte MAC address", s)
	}
	return mac, err
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, err
		}
		if p != p.Masked() {
			return p, fmt.Errorf("%s has host bits set", s)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return Host(a), nil
}

// splitTop splits s at commas that are not inside parentheses or brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

func parseActions(s string) ([]Action, error) {
	s = strings.TrimSpace(s)
	if s == "drop" || s == "" {
		return nil, nil
	}
	var acts []Action
	for _, tok := range splitTop(s) {
		a, err := parseAction(strings.TrimSpace(tok))
		if err != nil {
			return nil, fmt.Errorf("action %q: %w", tok, err)
		}
		acts = append(acts, a)
	}
	return acts, nil
}

// reservedOutputs are the ports a bare action names, in any case
// (go-openvswitch writes "local", ovs-ofctl prints "LOCAL").
var reservedOutputs = []Port{LOCAL, NORMAL, FLOOD, InPort}

func parseAction(tok string) (Action, error) {
	for _, p := range reservedOutputs {
		if strings.EqualFold(tok, p.name) {
			return Output(p), nil
		}
	}
	if tok == "pop_vlan" || tok == "strip_vlan" {
		return PopVLAN(), nil
	}
	name, arg, _ := strings.Cut(tok, ":")
	switch {
	case name == "output":
		p, err := parsePort(arg)
		return Output(p), err
	case name == "group":
		n, err := strconv.ParseUint(arg, 10, 32)
		return Group(uint32(n)), err
	case name == "set_field":
		return parseSetField(arg)
	case name == "load":
		return parseLoad(arg)
	case name == "mod_dl_src" || name == "mod_dl_dst":
		mac, err := parseMAC(arg)
		f := FieldEthSrc
		if name == "mod_dl_dst" {
			f = FieldEthDst
		}
		return SetEth(f, mac), err
	case name == "mod_nw_src" || name == "mod_nw_dst":
		ip, err := netip.ParseAddr(arg)
		if err != nil || !ip.Is4() {
			return nil, fmt.Errorf("%q is not an IPv4 address", arg)
		}
		if name == "mod_nw_dst" {
			return SetIP(FieldIPDst, ip), nil
		}
		return SetIP(FieldIPSrc, ip), nil
	case strings.HasPrefix(tok, "resubmit(") && strings.HasSuffix(tok, ")"):
		return parseResubmit(tok[len("resubmit(") : len(tok)-1])
	case strings.HasPrefix(tok, "ct(") && strings.HasSuffix(tok, ")"):
		return parseCT(tok[len("ct(") : len(tok)-1])
	}
	if n, err := strconv.ParseUint(tok, 10, 32); err == nil {
		return Output(PortNumber(uint32(n))), nil
	}
	return nil, fmt.Errorf("unknown action")
}

func parseSetField(arg string) (Action, error) {
	v, field, ok := strings.Cut(arg, "->")
	if !ok {
		return nil, fmt.Errorf("no ->")
	}
	f := Field(field)
	var a Action
	switch f {
	case FieldEthSrc, FieldEthDst:
		mac, err := parseMAC(v)
		if err != nil {
			return nil, err
		}
		a = SetEth(f, mac)
	case FieldIPSrc, FieldIPDst, FieldIPv6Src, FieldIPv6Dst:
		ip, err := netip.ParseAddr(v)
		if err != nil {
			return nil, err
		}
		a = SetIP(f, ip)
	case FieldPktMark, FieldCtMark:
		n, err := strconv.ParseUint(v, 0, 32)
		if err != nil {
			return nil, err
		}
		a = SetField(f, uint32(n))
	default:
		return nil, fmt.Errorf("unsupported field %q", field)
	}
	return a, a.validate()
}

func parseLoad(arg string) (Action, error) {
	v, dst, ok := strings.Cut(arg, "->")
	if !ok || !strings.HasSuffix(dst, "[]") {
		return nil, fmt.Errorf("only whole-register loads are supported")
	}
	n, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return nil, err
	}
	reg := strings.TrimSuffix(dst, "[]")
	for f, name := range nxmNames {
		if name == reg {
			return Load(f, uint32(n)), nil
		}
	}
	return nil, fmt.Errorf("unsupported register %q", reg)
}

func parseResubmit(arg string) (Action, error) {
	p, t, ok := strings.Cut(arg, ",")
	if !ok {
		return nil, fmt.Errorf("resubmit needs (port,table)")
	}
	var port Port
	if p != "" {
		var err error
		if port, err = parsePort(p); err != nil {
			return nil, err
		}
	}
	n, err := strconv.ParseUint(t, 10, 8)
	if err != nil {
		return nil, err
	}
	return Resubmit(port, uint8(n)), nil
}

func parseCT(arg string) (Action, error) {
	var c CT
	for _, tok := range splitTop(arg) {
		k, v, _ := strings.Cut(tok, "=")
		switch {
		case tok == "commit":
			c.Commit = true
		case k == "table":
			n, err := strconv.ParseUint(v, 10, 8)
			if err != nil {
				return nil, fmt.Errorf("table: %w", err)
			}
			c.Table = ToTable(uint8(n))
		case k == "zone":
			n, err := parseUint16(v)
			if err != nil {
				return nil, fmt.Errorf("zone: %w", err)
			}
			c.Zone = n
		case tok == "nat":
			c.NAT = &NAT{Kind: NATRestore}
		case strings.HasPrefix(tok, "nat(") && strings.HasSuffix(tok, ")"):
			n, err := parseNAT(tok[len("nat(") : len(tok)-1])
			if err != nil {
				return nil, fmt.Errorf("nat: %w", err)
			}
			c.NAT = n
		case strings.HasPrefix(tok, "exec(") && strings.HasSuffix(tok, ")"):
			acts, err := parseActions(tok[len("exec(") : len(tok)-1])
			if err != nil {
				return nil, fmt.Errorf("exec: %w", err)
			}
			c.Exec = acts
		default:
			return nil, fmt.Errorf("unsupported ct argument %q", tok)
		}
	}
	return c, c.validate()
}

func parseNAT(s string) (*NAT, error) {
	n := &NAT{}
	kind, rng, ok := strings.Cut(s, "=")
	switch {
	case !ok:
		return nil, fmt.Errorf("%q: want src= or dst=", s)
	case kind == "src":
		n.Kind = NATSrc
	case kind == "dst":
		n.Kind = NATDst
	default:
		return nil, fmt.Errorf("%q: want src= or dst=", s)
	}
	// Addresses: a.b.c.d[-e.f.g.h] or [v6][-[v6]] when a port follows, or v6[-v6].
	var addrs, ports string
	if strings.HasPrefix(rng, "[") {
		i := strings.LastIndex(rng, "]")
		addrs = strings.NewReplacer("[", "", "]", "").Replace(rng[:i+1])
		ports = strings.TrimPrefix(rng[i+1:], ":")
	} else if strings.Count(rng, ":") <= 1 {
		addrs, ports, _ = strings.Cut(rng, ":")
	} else {
		addrs = rng // bare IPv6, no port
	}
	lo, hi, isRange := strings.Cut(addrs, "-")
	var err error
	if n.Addr, err = netip.ParseAddr(lo); err != nil {
		return nil, err
	}
	if isRange {
		if n.AddrMax, err = netip.ParseAddr(hi); err != nil {
			return nil, err
		}
	}
	if ports != "" {
		plo, phi, isPortRange := strings.Cut(ports, "-")
		if n.Port, err = parseUint16(plo); err != nil {
			return nil, err
		}
		if isPortRange {
			if n.PortMax, err = parseUint16(phi); err != nil {
				return nil, err
			}
		}
	}
	return n, nil
}

// parseDump reads a dump-flows listing into entries keyed as the bridge
// prints them, without interpreting matches or actions: flows another
// controller installed with fields this package does not model still diff
// correctly.
func parseDump(dump []byte) (map[string]*entry, error) {
	out := make(map[string]*entry)
	var key strings.Builder
	for line := range strings.Lines(string(dump)) {
		line = strings.TrimSpace(line)
		if line == "" || isReplyHeader(line) {
			continue
		}
		head, acts, ok := strings.Cut(line, " actions=")
		if !ok {
			if !strings.HasPrefix(line, "actions=") {
				return nil, fmt.Errorf("dump line %q: no actions", line)
			}
			head, acts = "", strings.TrimPrefix(line, "actions=")
		}
		e := &entry{priority: DefaultPriority, actions: acts}
		key.Reset()
		for _, tok := range strings.Split(head, ",") {
			tok = strings.TrimSpace(tok)
			k, v, _ := strings.Cut(tok, "=")
			var err error
			switch {
			case tok == "" || statKeys[k]:
				continue
			case k == "cookie":
				e.cookie, err = strconv.ParseUint(v, 0, 64)
			case k == "table":
				var n uint64
				n, err = strconv.ParseUint(v, 10, 8)
				e.table = uint8(n)
			default:
				if k == "priority" {
					var n uint64
					n, err = strconv.ParseUint(v, 10, 16)
					e.priority = uint16(n)
				}
				if key.Len() > 0 {
					key.WriteByte(',')
				}
				key.WriteString(tok)
			}
			if err != nil {
				return nil, fmt.Errorf("dump line %q: %s: %w", line, k, err)
			}
		}
		if e.table != 0 {
			e.key = "table=" + strconv.Itoa(int(e.table)) + ", " + key.String()
		} else {
			e.key = key.String()
		}
		out[e.key] = e
	}
	return out, nil
}
