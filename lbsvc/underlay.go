package lbsvc

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// PrioritySteering is the priority of the provider-bridge flows steering
// underlay VIP traffic into OVN, as Kube-OVN's
// (pkg/daemon/flow_rules_linux.go).
const PrioritySteering = 10000

// UnderlaySubnet is a Kube-OVN underlay subnet: one family's
// block of a kubeovn.io/v1 Subnet.
type UnderlaySubnet struct {
	// Subnet is the subnet's CIDR and excludeIps; its Name is the
	// Subnet's. Underlay VIPs must be excluded so that pod IPAM never
	// hands them out.
	Subnet *ipam.Pool
	// EnableExternalLBAddress lets addresses of the subnet's CIDR be
	// LoadBalancer VIPs (Kube-OVN's enableExternalLBAddress).
	EnableExternalLBAddress bool
	// Switch is the subnet's logical switch, the Subnet's name when
	// empty (Kube-OVN names the switch after the Subnet).
	Switch string
	// RouterMAC is the MAC of the router port on the switch (Kube-OVN's
	// status.u2oInterconnectionMAC): steered VIP traffic is addressed to
	// it, so the switch's load balancer DNATs it and the router delivers
	// it to the chosen pod.
	RouterMAC net.HardwareAddr
}

// SwitchName is the subnet's logical switch.
func (u UnderlaySubnet) SwitchName() string {
	if u.Switch != "" {
		return u.Switch
	}
	return u.Subnet.Name
}

// LocalnetPatch is the provider bridge's patch port to br-int that
// ovn-controller makes for the localnet port of an underlay switch, as
// Kube-OVN names that port (localnet.<switch>).
func LocalnetPatch(sw string) string { return "patch-localnet." + sw + "-to-br-int" }

// underlayOf returns the underlay subnet whose CIDR holds vip.
func underlayOf(vip netip.Addr, opts Options) (UnderlaySubnet, bool) {
	for _, u := range opts.Underlay {
		if u.Subnet != nil && u.Subnet.CIDR.Contains(vip) {
			return u, true
		}
	}
	return UnderlaySubnet{}, false
}

// inUnderlay reports whether vip is an external LB address of an underlay
// subnet.
func inUnderlay(vip netip.Addr, opts Options) bool {
	u, ok := underlayOf(vip, opts)
	return ok && u.EnableExternalLBAddress
}

// underlayEvents warns about external VIPs inside underlay subnets that
// will not work: the subnet does not enable external LB addresses, the VIP
// is not excluded from pod IPAM, or Kube-OVN's ls-ct-skip-dst-lport-ips is
// on.
func underlayEvents(svc *corev1.Service, vips []netip.Addr, opts Options) []event.Event {
	var events []event.Event
	add := func(reason, format string, args ...any) {
		events = append(events, event.Warningf(serviceRef(svc), reason, format, args...))
	}
	for _, vip := range vips {
		u, ok := underlayOf(vip, opts)
		switch {
		case !ok:
		case !u.EnableExternalLBAddress:
			add("UnderlayLBAddressDisabled", "VIP %s is in underlay subnet %q (%s), which does not set enableExternalLBAddress: it is not steered into OVN",
				vip, u.Subnet.Name, u.Subnet.CIDR)
		default:
			if !u.Subnet.Excluded(vip) {
				add("UnderlayVIPNotExcluded", "VIP %s is not in the excludeIps of underlay subnet %q: pod IPAM may hand it to a pod",
					vip, u.Subnet.Name)
			}
			if opts.LSCtSkipDstLportIPs {
				add("LSCtSkipDstLportIPs", "VIP %s is an underlay LB address while ls-ct-skip-dst-lport-ips is on: Kube-OVN's OVN skips conntrack for it; set it false",
					vip)
			}
		}
	}
	return events
}

