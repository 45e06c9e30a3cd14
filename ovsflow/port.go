package ovsflow

import (
	"fmt"
	"strconv"
)

// OpenFlow 1.1+ reserved port numbers.
const (
	ofppInPort uint32 = 0xfffffff8
	ofppNormal uint32 = 0xfffffffa
	ofppFlood  uint32 = 0xfffffffb
	ofppLocal  uint32 = 0xfffffffe
	ofppMax    uint32 = 0xffffff00
)

// Port is an OpenFlow port: a bridge port by name (resolved to its ofport
// when a program is applied), a port number, or a reserved port.
type Port struct {
	name string
	num  uint32 // 0: not resolved yet
}

// Reserved ports.
var (
	// LOCAL is the bridge's own host interface.
	LOCAL = Port{name: "LOCAL", num: ofppLocal}
	// NORMAL is the traditional L2/L3 processing of the switch.
	NORMAL = Port{name: "NORMAL", num: ofppNormal}
	// InPort is the port the packet came in on (output only).
	InPort = Port{name: "IN_PORT", num: ofppInPort}
	// FLOOD is every port but the input port and those with flooding
	// disabled (output only).
	FLOOD = Port{name: "FLOOD", num: ofppFlood}
)

// PortName refers to a bridge port by its name; [Flow.Resolve] turns it into
// the port's current ofport.
func PortName(name string) Port { return Port{name: name} }

// PortNumber refers to a port by its OpenFlow number.
func PortNumber(n uint32) Port { return Port{num: n} }

// IsZero reports whether p is the zero Port (no port).
func (p Port) IsZero() bool { return p.name == "" && p.num == 0 }

// Name is the port's name, "" for a port known only by number.
func (p Port) Name() string { return p.name }

// Number is the port's OpenFlow number, 0 while a named port is unresolved.
func (p Port) Number() uint32 { return p.num }

func (p Port) reserved() bool { return p.num >= ofppMax }

// String renders p as ovs-ofctl prints it: a number once resolved, the
// reserved name, or the port's name while unresolved.
func (p Port) String() string {
	switch {
	case p.reserved():
		return p.name
	case p.num != 0:
		return strconv.FormatUint(uint64(p.num), 10)
	default:
		return p.name
	}
}

// PortMap maps port names of one bridge to their ofports.
type PortMap map[string]uint32

// UnknownPortError reports a port name the bridge does not have.
type UnknownPortError struct {
	Port string
}

func (e *UnknownPortError) Error() string {
	return fmt.Sprintf("port %q is not on the bridge (or has no ofport yet)", e.Port)
}

// named reports whether p is a port name still to resolve.
func (p Port) named() bool { return p.num == 0 && p.name != "" }

func (p Port) resolve(ports PortMap) (Port, error) {
	if !p.named() {
		return p, nil
	}
	n, ok := ports[p.name]
	if !ok || n == 0 || n >= ofppMax {
		return p, &UnknownPortError{Port: p.name}
	}
	return Port{name: p.name, num: n}, nil
}

func parsePort(s string) (Port, error) {
	switch s {
	case "LOCAL":
		return LOCAL, nil
	case "NORMAL":
		return NORMAL, nil
	case "FLOOD":
		return FLOOD, nil
	case "IN_PORT", "in_port":
		return InPort, nil
	}
	n, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return PortName(s), nil
	}
	if n == 0 || uint32(n) >= ofppMax {
		return Port{}, fmt.Errorf("port number %s out of range", s)
	}
	return PortNumber(uint32(n)), nil
}
