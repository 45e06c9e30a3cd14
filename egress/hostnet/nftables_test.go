package hostnet

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/testbed"
)

// nftReference is what the earlier nftables backend had nft run (through
// sigs.k8s.io/knftables, which the netlink backend replaced) for
// refRules: the ruleset the netlink backend must reproduce, and the table
// a node upgraded from it holds.
const nftReference = `add table inet ovnedge-egressip { comment "ovnedge egress IP SNAT on host links" ; }
add map inet ovnedge-egressip snat-v4 { type ipv4_addr . ifname : ipv4_addr ; }
add map inet ovnedge-egressip snat-v6 { type ipv6_addr . ifname : ipv6_addr ; }
add chain inet ovnedge-egressip postrouting { type nat hook postrouting priority 100 ; }
flush chain inet ovnedge-egressip postrouting
add rule inet ovnedge-egressip postrouting snat ip to ip saddr . oifname map @snat-v4
add rule inet ovnedge-egressip postrouting snat ip6 to ip6 saddr . oifname map @snat-v6
add element inet ovnedge-egressip snat-v4 { 10.244.1.3 . "eg0" : 192.168.100.50 }
add element inet ovnedge-egressip snat-v4 { 10.244.1.4 . "eth-long-name01" : 192.168.101.50 }
add element inet ovnedge-egressip snat-v6 { fd00:10:244::3 . "eg0" : fd00:100::50 }
`

var refRules = []SNATRule{
	{netip.MustParseAddr("10.244.1.3"), "eg0", netip.MustParseAddr("192.168.100.50")},
	{netip.MustParseAddr("10.244.1.4"), "eth-long-name01", netip.MustParseAddr("192.168.101.50")},
	{netip.MustParseAddr("fd00:10:244::3"), "eg0", netip.MustParseAddr("fd00:100::50")},
}

// loadReference runs nftReference's script in n with nft.
func loadReference(t *testing.T, n *testbed.Netns) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reference.nft")
	if err := os.WriteFile(path, []byte(nftReference), 0o600); err != nil {
		t.Fatal(err)
	}
	n.Run(t, "nft", "-f", path)
}

// nftHandle matches what differs between two equal rulesets: handles
// (`# handle N`, and a rule's handle and position in netlink debug output)
// and the table's comment.
var nftHandle = regexp.MustCompile(`(?m)( # handle \d+|^\s*comment ".*"\n|^(inet \S+ \S+)( \d+)+$)`)

// nftView is the backend's table as nft shows it in three ways: the
// ruleset, its netlink bytecode, and its JSON (handles and the table's
// comment left out: google/nftables v0.3.0 cannot set a table's comment,
// and nothing reads it).
func nftView(t *testing.T, n *testbed.Netns, table string) []string {
	t.Helper()
	text := n.Run(t, "nft", "-a", "list", "table", "inet", table)
	debug := n.Run(t, "nft", "--debug=netlink", "list", "table", "inet", table)
	var doc struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(n.Run(t, "nft", "-j", "list", "table", "inet", table)), &doc); err != nil {
		t.Fatal(err)
	}
	var objs []string
	for _, o := range doc.Nftables {
		for kind, v := range o {
			if kind == "metainfo" {
				continue
			}
			delete(v, "handle")
			delete(v, "comment")
			if elems, ok := v["elem"].([]any); ok { // hash order
				slices.SortFunc(elems, func(a, b any) int {
					ja, _ := json.Marshal(a)
					jb, _ := json.Marshal(b)
					return strings.Compare(string(ja), string(jb))
				})
			}
			b, _ := json.Marshal(map[string]any{kind: v})
			objs = append(objs, string(b))
		}
	}
	strip := func(s string) string {
		lines := strings.Split(nftHandle.ReplaceAllString(s+"\n", "$2"), "\n")
		// A map's elements come in hash order: sort each run of them.
		for i := 0; i < len(lines); {
			j := i
			for j < len(lines) && strings.HasPrefix(lines[j], "\telement ") {
				j++
			}
			slices.Sort(lines[i:j])
			i = j + 1
		}
		return strings.Join(lines, "\n")
	}
	return []string{strip(text), strip(debug), strings.Join(objs, "\n")}
}

