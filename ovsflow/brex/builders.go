package brex

import (
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"slices"
	"strconv"

	"github.com/ovnedge/ovnedge/ovsflow"
)

// BaseCookie is OVN-Kubernetes' cookie of a node's own flows
// (DefaultOpenFlowCookie): the base flows and, with the gateway flows,
// the egress flows.
const BaseCookie uint64 = 0xdeff105

// CookieMark is the top 16 bits of the cookies of the flows only ovnedge
// defines ([FenceCookie], [EgressCookie]); every flow OVN-Kubernetes
// defines carries its own cookie ([BaseCookie], [ETPLocalCookie],
// [ServiceCookie], [PortCookie]).
const CookieMark uint64 = 0x0ede << 48

// EgressCookie is the cookie of the egress flows beside OVN-Kubernetes'
// gateway ([Egress].Cookie, when ovnkube-node programs the bridge's
// gateway flows and owns [BaseCookie]).
const EgressCookie uint64 = CookieMark | 0xe9e55

// OwnedCookie reports whether c is one of the cookies only ovnedge gives
// its flows, [FenceCookie] and [EgressCookie]: exact values, so that no
// cookie of OVN-Kubernetes' hash is taken for one by chance.
func OwnedCookie(c uint64) bool {
	return c == FenceCookie || c == EgressCookie
}

// Owns returns which flows of a node's external bridge are ovnedge's, for
// [ovsflow.ApplierOptions].Owns: an Applier started anew deletes those its
// program lacks (flows a previous process left for owners gone
// meanwhile), and leaves all others alone.
//
// With gateway true ovnedge programs the bridge's shared gateway, the way
// ovnkube-node owns the bridge it programs (it replaces all of its flows):
// its flows carry OVN-Kubernetes' cookies, and are known by their shape:
// every table 0 flow at [PriorityService] (Services and their VIPs'
// ARP/NDP bypass, whatever their cookie) and [PrioritySourceRange], every flow of tables
// [TableHostDNAT] and [TableHostReply], every flow with [BaseCookie] or
// [ETPLocalCookie], and ovnedge's own cookies ([OwnedCookie]).
//
// With gateway false ovnkube-node programs the gateway and ovnedge adds
// only flows OVN-Kubernetes does not define: it owns its own cookies
// ([OwnedCookie]) and nothing else, so no flow of ovnkube-node's is ever
// changed or deleted.
func Owns(gateway bool) func(ovsflow.FlowID) bool {
	if gateway {
		return ownsGateway
	}
	return func(id ovsflow.FlowID) bool { return OwnedCookie(id.Cookie) }
}

func ownsGateway(id ovsflow.FlowID) bool {
	switch {
	case OwnedCookie(id.Cookie) || id.Cookie == BaseCookie || id.Cookie == ETPLocalCookie:
		return true
	case id.Table == 0:
		return id.Priority == PriorityService || id.Priority == PrioritySourceRange
	default:
		return id.Table == TableHostDNAT || id.Table == TableHostReply
	}
}

// DefaultZone is the conntrack zone of br-ex's host and egress traffic.
const DefaultZone uint16 = 64000

// Priorities of the programs' table 0 flows.
const (
	PriorityVIPBypass     = 110 // ARP/NS for a service VIP -> ovsflow.LOCAL
	PriorityService       = 110 // Service traffic between the uplink and OVN (or the host)
	PrioritySourceRange   = 111 // a restricted VIP's allowed sources to the host (loadBalancerSourceRanges)
	PriorityEgressLocal   = 109 // this node's pods leave unSNATed
	PriorityEgressNodeIP  = 105 // pkt_mark 1008: SNAT to the node IP
	PriorityEgressDrop    = 104 // other nodes' pods must not leak
	PriorityEgressDefault = 100 // everything else from the patch port
	PriorityHostEgress    = 100 // traffic from ovsflow.LOCAL
	PriorityReply         = 50  // replies to the bridge MAC
	PriorityBridgeMAC     = 10  // non-IP to the bridge MAC (table 1: new connections to it)
	PriorityPatchMAC      = 10  // non-IP from the patch port with the bridge MAC
	PriorityPatchDrop     = 9   // anything else from the patch port
	PriorityNormal        = 0   // the rest
)