// underlayLBs are the load balancers of a Service's underlay VIPs (those
// inUnderlay): per underlay switch and protocol one on the switch,
// "Service_<ns>/<name>_<PROTO>_underlay_<switch>". With
// Options.PreferLocal and externalTrafficPolicy=Local an IPv4 VIP is
// instead on a template load balancer
// ("..._underlay_<switch>_IPv4", options template=true) whose backends
// are the chassis variable TemplateName("Service_<ns>/<name>_<PROTO>_<port>_underlay_IPv4"):
// on each node's chassis its own ready endpoints, or
// every endpoint when it has none (Kube-OVN's prefer_local_backend).
// A VIP without endpoints is left out, as Kube-OVN deletes it.
func underlayLBs(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, nodes []Node, vips []netip.Addr, opts Options) (
	[]ovnLB, []ovsdbnb.TemplateVar, []event.Event) {
	if len(vips) == 0 {
		return nil, nil, nil
	}
	var events []event.Event
	local := opts.PreferLocal && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	bySwitch := map[string][]netip.Addr{}
	for _, vip := range vips {
		u, _ := underlayOf(vip, opts)
		bySwitch[u.SwitchName()] = append(bySwitch[u.SwitchName()], vip)
		if local && vip.Is6() {
			events = append(events, event.Warningf(serviceRef(svc), "UnderlayPreferLocalIPv6",
				"underlay VIP %s is load-balanced to every endpoint: local preference is implemented for IPv4 VIPs only", vip))
		}
	}
	var out []ovnLB
	vals := map[string]map[string]string{} // template -> chassis -> value
	for _, sw := range sortedKeys(bySwitch) {
		for _, proto := range protoOrder {
			plain := ovnLB{name: lbName(svc, proto, "underlay_"+sw), proto: proto, switches: []string{sw}}
			tmpl := ovnLB{name: plain.name + "_IPv4", proto: proto, switches: []string{sw},
				opts: lbOpts{template: true, family: "ipv4"}}
			for _, sp := range svc.Spec.Ports {
				if cmpProto(sp.Protocol) != proto || sp.Port <= 0 || sp.Port > 65535 {
					continue
				}
				pe := portEndpoints(sp, eps)
				for _, vip := range bySwitch[sw] {
					all := backends(pe, vip.Is6(), anyNode)
					if len(all) == 0 {
						continue
					}
					src := joinHostPort(vip.String(), sp.Port)
					if !local || vip.Is6() {
						plain.rules = append(plain.rules, lbRule{source: src, targets: all})
						continue
					}
					name := TemplateName(lbName(svc, proto, strconv.Itoa(int(sp.Port))+"_underlay_IPv4"))
					for _, n := range sortedNodes(nodes) {
						if n.Chassis == "" {
							continue
						}
						v := backends(pe, false, onNode(n.Name))
						if len(v) == 0 {
							v = all
						}
						if vals[name] == nil {
							vals[name] = map[string]string{}
						}
						vals[name][n.Chassis] = strings.Join(v, ",")
					}
					tmpl.rules = append(tmpl.rules, lbRule{source: src, targets: []string{"^" + name}})
				}
			}
			for _, lb := range []ovnLB{plain, tmpl} {
				if len(lb.rules) > 0 {
					out = append(out, lb)
				}
			}
		}
	}
	var vars []ovsdbnb.TemplateVar
	for _, name := range sortedKeys(vals) {
		for _, ch := range sortedKeys(vals[name]) {
			vars = append(vars, ovsdbnb.TemplateVar{Chassis: ch, Name: name, Value: vals[name][ch]})
		}
	}
	return out, vars, events
}

// Steering describes the provider bridge of an underlay network on one
// node.
type Steering struct {
	// NIC is the bridge port of the underlay NIC (Kube-OVN's
	// ProviderNetwork defaultInterface).
	NIC string
	// VLAN, when not 0, limits the flows to frames of that VLAN.
	VLAN uint16
	// Patch is the patch port to br-int; empty: the one of each subnet's
	// localnet port (LocalnetPatch).
	Patch string
	// HasPort, when not nil, says whether the bridge has a port: a
	// subnet whose patch port is missing (ovn-controller makes it once the
	// switch has a port on this chassis) gets no flows yet.
	HasPort func(name string) bool
}

