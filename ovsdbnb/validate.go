package ovsdbnb

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

// validate checks one owner's State before anything is sent; the error
// is an *OwnerError naming the row.
func validate(o Owner, st State) error {
	bad := func(row string, err error) error { return &OwnerError{Owner: o, Row: row, Err: err} }
	if o.Type == "" || o.Name == "" {
		return bad("owner", errors.New("owner type and name must not be empty"))
	}
	seen := map[string]bool{}
	dup := func(id string) error {
		if seen[id] {
			return bad(id, errors.New("listed twice"))
		}
		seen[id] = true
		return nil
	}
	for _, lb := range st.LoadBalancers {
		row := "load balancer " + lb.Name
		if lb.Name == "" {
			return bad(row, errors.New("empty name"))
		}
		if err := dup(row); err != nil {
			return err
		}
		if err := validateLB(lb); err != nil {
			return bad(row, err)
		}
	}
	for _, g := range st.Groups {
		if g.Name == "" {
			return bad("load balancer group", errors.New("empty name"))
		}
	}
	for _, p := range st.Policies {
		row := policyID(p.Router, p.Priority, p.Match)
		if err := dup(row); err != nil {
			return err
		}
		if err := validatePolicy(p); err != nil {
			return bad(row, err)
		}
	}
	for _, n := range st.NATs {
		row := natID(n.Router, n.Type, n.ExternalIP, n.LogicalIP)
		if err := dup(row); err != nil {
			return err
		}
		if err := validateNAT(n); err != nil {
			return bad(row, err)
		}
	}
	for _, a := range st.AddressSets {
		row := "address set " + a.ExternalIDs[KeyID]
		if a.ExternalIDs[KeyID] == "" {
			return bad(row, fmt.Errorf("external_ids[%s] is empty: it names the set", KeyID))
		}
		if err := dup(row); err != nil {
			return err
		}
		for _, addr := range a.Addresses {
			if !isIPOrPrefix(addr) {
				return bad(row, fmt.Errorf("address %q is not an IP or CIDR", addr))
			}
		}
		if err := validateKeys(map[string]map[string]string{"external_ids": a.ExternalIDs}); err != nil {
			return bad(row, err)
		}
	}
	if row, err := validateTemplateVars(st.TemplateVars); err != nil {
		return bad(row, err)
	}
	for _, q := range st.QoSRules {
		row := qosID(q.Direction, q.Priority, q.Match)
		if err := dup(row); err != nil {
			return err
		}
		if err := validateQoS(q); err != nil {
			return bad(row, err)
		}
	}
	for _, a := range st.ACLs {
		row := aclID(a.Direction, a.Priority, a.Match)
		if err := dup(row); err != nil {
			return err
		}
		if err := validateACL(a); err != nil {
			return bad(row, err)
		}
	}
	return nil
}

// validateKeys refuses map keys the KeyManaged record cannot hold, and
// the keys the reconciler writes itself.
func validateKeys(maps map[string]map[string]string) error {
	for _, col := range sortedKeys(maps) {
		for k := range maps[col] {
			if k == "" || strings.ContainsAny(k, ",;=") {
				return fmt.Errorf("%s key %q: empty or contains ',', ';' or '='", col, k)
			}
			if col == "external_ids" && (k == KeyOwnedBy || k == KeyManaged || k == KeyACL) {
				return fmt.Errorf("external_ids key %q is written by the reconciler", k)
			}
		}
	}
	return nil
}

