package ovsdbnb_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/testbed"
)

var qosOwner = ovsdbnb.Owner{Type: "ClusterPolicies", Name: "qos"}

// dscpQoS is a QoS row marking DSCP 10 on the given switches.
func dscpQoS(switches ...string) ovsdbnb.QoS {
	return ovsdbnb.QoS{Priority: 103, Direction: "from-lport", Match: "ip4.src == 10.244.1.3 && ct.trk && ct.rpl",
		Action:      map[string]int{"dscp": 10},
		ExternalIDs: map[string]string{ovsdbnb.KeyOwnerController: ovsdbnb.DefaultController, ovsdbnb.KeyName: "qos"},
		Switches:    switches}
}

// qosUUIDs returns the qos_rules of switch sw.
func qosUUIDs(o *testbed.OVN, sw string) string { return switchColumn(o, sw, "qos_rules") }

// switchColumn returns column col of switch sw (a set of UUIDs, bare).
func switchColumn(o *testbed.OVN, sw, col string) string {
	return o.Nbctl("--bare", "--columns="+col, "find", "Logical_Switch", "name="+sw)
}

// One QoS row shared by several switches: inserted once and held by each
// switch's qos_rules, changed in place (columns, switches), foreign keys
// and rows untouched, removed from every switch and deleted when no
// longer wanted; a second Sync sends nothing. Owners finds an owner
// whose only rows are QoS rows.
func TestSyncQoS(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0", "--", "ls-add", "sw1")
	o.Nbctl("qos-add", "sw0", "to-lport", "200", "ip4.dst == 8.8.8.8", "dscp=20")
	foreign := qosUUIDs(o, "sw0")
	c := dial(t, o.NB)

	want := map[ovsdbnb.Owner]ovsdbnb.State{qosOwner: {QoSRules: []ovsdbnb.QoS{dscpQoS("sw0", "sw1")}}}
	if res := sync(t, c, want); res.Inserts != 1 || res.Mutates != 2 || res.Transactions != 1 {
		t.Errorf("first sync: %+v, want 1 insert and 2 switch mutations in 1 transaction", res)
	}
	row := o.Nbctl("--bare", "--columns=_uuid", "find", "QoS", "priority=103")
	if row == "" || strings.Contains(row, "\n") {
		t.Fatalf("QoS rows of priority 103: %q, want one", row)
	}
	if got := qosUUIDs(o, "sw1"); got != row {
		t.Errorf("sw1 qos_rules = %q, want %q", got, row)
	}
	if got := qosUUIDs(o, "sw0"); !strings.Contains(got, row) || !strings.Contains(got, foreign) {
		t.Errorf("sw0 qos_rules = %q, want ours %s and the foreign %s", got, row, foreign)
	}
	for _, w := range []string{"from-lport", "103", `ip4.src == 10.244.1.3 && ct.trk && ct.rpl`, "dscp=10"} {
		if got := o.Nbctl("qos-list", "sw1"); !strings.Contains(got, w) {
			t.Errorf("qos-list sw1 has no %q:\n%s", w, got)
		}
	}
	if res := sync(t, c, want); res.Ops() != 0 {
		t.Errorf("second sync: %+v, want no operations", res)
	}

	got, err := dial(t, o.NB).Owners("ClusterPolicies")
	if err != nil || !reflect.DeepEqual(got, []ovsdbnb.Owner{qosOwner}) {
		t.Errorf("Owners(ClusterPolicies) = %v, %v; want %v", got, err, qosOwner)
	}

	// In place: another action, a bandwidth, off sw1; a foreign key kept.
	o.Nbctl("set", "QoS", row, "external_ids:other=keep")
	q := dscpQoS("sw0")
	q.Action = map[string]int{"dscp": 12}
	q.Bandwidth = map[string]int{"rate": 1000, "burst": 100}
	want[qosOwner] = ovsdbnb.State{QoSRules: []ovsdbnb.QoS{q}}
	if res := sync(t, c, want); res.Inserts != 0 || res.Deletes != 0 || res.Updates != 1 || res.Mutates != 1 {
		t.Errorf("change: %+v, want 1 update (action, bandwidth) and 1 mutation (sw1)", res)
	}
	if got := o.Nbctl("--bare", "--columns=_uuid", "find", "QoS", "priority=103"); got != row {
		t.Errorf("QoS row after the change: %q, want the same row %s", got, row)
	}
	if got := qosUUIDs(o, "sw1"); got != "" {
		t.Errorf("sw1 qos_rules after the change: %q, want none", got)
	}
	for args, w := range map[string]string{
		"get QoS " + row + " action":       "{dscp=12}",
		"get QoS " + row + " bandwidth":    "{burst=100, rate=1000}",
		"get QoS " + row + " external_ids": "other=keep",
	} {
		if got := o.Nbctl(strings.Fields(args)...); !strings.Contains(got, w) {
			t.Errorf("%s = %s, want %s", args, got, w)
		}
	}
	if res := sync(t, c, want); res.Ops() != 0 {
		t.Errorf("sync after the change: %+v, want no operations", res)
	}

	// Not wanted any more: detached and deleted; the foreign row stays.
	if res := sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{qosOwner: {}}); res.Deletes != 1 || res.Mutates != 1 {
		t.Errorf("delete: %+v, want 1 delete and 1 mutation", res)
	}
	if got := o.Nbctl("--bare", "--columns=_uuid", "list", "QoS"); got != foreign {
		t.Errorf("QoS rows after the delete: %q, want only the foreign %s", got, foreign)
	}
	if got := qosUUIDs(o, "sw0"); got != foreign {
		t.Errorf("sw0 qos_rules after the delete: %q, want %s", got, foreign)
	}
}

