package ovsflow

import (
	"fmt"
	"slices"
	"strings"
)

// BridgePort is a port of an OVS bridge as [Uplink] reads it: its name and
// the types of its interfaces ("" for a system interface, "system",
// "internal", "patch", ...).
type BridgePort struct {
	Name  string
	Types []string
}

// Uplink chooses the bridge port of the physical NIC among the bridge's
// ports when none is configured, the way OVN-Kubernetes' GetNicName
// (go-controller/pkg/util/net_linux.go) does: the one port whose interface
// has type "system"; else the bridge's external_ids:bridge-uplink; else,
// for a bridge named "br<nic>", the port <nic>. Deviation: when none of
// these answers, the one port that is neither internal, patch nor a tunnel
// is the uplink too (a NIC added without type=system, as ovs-vsctl add-port
// does by default); OVN-Kubernetes would fail there. Anything else is an
// error naming the candidates, so the user sets the uplink.
func Uplink(bridge, bridgeUplink string, ports []BridgePort) (string, error) {
	var system, plain []string
	has := map[string]bool{}
	for _, p := range ports {
		has[p.Name] = true
		if slices.Contains(p.Types, "system") {
			system = append(system, p.Name)
		}
		if len(p.Types) == 1 && (p.Types[0] == "" || p.Types[0] == "system") && p.Name != bridge {
			plain = append(plain, p.Name)
		}
	}
	switch nic, ok := strings.CutPrefix(bridge, "br"); {
	case len(system) == 1:
		return system[0], nil
	case bridgeUplink != "":
		if !has[bridgeUplink] {
			return "", fmt.Errorf("bridge %s: external_ids:bridge-uplink %q is not one of its ports", bridge, bridgeUplink)
		}
		return bridgeUplink, nil
	case ok && has[nic]:
		return nic, nil
	case len(plain) == 1:
		return plain[0], nil
	}
	slices.Sort(plain)
	return "", fmt.Errorf("bridge %s: cannot tell its uplink among %d candidate ports %v; set it (--uplink)", bridge, len(plain), plain)
}