// Priorities of table 1 (TableReply) flows besides PriorityBridgeMAC and
// PriorityNormal.
const (
	PriorityReplyTracked = 100 // established/related connections by ct_mark
	PriorityNDFlood      = 14  // IPv6 router and neighbour advertisements
)

// Tables of the shared gateway's flows.
const (
	// TableReply dispatches packets to the bridge MAC after conntrack
	// zone 64000, by the ct_mark of their connection.
	TableReply uint8 = 1
	// TableHostDNAT hands externalTrafficPolicy=Local Service traffic
	// DNATed to a host-network endpoint to the host (LOCAL).
	TableHostDNAT uint8 = 6
	// TableHostReply sends that traffic's replies, unDNATed, out of the
	// uplink.
	TableHostReply uint8 = 7
)

// Connection marks (ct_mark) of the bridge's conntrack zone: who a
// connection leaving the bridge belongs to, so its replies go back there.
const (
	CtMarkOVN  uint32 = 1
	CtMarkHost uint32 = 2
)

// NodeIPMark is the pkt_mark OVN's 102 allow policy puts on pod -> node IP
// traffic (options:pkt_mark=1008).
const NodeIPMark uint32 = 1008

// ServiceCookie is the cookie of a service VIP's flows: FNV-1a 64 over
// namespace, name, VIP and decimal port concatenated, as OVN-Kubernetes
// computes it (svcToCookie with the VIP as token).
func ServiceCookie(namespace, name string, vip netip.Addr, port int32) uint64 {
	var buf [46]byte
	return svcCookie(namespace, name, vip.AppendTo(buf[:0]), port)
}

// PortCookie is the cookie of a Service's flows that belong to a port
// rather than a VIP: its NodePort flows (port is the NodePort) and the
// reply flows of a host-network endpoint (port is the target port).
// proto is the flow's protocol shorthand ("tcp", "udp6", ...), which
// OVN-Kubernetes hashes in place of the VIP.
func PortCookie(namespace, name string, proto ovsflow.Proto, port int32) uint64 {
	return svcCookie(namespace, name, []byte(proto.String()), port)
}

