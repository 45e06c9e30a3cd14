//go:build linux

package hostnet

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ovnedge/ovnedge/egress/egresssvc"
)

// EgressServicesTable is the nftables table (family inet) of the
// EgressServices a node hosts: OVN-Kubernetes' chain and maps
// (go-controller/pkg/node/controllers/egressservice), in a table of its
// own so that ovnkube-node's table ovn-kubernetes is never touched:
//
//	table inet ovnedge-egress-service {
//		map egress-service-snat-v4 { type ipv4_addr : ipv4_addr; }
//		map egress-service-snat-v6 { type ipv6_addr : ipv6_addr; }
//		chain egress-services {
//			type nat hook postrouting priority srcnat; policy accept;
//			meta mark 0x000003f0 return
//			snat ip to ip saddr map @egress-service-snat-v4
//			snat ip6 to ip6 saddr map @egress-service-snat-v6
//		}
//	}
//
// Mark 0x3f0 is pod -> node IP traffic (the 102 policy's pkt_mark 1008),
// SNATed to the node IP by the bridge.
const EgressServicesTable = "ovnedge-egress-service"

// EgressServices programs a node's egresssvc.Host: the SNAT maps above
// and the ip rules of spec.network (priority egresssvc.RulePriority; rules
// of that priority that are not wanted are deleted, as upstream does).
type EgressServices struct {
	ns   *namespace
	last *egresssvc.Host // the last Host applied whole
}

// NewEgressServices opens the namespace at netnsPath ("" = the caller's).
func NewEgressServices(netnsPath string) (*EgressServices, error) {
	ns, err := openNamespace(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("egress services: %w", err)
	}
	return &EgressServices{ns: ns}, nil
}

// Close releases the namespace handle.
func (e *EgressServices) Close() error { return e.ns.close() }

// ErrNoForwarding is Sync's error when the node hosts EgressServices of
// a family it does not forward (net.ipv4.conf.all.forwarding,
// net.ipv6.conf.all.forwarding): the endpoints' packets come in on the
// management port and must leave by the uplink, as on every Kubernetes
// node (kubeadm requires it). Everything else is applied.
var ErrNoForwarding = errors.New("the node does not forward")

// Sync makes the node's maps and rules those of h; the maps are replaced
// in one nftables transaction (a node with no SNAT has no table). Nothing
// is sent when h is what the last Sync applied. Among its errors,
// ErrNoForwarding and *TableError say what the node or an EgressService
// lacks; everything else of h is applied then.
func (e *EgressServices) Sync(h egresssvc.Host) error {
	if e.last != nil && slices.Equal(e.last.SNAT, h.SNAT) && slices.Equal(e.last.Rules, h.Rules) {
		return nil
	}
	var off []string
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		if !slices.ContainsFunc(h.SNAT, func(s egresssvc.SNAT) bool { return s.Pod.Is6() == (fam == netlink.FAMILY_V6) }) {
			continue
		}
		if on, err := e.ns.forwarding("all", fam); err == nil && !on {
			off = append(off, "net."+familyName(fam)+".conf.all.forwarding is 0")
		}
	}
	e.last = nil
	if err := e.syncNFT(h.SNAT); err != nil {
		return err
	}
	errs := []error{e.syncRules(h.Rules)}
	if len(off) > 0 {
		errs = append(errs, fmt.Errorf("%w: %s", ErrNoForwarding, strings.Join(off, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return err // applied again next time
	}
	e.last = &h
	return nil
}

var esvcFamilies = [2]nftFamily{
	{name: "egress-service-snat-v4", addr: nftables.TypeIPAddr, addrLen: 4, nfproto: unix.NFPROTO_IPV4, saddrOff: 12},
	{name: "egress-service-snat-v6", addr: nftables.TypeIP6Addr, addrLen: 16, nfproto: unix.NFPROTO_IPV6, saddrOff: 8},
}

// syncNFT declares the table, replaces the chain's rules and the maps'
// elements, in one batch; without SNATs it deletes the table.
func (e *EgressServices) syncNFT(snat []egresssvc.SNAT) error {
	c, err := e.ns.nftables()
	if err != nil {
		return fmt.Errorf("egress services nftables: %w", err)
	}
	table := &nftables.Table{Name: EgressServicesTable, Family: nftables.TableFamilyINet}
	if len(snat) == 0 {
		if err := deleteTable(c, table); err != nil {
			return fmt.Errorf("egress services nftables: %w", err)
		}
		return nil
	}
	t := c.AddTable(table)
	ch := c.AddChain(&nftables.Chain{Name: "egress-services", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	c.FlushChain(ch)
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0x3f0)},
		&expr.Verdict{Kind: expr.VerdictReturn},
	}})
	for i, f := range esvcFamilies {
		s := &nftables.Set{Table: t, Name: f.name, IsMap: true, KeyType: f.addr, DataType: f.addr}
		if err := c.AddSet(s, nil); err != nil {
			return fmt.Errorf("egress services nftables: map %s: %w", s.Name, err)
		}
		c.FlushSet(s)
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(f.saddr(),
			&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, DestRegister: 1, IsDestRegSet: true},
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: uint32(f.nfproto), RegAddrMin: 1, RegAddrMax: 1},
		)})
		var elems []nftables.SetElement
		for _, r := range snat {
			if r.Pod.Is6() == (i == 1) && r.Source.Is6() == r.Pod.Is6() {
				elems = append(elems, nftables.SetElement{Key: r.Pod.AsSlice(), Val: r.Source.AsSlice()})
			}
		}
		for len(elems) > 0 {
			n := min(len(elems), nftElemsPerMsg)
			if err := c.SetAddElements(s, elems[:n]); err != nil {
				return fmt.Errorf("egress services nftables: map %s: %w", s.Name, err)
			}
			elems = elems[n:]
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("egress services nftables: %d SNAT elements: %w", len(snat), err)
	}
	return nil
}

