//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/coreos/go-iptables/iptables"
)

// IPTables is the iptables SNAT backend (upstream's): chain ChainName in
// table nat, jumped to from the top of POSTROUTING, holding one rule per
// pod, `-s <pod IP>/32 -o <link> -j SNAT --to-source <egress IP>`; IPv6
// rules go to ip6tables. It touches only ChainName and its jump.
type IPTables struct {
	ns   *namespace
	ipt4 *iptables.IPTables
	ipt6 *iptables.IPTables
}

// NewIPTables opens the iptables backend on the network namespace at
// netnsPath ("" = the caller's own). The iptables, ip6tables and
// iptables-restore commands (and their ip6tables twin) must be installed:
// the ovnedge image holds none, so this backend needs an image that adds
// them (NFTables needs no binary).
func NewIPTables(netnsPath string) (*IPTables, error) {
	ns, err := openNamespace(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("hostnet iptables: %w", err)
	}
	b := &IPTables{ns: ns}
	if b.ipt4, err = iptables.New(iptables.IPFamily(iptables.ProtocolIPv4)); err != nil {
		return nil, errors.Join(fmt.Errorf("hostnet iptables: %w", err), ns.close())
	}
	if b.ipt6, err = iptables.New(iptables.IPFamily(iptables.ProtocolIPv6)); err != nil {
		return nil, errors.Join(fmt.Errorf("hostnet ip6tables: %w", err), ns.close())
	}
	return b, nil
}

// Close releases the namespace handle.
func (b *IPTables) Close() error { return b.ns.close() }

const natTable = "nat"

var jumpRule = []string{"-j", ChainName}

// cmdName names ipt's command for messages.
func cmdName(ipt *iptables.IPTables) string {
	if ipt.Proto() == iptables.ProtocolIPv6 {
		return "ip6tables"
	}
	return "iptables"
}

func (b *IPTables) tables() []*iptables.IPTables { return []*iptables.IPTables{b.ipt4, b.ipt6} }

func (b *IPTables) forFamily(ip netip.Addr) *iptables.IPTables {
	if ip.Is4() {
		return b.ipt4
	}
	return b.ipt6
}

// List implements SNAT.
func (b *IPTables) List(_ context.Context) ([]SNATRule, bool, error) {
	var rules []SNATRule
	present := false
	err := b.ns.do(func() error {
		for _, ipt := range b.tables() {
			ok, err := ipt.ChainExists(natTable, ChainName)
			if err != nil {
				return fmt.Errorf("%s: %w", cmdName(ipt), err)
			}
			if !ok {
				continue
			}
			present = true
			lines, err := ipt.List(natTable, ChainName)
			if err != nil {
				return fmt.Errorf("list %s chain %s: %w", cmdName(ipt), ChainName, err)
			}
			for _, l := range lines {
				if r, ok := parseIPTablesRule(l); ok {
					rules = append(rules, r)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("hostnet iptables: %w", err)
	}
	return rules, present, nil
}

// parseIPTablesRule parses one `iptables -S` line of ChainName; the chain's
// other lines (its -N line, or rules someone else put there) are skipped.
func parseIPTablesRule(line string) (SNATRule, bool) {
	f := strings.Fields(line)
	var r SNATRule
	if len(f) < 2 || f[0] != "-A" || f[1] != ChainName {
		return r, false
	}
	for i := 2; i+1 < len(f); i++ {
		switch f[i] {
		case "-s":
			p, err := netip.ParsePrefix(f[i+1])
			if err != nil || !p.IsSingleIP() {
				return r, false
			}
			r.PodIP = p.Addr()
		case "-o":
			r.Link = f[i+1]
		case "--to-source":
			ip, err := netip.ParseAddr(f[i+1])
			if err != nil {
				return r, false
			}
			r.EgressIP = ip
		}
	}
	return r, r.PodIP.IsValid() && r.Link != "" && r.EgressIP.IsValid()
}

func ruleSpec(r SNATRule) []string {
	return []string{"-s", netip.PrefixFrom(r.PodIP, r.PodIP.BitLen()).String(), "-o", r.Link,
		"-j", "SNAT", "--to-source", r.EgressIP.String()}
}

// Apply implements SNAT. The rules of each family change in one
// `iptables-restore --noflush` transaction: go-iptables runs one command per
// rule (about 20 ms each here, 20 s for 1,000 pods), and a single
// transaction also makes a pod's switch of egress IP atomic. go-iptables
// still creates the chain and its jump, and lists.
func (b *IPTables) Apply(ctx context.Context, add, remove []SNATRule) error {
	err := b.ns.do(func() error {
		for _, ipt := range b.tables() {
			var lines strings.Builder
			n := 0
			for _, r := range add {
				if b.forFamily(r.PodIP) == ipt {
					fmt.Fprintf(&lines, "-A %s %s\n", ChainName, strings.Join(ruleSpec(r), " "))
					n++
				}
			}
			if n > 0 {
				if err := ensureChain(ipt); err != nil {
					return err
				}
			}
			for _, r := range remove {
				if b.forFamily(r.PodIP) == ipt {
					fmt.Fprintf(&lines, "-D %s %s\n", ChainName, strings.Join(ruleSpec(r), " "))
					n++
				}
			}
			if n == 0 {
				continue
			}
			if err := restore(ctx, ipt, lines.String()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("hostnet iptables: %w", err)
	}
	return nil
}

// restore applies lines (-A/-D rules) to the nat table in one
// transaction, leaving the rest of the table as it is.
func restore(ctx context.Context, ipt *iptables.IPTables, lines string) error {
	cmd := exec.CommandContext(ctx, cmdName(ipt)+"-restore", "--noflush", "--wait")
	cmd.Stdin = strings.NewReader("*" + natTable + "\n" + lines + "COMMIT\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %w: %s", cmdName(ipt), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ensureChain creates ChainName and its jump from POSTROUTING if missing.
func ensureChain(ipt *iptables.IPTables) error {
	ok, err := ipt.ChainExists(natTable, ChainName)
	if err != nil {
		return fmt.Errorf("%s: %w", cmdName(ipt), err)
	}
	if !ok {
		if err := ipt.NewChain(natTable, ChainName); err != nil {
			return fmt.Errorf("create %s chain %s: %w", cmdName(ipt), ChainName, err)
		}
	}
	if ok, err := ipt.Exists(natTable, "POSTROUTING", jumpRule...); err != nil || ok {
		return err
	}
	if err := ipt.Insert(natTable, "POSTROUTING", 1, jumpRule...); err != nil {
		return fmt.Errorf("add %s jump to %s: %w", cmdName(ipt), ChainName, err)
	}
	return nil
}

// Reset implements SNAT.
func (b *IPTables) Reset(_ context.Context) error {
	err := b.ns.do(func() error {
		for _, ipt := range b.tables() {
			ok, err := ipt.ChainExists(natTable, ChainName)
			if err != nil {
				return fmt.Errorf("%s: %w", cmdName(ipt), err)
			}
			if !ok {
				continue // no chain, so no jump to it either
			}
			if err := ipt.DeleteIfExists(natTable, "POSTROUTING", jumpRule...); err != nil {
				return fmt.Errorf("delete %s jump to %s: %w", cmdName(ipt), ChainName, err)
			}
			if err := ipt.ClearAndDeleteChain(natTable, ChainName); err != nil {
				return fmt.Errorf("delete %s chain %s: %w", cmdName(ipt), ChainName, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("hostnet iptables: %w", err)
	}
	return nil
}