// svcCookie is OVN-Kubernetes' svcToCookie, FNV-1a 64 of namespace, name,
// token and the decimal port.
func svcCookie(namespace, name string, token []byte, port int32) uint64 {
	var buf [64]byte
	b := append(buf[:0], namespace...)
	b = append(b, name...)
	b = append(b, token...)
	b = strconv.AppendInt(b, int64(port), 10)
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// Service is a Kubernetes Service's VIPs and ports as the ARP/NDP bypass
// needs them.
type Service struct {
	Namespace, Name string
	// VIPs are the ExternalIPs and LoadBalancer ingress IPs.
	VIPs []netip.Addr
	// Ports are the service port numbers.
	Ports []int32
}

// Owner is the program owner name of the service's flows.
func (s Service) Owner() string { return "service/" + s.Namespace + "/" + s.Name }

// Bypass says where VIP neighbour discovery enters the bridge.
type Bypass struct {
	// Uplink is the bridge port of the physical NIC.
	Uplink string
	// VLAN, when not 0, is the gateway VLAN: requests carry that tag and
	// are untagged on their way to LOCAL.
	VLAN uint16
}

// ARPBypass returns the flows sending ARP requests (IPv4) and neighbour
// solicitations (IPv6) for the service's VIPs from the uplink to LOCAL, so
// they never reach OVN (see OVN-Kubernetes'
// docs/design/external-ip-and-loadbalancer-ingress.md). One flow per VIP: a VIP on several
// ports gets the cookie of its lowest port.
func ARPBypass(b Bypass, svc Service) ([]ovsflow.Flow, error) {
	if b.Uplink == "" {
		return nil, fmt.Errorf("arp bypass for %s/%s: no uplink port", svc.Namespace, svc.Name)
	}
	if b.VLAN > 4094 {
		return nil, fmt.Errorf("arp bypass for %s/%s: VLAN %d out of range 1-4094", svc.Namespace, svc.Name, b.VLAN)
	}
	if len(svc.Ports) == 0 {
		return nil, nil
	}
	port := slices.Min(svc.Ports)
	actions := []ovsflow.Action{ovsflow.Output(ovsflow.LOCAL)}
	if b.VLAN != 0 {
		actions = []ovsflow.Action{ovsflow.PopVLAN(), ovsflow.Output(ovsflow.LOCAL)}
	}
	flows := make([]ovsflow.Flow, 0, len(svc.VIPs))
	for _, vip := range svc.VIPs {
		if err := checkUnicast(vip); err != nil {
			return nil, fmt.Errorf("arp bypass for %s/%s: VIP %w", svc.Namespace, svc.Name, err)
		}
		m := ovsflow.Match{InPort: ovsflow.PortName(b.Uplink), DlVLAN: b.VLAN}
		if vip.Is4() {
			m.Proto, m.ARPOp, m.ARPTpa = ovsflow.ProtoARP, 1, ovsflow.Host(vip)
		} else {
			m.Proto, m.ICMP, m.NDTarget = ovsflow.ProtoICMP6, &ovsflow.ICMP{Type: 135}, vip
		}
		flows = append(flows, ovsflow.Flow{
			Priority: PriorityVIPBypass,
			Cookie:   ServiceCookie(svc.Namespace, svc.Name, vip, port),
			Match:    m,
			Actions:  actions,
		})
	}
	return flows, nil
}

func checkUnicast(a netip.Addr) error {
	switch {
	case !a.IsValid():
		return fmt.Errorf("missing address")
	case a.Is4In6():
		return fmt.Errorf("%s is an IPv4-mapped IPv6 address", a)
	case a.Zone() != "":
		return fmt.Errorf("%s has a zone", a)
	case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%s is not a unicast address", a)
	}
	return nil
}

// Egress describes a node for its EgressIP flows.
type Egress struct {
	// Uplink and Patch are the bridge ports of the NIC and of the patch
	// port to br-int.
	Uplink, Patch string
	// NodeSubnets are this node's pod subnets; ClusterSubnets all pod
	// subnets of the cluster; NodeIPs the node's addresses on the bridge.
	// Each family present in NodeSubnets gets its flows and needs a node
	// IP of that family.
	NodeSubnets    []netip.Prefix
	ClusterSubnets []netip.Prefix
	NodeIPs        []netip.Addr
	// Zone is the conntrack zone, DefaultZone when 0.
	Zone uint16
	// Cookie is the flows' cookie: BaseCookie when 0 (the flows are part
	// of the gateway ovnedge programs), EgressCookie beside
	// OVN-Kubernetes' gateway.
	Cookie uint64
}

// EgressFlows returns the egress flows of OVN-Kubernetes' EgressIP feature
// page (docs/features/cluster-egress-controls/egress-ip.md before commit
// 28c67eac6), per IP family:
//
//	109 ip,in_port=<patch>,nw_src=<node subnet>   -> ct(commit,zone,exec(ct_mark=1)),output:<uplink>
//	105 pkt_mark=0x3f0,ip,in_port=<patch>          -> ct(commit,zone,nat(src=<node IP>),exec(load ct_mark=1)),output:<uplink>
//	104 ip,in_port=<patch>,nw_src=<cluster subnet> -> drop (one per cluster subnet)
//	100 ip,in_port=<patch>                         -> ct(commit,zone,exec(ct_mark=1)),output:<uplink>
func EgressFlows(e Egress) ([]ovsflow.Flow, error) {
	if e.Uplink == "" || e.Patch == "" {
		return nil, fmt.Errorf("egress flows: uplink and patch ports are required")
	}
	zone, cookie := cmpOr(e.Zone, DefaultZone), cmpOr(e.Cookie, BaseCookie)
	var flows []ovsflow.Flow
	for _, v6 := range []bool{false, true} {
		proto := ovsflow.ProtoIP
		if v6 {
			proto = ovsflow.ProtoIPv6
		}
		nodeSubnets := ofFamily(e.NodeSubnets, v6)
		if len(nodeSubnets) == 0 {
			continue
		}
		var nodeIP netip.Addr
		for _, a := range e.NodeIPs {
			if a.Is6() == v6 && checkUnicast(a) == nil {
				nodeIP = a
				break
			}
		}
		if !nodeIP.IsValid() {
			return nil, fmt.Errorf("egress flows: no %s node IP among %v", proto, e.NodeIPs)
		}
		fromPatch := ovsflow.Match{Proto: proto, InPort: ovsflow.PortName(e.Patch)}
		commit := func(nat *ovsflow.NAT, mark ovsflow.Action) []ovsflow.Action {
			return []ovsflow.Action{ovsflow.CT{Commit: true, Zone: zone, NAT: nat, Exec: []ovsflow.Action{mark}}, ovsflow.Output(ovsflow.PortName(e.Uplink))}
		}
		for _, s := range nodeSubnets {
			m := fromPatch
			m.NwSrc = s
			flows = append(flows, ovsflow.Flow{Priority: PriorityEgressLocal, Cookie: cookie, Match: m,
				Actions: commit(nil, ovsflow.SetField(ovsflow.FieldCtMark, 1))})
		}
		m := fromPatch
		m.PktMark = ovsflow.Exact(NodeIPMark)
		flows = append(flows, ovsflow.Flow{Priority: PriorityEgressNodeIP, Cookie: cookie, Match: m,
			Actions: commit(&ovsflow.NAT{Kind: ovsflow.NATSrc, Addr: nodeIP}, ovsflow.Load(ovsflow.FieldCtMark, 1))})
		for _, s := range ofFamily(e.ClusterSubnets, v6) {
			m := fromPatch
			m.NwSrc = s
			flows = append(flows, ovsflow.Flow{Priority: PriorityEgressDrop, Cookie: cookie, Match: m})
		}
		flows = append(flows, ovsflow.Flow{Priority: PriorityEgressDefault, Cookie: cookie, Match: fromPatch,
			Actions: commit(nil, ovsflow.SetField(ovsflow.FieldCtMark, 1))})
	}
	if len(flows) == 0 {
		return nil, fmt.Errorf("egress flows: no node subnet")
	}
	return flows, nil
}

func ofFamily(ps []netip.Prefix, v6 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if p.IsValid() && p.Addr().Is6() == v6 {
			out = append(out, p.Masked())
		}
	}
	return out
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Base describes a node's bridge for its base flows.
type Base struct {
	Uplink, Patch string
	// BridgeMAC is the MAC address of the bridge's LOCAL interface, which
	// OVN's gateway router shares in shared gateway mode.
	BridgeMAC net.HardwareAddr
	// IPv4 and IPv6 select the families to program.
	IPv4, IPv6 bool
	Zone       uint16 // DefaultZone when 0
}

// BaseFlows returns the shared gateway's common flows of the bridge
// (OVN-Kubernetes' commonFlows and flowsForDefaultBridge for the default
// network in shared gateway mode, reduced to what the Service and egress
// flows need; docs/deviations.md lists what is left out). Per family:
//
//	table 0
//	100 ip,in_port=LOCAL             -> ct(commit,zone,exec(ct_mark=2)),output:<uplink>  host traffic leaves
//	100 ip,in_port=<patch>           -> ct(commit,zone,exec(ct_mark=1)),output:<uplink>  pod traffic leaves
//	 50 ip,dl_dst=<MAC>              -> ct(table=1,zone,nat)                            what comes back
//	table 1 (after conntrack)
//	100 ct_state=+est+trk, ct_mark=0x1 (and +rel) -> output:<patch>   replies to OVN
//	100 ct_state=+est+trk, ct_mark=0x2 (and +rel) -> LOCAL            replies to the host
//	 14 icmp6,icmp_type=134 (RA) and 136 (NA)     -> FLOOD            IPv6 only: no conntrack entry, OVN and host need them
//
// and once:
//
//	table 0
//	 10 dl_dst=<MAC>                 -> output:<patch>,NORMAL   non-IP (ARP) to the shared MAC: OVN and the host
//	 10 in_port=<patch>,dl_src=<MAC> -> NORMAL                  non-IP from OVN's gateway router
//	  9 in_port=<patch>              -> drop                    anything else from OVN
//	  0                              -> NORMAL
//	table 1
//	 10 dl_dst=<MAC>                 -> LOCAL                   new connections to the shared MAC: the host
//	  0                              -> NORMAL
//
// The priority-100 flow from the patch port is exactly the one
// [EgressFlows] emits (the EgressIP feature page's layout, no dl_src match): the two owners
// share one bridge flow, the base keeping it when the egress flows are
// absent. The priority-0 flow replaces the `priority=0 actions=NORMAL`
// flow (cookie 0) a new bridge holds: same key, so installing the base
// takes that flow over with [BaseCookie].
func BaseFlows(b Base) ([]ovsflow.Flow, error) {
	if b.Uplink == "" || b.Patch == "" {
		return nil, fmt.Errorf("base flows: uplink and patch ports are required")
	}
	if len(b.BridgeMAC) != 6 {
		return nil, fmt.Errorf("base flows: bridge MAC %q is not a 6-byte MAC address", b.BridgeMAC)
	}
	zone := cmpOr(b.Zone, DefaultZone)
	uplink, patch, mac := ovsflow.PortName(b.Uplink), ovsflow.PortName(b.Patch), b.BridgeMAC
	flows := []ovsflow.Flow{
		{Priority: PriorityBridgeMAC, Cookie: BaseCookie, Match: ovsflow.Match{DlDst: mac}, Actions: []ovsflow.Action{ovsflow.Output(patch), ovsflow.Output(ovsflow.NORMAL)}},
		{Priority: PriorityPatchMAC, Cookie: BaseCookie, Match: ovsflow.Match{InPort: patch, DlSrc: mac}, Actions: []ovsflow.Action{ovsflow.Output(ovsflow.NORMAL)}},
		{Priority: PriorityPatchDrop, Cookie: BaseCookie, Match: ovsflow.Match{InPort: patch}},
		{Priority: PriorityNormal, Cookie: BaseCookie, Actions: []ovsflow.Action{ovsflow.Output(ovsflow.NORMAL)}},
		{Table: TableReply, Priority: PriorityBridgeMAC, Cookie: BaseCookie, Match: ovsflow.Match{DlDst: mac}, Actions: []ovsflow.Action{ovsflow.Output(ovsflow.LOCAL)}},
		{Table: TableReply, Priority: PriorityNormal, Cookie: BaseCookie, Actions: []ovsflow.Action{ovsflow.Output(ovsflow.NORMAL)}},
	}
	commit := func(mark uint32) []ovsflow.Action {
		return []ovsflow.Action{ovsflow.CT{Commit: true, Zone: zone, Exec: []ovsflow.Action{ovsflow.SetField(ovsflow.FieldCtMark, mark)}}, ovsflow.Output(uplink)}
	}
	for _, p := range []struct {
		on    bool
		proto ovsflow.Proto
	}{{b.IPv4, ovsflow.ProtoIP}, {b.IPv6, ovsflow.ProtoIPv6}} {
		if !p.on {
			continue
		}
		flows = append(flows,
			ovsflow.Flow{Priority: PriorityReply, Cookie: BaseCookie,
				Match:   ovsflow.Match{Proto: p.proto, DlDst: mac},
				Actions: []ovsflow.Action{ovsflow.CT{Table: ovsflow.ToTable(TableReply), Zone: zone, NAT: &ovsflow.NAT{}}}},
			ovsflow.Flow{Priority: PriorityHostEgress, Cookie: BaseCookie,
				Match: ovsflow.Match{Proto: p.proto, InPort: ovsflow.LOCAL}, Actions: commit(CtMarkHost)},
			ovsflow.Flow{Priority: PriorityEgressDefault, Cookie: BaseCookie,
				Match: ovsflow.Match{Proto: p.proto, InPort: patch}, Actions: commit(CtMarkOVN)},
		)
		for _, st := range []ovsflow.CtFlags{ovsflow.CtEst, ovsflow.CtRel} {
			for _, r := range []struct {
				mark uint32
				to   ovsflow.Port
			}{{CtMarkOVN, patch}, {CtMarkHost, ovsflow.LOCAL}} {
				flows = append(flows, ovsflow.Flow{Table: TableReply, Priority: PriorityReplyTracked, Cookie: BaseCookie,
					Match:   ovsflow.Match{Proto: p.proto, CtState: ovsflow.CtState{On: st | ovsflow.CtTrk}, CtMark: ovsflow.Exact(r.mark)},
					Actions: []ovsflow.Action{ovsflow.Output(r.to)}})
			}
		}
		if p.proto == ovsflow.ProtoIPv6 {
			for _, typ := range []uint8{134, 136} { // router and neighbour advertisements
				flows = append(flows, ovsflow.Flow{Table: TableReply, Priority: PriorityNDFlood, Cookie: BaseCookie,
					Match: ovsflow.Match{Proto: ovsflow.ProtoICMP6, ICMP: &ovsflow.ICMP{Type: typ}}, Actions: []ovsflow.Action{ovsflow.Output(ovsflow.FLOOD)}})
			}
		}
	}
	return flows, nil
}
