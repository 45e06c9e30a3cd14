package ovsdbnb_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// driftState is the desired state of the drift tests: a Service's load
// balancer on sw0 and lr0, an EgressIP's policy, NAT and address set on
// lr0, a QoS row on sw0 and sw1, template variables on two chassis.
func driftState() map[ovsdbnb.Owner]ovsdbnb.State {
	tmpl := ovsdbnb.Owner{Type: "LBTemplates", Name: "node-ips"}
	return map[ovsdbnb.Owner]ovsdbnb.State{
		svc:      webState("10.244.1.5:8080,10.244.2.5:8080"),
		eip:      eipState("100.64.0.3", "100.64.0.4"),
		qosOwner: {QoSRules: []ovsdbnb.QoS{dscpQoS("sw0", "sw1")}},
		tmpl: {TemplateVars: []ovsdbnb.TemplateVar{{Chassis: "ch1", Name: "NODEIP_IPv4_0", Value: "172.18.0.2"},
			{Chassis: "ch2", Name: "NODEIP_IPv4_0", Value: "172.18.0.3"}}},
	}
}

// TestCurrent reads back what Sync wrote: each owner's State is the one
// written (keys another writer added to its rows left out), syncing it
// sends nothing, and types select the owners.
func TestCurrent(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0", "--", "ls-add", "sw1", "--", "lr-add", "lr0")
	c := dial(t, o.NB)
	want := driftState()
	sync(t, c, want)
	lb := o.Nbctl("--bare", "--columns=_uuid", "find", "Load_Balancer", "name=Service_default/web_TCP_cluster")
	o.Nbctl("set", "Load_Balancer", lb, "external_ids:other=keep", "options:foreign=1", `vips:"10.96.0.11:80"="10.0.0.1:80"`)

	got, err := c.Current()
	if err != nil {
		t.Fatal(err)
	}
	for owner, st := range want {
		if !got[owner].Equal(st.Sorted()) {
			t.Errorf("Current %s:\n got %+v\nwant %+v", owner, got[owner], st)
		}
	}
	if len(got) != len(want) {
		t.Errorf("Current: %d owners, want %d", len(got), len(want))
	}
	if res := sync(t, c, got); res.Ops() != 0 {
		t.Errorf("syncing the Current state sent %+v, want nothing", res)
	}
	eips, err := c.Current("EgressIP")
	if err != nil || len(eips) != 1 || !eips[eip].Equal(want[eip]) {
		t.Errorf("Current(EgressIP) = %+v, %v; want only %s", eips, err, eip)
	}
}

// logLines is a slog handler keeping the messages of its records.
type logLines struct {
	mu   gosync.Mutex
	msgs []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }
func (l *logLines) has(msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.msgs, msg)
}

// takeChanges waits until the monitor has seen changes and returns them,
// with those that follow within 200 ms.
func takeChanges(t *testing.T, c *ovsdbnb.Client) ovsdbnb.Changes {
	t.Helper()
	select {
	case <-c.Changed():
	case <-time.After(10 * time.Second):
		t.Fatal("no change seen within 10s")
	}
	time.Sleep(200 * time.Millisecond)
	return c.TakeChanges()
}

