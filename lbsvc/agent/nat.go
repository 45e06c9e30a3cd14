//go:build linux

package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-iptables/iptables"
	"github.com/mdlayher/arp"
)

// The agent's nat chains.
const (
	ChainDNAT = "OVNEDGE-LBSVC-DNAT"
	ChainSNAT = "OVNEDGE-LBSVC-SNAT"
)

// natRules returns the wanted rules of each chain, as `iptables -S`
// prints them (so a listing compares equal).
func natRules(cfg Config) map[string][]string {
	host := func(a netip.Addr) string { return netip.PrefixFrom(a, a.BitLen()).String() }
	var dnat []string
	for _, p := range cfg.Ports {
		to := netip.AddrPortFrom(cfg.ClusterIP, p.Port).String()
		dnat = append(dnat, strings.Join([]string{"-d", host(cfg.LBIP.Addr()), "-p", p.Protocol, "-m", p.Protocol,
			"--dport", strconv.Itoa(int(p.Port)), "-j", "DNAT", "--to-destination", to}, " "))
	}
	return map[string][]string{
		ChainDNAT: dnat,
		ChainSNAT: {"-d " + host(cfg.ClusterIP) + " -j MASQUERADE"},
	}
}

// ensureNAT makes the agent's chains hold exactly natRules, jumped to
// from PREROUTING and POSTROUTING.
func ensureNAT(cfg Config) (added, removed int, err error) {
	proto := iptables.ProtocolIPv4
	if cfg.LBIP.Addr().Is6() {
		proto = iptables.ProtocolIPv6
	}
	ipt, err := iptables.New(iptables.IPFamily(proto))
	if err != nil {
		return 0, 0, fmt.Errorf("agent: iptables: %w", err)
	}
	want := natRules(cfg)
	for _, c := range []struct{ chain, from string }{{ChainDNAT, "PREROUTING"}, {ChainSNAT, "POSTROUTING"}} {
		ok, err := ipt.ChainExists("nat", c.chain)
		if err == nil && !ok {
			err = ipt.NewChain("nat", c.chain)
		}
		if err != nil {
			return added, removed, fmt.Errorf("agent: nat chain %s: %w", c.chain, err)
		}
		if ok, err = ipt.Exists("nat", c.from, "-j", c.chain); err == nil && !ok {
			err = ipt.Append("nat", c.from, "-j", c.chain)
			added++
		}
		if err != nil {
			return added, removed, fmt.Errorf("agent: jump from %s to %s: %w", c.from, c.chain, err)
		}
		a, r, err := syncChain(ipt, c.chain, want[c.chain])
		added, removed = added+a, removed+r
		if err != nil {
			return added, removed, err
		}
	}
	return added, removed, nil
}

// syncChain deletes the rules of chain not in want and appends the
// missing ones.
func syncChain(ipt *iptables.IPTables, chain string, want []string) (added, removed int, err error) {
	lines, err := ipt.List("nat", chain)
	if err != nil {
		return 0, 0, fmt.Errorf("agent: list nat %s: %w", chain, err)
	}
	have := map[string]bool{}
	for _, l := range lines {
		rule, ok := strings.CutPrefix(l, "-A "+chain+" ")
		if !ok {
			continue
		}
		if !slices.Contains(want, rule) {
			if err := ipt.Delete("nat", chain, strings.Fields(rule)...); err != nil {
				return added, removed, fmt.Errorf("agent: delete nat %s %s: %w", chain, rule, err)
			}
			removed++
			continue
		}
		have[rule] = true
	}
	for _, rule := range want {
		if have[rule] {
			continue
		}
		if err := ipt.Append("nat", chain, strings.Fields(rule)...); err != nil {
			return added, removed, fmt.Errorf("agent: append nat %s %s: %w", chain, rule, err)
		}
		have[rule] = true
		added++
	}
	return added, removed, nil
}

// checkGateway asks for the gateway's MAC on the external interface,
// cfg.ARPAttempts times at most, each waiting cfg.ARPTimeout.
func checkGateway(ctx context.Context, cfg Config) GatewayStatus {
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
