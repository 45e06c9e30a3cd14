package brex

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ovnedge/ovnedge/ovsflow"
)

// ETPLocalCookie is OVN-Kubernetes' cookie of the table 6 and 7 flows
// every externalTrafficPolicy=Local Service with a host-network endpoint
// shares (etpSvcOpenFlowCookie).
const ETPLocalCookie uint64 = 0xe745ecf105

// HostNodePortZone is the conntrack zone of Service traffic DNATed to a
// host-network endpoint (OVN-Kubernetes' HostNodePortConntrackZone,
// its conntrack zone 64000 + 3).
const HostNodePortZone uint16 = 64003

// ServicePort is one port of a Service as the shared gateway's flows see
// it.
type ServicePort struct {
	// Protocol is ProtoTCP, ProtoUDP or ProtoSCTP; IPv6 flows use the
	// IPv6 shorthand of the same protocol.
	Protocol ovsflow.Proto
	// Port is the service port, what clients of a VIP connect to.
	Port int32
	// NodePort is the port on every node's address, 0 for none.
	NodePort int32
	// HostPort4 and HostPort6, when not 0, are the target port of a
	// host-network endpoint of the Service on this node, per family
	// (externalTrafficPolicy=Local; OVN-Kubernetes' "case 1"): that
	// family's NodePort and VIP traffic is DNATed to the node IP and this
	// port and handed to the host instead of OVN.
	HostPort4, HostPort6 int32
}

// hostPort returns the host target port of the family, 0 for none.
func (p ServicePort) hostPort(v6 bool) int32 {
	if v6 {
		return p.HostPort6
	}
	return p.HostPort4
}

// GatewayService is a Kubernetes Service as the shared gateway's flows
// need it.
type GatewayService struct {
	Namespace, Name string
	// VIPs are the ExternalIPs and LoadBalancer ingress IPs.
	VIPs  []netip.Addr
	Ports []ServicePort
	// SourceRanges restricts the VIPs it has a key for to the sources of
	// its prefixes (loadBalancerSourceRanges) where their traffic goes to
	// a host-network endpoint: traffic to OVN is filtered there (by
	// ACLs), not on the bridge.
	SourceRanges map[netip.Addr][]netip.Prefix
}

// Owner is the program owner name of the service's flows, the same as
// [Service.Owner].
func (s GatewayService) Owner() string { return s.Bypass().Owner() }

// Bypass returns the service's ARP/NDP bypass input: its VIPs and port
// numbers.
func (s GatewayService) Bypass() Service {
	b := Service{Namespace: s.Namespace, Name: s.Name, VIPs: s.VIPs}
	for _, p := range s.Ports {
		b.Ports = append(b.Ports, p.Port)
	}
	return b
}

// Gateway describes a node's shared gateway bridge for its Service flows.
type Gateway struct {
	// Base gives the ports, the bridge MAC and the IP families: the
	// NodePort flows are programmed for each family it enables.
	Base
	// NodeIPs are the node's addresses on the bridge: the first of each
	// family is where host-network endpoint traffic is DNATed to.
	NodeIPs []netip.Addr
	// HostZone is the conntrack zone of that DNAT, HostNodePortZone when 0.
	HostZone uint16
	// VLAN is the gateway VLAN of the ARP/NDP bypass (see [Bypass]); like
	// OVN-Kubernetes', the other Service flows do not depend on it.
	VLAN uint16
	// SourceRanges enforces the Services' SourceRanges (OVN-Kubernetes
	// ignores loadBalancerSourceRanges: without it, the flows are its).
	SourceRanges bool
}