// The QoS "mark" action (OVN-Kubernetes' EgressIP reply-traffic rule) is
// refused, alone and before anything is sent, by a NB whose schema does
// not have it (the installed OVN 23.03's), and written into one that has
// it (the QoS action of OVN 24.03's schema).
func TestSyncQoSMark(t *testing.T) {
	mark := func(switches ...string) ovsdbnb.QoS {
		q := dscpQoS(switches...)
		q.Action = map[string]int{"mark": 42}
		return q
	}
	markOwner := ovsdbnb.Owner{Type: "ClusterPolicies", Name: "mark"}

	old := testbed.StartOVN(t)
	old.Nbctl("ls-add", "sw0")
	c := dial(t, old.NB)
	if c.SupportsKey(nbdb.QoSTable, "action", "mark") || !c.SupportsKey(nbdb.QoSTable, "action", "dscp") {
		t.Errorf("OVN 23.03 schema: SupportsKey(QoS action) mark %v, dscp %v; want false, true",
			c.SupportsKey(nbdb.QoSTable, "action", "mark"), c.SupportsKey(nbdb.QoSTable, "action", "dscp"))
	}
	if !c.SupportsKey(nbdb.LoadBalancerTable, "options", "anything") || c.SupportsKey("NoSuchTable", "x", "y") {
		t.Error("SupportsKey: a map column without an enum takes any key, an unknown table none")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Sync(ctx, map[ovsdbnb.Owner]ovsdbnb.State{markOwner: {QoSRules: []ovsdbnb.QoS{mark("sw0")}},
		qosOwner: {QoSRules: []ovsdbnb.QoS{dscpQoS("sw0")}}})
	var oe *ovsdbnb.OwnerError
	if !errors.As(err, &oe) || oe.Owner != markOwner || !strings.Contains(err.Error(), `does not accept "mark" in QoS.action`) ||
		!strings.Contains(err.Error(), "7.0.0") {
		t.Errorf("Sync with a mark on OVN 23.03: %v, want an OwnerError of %s naming the schema", err, markOwner)
	}
	if res.Inserts != 1 || res.Owners != 1 {
		t.Errorf("result %+v, want the other owner's QoS row written", res)
	}

	o := testbed.StartOVNWith(t, testbed.OVNOptions{QoSMark: true})
	o.Nbctl("ls-add", "sw0", "--", "ls-add", "sw1")
	c = dial(t, o.NB)
	if !c.SupportsKey(nbdb.QoSTable, "action", "mark") {
		t.Error("the QoS mark schema does not accept a mark")
	}
	want := map[ovsdbnb.Owner]ovsdbnb.State{markOwner: {QoSRules: []ovsdbnb.QoS{mark("sw0", "sw1")}}}
	if res := sync(t, c, want); res.Inserts != 1 {
		t.Errorf("first sync: %+v, want 1 insert", res)
	}
	dump := o.Dump(nbdb.QoSTable, "action", "priority", "match")
	for _, w := range []string{`action              : {mark=42}`, "priority            : 103", `"ip4.src == 10.244.1.3 && ct.trk && ct.rpl"`} {
		if !strings.Contains(dump, w) {
			t.Errorf("QoS rows have no %q:\n%s", w, dump)
		}
	}
	row := strings.TrimSpace(o.Nbctl("--bare", "--columns=_uuid", "list", "QoS"))
	for _, sw := range []string{"sw0", "sw1"} {
		if got := qosUUIDs(o, sw); got != row {
			t.Errorf("%s qos_rules = %q, want %q", sw, got, row)
		}
	}
	if res := sync(t, c, want); res.Ops() != 0 {
		t.Errorf("second sync: %+v, want no operations", res)
	}
}