// TestNFTablesRuleset checks that the netlink backend programs exactly the
// ruleset the nft command made for the same rules (the text, the netlink
// bytecode and the JSON of `nft list table`), and that it takes over a
// table nft made (a node upgraded from that backend): it lists its
// elements, adds and removes on it, and resets it.
func TestNFTablesRuleset(t *testing.T) {
	testbed.Require(t, "ip", "nft")
	ctx := context.Background()
	sorted := func(r []SNATRule) []SNATRule {
		r = slices.Clone(r)
		slices.SortFunc(r, func(a, b SNATRule) int { return strings.Compare(a.String(), b.String()) })
		return r
	}

	ref := testbed.NewNetns(t, "hnnftref")
	loadReference(t, ref)
	want := nftView(t, ref, NFTablesTable)

	n := testbed.NewNetns(t, "hnnft")
	b, err := NewNFTables(nsPath(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if err := b.Apply(ctx, refRules, nil); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got := nftView(t, n, NFTablesTable)
	for i, what := range []string{"nft list table", "nft --debug=netlink list table", "nft -j list table"} {
		if got[i] != want[i] {
			t.Errorf("%s differs from the nft-made reference:\n--- netlink backend\n%s\n--- reference\n%s", what, got[i], want[i])
		}
	}
	if rules, present, err := b.List(ctx); err != nil || !present || !reflect.DeepEqual(sorted(rules), sorted(refRules)) {
		t.Errorf("List = %v, %v, %v; want %v", rules, present, err, refRules)
	}
	// Applying again re-declares the table and replaces the chain's rules:
	// nothing changes, no rule is duplicated.
	extra := SNATRule{netip.MustParseAddr("10.244.1.9"), "eg0", netip.MustParseAddr("192.168.100.50")}
	if err := b.Apply(ctx, []SNATRule{extra}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(ctx, nil, []SNATRule{extra}); err != nil {
		t.Fatal(err)
	}
	for i, again := range nftView(t, n, NFTablesTable) {
		if again != want[i] {
			t.Errorf("after adding and removing an element:\n%s\nwant\n%s", again, want[i])
		}
	}

	t.Run("upgrade from nft", func(t *testing.T) {
		up, err := NewNFTables(nsPath(ref))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = up.Close() })
		rules, present, err := up.List(ctx)
		if err != nil || !present || !reflect.DeepEqual(sorted(rules), sorted(refRules)) {
			t.Fatalf("List of nft's table = %v, %v, %v; want %v", rules, present, err, refRules)
		}
		// A pod switching egress IP, as the Manager does: replace in one go.
		moved := SNATRule{refRules[0].PodIP, "eg0", netip.MustParseAddr("192.168.100.51")}
		if err := up.Apply(ctx, []SNATRule{moved, extra}, []SNATRule{refRules[0]}); err != nil {
			t.Fatalf("Apply on nft's table: %v", err)
		}
		rules, _, err = up.List(ctx)
		wantRules := append([]SNATRule{moved, extra}, refRules[1:]...)
		if err != nil || !reflect.DeepEqual(sorted(rules), sorted(wantRules)) {
			t.Errorf("after Apply: %v, %v; want %v", rules, err, wantRules)
		}
		if out := ref.Run(t, "nft", "list", "map", "inet", NFTablesTable, nftMap4); !strings.Contains(out, `10.244.1.3 . "eg0" : 192.168.100.51`) {
			t.Errorf("nft does not show the moved pod:\n%s", out)
		}
		if err := up.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		if err := up.Reset(ctx); err != nil {
			t.Errorf("Reset of no table: %v", err)
		}
		if rules, present, err := up.List(ctx); err != nil || present || len(rules) > 0 {
			t.Errorf("after Reset: %v, %v, %v", rules, present, err)
		}
		if out := ref.Run(t, "nft", "list", "ruleset"); out != "" {
			t.Errorf("ruleset after Reset:\n%s", out)
		}
	})
}

// emptyPath empties PATH until restore is called (and at t's cleanup), as
// in the ovnedge image, which holds nothing but the ovnedge binary; it
// checks that no command of the kind the backends once ran can be found.
func emptyPath(t *testing.T) (restore func()) {
	t.Helper()
	orig := os.Getenv("PATH")
	t.Setenv("PATH", t.TempDir())
	for _, cmd := range []string{"nft", "iptables", "iptables-restore", "ip"} {
		if p, err := exec.LookPath(cmd); err == nil {
			t.Fatalf("%s still found at %s", cmd, p)
		}
	}
	return func() { os.Setenv("PATH", orig) }
}

// TestSeed002WithoutBinaries runs the host-interface egress IP
// with the nftables backend and PATH emptied, so that no command can run:
// the backend and the Manager open, converge, and the pod's connection
// reaches the far host from the egress IP; nft, back on PATH, shows the
// map element and the chain; a converge to nothing, again without PATH,
// leaves nothing behind.
func TestSeed002WithoutBinaries(t *testing.T) {
	nft := backends[1]
	if nft.name != "nftables" {
		t.Fatalf("backends[1] is %s", nft.name)
	}
	tp := newTopology(t, nft) // sets the namespaces up with ip, sysctl
	ctx := context.Background()
	state := State{{Link: "eg0", EgressIP: netip.MustParseAddr(egressIP), PodIPs: []netip.Addr{netip.MustParseAddr(podIP)}}}

	restore := emptyPath(t)
	tp.open(t, nft)
	res, err := tp.mgr.Converge(ctx, state)
	if err != nil || res.SNATAdded != 1 || res.RulesAdded != 1 || res.AddrsAdded != 1 {
		t.Fatalf("Converge without binaries: %+v, %v", res, err)
	}
	want := []SNATRule{{PodIP: netip.MustParseAddr(podIP), Link: "eg0", EgressIP: netip.MustParseAddr(egressIP)}}
	if rules, present, err := tp.snat.List(ctx); err != nil || !present || !slices.Equal(rules, want) {
		t.Errorf("List = %v, %v, %v; want %v", rules, present, err, want)
	}
	if src, err := tp.sourceSeen(t); err != nil || src != egressIP {
		t.Errorf("far host saw source %q (err %v), want %s", src, err, egressIP)
	}
	restore()

	out := tp.node.Run(t, "nft", "list", "table", "inet", NFTablesTable)
	for _, want := range []string{
		`elements = { ` + podIP + ` . "eg0" : ` + egressIP + ` }`,
		"type nat hook postrouting priority srcnat; policy accept;",
		"snat ip to ip saddr . oifname map @snat-v4",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("nft list table lacks %q:\n%s", want, out)
		}
	}

	restore = emptyPath(t)
	res, err = tp.mgr.Converge(ctx, nil)
	restore()
	if err != nil || res.SNATRemoved != 1 || res.RulesRemoved != 1 || res.AddrsRemoved != 1 {
		t.Errorf("empty converge without binaries: %+v, %v", res, err)
	}
	if left := tp.leftovers(t, nft); len(left) > 0 {
		t.Errorf("left behind:\n%s", strings.Join(left, "\n"))
	}
}