// TestChangesRepair edits, deletes and detaches owned rows by hand, as
// another writer would: the monitor names the owner and what changed, and
// syncing the changed owners again puts their rows back. Rows of another
// writer are no owner's change; a created switch is a topology change; a
// replaced database is a reconnection (logged) after which the owners'
// rows are written again.
func TestChangesRepair(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0", "--", "ls-add", "sw1", "--", "lr-add", "lr0")
	logs := &logLines{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{o.NB}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := driftState()
	sync(t, c, want)
	time.Sleep(200 * time.Millisecond)
	c.TakeChanges() // the first monitor reply's rows and the first Sync's

	lbUUID := func() string {
		return o.Nbctl("--bare", "--columns=_uuid", "find", "Load_Balancer", "name=Service_default/web_TCP_cluster")
	}
	tests := []struct {
		name   string
		edit   func()
		owner  ovsdbnb.Owner
		change string
	}{
		{"policy deleted", func() { o.Nbctl("lr-policy-del", "lr0", "100", "ip4.src == 10.244.1.3") },
			eip, "Logical_Router_Policy deleted"},
		{"NAT deleted", func() { o.Nbctl("lr-nat-del", "lr0", "snat", "10.244.1.3") }, eip, "NAT deleted"},
		{"address set emptied", func() {
			o.Nbctl("clear", "Address_Set", ovsdbnb.AddressSetName(want[eip].AddressSets[0].ExternalIDs[ovsdbnb.KeyID]), "addresses")
		}, eip, "Address_Set updated"},
		{"backends changed", func() { o.Nbctl("set", "Load_Balancer", lbUUID(), `vips:"10.96.0.10:80"="10.0.0.9:80"`) },
			svc, "Load_Balancer updated"},
		{"load balancer detached", func() { o.Nbctl("ls-lb-del", "sw0", lbUUID()) },
			svc, "Load_Balancer detached from Logical_Switch"},
		{"load balancer deleted", func() { o.Nbctl("lb-del", lbUUID()) }, svc, "Load_Balancer deleted"},
		{"QoS taken from a switch", func() { o.Nbctl("clear", "Logical_Switch", "sw1", "qos_rules") },
			qosOwner, "QoS detached from Logical_Switch"},
		{"template variables removed", func() { o.Nbctl("clear", "Chassis_Template_Var", "ch2", "variables") },
			ovsdbnb.Owner{Type: "LBTemplates", Name: "node-ips"}, "Chassis_Template_Var updated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.edit()
			ch := takeChanges(t, c)
			if !slices.Contains(ch.Owners[tc.owner], tc.change) || len(ch.Owners) != 1 {
				t.Errorf("changes %+v, want %s: %q only", ch, tc.owner, tc.change)
			}
			repair := map[ovsdbnb.Owner]ovsdbnb.State{}
			for owner := range ch.Owners {
				repair[owner] = want[owner]
			}
			if res := sync(t, c, repair); res.Ops() == 0 {
				t.Errorf("repair sent nothing")
			}
			if res := sync(t, c, want); res.Ops() != 0 {
				t.Errorf("after the repair a full sync sent %+v, want nothing", res)
			}
			takeChanges(t, c) // the repair's own
		})
	}

	t.Run("foreign rows", func(t *testing.T) {
		o.Nbctl("lr-policy-add", "lr0", "200", "ip4.dst == 8.8.8.8", "drop")
		o.Nbctl("lb-add", "foreign", "10.96.0.99:53", "10.244.0.9:53", "udp")
		time.Sleep(500 * time.Millisecond)
		if ch := c.TakeChanges(); !ch.Empty() {
			t.Errorf("another writer's rows: %+v, want no change of ours", ch)
		}
	})
	t.Run("topology", func(t *testing.T) {
		o.Nbctl("ls-add", "sw9")
		if ch := takeChanges(t, c); !ch.Topology || ch.TopologyLost || len(ch.Owners) != 0 {
			t.Errorf("a switch created: %+v, want a topology change only, none lost", ch)
		}
		o.Nbctl("ls-del", "sw9")
		if ch := takeChanges(t, c); !ch.Topology || !ch.TopologyLost || len(ch.Owners) != 0 {
			t.Errorf("a switch deleted: %+v, want topology lost", ch)
		}
	})
	t.Run("database replaced", func(t *testing.T) {
		o.ReplaceNB()
		ch := takeChanges(t, c)
		for !ch.Reconnected {
			ch = takeChanges(t, c)
		}
		if !logs.has("ovsdbnb: connection lost, reconnecting") || !logs.has("ovsdbnb: reconnected") {
			t.Errorf("the reconnection is not logged: %q", logs.msgs)
		}
		if cur, err := c.Current(); err != nil || len(cur) != 0 {
			t.Errorf("Current after the NB was replaced: %v, %v; want nothing", cur, err)
		}
		o.Nbctl("ls-add", "sw0", "--", "ls-add", "sw1", "--", "lr-add", "lr0")
		if res := sync(t, c, want); res.Inserts == 0 {
			t.Errorf("sync into the new NB: %+v, want inserts", res)
		}
		if got := o.Nbctl("lr-policy-list", "lr0"); !strings.Contains(got, "10.244.1.3") {
			t.Errorf("lr-policy-list lr0 in the new NB:\n%s", got)
		}
	})
}