// Event reasons of the steering flows.
const (
	ReasonUnderlayNoRouterMAC = "UnderlayNoRouterMAC"
)

// SteeringFlows returns the provider-bridge flows that steer a Service's
// underlay VIP traffic from the NIC into OVN, one per VIP and port, as
// Kube-OVN's daemon installs them (flow_rules_linux.go,
// AddOrUpdateUnderlaySubnetSvcLocalFlowCache):
//
//	priority=10000,tcp,in_port=<nic>,nw_dst=<VIP>,tp_dst=<port> actions=set_field:<router MAC>->eth_dst,output:<patch>
//
// (ovs-ofctl's mod_dl_dst). Only ExternalIPs and LB ingress IPs inside an
// underlay subnet with EnableExternalLBAddress get flows; the cookie is
// the service cookie of the VIP and port (Kube-OVN uses one cookie for
// all). Install them under brex.Service{Namespace, Name}.Owner() in the
// provider bridge's program. A subnet without RouterMAC gets no flows and
// a Warning event (Kube-OVN then uses its own OVN's ls_dnat_mod_dl_dst,
// which stock OVN lacks); missing reports the patch ports that HasPort
// says are missing.
func SteeringFlows(s Steering, svc *corev1.Service, opts Options) (flows []ovsflow.Flow, missing []string, events []event.Event, err error) {
	if s.NIC == "" {
		return nil, nil, nil, fmt.Errorf("steering flows for %s/%s: the NIC port is required", svc.Namespace, svc.Name)
	}
	ips, _ := parseIPs(svc)
	for _, vip := range ips.external {
		u, ok := underlayOf(vip, opts)
		if !ok || !u.EnableExternalLBAddress {
			continue
		}
		if len(u.RouterMAC) != 6 {
			events = append(events, event.Warningf(serviceRef(svc), ReasonUnderlayNoRouterMAC,
				"underlay VIP %s is not steered into OVN: subnet %q has no router port MAC (status.u2oInterconnectionMAC; enable u2oInterconnection)",
				vip, u.Subnet.Name))
			continue
		}
		patch := cmp.Or(s.Patch, LocalnetPatch(u.SwitchName()))
		if s.HasPort != nil && !s.HasPort(patch) {
			if !slices.Contains(missing, patch) {
				missing = append(missing, patch)
			}
			continue
		}
		for _, sp := range svc.Spec.Ports {
			proto, ok := flowProto(sp.Protocol, vip.Is6())
			if !ok || sp.Port <= 0 || sp.Port > 65535 {
				continue
			}
			flows = append(flows, ovsflow.Flow{
				Priority: PrioritySteering,
				Cookie:   brex.ServiceCookie(svc.Namespace, svc.Name, vip, sp.Port),
				Match: ovsflow.Match{Proto: proto, InPort: ovsflow.PortName(s.NIC), DlVLAN: s.VLAN,
					NwDst: ovsflow.Host(vip), TpDst: uint16(sp.Port)},
				Actions: []ovsflow.Action{ovsflow.SetEth(ovsflow.FieldEthDst, u.RouterMAC), ovsflow.Output(ovsflow.PortName(patch))},
			})
		}
	}
	return flows, missing, events, nil
}

// flowProto is the ovsflow shorthand of a Service port protocol.
func flowProto(p corev1.Protocol, v6 bool) (ovsflow.Proto, bool) {
	type pair struct{ v4, v6 ovsflow.Proto }
	m := map[corev1.Protocol]pair{
		"":                  {ovsflow.ProtoTCP, ovsflow.ProtoTCP6},
		corev1.ProtocolTCP:  {ovsflow.ProtoTCP, ovsflow.ProtoTCP6},
		corev1.ProtocolUDP:  {ovsflow.ProtoUDP, ovsflow.ProtoUDP6},
		corev1.ProtocolSCTP: {ovsflow.ProtoSCTP, ovsflow.ProtoSCTP6},
	}
	pr, ok := m[p]
	if v6 {
		return pr.v6, ok
	}
	return pr.v4, ok
}
