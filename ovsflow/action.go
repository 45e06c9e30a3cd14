package ovsflow

import (
	"net"
	"net/netip"
	"strconv"
)

// Action is one OpenFlow action. The actions a flow can carry are made by
// the constructors in this package ([Output], [SetField], [CT], ...); a flow
// with no action drops its packets.
type Action interface {
	appendText(b []byte) []byte
	// resolve returns the action with its named ports resolved, or nil
	// when it names none.
	resolve(ports PortMap) (Action, error)
	validate() error
}

type output struct{ port Port }

// Output sends the packet to a port: a named port, [LOCAL], [NORMAL] or
// [InPort].
func Output(p Port) Action { return output{port: p} }

func (a output) appendText(b []byte) []byte {
	if a.port.reserved() {
		return append(b, a.port.name...)
	}
	b = append(b, "output:"...)
	return append(b, a.port.String()...)
}

func (a output) resolve(ports PortMap) (Action, error) {
	if !a.port.named() {
		return nil, nil
	}
	p, err := a.port.resolve(ports)
	return output{port: p}, err
}

func (a output) validate() error {
	if a.port.IsZero() {
		return fieldErr("output", "no port")
	}
	return nil
}

type popVLAN struct{}

// PopVLAN removes the outer VLAN tag (ovs-ofctl's strip_vlan).
func PopVLAN() Action { return popVLAN{} }

func (popVLAN) appendText(b []byte) []byte      { return append(b, "pop_vlan"...) }
func (popVLAN) resolve(PortMap) (Action, error) { return nil, nil }
func (popVLAN) validate() error                 { return nil }

// Field is a header or metadata field an action can write.
type Field string

// Fields that [SetField] and [Load] write.
const (
	FieldEthSrc  Field = "eth_src"
	FieldEthDst  Field = "eth_dst"
	FieldIPSrc   Field = "ip_src"
	FieldIPDst   Field = "ip_dst"
	FieldIPv6Src Field = "ipv6_src"
	FieldIPv6Dst Field = "ipv6_dst"
	FieldPktMark Field = "pkt_mark"
	FieldCtMark  Field = "ct_mark"
)

// nxmNames are the Nicira register names ovs-ofctl prints for load actions.
var nxmNames = map[Field]string{
	FieldPktMark: "NXM_NX_PKT_MARK",
	FieldCtMark:  "NXM_NX_CT_MARK",
}

type setField struct {
	field Field
	value string // canonical text
}

// SetField writes an integer value (pkt_mark, ct_mark) to a field.
func SetField(f Field, v uint32) Action {
	return setField{field: f, value: string(appendHex(nil, uint64(v)))}
}

// SetEth writes a MAC address to eth_src or eth_dst (ovs-ofctl's
// mod_dl_src/mod_dl_dst).
func SetEth(f Field, mac net.HardwareAddr) Action { return setField{field: f, value: mac.String()} }

// SetIP writes an address to ip_src/ip_dst (IPv4) or ipv6_src/ipv6_dst.
func SetIP(f Field, a netip.Addr) Action { return setField{field: f, value: a.String()} }

func (a setField) appendText(b []byte) []byte {
	b = append(b, "set_field:"...)
	b = append(b, a.value...)
	b = append(b, "->"...)
	return append(b, a.field...)
}

func (setField) resolve(PortMap) (Action, error) { return nil, nil }

func (a setField) validate() error {
	name := "set_field:" + string(a.field)
	switch a.field {
	case FieldEthSrc, FieldEthDst:
		if _, err := net.ParseMAC(a.value); err != nil || len(a.value) != 17 {
			return fieldErr(name, "%q is not a MAC address", a.value)
		}
	case FieldIPSrc, FieldIPDst, FieldIPv6Src, FieldIPv6Dst:
		ip, err := netip.ParseAddr(a.value)
		if err != nil || ip.Is6() != (a.field == FieldIPv6Src || a.field == FieldIPv6Dst) {
			return fieldErr(name, "%q is not an address of the field's family", a.value)
		}
	case FieldPktMark, FieldCtMark:
	default:
		return fieldErr(name, "unsupported field")
	}
	return nil
}

type load struct {
	field Field
	value uint32
}

// Load writes a value to a whole Nicira register (pkt_mark, ct_mark):
// ovs-ofctl's `load:V->NXM_NX_CT_MARK[]`. It does what SetField does; it is
// there because OVN-Kubernetes' flows use both spellings and the bridge keeps
// them apart.
func Load(f Field, v uint32) Action { return load{field: f, value: v} }

func (a load) appendText(b []byte) []byte {
	b = append(b, "load:"...)
	b = appendHex(b, uint64(a.value))
	b = append(b, "->"...)
	b = append(b, nxmNames[a.field]...)
	return append(b, "[]"...)
}

func (load) resolve(PortMap) (Action, error) { return nil, nil }

func (a load) validate() error {
	if _, ok := nxmNames[a.field]; !ok {
		return fieldErr("load:"+string(a.field), "unsupported field")
	}
	return nil
}

type resubmit struct {
	port  Port
	table uint8
}

// Resubmit looks the packet up again in table, as if it came in on port
// (the zero Port keeps the packet's in_port).
func Resubmit(port Port, table uint8) Action { return resubmit{port: port, table: table} }