// TestDriftedEchoes: the monitor reports the client's own Sync as changes
// of every owner it wrote (it does not say who wrote), but none of them
// has drifted from the State written, read through the index or by a
// scan; once another writer edits, deletes or detaches an owner's rows,
// that owner alone has.
func TestDriftedEchoes(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0", "--", "ls-add", "sw1", "--", "lr-add", "lr0")
	c := dial(t, o.NB)
	want := driftState()
	// A group, as the daemon's Service states hold: shared, not read
	// back, and no drift.
	st := want[svc]
	st.Groups = []ovsdbnb.LoadBalancerGroup{{Name: "clusterLBGroup", Switches: []string{"sw0"}}}
	st.LoadBalancers[0].Groups = []string{"clusterLBGroup"}
	want[svc] = st
	sync(t, c, want)
	ch := takeChanges(t, c)
	if len(ch.Owners) != len(want) {
		t.Fatalf("the monitor's echo of the Sync names %d owners, want %d: %+v", len(ch.Owners), len(want), ch)
	}
	echoes := map[ovsdbnb.Owner]ovsdbnb.State{}
	for owner := range ch.Owners {
		echoes[owner] = want[owner]
	}
	drifted := func(written map[ovsdbnb.Owner]ovsdbnb.State) []ovsdbnb.Owner {
		t.Helper()
		d, err := c.Drifted(written)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := drifted(echoes); len(d) != 0 {
		t.Errorf("own writes: drifted %v, want none", d)
	}
	// Many owners are read by a scan of the tables: the same answer.
	many := maps.Clone(want)
	for i := range 300 {
		many[ovsdbnb.Owner{Type: "EgressIP", Name: fmt.Sprint("absent", i)}] = ovsdbnb.State{}
	}
	if d := drifted(many); len(d) != 0 {
		t.Errorf("own writes, %d owners: drifted %v, want none", len(many), d)
	}

	o.Nbctl("lr-nat-del", "lr0", "snat", "10.244.1.3")
	lb := o.Nbctl("--bare", "--columns=_uuid", "find", "Load_Balancer", "name=Service_default/web_TCP_cluster")
	o.Nbctl("ls-lb-del", "sw0", lb)
	ch = takeChanges(t, c)
	for range 50 {
		if len(ch.Owners) == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
		next := c.TakeChanges()
		maps.Copy(ch.Owners, next.Owners)
	}
	changed := map[ovsdbnb.Owner]ovsdbnb.State{}
	for owner := range ch.Owners {
		changed[owner] = want[owner]
	}
	wantDrift := []ovsdbnb.Owner{eip, svc}
	slices.SortFunc(wantDrift, func(a, b ovsdbnb.Owner) int { return strings.Compare(a.String(), b.String()) })
	if d := drifted(changed); !slices.Equal(d, wantDrift) {
		t.Errorf("after another writer's edits: drifted %v, want %v", d, wantDrift)
	}
	if d := drifted(many); !slices.Equal(d, wantDrift) {
		t.Errorf("after another writer's edits, %d owners: drifted %v, want %v", len(many), d, wantDrift)
	}
	sync(t, c, changed)
	if d := drifted(many); len(d) != 0 {
		t.Errorf("after the repair: drifted %v, want none", d)
	}
	// A group has no owner stamp: the owners naming it have drifted
	// when it is no longer attached (or gone with a wiped database).
	o.Nbctl("clear", "Logical_Switch", "sw0", "load_balancer_group")
	if ch := takeChanges(t, c); !ch.Topology || !ch.TopologyLost {
		t.Errorf("a group detached: %+v, want topology lost", ch)
	}
	if d := drifted(many); !slices.Equal(d, []ovsdbnb.Owner{svc}) {
		t.Errorf("after the group was detached: drifted %v, want %v", d, svc)
	}
}
