package lbsvc

import (
	"fmt"
	"net"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/ovsflow"
)

// PrioritySteering is the priority of the provider-bridge flows steering
// underlay VIP traffic into OVN (reference §5).
const PrioritySteering = 10000

// UnderlaySubnet is a Kube-OVN underlay subnet (seed 003).
type UnderlaySubnet struct {
	// Subnet is the subnet's CIDR and excludeIps. Underlay VIPs must be
	// excluded so that pod IPAM never hands them out.
	Subnet *ipam.Pool
	// EnableExternalLBAddress lets addresses of the subnet's CIDR be
	// LoadBalancer VIPs (Kube-OVN's enableExternalLBAddress).
	EnableExternalLBAddress bool
}

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

// Steering describes the provider bridge of an underlay network.
type Steering struct {
	// NIC is the bridge port of the underlay NIC, Patch the patch port to
	// br-int.
	NIC, Patch string
	// RouterMAC is the MAC of the logical router port serving the underlay
	// subnet: steered packets are addressed to it.
	RouterMAC net.HardwareAddr
}

// SteeringFlows returns the provider-bridge flows that steer a Service's
// underlay VIP traffic from the NIC into OVN, one per VIP and port
// (reference §5):
//
//	priority=10000,tcp,in_port=<nic>,nw_dst=<VIP>,tp_dst=<port> actions=set_field:<router MAC>->eth_dst,output:<patch>
//
// (ovs-ofctl's mod_dl_dst). Only ExternalIPs and LB ingress IPs inside an
// underlay subnet with EnableExternalLBAddress get flows; the cookie is
// the service cookie of the VIP and port. Install them under
// ovsflow.Service{Namespace, Name}.Owner() in the provider bridge's
// program.
func SteeringFlows(s Steering, svc *corev1.Service, opts Options) ([]ovsflow.Flow, error) {
	if s.NIC == "" || s.Patch == "" {
		return nil, fmt.Errorf("steering flows for %s/%s: NIC and patch ports are required", svc.Namespace, svc.Name)
	}
	if len(s.RouterMAC) != 6 {
		return nil, fmt.Errorf("steering flows for %s/%s: router MAC %q is not a 6-byte MAC address", svc.Namespace, svc.Name, s.RouterMAC)
	}
	ips, _ := parseIPs(svc)
	var flows []ovsflow.Flow
	for _, vip := range ips.external {
		if !inUnderlay(vip, opts) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			proto, ok := flowProto(sp.Protocol, vip.Is6())
			if !ok || sp.Port <= 0 || sp.Port > 65535 {
				continue
			}
			flows = append(flows, ovsflow.Flow{
				Priority: PrioritySteering,
				Cookie:   ovsflow.ServiceCookie(svc.Namespace, svc.Name, vip, sp.Port),
				Match: ovsflow.Match{Proto: proto, InPort: ovsflow.PortName(s.NIC),
					NwDst: ovsflow.Host(vip), TpDst: uint16(sp.Port)},
				Actions: []ovsflow.Action{ovsflow.SetEth(ovsflow.FieldEthDst, s.RouterMAC), ovsflow.Output(ovsflow.PortName(s.Patch))},
			})
		}
	}
	return flows, nil
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