func (a resubmit) appendText(b []byte) []byte {
	b = append(b, "resubmit("...)
	if !a.port.IsZero() {
		b = append(b, a.port.String()...)
	}
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(a.table), 10)
	return append(b, ')')
}

func (a resubmit) resolve(ports PortMap) (Action, error) {
	if !a.port.named() {
		return nil, nil
	}
	p, err := a.port.resolve(ports)
	return resubmit{port: p, table: a.table}, err
}

func (resubmit) validate() error { return nil }

type group struct{ id uint32 }

// Group sends the packet to an OpenFlow group.
func Group(id uint32) Action { return group{id: id} }

func (a group) appendText(b []byte) []byte {
	b = append(b, "group:"...)
	return strconv.AppendUint(b, uint64(a.id), 10)
}

func (group) resolve(PortMap) (Action, error) { return nil, nil }
func (group) validate() error                 { return nil }

// CT sends the packet through conntrack (the Nicira ct action).
type CT struct {
	Commit bool
	// Table, when not nil, recirculates the packet to that table after
	// conntrack (use [ToTable]).
	Table *uint8
	Zone  uint16
	NAT   *NAT
	// Exec holds the actions applied to the connection on commit: SetField
	// or Load of ct_mark.
	Exec []Action
}

// ToTable is a table number for [CT.Table].
func ToTable(n uint8) *uint8 { return &n }

// NATKind says which address a NAT rewrites.
type NATKind uint8

// NAT kinds.
const (
	// NATRestore applies the connection's existing NAT (a bare "nat").
	NATRestore NATKind = iota
	NATSrc
	NATDst
)

// NAT is the nat argument of a ct action: a bare "nat" (restore the
// connection's translation) or src/dst translation to an address range and
// an optional port range.
type NAT struct {
	Kind          NATKind
	Addr, AddrMax netip.Addr // AddrMax: optional end of range
	Port, PortMax uint16     // optional; PortMax: end of range
}

func (c CT) appendText(b []byte) []byte {
	b = append(b, "ct("...)
	start := len(b)
	sep := func() {
		if len(b) > start {
			b = append(b, ',')
		}
	}
	if c.Commit {
		b = append(b, "commit"...)
	}
	if c.Table != nil {
		sep()
		b = append(b, "table="...)
		b = strconv.AppendUint(b, uint64(*c.Table), 10)
	}
	if c.Zone != 0 {
		sep()
		b = append(b, "zone="...)
		b = strconv.AppendUint(b, uint64(c.Zone), 10)
	}
	if c.NAT != nil {
		sep()
		b = c.NAT.appendText(b)
	}
	if len(c.Exec) > 0 {
		sep()
		b = append(b, "exec("...)
		for i, a := range c.Exec {
			if i > 0 {
				b = append(b, ',')
			}
			b = a.appendText(b)
		}
		b = append(b, ')')
	}
	return append(b, ')')
}

func (n *NAT) appendText(b []byte) []byte {
	b = append(b, "nat"...)
	if n.Kind == NATRestore {
		return b
	}
	if n.Kind == NATSrc {
		b = append(b, "(src="...)
	} else {
		b = append(b, "(dst="...)
	}
	bracket := n.Addr.Is6() && n.Port != 0
	appendAddr := func(a netip.Addr) {
		if bracket {
			b = append(b, '[')
		}
		b = a.AppendTo(b)
		if bracket {
			b = append(b, ']')
		}
	}
	appendAddr(n.Addr)
	if n.AddrMax.IsValid() {
		b = append(b, '-')
		appendAddr(n.AddrMax)
	}
	if n.Port != 0 {
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(n.Port), 10)
		if n.PortMax != 0 {
			b = append(b, '-')
			b = strconv.AppendUint(b, uint64(n.PortMax), 10)
		}
	}
	return append(b, ')')
}

func (CT) resolve(PortMap) (Action, error) { return nil, nil }

func (c CT) validate() error {
	for _, a := range c.Exec {
		switch e := a.(type) {
		case setField:
			if e.field != FieldCtMark {
				return fieldErr("ct(exec)", "only ct_mark can be set, not %s", e.field)
			}
		case load:
			if e.field != FieldCtMark {
				return fieldErr("ct(exec)", "only ct_mark can be loaded, not %s", e.field)
			}
		default:
			return fieldErr("ct(exec)", "only set_field/load of ct_mark allowed")
		}
	}
	if len(c.Exec) > 0 && !c.Commit {
		return fieldErr("ct(exec)", "exec needs commit")
	}
	if n := c.NAT; n != nil && n.Kind != NATRestore {
		if !n.Addr.IsValid() {
			return fieldErr("ct(nat)", "src/dst NAT needs an address")
		}
		if n.AddrMax.IsValid() && (n.AddrMax.Is6() != n.Addr.Is6() || n.AddrMax.Less(n.Addr)) {
			return fieldErr("ct(nat)", "bad address range %s-%s", n.Addr, n.AddrMax)
		}
		if n.PortMax != 0 && n.PortMax < n.Port {
			return fieldErr("ct(nat)", "bad port range %d-%d", n.Port, n.PortMax)
		}
	}
	return nil
}