// ServiceFlows returns the flows of OVN-Kubernetes' shared gateway mode
// for one Service (updateServiceFlowCache and createLbAndExternalSvcFlows),
// all at priority 110 in table 0 unless noted. Per port with a NodePort
// and per family of g:
//
//	in_port=<uplink>,tcp,tp_dst=<nodePort>               -> output:<patch>
//	in_port=<patch>,dl_src=<MAC>,tcp,tp_src=<nodePort>   -> output:<uplink>
//
// with cookie PortCookie(ns, name, "tcp" or "tcp6", nodePort). Per VIP:
// its ARP/NDP bypass ([ARPBypass]), and per VIP and port
//
//	in_port=<uplink>,icmp,nw_dst=<VIP>,icmp_type=3,icmp_code=4  -> output:<patch>  (icmp6 type 2 code 0; once per VIP)
//	in_port=<uplink>,tcp,nw_dst=<VIP>,tp_dst=<port>             -> output:<patch>
//	in_port=<patch>,dl_src=<MAC>,tcp,nw_src=<VIP>,tp_src=<port> -> output:<uplink>
//
// with cookie ServiceCookie(ns, name, VIP, port); like the bypass, the
// ICMP "fragmentation needed" flow, which does not depend on the port,
// carries the cookie of the lowest port. A port with a host target port
// for the family (ServicePort.HostPort4/HostPort6) has instead, for its
// NodePort and each VIP of the family,
//
//	in_port=<uplink>,tcp,[nw_dst=<VIP>,]tp_dst=<port> -> ct(commit,table=6,zone=64003,nat(dst=<node IP>:<target>))
//	table=6                                           -> LOCAL             (cookie ETPLocalCookie)
//	in_port=LOCAL,tcp,tp_src=<target>                 -> ct(table=7,zone=64003,nat)  (cookie PortCookie(..., target))
//	table=7                                           -> output:<uplink>   (cookie ETPLocalCookie)
//
// A VIP with SourceRanges has, for a port going to the host, the DNAT
// flow once per allowed range at PrioritySourceRange (nw_src=<range>) and
// in its place at 110 a drop.
//
// Flows several ports or VIPs of the Service emit alike are emitted once.
func ServiceFlows(g Gateway, svc GatewayService) ([]ovsflow.Flow, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("gateway flows for %s/%s: %s", svc.Namespace, svc.Name, fmt.Sprintf(format, args...))
	}
	if g.Uplink == "" || g.Patch == "" {
		return nil, fail("uplink and patch ports are required")
	}
	if len(g.BridgeMAC) != 6 {
		return nil, fail("bridge MAC %q is not a 6-byte MAC address", g.BridgeMAC)
	}
	for _, p := range svc.Ports {
		if !p.Protocol.HasPorts() || p.Protocol.IsIPv6() {
			return nil, fail("port %d: protocol %q is not tcp, udp or sctp", p.Port, p.Protocol)
		}
		for _, n := range []int32{p.Port, p.NodePort, p.HostPort4, p.HostPort6} {
			if n < 0 || n > 65535 {
				return nil, fail("port %d: %d out of range 1-65535", p.Port, n)
			}
		}
		if p.Port == 0 {
			return nil, fail("port 0")
		}
	}
	bypass, err := ARPBypass(Bypass{Uplink: g.Uplink, VLAN: g.VLAN}, svc.Bypass())
	if err != nil {
		return nil, err
	}
	b := &serviceBuilder{g: g, svc: svc, zone: cmpOr(g.HostZone, HostNodePortZone),
		uplink: ovsflow.PortName(g.Uplink), patch: ovsflow.PortName(g.Patch)}
	for _, f := range bypass {
		b.add(f)
	}
	for _, p := range svc.Ports {
		if p.NodePort == 0 {
			continue
		}
		for _, v6 := range []bool{false, true} {
			if (v6 && !g.IPv6) || (!v6 && !g.IPv4) {
				continue
			}
			proto := p.Protocol.Family(v6)
			m := ovsflow.Match{InPort: b.uplink, Proto: proto, TpDst: uint16(p.NodePort)}
			cookie := PortCookie(svc.Namespace, svc.Name, proto, p.NodePort)
			if err := b.toOVNOrHost(p, v6, m, cookie, ovsflow.Match{Proto: proto, TpSrc: uint16(p.NodePort)}, nil, false); err != nil {
				return nil, err
			}
		}
	}
	if len(svc.Ports) > 0 {
		lowest := slices.MinFunc(svc.Ports, func(a, b ServicePort) int { return int(a.Port - b.Port) }).Port
		for _, vip := range svc.VIPs {
			v6 := vip.Is6()
			if !slices.ContainsFunc(svc.Ports, func(p ServicePort) bool { return p.hostPort(v6) == 0 }) {
				continue // every port goes to the host: no PMTU discovery through OVN
			}
			m := ovsflow.Match{InPort: b.uplink, Proto: ovsflow.ProtoICMP, NwDst: ovsflow.Host(vip), ICMP: &ovsflow.ICMP{Type: 3, Code: 4}}
			if v6 {
				m.Proto, m.ICMP = ovsflow.ProtoICMP6, &ovsflow.ICMP{Type: 2, Code: 0}
			}
			b.add(ovsflow.Flow{Priority: PriorityService, Cookie: ServiceCookie(svc.Namespace, svc.Name, vip, lowest),
				Match: m, Actions: []ovsflow.Action{ovsflow.Output(b.patch)}})
		}
	}
	for _, p := range svc.Ports {
		for _, vip := range svc.VIPs {
			proto := p.Protocol.Family(vip.Is6())
			m := ovsflow.Match{InPort: b.uplink, Proto: proto, NwDst: ovsflow.Host(vip), TpDst: uint16(p.Port)}
			reply := ovsflow.Match{Proto: proto, NwSrc: ovsflow.Host(vip), TpSrc: uint16(p.Port)}
			allowed, restricted := svc.SourceRanges[vip]
			restricted = restricted && g.SourceRanges
			if err := b.toOVNOrHost(p, vip.Is6(), m, ServiceCookie(svc.Namespace, svc.Name, vip, p.Port), reply, allowed, restricted); err != nil {
				return nil, err
			}
		}
	}
	return b.flows, nil
}