func validateLB(lb LoadBalancer) error {
	switch lb.Protocol {
	case "", "tcp", "udp", "sctp":
	default:
		return fmt.Errorf("protocol %q: want tcp, udp or sctp", lb.Protocol)
	}
	for _, f := range lb.SelectionFields {
		switch f {
		case "eth_src", "eth_dst", "ip_src", "ip_dst", "tp_src", "tp_dst":
		default:
			return fmt.Errorf("selection field %q", f)
		}
	}
	// A template load balancer (options:template=true, OVN 22.12+) may
	// name chassis template variables, "^NAME" or "^NAME:port", as VIPs
	// and backends; each chassis expands them.
	template := lb.Options["template"] == "true"
	if template {
		switch lb.Options["address-family"] {
		case "ipv4", "ipv6":
		default:
			return fmt.Errorf("template load balancer: options:address-family %q: want ipv4 or ipv6", lb.Options["address-family"])
		}
	}
	parse := func(s string) error {
		if template && strings.HasPrefix(s, "^") {
			return parseTemplateRef(s)
		}
		_, err := parseEndpoint(s)
		return err
	}
	for _, vip := range sortedKeys(lb.VIPs) {
		if err := parse(vip); err != nil {
			return fmt.Errorf("vip %q: %w", vip, err)
		}
		if b := lb.VIPs[vip]; b != "" {
			for _, ep := range strings.Split(b, ",") {
				if err := parse(ep); err != nil {
					return fmt.Errorf("vip %q: backend %q: %w", vip, ep, err)
				}
			}
		}
	}
	return validateKeys(map[string]map[string]string{"external_ids": lb.ExternalIDs, "options": lb.Options, "vips": lb.VIPs})
}

// parseTemplateRef checks "^NAME" or "^NAME:port".
func parseTemplateRef(s string) error {
	name, port, hasPort := strings.Cut(strings.TrimPrefix(s, "^"), ":")
	if name == "" || strings.ContainsAny(name, ",;= ^") {
		return fmt.Errorf("template %q: bad variable name", s)
	}
	if hasPort {
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return fmt.Errorf("template %q: port %q: want 1-65535", s, port)
		}
	}
	return nil
}

// parseEndpoint parses "ip", "ip:port" or "[ipv6]:port".
func parseEndpoint(s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 0), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, errors.New(`want "ip", "ip:port" or "[ipv6]:port"`)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q is not an IP", host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return netip.AddrPort{}, fmt.Errorf("port %q: want 1-65535", port)
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

// isIPOrPrefix reports whether s is an IP address or a CIDR.
func isIPOrPrefix(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	_, err := netip.ParsePrefix(s)
	return err == nil
}

func validatePolicy(p RouterPolicy) error {
	if p.Router == "" {
		return errors.New("empty router")
	}
	if p.Priority < 0 || p.Priority > 32767 {
		return fmt.Errorf("priority %d: want 0-32767", p.Priority)
	}
	switch p.Action {
	case "allow", "drop":
		if len(p.Nexthops) > 0 {
			return fmt.Errorf("action %s takes no nexthops", p.Action)
		}
	case "reroute":
		if len(p.Nexthops) == 0 {
			return errors.New("action reroute needs nexthops")
		}
	default:
		return fmt.Errorf("action %q: want allow, reroute or drop", p.Action)
	}
	for _, nh := range p.Nexthops {
		if _, err := netip.ParseAddr(nh); err != nil {
			return fmt.Errorf("nexthop %q is not an IP", nh)
		}
	}
	if err := CheckMatch(p.Match); err != nil {
		return err
	}
	return validateKeys(map[string]map[string]string{"external_ids": p.ExternalIDs, "options": p.Options})
}

func validateNAT(n NAT) error {
	if n.Router == "" {
		return errors.New("empty router")
	}
	switch n.Type {
	case "snat", "dnat", "dnat_and_snat":
	default:
		return fmt.Errorf("type %q: want snat, dnat or dnat_and_snat", n.Type)
	}
	if _, err := netip.ParseAddr(n.ExternalIP); err != nil {
		return fmt.Errorf("external_ip %q is not an IP", n.ExternalIP)
	}
	if !isIPOrPrefix(n.LogicalIP) {
		return fmt.Errorf("logical_ip %q is not an IP or CIDR", n.LogicalIP)
	}
	return validateKeys(map[string]map[string]string{"external_ids": n.ExternalIDs, "options": n.Options})
}

