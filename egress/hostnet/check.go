//go:build linux

package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// check tests an assignment against the host-interface requirements and
// returns its link and the prefix length to add the egress IP with: that
// of the link's global network containing it (as upstream), so that the
// kernel adds it as a secondary address of that network: the node's own
// traffic keeps the primary address as source, and no new prefix route
// appears. egressIPs are all egress IPs (wanted or owned), which never
// count as the link's own networks.
func (m *Manager) check(a Assignment, egressIPs map[netip.Addr]bool) (netlink.Link, int, *RequirementError) {
	eip := a.EgressIP.Unmap()
	reject := func(reason Reason, err error, format string, args ...any) *RequirementError {
		return &RequirementError{Link: a.Link, EgressIP: eip, Reason: reason, Detail: fmt.Sprintf(format, args...), Err: err}
	}
	if err := validate(a); err != nil {
		return nil, 0, reject(ReasonInvalid, nil, "%s", err)
	}
	link, err := m.nl.LinkByName(a.Link)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, 0, reject(ReasonLinkNotFound, nil, "no such link")
		}
		return nil, 0, reject(ReasonLinkNotFound, err, "look up link")
	}
	attrs := link.Attrs()
	if attrs.Flags&net.FlagUp == 0 {
		return nil, 0, reject(ReasonLinkDown, nil, "link is administratively down")
	}
	if attrs.OperState != netlink.OperUp && attrs.OperState != netlink.OperUnknown {
		return nil, 0, reject(ReasonLinkDown, nil, "link operational state is %s", attrs.OperState)
	}
	family := familyOf(eip)
	addrs, err := m.nl.AddrList(link, family)
	if err != nil {
		return nil, 0, reject(ReasonNoGlobalAddress, err, "list addresses")
	}
	var networks []string
	plen := -1
	for _, ad := range addrs {
		ip, _ := netip.AddrFromSlice(ad.IP)
		if ad.Scope != unix.RT_SCOPE_UNIVERSE || egressIPs[ip.Unmap()] {
			continue
		}
		p := prefixOf(ad.IPNet, family)
		networks = append(networks, p.Masked().String())
		if plen < 0 && p.Contains(eip) {
			plen = p.Bits()
		}
	}
	if len(networks) == 0 {
		return nil, 0, reject(ReasonNoGlobalAddress, nil, "link has no %s address of global scope", familyName(family))
	}
	if plen < 0 {
		return nil, 0, reject(ReasonNotInLinkNetwork, nil, "link's networks are %s", strings.Join(networks, ", "))
	}
	on, err := m.forwarding(a.Link, family)
	if err != nil {
		return nil, 0, reject(ReasonForwardingDisabled, err, "read forwarding sysctl")
	}
	if !on {
		return nil, 0, reject(ReasonForwardingDisabled, nil, "net.%s.conf.%s.forwarding is 0", familyName(family), a.Link)
	}
	return link, plen, nil
}

// LinkOf returns the link holding network: the one link with an address
// of global scope in exactly that network (egress.HostAssignment names
// the node's host network of an egress IP, an Assignment its link). No
// such link, or several, is an error.
func (m *Manager) LinkOf(network netip.Prefix) (string, error) {
	family := familyOf(network.Addr())
	names, err := linksWith(m.nl, family, func(ad netlink.Addr) bool {
		return prefixOf(ad.IPNet, family).Masked() == network.Masked()
	})
	if err != nil {
		return "", fmt.Errorf("link of %s: %w", network, err)
	}
	switch len(names) {
	case 0:
		return "", fmt.Errorf("link of %s: no link has an address in it", network)
	case 1:
		return names[0], nil
	default:
		return "", fmt.Errorf("link of %s: several links have addresses in it: %s", network, strings.Join(names, ", "))
	}
}

// linksWith returns the names (each once, in the order found) of the
// links with an address of global scope of family that keep keeps.
func linksWith(nl *netlink.Handle, family int, keep func(netlink.Addr) bool) ([]string, error) {
	addrs, err := nl.AddrList(nil, family)
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	var names []string
	for _, ad := range addrs {
		if ad.Scope != unix.RT_SCOPE_UNIVERSE || ad.IPNet == nil || !keep(ad) {
			continue
		}
		link, err := nl.LinkByIndex(ad.LinkIndex)
		if err != nil {
			return nil, fmt.Errorf("link %d: %w", ad.LinkIndex, err)
		}
		if name := link.Attrs().Name; !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// validate checks an assignment's addresses and link name.
func validate(a Assignment) error {
	if a.Link == "" || len(a.Link) >= unix.IFNAMSIZ || strings.ContainsAny(a.Link, "/ \t\n") {
		return fmt.Errorf("invalid link name %q", a.Link)
	}
	eip := a.EgressIP.Unmap()
	if !eip.IsGlobalUnicast() {
		return fmt.Errorf("egress IP %v is not a unicast address of global scope", a.EgressIP)
	}
	for _, pod := range a.PodIPs {
		p := pod.Unmap()
		if !p.IsValid() || p.IsUnspecified() || p.IsMulticast() {
			return fmt.Errorf("invalid pod IP %v", pod)
		}
		if p.Is4() != eip.Is4() {
			return fmt.Errorf("pod IP %v is not of the egress IP's family", pod)
		}
	}
	return nil
}

// forwarding reads the link's forwarding sysctl inside the namespace.
func (m *Manager) forwarding(link string, family int) (bool, error) {
	return m.ns.forwarding(link, family)
}

// forwarding reads the link's forwarding sysctl ("all": the namespace's)
// inside the namespace (/proc/sys/net resolves to the reading thread's
// namespace).
func (n *namespace) forwarding(link string, family int) (bool, error) {
	path := fmt.Sprintf("/proc/sys/net/%s/conf/%s/forwarding", familyName(family), link)
	var data []byte
	err := n.do(func() error {
		var err error
		data, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return strings.TrimSpace(string(data)) != "0", nil
}

func familyName(family int) string {
	if family == netlink.FAMILY_V6 {
		return "ipv6"
	}
	return "ipv4"
}