// serviceBuilder accumulates one Service's flows, each key once.
type serviceBuilder struct {
	g             Gateway
	svc           GatewayService
	zone          uint16
	uplink, patch ovsflow.Port
	flows         []ovsflow.Flow
	keys          map[string]bool
}

func (b *serviceBuilder) add(f ovsflow.Flow) {
	if b.keys == nil {
		b.keys = map[string]bool{}
	}
	k := f.Key()
	if !b.keys[k] {
		b.keys[k] = true
		b.flows = append(b.flows, f)
	}
}

// toOVNOrHost adds the flows of traffic matching in (from the uplink):
// to OVN, with replies matching reply from the patch port with the
// bridge MAC going back out; or, when the port has a host target port for
// the family, DNATed to the host (when restricted, from the allowed
// sources only).
func (b *serviceBuilder) toOVNOrHost(p ServicePort, v6 bool, in ovsflow.Match, cookie uint64, reply ovsflow.Match,
	allowed []netip.Prefix, restricted bool) error {
	target := p.hostPort(v6)
	if target == 0 {
		reply.InPort, reply.DlSrc = b.patch, b.g.BridgeMAC
		b.add(ovsflow.Flow{Priority: PriorityService, Cookie: cookie, Match: in, Actions: []ovsflow.Action{ovsflow.Output(b.patch)}})
		b.add(ovsflow.Flow{Priority: PriorityService, Cookie: cookie, Match: reply, Actions: []ovsflow.Action{ovsflow.Output(b.uplink)}})
		return nil
	}
	var nodeIP netip.Addr
	for _, a := range b.g.NodeIPs {
		if a.Is6() == v6 && checkUnicast(a) == nil {
			nodeIP = a
			break
		}
	}
	if !nodeIP.IsValid() {
		return fmt.Errorf("gateway flows for %s/%s: port %d has a host-network endpoint but there is no %s node IP among %v",
			b.svc.Namespace, b.svc.Name, p.Port, in.Proto, b.g.NodeIPs)
	}
	dnat := ovsflow.Flow{Priority: PriorityService, Cookie: cookie, Match: in, Actions: []ovsflow.Action{ovsflow.CT{Commit: true,
		Table: ovsflow.ToTable(TableHostDNAT), Zone: b.zone, NAT: &ovsflow.NAT{Kind: ovsflow.NATDst, Addr: nodeIP, Port: uint16(target)}}}}
	if restricted {
		for _, r := range allowed {
			if r.Addr().Is6() == v6 {
				f := dnat
				f.Priority, f.Match.NwSrc = PrioritySourceRange, r
				b.add(f)
			}
		}
		dnat.Actions = nil // drop
	}
	b.add(dnat)
	b.add(ovsflow.Flow{Table: TableHostDNAT, Priority: PriorityService, Cookie: ETPLocalCookie, Actions: []ovsflow.Action{ovsflow.Output(ovsflow.LOCAL)}})
	b.add(ovsflow.Flow{Priority: PriorityService, Cookie: PortCookie(b.svc.Namespace, b.svc.Name, in.Proto, target),
		Match:   ovsflow.Match{InPort: ovsflow.LOCAL, Proto: in.Proto, TpSrc: uint16(target)},
		Actions: []ovsflow.Action{ovsflow.CT{Table: ovsflow.ToTable(TableHostReply), Zone: b.zone, NAT: &ovsflow.NAT{}}}})
	b.add(ovsflow.Flow{Table: TableHostReply, Priority: PriorityService, Cookie: ETPLocalCookie, Actions: []ovsflow.Action{ovsflow.Output(b.uplink)}})
	return nil
}