func validateQoS(q QoS) error {
	if err := validateHeld(q.Direction, q.Priority, q.Switches); err != nil {
		return err
	}
	if len(q.Action) == 0 && len(q.Bandwidth) == 0 {
		return errors.New("neither an action nor a bandwidth")
	}
	for _, k := range sortedKeys(q.Action) {
		v := q.Action[k]
		switch {
		case k == "dscp" && (v < 0 || v > 63):
			return fmt.Errorf("action dscp=%d: want 0-63", v)
		case k == "mark" && (v < 0 || int64(v) > math.MaxUint32):
			return fmt.Errorf("action mark=%d: want 0-4294967295", v)
		case k != "dscp" && k != "mark":
			return fmt.Errorf("action %q: want dscp or mark", k)
		}
	}
	for _, k := range sortedKeys(q.Bandwidth) {
		if k != "rate" && k != "burst" {
			return fmt.Errorf("bandwidth %q: want rate or burst", k)
		}
		if v := q.Bandwidth[k]; v < 1 || int64(v) > math.MaxUint32 {
			return fmt.Errorf("bandwidth %s=%d: want 1-4294967295", k, v)
		}
	}
	if err := CheckMatch(q.Match); err != nil {
		return err
	}
	return validateKeys(map[string]map[string]string{"external_ids": q.ExternalIDs})
}

func validateACL(a ACL) error {
	if err := validateHeld(a.Direction, a.Priority, a.Switches); err != nil {
		return err
	}
	switch a.Action {
	case "allow", "allow-related", "allow-stateless", "drop", "reject":
	default:
		return fmt.Errorf("action %q: want allow, allow-related, allow-stateless, drop or reject", a.Action)
	}
	if len(a.Name) > 63 {
		return fmt.Errorf("name %q: longer than 63 bytes", a.Name)
	}
	if err := CheckMatch(a.Match); err != nil {
		return err
	}
	return validateKeys(map[string]map[string]string{"external_ids": a.ExternalIDs})
}

// validateHeld checks what QoS rows and ACLs share: a direction, a
// priority of 0-32767 and the switches holding the row. A row no switch
// holds is garbage-collected by the server: the next Sync would insert
// it again, forever.
func validateHeld(direction string, priority int, switches []string) error {
	switch direction {
	case "from-lport", "to-lport":
	default:
		return fmt.Errorf("direction %q: want from-lport or to-lport", direction)
	}
	if priority < 0 || priority > 32767 {
		return fmt.Errorf("priority %d: want 0-32767", priority)
	}
	if len(switches) == 0 {
		return errors.New("no logical switch holds it")
	}
	if slices.Contains(switches, "") {
		return errors.New("empty switch name")
	}
	return nil
}

// checkVIPs fails the owners that claim a VIP (protocol and "vip:port")
// another owner holds. The holder is the owner whose row in the NB holds
// the VIP and still wants it, or else the first claiming owner by name.
// The cache is scanned only for the VIPs that are new to their owner or
// claimed twice, so a Sync that changes backends reads no other rows.
func (s *syncer) checkVIPs(desired map[Owner]State, owners []Owner) {
	claims := map[string][]Owner{} // vip -> claiming owners, sorted
	wants := map[string]map[Owner]bool{}
	var check []string // vips claimed twice or new to their owner
	for _, o := range owners {
		mine := map[string]bool{}
		for _, lb := range desired[o].LoadBalancers {
			for vip := range lb.VIPs {
				k := lb.Protocol + " " + vip
				if !mine[k] {
					mine[k] = true
					claims[k] = append(claims[k], o)
				}
			}
		}
		if len(mine) == 0 {
			continue
		}
		held := s.heldVIPs(o)
		for k := range mine {
			if wants[k] == nil {
				wants[k] = map[Owner]bool{}
			}
			wants[k][o] = true
			if !held[k] || len(claims[k]) == 2 {
				check = append(check, k)
			}
		}
	}
	if len(check) == 0 {
		return
	}
	need := map[string]bool{}
	needVIP := map[string]bool{} // the VIPs alone: the scan below builds no key for a VIP not needed
	for _, k := range check {
		need[k] = true
		_, vip, _ := strings.Cut(k, " ")
		needVIP[vip] = true
	}
	holder := map[string]string{} // vip -> owner string holding it in the NB
	for _, m := range s.c.nb.Cache().Table(nbdb.LoadBalancerTable).RowsShallow() {
		lb, ok := m.(*nbdb.LoadBalancer)
		if !ok {
			continue
		}
		for vip := range lb.Vips {
			if !needVIP[vip] {
				continue
			}
			if ob := lb.ExternalIDs[KeyOwnedBy]; ob != "" {
				if k := ptrString(lb.Protocol) + " " + vip; need[k] {
					holder[k] = ob
				}
			}
		}
	}
	for _, k := range sortedKeys(need) {
		cl := claims[k]
		winner := ""
		if h, ok := holder[k]; ok {
			if o, inMap := ownerByString(desired, h); !inMap || wants[k][o] {
				winner = h
			}
		}
		if winner == "" {
			if len(cl) == 1 {
				continue
			}
			winner = cl[0].String()
		}
		for _, o := range cl {
			if o.String() != winner {
				s.fail(&OwnerError{Owner: o, Row: "vip " + k, Err: fmt.Errorf("also claimed by owner %s", winner)})
			}
		}
	}
}

