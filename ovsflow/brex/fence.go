package brex

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ovnedge/ovnedge/ovsflow"
)

// FenceCookie is the cookie of the egress fence flows ([EgressFence]). It
// carries [CookieMark], so [OwnedCookie] knows it, but no Service hash:
// fence flows are a node's own, time-bounded state, which a render of the
// objects alone does not show.
const FenceCookie uint64 = CookieMark | 0xfe9ce

// PriorityEgressFence is the priority of the fence flows: above every
// other table 0 flow from the patch port.
const PriorityEgressFence = 120

// EgressFence returns the flows that silence this node's gateway router
// for egress IPs it no longer holds: ARP replies (IPv4) and neighbour
// advertisements (IPv6) from the patch port whose sender or target is one
// of ips are dropped, so a chassis whose ovn-controller has not yet
// removed the IP's NAT (lagging, or cut off from the Southbound database)
// cannot answer for it beside the new owner. Gratuitous ARPs (requests)
// pass: the node's first one must not be lost if the IP comes back to it.
// IPv6 has no such distinction here (solicited and unsolicited
// advertisements are both type 136), so an IPv6 egress IP that comes back
// while fenced loses OVN's first unsolicited advertisement; OVN repeats it
// a second later.
//
//	120 arp,in_port=<patch>,arp_spa=<ip>,arp_op=2        -> drop
//	120 icmp6,in_port=<patch>,icmp_type=136,icmp_code=0,nd_target=<ip> -> drop
func EgressFence(patch string, ips []netip.Addr) ([]ovsflow.Flow, error) {
	if len(ips) == 0 {
		return nil, nil
	}
	if patch == "" {
		return nil, fmt.Errorf("egress fence: no patch port")
	}
	ips = slices.Clone(ips)
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	flows := make([]ovsflow.Flow, 0, len(ips))
	for _, ip := range ips {
		if err := checkUnicast(ip); err != nil {
			return nil, fmt.Errorf("egress fence: %w", err)
		}
		m := ovsflow.Match{InPort: ovsflow.PortName(patch)}
		if ip.Is4() {
			m.Proto, m.ARPOp, m.ARPSpa = ovsflow.ProtoARP, 2, ovsflow.Host(ip)
		} else {
			m.Proto, m.ICMP, m.NDTarget = ovsflow.ProtoICMP6, &ovsflow.ICMP{Type: 136}, ip
		}
		flows = append(flows, ovsflow.Flow{Priority: PriorityEgressFence, Cookie: FenceCookie, Match: m})
	}
	return flows, nil
}

// Fenced returns the IPs that flows (a bridge's dump) fence: those of
// [EgressFence]'s flows among them, sorted. A restarted process resumes
// its fences from them (egress.Fence.Resume).
func Fenced(flows []ovsflow.Flow) []netip.Addr {
	var ips []netip.Addr
	for _, f := range flows {
		if f.Cookie != FenceCookie || f.Priority != PriorityEgressFence {
			continue
		}
		switch {
		case f.Match.ARPSpa.IsValid() && f.Match.ARPSpa.IsSingleIP():
			ips = append(ips, f.Match.ARPSpa.Addr())
		case f.Match.NDTarget.IsValid():
			ips = append(ips, f.Match.NDTarget)
		}
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	return slices.Compact(ips)
}
