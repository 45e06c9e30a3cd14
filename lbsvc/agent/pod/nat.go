//go:build linux

package pod

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/ovnedge/ovnedge/lbsvc/agent"
	"golang.org/x/sys/unix"
)

// The agent's nftables table (family ip, or ip6 for an IPv6 LoadBalancer
// address) and its two nat base chains. Nothing else is touched.
const (
	Table     = "ovnedge-lbsvc"
	ChainDNAT = "prerouting"  // type nat hook prerouting priority dstnat
	ChainSNAT = "postrouting" // type nat hook postrouting priority srcnat
)

// natRule is one wanted rule: its comment, which identifies it (the
// rules are listed and compared by it), and its expressions.
type natRule struct {
	comment string
	exprs   []expr.Any
}

// natRules returns the wanted rules of each chain: per port `<ip|ip6>
// daddr LBIP meta l4proto <proto> th dport <port> dnat to ClusterIP:port`
// and `<ip|ip6> daddr ClusterIP masquerade`.
func natRules(cfg agent.Config) map[string][]natRule {
	v6 := cfg.LBIP.Addr().Is6()
	natFamily := uint32(unix.NFPROTO_IPV4)
	if v6 {
		natFamily = unix.NFPROTO_IPV6
	}
	var dnat []natRule
	for _, p := range cfg.Ports {
		to := netip.AddrPortFrom(cfg.ClusterIP, p.Port)
		exprs := append(matchDaddr(cfg.LBIP.Addr()),
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNumber(p.Protocol)}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(p.Port)},
			&expr.Immediate{Register: 1, Data: cfg.ClusterIP.AsSlice()},
			&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(p.Port)},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: natFamily, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
		)
		dnat = append(dnat, natRule{fmt.Sprintf("dnat %s %s to %s", cfg.LBIP.Addr(), p, to), exprs})
	}
	masq := append(matchDaddr(cfg.ClusterIP), &expr.Masq{})
	return map[string][]natRule{
		ChainDNAT: dnat,
		ChainSNAT: {{fmt.Sprintf("masquerade to %s", cfg.ClusterIP), masq}},
	}
}

// matchDaddr matches packets to a (of the table's family).
func matchDaddr(a netip.Addr) []expr.Any {
	offset := uint32(16) // IPv4 destination
	if a.Is6() {
		offset = 24
	}
	b := a.AsSlice()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(len(b))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

func protoNumber(p string) byte {
	switch p {
	case "udp":
		return unix.IPPROTO_UDP
	case "sctp":
		return unix.IPPROTO_SCTP
	}
	return unix.IPPROTO_TCP
}

// ensureNAT makes the agent's chains hold exactly natRules, through
// nftables' netlink API (no nft or iptables binary), on the network
// namespace of the calling thread. Rules are told apart by their comment.
func ensureNAT(cfg agent.Config) (added, removed int, err error) {
	c, err := nftables.New()
	if err != nil {
		return 0, 0, fmt.Errorf("agent: nftables: %w", err)
	}
	family := nftables.TableFamilyIPv4
	if cfg.LBIP.Addr().Is6() {
		family = nftables.TableFamilyIPv6
	}
	table := c.AddTable(&nftables.Table{Name: Table, Family: family})
	chains := map[string]*nftables.Chain{
		ChainDNAT: c.AddChain(&nftables.Chain{Name: ChainDNAT, Table: table, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest}),
		ChainSNAT: c.AddChain(&nftables.Chain{Name: ChainSNAT, Table: table, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource}),
	}
	if err := c.Flush(); err != nil { // add is idempotent: existing ones stay
		return 0, 0, fmt.Errorf("agent: nftables table %s %s: %w", familyName(family), Table, err)
	}
	for _, name := range []string{ChainDNAT, ChainSNAT} {
		have, err := c.GetRules(table, chains[name])
		if err != nil {
			return added, removed, fmt.Errorf("agent: list nftables chain %s: %w", name, err)
		}
		a, r := syncChain(c, table, chains[name], have, natRules(cfg)[name])
		if err := c.Flush(); err != nil {
			return added, removed, fmt.Errorf("agent: nftables chain %s: %w", name, err)
		}
		added, removed = added+a, removed+r
	}
	return added, removed, nil
}

// syncChain queues the deletion of the rules of chain not in want (by
// comment; a rule without one, or a duplicate, goes too) and the
// addition of the missing ones.
func syncChain(c *nftables.Conn, table *nftables.Table, chain *nftables.Chain, have []*nftables.Rule, want []natRule) (added, removed int) {
	wanted := map[string]bool{}
	for _, r := range want {
		wanted[r.comment] = true
	}
	seen := map[string]bool{}
	for _, r := range have {
		comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		if wanted[comment] && !seen[comment] {
			seen[comment] = true
			continue
		}
		_ = c.DelRule(r) // queued; errors come with Flush
		removed++
	}
	for _, r := range want {
		if seen[r.comment] {
			continue
		}
		c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: r.exprs,
			UserData: userdata.AppendString(nil, userdata.TypeComment, r.comment)})
		added++
	}
	return added, removed
}