// checkLBNames fails the owners that want a load balancer name another
// owner of the same Sync wants too. The name goes to the owner whose row
// holds it in the NB, or else to the first owner by name.
func (s *syncer) checkLBNames(desired map[Owner]State, owners []Owner) {
	claims := map[string][]Owner{}
	for _, o := range owners {
		for _, lb := range desired[o].LoadBalancers {
			claims[lb.Name] = append(claims[lb.Name], o)
		}
	}
	for _, name := range sortedKeys(claims) {
		cl := claims[name]
		if len(cl) < 2 {
			continue
		}
		winner := cl[0].String()
		if lb, err := s.lbByName(name); err == nil && lb != nil {
			for _, o := range cl {
				if o.String() == lb.ExternalIDs[KeyOwnedBy] {
					winner = o.String()
				}
			}
		}
		for _, o := range cl {
			if o.String() != winner {
				s.fail(&OwnerError{Owner: o, Row: "load balancer " + name, Err: fmt.Errorf("also wanted by owner %s", winner)})
			}
		}
	}
}

// heldVIPs returns the VIPs ("protocol vip:port") of owner o's cached
// load balancers (none when the cache cannot be read: they are then
// checked against every row).
func (s *syncer) heldVIPs(o Owner) map[string]bool {
	held := map[string]bool{}
	rows, err := ownedRows(s, o, nbdb.LoadBalancerTable, &nbdb.LoadBalancer{ExternalIDs: ownerIDs(o)},
		func(r *nbdb.LoadBalancer) map[string]string { return r.ExternalIDs })
	if err != nil {
		return held
	}
	for _, lb := range rows {
		for vip := range lb.Vips {
			held[ptrString(lb.Protocol)+" "+vip] = true
		}
	}
	return held
}

// ownerByString finds the owner of desired whose String is s.
func ownerByString(desired map[Owner]State, s string) (Owner, bool) {
	typ, name, _ := strings.Cut(s, "/")
	o := Owner{Type: typ, Name: name}
	_, ok := desired[o]
	return o, ok
}

// matchToken splits an OVN match into tokens: operators, punctuation,
// strings, $sets/@groups, and words (fields and constants).
var matchToken = regexp.MustCompile(`^(?:\s+|/\*.*?\*/|==|!=|<=|>=|&&|\|\||[<>!(){}\[\],]|"(?:[^"\\]|\\.)*"|[$@][A-Za-z_][A-Za-z0-9_]*|[A-Za-z0-9_.:/]+)`)

// CheckMatch checks the syntax of an OVN logical flow match (the
// language of ovn-sb(5) "Logical_Flow: match"): balanced parentheses,
// relational operators between a field and constants, && and || not
// mixed without parentheses, and well-formed constants. It does not know
// OVN's field names; northd would otherwise drop a bad match silently.
func CheckMatch(m string) error {
	var toks []string
	for rest := m; rest != ""; {
		loc := matchToken.FindStringIndex(rest)
		if loc == nil {
			return fmt.Errorf("match %q: unexpected %q", m, rest)
		}
		t := rest[:loc[1]]
		rest = rest[loc[1]:]
		if strings.TrimSpace(t) == "" || strings.HasPrefix(t, "/*") {
			continue
		}
		toks = append(toks, t)
	}
	if len(toks) == 0 {
		return fmt.Errorf("match %q: empty", m)
	}
	p := &matchParser{toks: toks}
	if err := p.expr(); err != nil {
		return fmt.Errorf("match %q: %w", m, err)
	}
	if p.i < len(p.toks) {
		return fmt.Errorf("match %q: unexpected %q", m, p.toks[p.i])
	}
	return nil
}

