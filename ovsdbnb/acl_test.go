package ovsdbnb_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

var aclOwner = ovsdbnb.Owner{Type: "Service", Name: "shop/web"}

// dropACL is an ACL dropping traffic to a VIP from outside a range, on
// the given switches.
func dropACL(switches ...string) ovsdbnb.ACL {
	return ovsdbnb.ACL{Priority: 1010, Direction: "from-lport", Action: "drop", Name: "shop_web",
		Match:       "ip4.dst == 172.18.0.200 && tcp.dst == 80 && ip4.src != {192.168.1.0/24}",
		ExternalIDs: map[string]string{ovsdbnb.KeyOwnerController: "ovnedge"}, Switches: switches}
}

// aclUUIDs returns the acls of switch sw.
func aclUUIDs(o *testbed.OVN, sw string) string { return switchColumn(o, sw, "acls") }

// One ACL shared by several switches, as a QoS row is: inserted once,
// marked KeyACL and held by each switch's acls; read back by Current as
// written; changed in place (action, name, switches) with a foreign key
// kept; detached and deleted when no longer wanted. The foreign ACL
// (another writer's, unmarked) is neither monitored nor touched, and a
// second Sync sends nothing.
func TestSyncACL(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0", "--", "ls-add", "sw1")
	o.Nbctl("acl-add", "sw0", "to-lport", "1001", "ip4.dst == 8.8.8.8", "drop")
	foreign := aclUUIDs(o, "sw0")
	c := dial(t, o.NB)

	want := map[ovsdbnb.Owner]ovsdbnb.State{aclOwner: {ACLs: []ovsdbnb.ACL{dropACL("sw0", "sw1")}}}
	if res := sync(t, c, want); res.Inserts != 1 || res.Mutates != 2 || res.Transactions != 1 {
		t.Errorf("first sync: %+v, want 1 insert and 2 switch mutations in 1 transaction", res)
	}
	row := o.Nbctl("--bare", "--columns=_uuid", "find", "ACL", "priority=1010")
	if row == "" || strings.Contains(row, "\n") {
		t.Fatalf("ACL rows of priority 1010: %q, want one", row)
	}
	if got := aclUUIDs(o, "sw1"); got != row {
		t.Errorf("sw1 acls = %q, want %q", got, row)
	}
	if got := aclUUIDs(o, "sw0"); !strings.Contains(got, row) || !strings.Contains(got, foreign) {
		t.Errorf("sw0 acls = %q, want ours %s and the foreign %s", got, row, foreign)
	}
	for args, w := range map[string]string{
		"get ACL " + row + " external_ids": `"ovnedge.io/acl"="true"`,
		"get ACL " + row + " name":         `shop_web`,
		"acl-list sw1":                     `from-lport  1010 (ip4.dst == 172.18.0.200 && tcp.dst == 80 && ip4.src != {192.168.1.0/24}) drop`,
	} {
		if got := o.Nbctl(strings.Fields(args)...); !strings.Contains(got, w) {
			t.Errorf("%s = %s, want %s", args, got, w)
		}
	}
	if res := sync(t, c, want); res.Ops() != 0 {
		t.Errorf("second sync: %+v, want no operations", res)
	}
	cur, err := c.Current("Service")
	if err != nil || !reflect.DeepEqual(cur, want) {
		t.Errorf("Current = %+v, %v; want %+v", cur, err, want)
	}

	// In place: another action and name, off sw1; a foreign key kept.
	o.Nbctl("set", "ACL", row, "external_ids:other=keep")
	a := dropACL("sw0")
	a.Action, a.Name = "reject", ""
	want[aclOwner] = ovsdbnb.State{ACLs: []ovsdbnb.ACL{a}}
	if res := sync(t, c, want); res.Inserts != 0 || res.Deletes != 0 || res.Updates != 1 || res.Mutates != 1 {
		t.Errorf("change: %+v, want 1 update (action, name) and 1 mutation (sw1)", res)
	}
	if got := aclUUIDs(o, "sw1"); got != "" {
		t.Errorf("sw1 acls after the change: %q, want none", got)
	}
	for args, w := range map[string]string{
		"get ACL " + row + " action":       "reject",
		"get ACL " + row + " name":         "[]",
		"get ACL " + row + " external_ids": "other=keep",
	} {
		if got := o.Nbctl(strings.Fields(args)...); !strings.Contains(got, w) {
			t.Errorf("%s = %s, want %s", args, got, w)
		}
	}
	if res := sync(t, c, want); res.Ops() != 0 {
		t.Errorf("sync after the change: %+v, want no operations", res)
	}

	// Not wanted any more: detached and deleted; the foreign row stays.
	if res := sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{aclOwner: {}}); res.Deletes != 1 || res.Mutates != 1 {
		t.Errorf("delete: %+v, want 1 delete and 1 mutation", res)
	}
	if got := o.Nbctl("--bare", "--columns=_uuid", "list", "ACL"); got != foreign {
		t.Errorf("ACL rows after the delete: %q, want only the foreign %s", got, foreign)
	}
	if got := aclUUIDs(o, "sw0"); got != foreign {
		t.Errorf("sw0 acls after the delete: %q, want %s", got, foreign)
	}
}

// A bad ACL fails its owner alone, before anything is sent.
func TestSyncACLInvalid(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0")
	c := dial(t, o.NB)
	for name, mutate := range map[string]func(*ovsdbnb.ACL){
		"action":      func(a *ovsdbnb.ACL) { a.Action = "pass" },
		"direction":   func(a *ovsdbnb.ACL) { a.Direction = "both" },
		"no switch":   func(a *ovsdbnb.ACL) { a.Switches = nil },
		"long name":   func(a *ovsdbnb.ACL) { a.Name = strings.Repeat("n", 64) },
		"marker key":  func(a *ovsdbnb.ACL) { a.ExternalIDs = map[string]string{ovsdbnb.KeyACL: "true"} },
		"no switch 2": func(a *ovsdbnb.ACL) { a.Switches = []string{"sw9"} },
	} {
		a := dropACL("sw0")
		mutate(&a)
		res, err := c.Sync(t.Context(), map[ovsdbnb.Owner]ovsdbnb.State{aclOwner: {ACLs: []ovsdbnb.ACL{a}}})
		if err == nil || res.Ops() != 0 {
			t.Errorf("%s: %+v, %v; want an error and nothing sent", name, res, err)
		}
	}
	if got := o.Nbctl("--bare", "--columns=_uuid", "list", "ACL"); got != "" {
		t.Errorf("ACL rows: %q, want none", got)
	}
}