// syncRules makes the rules of priority egresssvc.RulePriority those
// wanted.
func (e *EgressServices) syncRules(want []egresssvc.Rule) error {
	h, err := e.ns.netlink()
	if err != nil {
		return err
	}
	defer h.Close()
	type key struct {
		from  netip.Addr
		table int
	}
	wanted := map[key]bool{}
	var errs []error
	for _, r := range want {
		t, err := RouteTable(r.Table)
		if err != nil {
			errs = append(errs, &TableError{Service: r.Service, Table: r.Table, Err: err})
			continue
		}
		wanted[key{r.From, t}] = true
	}
	have := map[key]bool{}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := h.RuleList(fam)
		if err != nil {
			return fmt.Errorf("egress services: list rules: %w", err)
		}
		for _, r := range rules {
			if r.Priority != egresssvc.RulePriority || r.Src == nil {
				continue
			}
			from, _ := netip.AddrFromSlice(r.Src.IP)
			k := key{from.Unmap(), r.Table}
			if ones, bits := r.Src.Mask.Size(); wanted[k] && ones == bits && !have[k] {
				have[k] = true
				continue
			}
			if err := h.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("egress services: delete rule from %s table %d: %w", from, r.Table, err))
			}
		}
	}
	for k := range wanted {
		if have[k] {
			continue
		}
		r := netlink.NewRule()
		r.Priority, r.Table, r.Family = egresssvc.RulePriority, k.table, netlink.FAMILY_V4
		if k.from.Is6() {
			r.Family = netlink.FAMILY_V6
		}
		r.Src = &net.IPNet{IP: k.from.AsSlice(), Mask: net.CIDRMask(k.from.BitLen(), k.from.BitLen())}
		if err := h.RuleAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("egress services: add rule from %s table %d: %w", k.from, k.table, err))
		}
	}
	return errors.Join(errs...)
}

// TableError is Sync's error for the rules of an EgressService whose
// spec.network names no routing table: they are left out, the rest is
// applied.
type TableError struct {
	Service, Table string
	Err            error
}

func (e *TableError) Error() string {
	return fmt.Sprintf("EgressService %s: spec.network: %v", e.Service, e.Err)
}

func (e *TableError) Unwrap() error { return e.Err }

// rtTables are where iproute2 names its routing tables.
var rtTables = []string{"/etc/iproute2/rt_tables", "/usr/share/iproute2/rt_tables", "/usr/lib/iproute2/rt_tables"}

// RouteTable is the id of a routing table given by number or by a name
// of iproute2's rt_tables files (and their rt_tables.d/*.conf).
func RouteTable(name string) (int, error) {
	if id, err := strconv.ParseUint(name, 10, 32); err == nil {
		return int(id), nil
	}
	for _, f := range rtTables {
		confs, _ := filepath.Glob(f + ".d/*.conf")
		for _, path := range append([]string{f}, confs...) {
			if id, ok := tableIn(path, name); ok {
				return id, nil
			}
		}
	}
	return 0, fmt.Errorf("routing table %q: not a number nor a name of %s", name, strings.Join(rtTables, ", "))
}

// tableIn looks name up in one rt_tables file.
func tableIn(path, name string) (int, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[1] == name && !strings.HasPrefix(fields[0], "#") {
			if id, err := strconv.ParseUint(fields[0], 0, 32); err == nil {
				return int(id), true
			}
		}
	}
	return 0, false
}