// matchParser is a recursive-descent parser of an OVN match.
type matchParser struct {
	toks []string
	i    int
}

func (p *matchParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *matchParser) next() string {
	t := p.peek()
	p.i++
	return t
}

// expr := unary (("&&" unary)* | ("||" unary)*)
func (p *matchParser) expr() error {
	if err := p.unary(); err != nil {
		return err
	}
	op := ""
	for t := p.peek(); t == "&&" || t == "||"; t = p.peek() {
		if op != "" && t != op {
			return errors.New("&& and || must be parenthesized when mixed")
		}
		op = p.next()
		if err := p.unary(); err != nil {
			return err
		}
	}
	return nil
}

// unary := "!" unary | "(" expr ")" | relation
func (p *matchParser) unary() error {
	switch p.peek() {
	case "!":
		p.next()
		return p.unary()
	case "(":
		p.next()
		if err := p.expr(); err != nil {
			return err
		}
		if t := p.next(); t != ")" {
			return fmt.Errorf("missing ')' (got %q)", t)
		}
		return nil
	}
	return p.relation()
}

var (
	fieldRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	// subscriptRE is a bit or bit range, "3" or "0..3" (one word token).
	subscriptRE = regexp.MustCompile(`^[0-9]+(\.\.[0-9]+)?$`)
	relops      = map[string]bool{"==": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true}
)

// relation := field ["[" int [".." int] "]"] [relop value] | constant
func (p *matchParser) relation() error {
	t := p.next()
	if t == "" {
		return errors.New("unexpected end")
	}
	if isConstant(t) {
		return nil // a boolean constant such as "1"
	}
	if !fieldRE.MatchString(t) {
		return fmt.Errorf("%q is not a field", t)
	}
	if p.peek() == "[" {
		p.next()
		if !subscriptRE.MatchString(p.next()) {
			return errors.New("bad subscript")
		}
		if p.next() != "]" {
			return errors.New("missing ']'")
		}
	}
	if !relops[p.peek()] {
		return nil // a predicate such as "ip4"
	}
	p.next()
	return p.value()
}

// value := constant | "{" constant ("," constant)* "}"
func (p *matchParser) value() error {
	if p.peek() != "{" {
		if t := p.next(); !isConstant(t) {
			return fmt.Errorf("%q is not a constant", t)
		}
		return nil
	}
	p.next()
	for {
		if t := p.next(); !isConstant(t) {
			return fmt.Errorf("%q is not a constant", t)
		}
		switch p.next() {
		case ",":
			if p.peek() == "}" {
				p.next()
				return nil
			}
		case "}":
			return nil
		default:
			return errors.New("missing '}'")
		}
	}
}

var macRE = regexp.MustCompile(`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}(/([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2})?$`)

// isConstant reports whether t is an OVN constant: a string, an address
// set or port group reference, an integer, an IP/CIDR (or value/mask) or
// a MAC.
func isConstant(t string) bool {
	switch {
	case t == "":
		return false
	case t[0] == '"', t[0] == '$', t[0] == '@':
		return true
	case macRE.MatchString(t):
		return true
	case isIPOrPrefix(t):
		return true
	}
	if v, mask, ok := strings.Cut(t, "/"); ok {
		return isConstant(v) && isConstant(mask)
	}
	if _, err := strconv.ParseUint(t, 0, 64); err == nil {
		return true
	}
	// Wider hex constants (e.g. 128-bit masks).
	if strings.HasPrefix(t, "0x") && len(t) > 2 && strings.Trim(t[2:], "0123456789abcdefABCDEF") == "" {
		return true
	}
	return false
}

// sortOwners sorts owners by their String.
func sortOwners(owners []Owner) {
	sort.Slice(owners, func(i, j int) bool { return owners[i].String() < owners[j].String() })
}