func familyName(f nftables.TableFamily) string {
	if f == nftables.TableFamilyIPv6 {
		return "ip6"
	}
	return "ip"
}

// checkGateway asks for the gateway's MAC on the external interface,
// cfg.ARPAttempts times at most, each waiting cfg.ARPTimeout.
func checkGateway(ctx context.Context, cfg agent.Config) GatewayStatus {
	st := GatewayStatus{Addr: cfg.Gateway}
	if !cfg.Gateway.Is4() {
		return st
	}
	st.Checked = true
	ifi, err := net.InterfaceByName(cfg.External)
	if err != nil {
		st.Err = err.Error()
		return st
	}
	c, err := arp.Dial(ifi)
	if err != nil {
		st.Err = fmt.Sprintf("open ARP socket on %s: %v", cfg.External, err)
		return st
	}
	defer c.Close()
	for st.Attempts < cfg.ARPAttempts && ctx.Err() == nil {
		st.Attempts++
		if err := c.SetDeadline(time.Now().Add(cfg.ARPTimeout)); err != nil {
			st.Err = err.Error()
			return st
		}
		mac, err := c.Resolve(cfg.Gateway)
		if err == nil {
			st.Reachable, st.MAC, st.Err = true, mac, ""
			return st
		}
		st.Err = err.Error()
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			time.Sleep(min(cfg.ARPTimeout, 100*time.Millisecond)) // not a timeout: do not spin
		}
	}
	if ctx.Err() != nil && !st.Reachable {
		st.Err = ctx.Err().Error()
	}
	return st
}

// announce tells the external link's hosts that the LB IP is now at this
// pod's MAC (a pod created again has a new one): gratuitous ARP requests,
// garpCount of them garpInterval apart, so that a neighbour that refused
// the first within its locktime takes a later one. Kube-OVN's
// vpc-nat-gateway image does the same on start. Errors are only logged:
// the neighbours learn the MAC anyway once their entries go stale.
func announce(ctx context.Context, cfg agent.Config) {
	if !cfg.LBIP.Addr().Is4() {
		return
	}
	ifi, err := net.InterfaceByName(cfg.External)
	if err != nil {
		cfg.Logger.Warn("lbsvc-agent: gratuitous ARP", "err", err)
		return
	}
	c, err := arp.Dial(ifi)
	if err != nil {
		cfg.Logger.Warn("lbsvc-agent: gratuitous ARP", "interface", cfg.External, "err", err)
		return
	}
	defer c.Close()
	ip := cfg.LBIP.Addr()
	p, err := arp.NewPacket(arp.OperationRequest, ifi.HardwareAddr, ip, ethernet.Broadcast, ip)
	if err != nil {
		cfg.Logger.Warn("lbsvc-agent: gratuitous ARP", "err", err)
		return
	}
	for i := range garpCount {
		if err := c.WriteTo(p, ethernet.Broadcast); err != nil {
			cfg.Logger.Warn("lbsvc-agent: gratuitous ARP", "interface", cfg.External, "err", err)
			return
		}
		if i == garpCount-1 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(garpInterval):
		}
	}
}

// The gratuitous ARPs of a newly added LB IP: more than one, further
// apart than a Linux neighbour's locktime (1 s by default).
const (
	garpCount    = 3
	garpInterval = 1100 * time.Millisecond
)
