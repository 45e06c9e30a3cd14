package egress

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// ServedPort is a port on which a pod served by an EgressIP answers
// connections that come in from outside the cluster with the client's
// address kept (a backend of an externalTrafficPolicy=Local Service).
type ServedPort struct {
	IP netip.Addr
	// Protocol is "tcp", "udp" or "sctp"; Port the pod's (target) port.
	Protocol string
	Port     int32
}

// noRerouteReplyPort names the policies of ReplyPortPolicies.
const noRerouteReplyPort = "EIP-No-Reroute-reply-port"

// ReplyPortPolicies is the reply-traffic rule for a Northbound database
// whose QoS table has no mark action (OVN before 24.03, such as Debian's
// 23.03), where OVN-Kubernetes' rule (ReplyQoSOwner's QoS marking replies
// with 42, and the 102 "pkt.mark == 42" allow) cannot be written. Without
// either, the replies of a served pod to a client whose address was kept
// (an externalTrafficPolicy=Local Service) are rerouted to the egress
// node and SNATed there: the connection breaks. Instead, one 102 allow
// policy per served port keeps the packets from that source port from
// being rerouted:
//
//	102 ip4.src == <pod IP> && tcp.src == <port>  allow
//
// This is a deliberate deviation (see the package doc): it matches by
// source port, not by conntrack reply state, so a connection the pod
// itself opens from that port also leaves unrerouted; sources in the
// ephemeral range, where clients' ports live, are not served ports. The
// rows belong to ReplyQoSOwner, in place of the QoS rules.
func ReplyPortPolicies(c Cluster, ports []ServedPort) ovsdbnb.State {
	c = c.withDefaults()
	ports = slices.Clone(ports)
	slices.SortFunc(ports, func(a, b ServedPort) int {
		return cmp.Or(a.IP.Compare(b.IP), strings.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
	})
	ports = slices.Compact(ports)
	var st ovsdbnb.State
	for _, p := range ports {
		if !p.IP.IsValid() || p.Port <= 0 || p.Port > 65535 || !slices.Contains([]string{"tcp", "udp", "sctp"}, p.Protocol) {
			continue
		}
		fam := ipFamily(p.IP.Is6())
		name := fmt.Sprintf("%s_%s_%s_%d", noRerouteReplyPort, p.IP, p.Protocol, p.Port)
		st.Policies = append(st.Policies, c.noReroute(name, fam,
			fmt.Sprintf("%s.src == %s && %s.src == %s", fam, p.IP, p.Protocol, strconv.Itoa(int(p.Port))), nil))
	}
	return st
}
