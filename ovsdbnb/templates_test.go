package ovsdbnb_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestTemplateVarsRealNB writes chassis template variables of two owners
// into the shared Chassis_Template_Var rows, takes over a variable
// OVN-Kubernetes wrote, and removes one owner's variables without touching
// the other's or the foreign ones.
func TestTemplateVarsRealNB(t *testing.T) {
	o := testbed.StartOVN(t)
	// A row OVN-Kubernetes wrote for chassis ch1: NODEIP_IPv4_0 and a
	// variable nobody here wants.
	o.Nbctl("create", "Chassis_Template_Var", "chassis=ch1", `variables={NODEIP_IPv4_0="172.18.0.2",OTHER="x"}`)
	c := dial(t, o.NB)
	nodes := ovsdbnb.Owner{Type: "LBTemplates", Name: "node-ips"}
	web := ovsdbnb.Owner{Type: "Service", Name: "default/web"}
	want := map[ovsdbnb.Owner]ovsdbnb.State{
		nodes: {TemplateVars: []ovsdbnb.TemplateVar{{Chassis: "ch1", Name: "NODEIP_IPv4_0", Value: "172.18.0.2"},
			{Chassis: "ch2", Name: "NODEIP_IPv4_0", Value: "172.18.0.3"}}},
		web: {TemplateVars: []ovsdbnb.TemplateVar{{Chassis: "ch1", Name: "Service__default_web__TCP", Value: "10.244.1.3:8080"},
			{Chassis: "ch2", Name: "Service__default_web__TCP", Value: ""}}},
	}
	res := sync(t, c, want)
	// One row inserted (ch2), the rest mutations of the shared rows.
	if res.Inserts != 1 || res.Deletes != 0 {
		t.Errorf("first sync: %+v, want 1 insert (ch2's row), 0 deletes", res)
	}
	got := o.Nbctl("--columns=chassis,variables", "list", "Chassis_Template_Var")
	for _, w := range []string{`NODEIP_IPv4_0="172.18.0.2"`, `OTHER=x`, `NODEIP_IPv4_0="172.18.0.3"`, `Service__default_web__TCP="10.244.1.3:8080"`} {
		if !strings.Contains(got, w) {
			t.Errorf("Chassis_Template_Var: no %s in\n%s", w, got)
		}
	}
	if res := sync(t, c, want); res.Ops() != 0 {
		t.Errorf("second sync: %+v, want nothing", res)
	}
	owners, err := c.Owners()
	if err != nil || len(owners) != 2 {
		t.Errorf("Owners: %v, %v; want the two owners", owners, err)
	}
	// The Service goes: its variables go, the node IPs and OTHER stay.
	sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{web: {}})
	got = o.Nbctl("--columns=variables", "list", "Chassis_Template_Var")
	if strings.Contains(got, "Service__") || !strings.Contains(got, "OTHER=x") || strings.Count(got, "NODEIP_IPv4_0") != 2 {
		t.Errorf("after the Service went:\n%s", got)
	}
}

// TestAdoptForeignRowsRealNB fills the NB with rows as OVN-Kubernetes
// writes them (no ovnedge stamp) and syncs the same rows: they are taken
// over in place (same UUIDs), nothing inserted or deleted, and keys only
// the foreign writer had (a legacy {name: <EgressIP>} id) go.
func TestAdoptForeignRowsRealNB(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0", "--", "lr-add", "lr0", "--", "lr-add", "lr1")
	lb := o.Nbctl("create", "Load_Balancer", "name=Service_default/web_TCP_cluster", "protocol=tcp",
		`vips={"10.96.0.10:80"="10.244.1.5:8080,10.244.2.5:8080"}`, `options={reject="true",event="false",skip_snat="false"}`,
		`external_ids={"k8s.ovn.org/kind"=Service,"k8s.ovn.org/owner"="default/web"}`)
	o.Nbctl("ls-lb-add", "sw0", strings.TrimSpace(lb), "--", "lr-lb-add", "lr0", strings.TrimSpace(lb))
	pol := o.Nbctl("--id=@p", "create", "Logical_Router_Policy", "priority=100", `match="ip4.src == 10.244.1.3"`, "action=reroute",
		`nexthops="100.64.0.3"`, `external_ids={name=eip1}`, "--", "add", "Logical_Router", "lr0", "policies", "@p")
	nat := o.Nbctl("--id=@n", "create", "NAT", "type=snat", "external_ip=172.18.0.33", "logical_ip=10.244.1.3",
		`options={stateless="false"}`, `external_ids={name=eip1}`, "--", "add", "Logical_Router", "lr0", "nat", "@n")
	c := dial(t, o.NB)
	want := map[ovsdbnb.Owner]ovsdbnb.State{svc: webState("10.244.1.5:8080,10.244.2.5:8080"), eip: eipState("100.64.0.3")}
	res := sync(t, c, want)
	if res.Inserts != 1 || res.Deletes != 0 || res.Adopted != 3 {
		// The address set is new: the only insert.
		t.Errorf("first sync: %+v, want 3 rows adopted, 1 insert (the address set), 0 deletes", res)
	}
	for _, w := range []struct{ table, uuid, col string }{
		{"Load_Balancer", lb, "name"}, {"Logical_Router_Policy", pol, "match"}, {"NAT", nat, "external_ip"},
	} {
		got := o.Nbctl("--columns=external_ids", "list", w.table, strings.TrimSpace(w.uuid))
		if !strings.Contains(got, "ovnedge.io/owner") {
			t.Errorf("%s %s not taken over in place: %s", w.table, strings.TrimSpace(w.uuid), got)
		}
		if strings.Contains(got, "name=eip1") {
			t.Errorf("%s: the legacy name key stayed: %s", w.table, got)
		}
	}
	if res := sync(t, c, want); res.Ops() != 0 {
		t.Errorf("second sync: %+v, want nothing", res)
	}
}

// TestSupportsTemplatesRealNB: the schema of the installed OVN (23.03)
// has load balancer templates; the same schema without its
// Chassis_Template_Var table (OVN before 22.12) has not.
func TestSupportsTemplatesRealNB(t *testing.T) {
	o := testbed.StartOVN(t)
	c := dial(t, o.NB)
	schema := c.Schema()
	if !ovsdbnb.SupportsTemplates(schema) {
		t.Fatalf("schema %s: no template support", schema.Version)
	}
	old := schema
	old.Tables = maps.Clone(schema.Tables)
	delete(old.Tables, "Chassis_Template_Var")
	if ovsdbnb.SupportsTemplates(old) {
		t.Error("a schema without Chassis_Template_Var: template support")
	}
	if !ovsdbnb.SupportsTemplates(c.Schema()) {
		t.Error("the client's schema was changed")
	}
}

// TestTemplateRecordsRealNB: once a Sync of many owners has read every
// chassis row's records, a Sync of a few owners skips the rows for an
// owner that wants no variable and holds none, and still removes the
// variables of one that held some (its record was read, or written
// since).
func TestTemplateRecordsRealNB(t *testing.T) {
	o := testbed.StartOVN(t)
	held := ovsdbnb.Owner{Type: "Service", Name: "default/held"}
	vars := func(name string) ovsdbnb.State {
		return ovsdbnb.State{TemplateVars: []ovsdbnb.TemplateVar{{Chassis: "ch1", Name: name, Value: "10.244.1.3:8080"}}}
	}
	// held's variable, written by an earlier client (a previous leader).
	sync(t, dial(t, o.NB), map[ovsdbnb.Owner]ovsdbnb.State{held: vars("Service__default_held__TCP")})
	c := dial(t, o.NB)
	// Many owners, held not among them: the records are read (held's).
	many := map[ovsdbnb.Owner]ovsdbnb.State{}
	for i := range 70 {
		many[ovsdbnb.Owner{Type: "EgressIP", Name: fmt.Sprintf("eip-%d", i)}] = ovsdbnb.State{}
	}
	if res := sync(t, c, many); res.Ops() != 0 {
		t.Errorf("many owners, nothing new: %+v", res)
	}
	late := ovsdbnb.Owner{Type: "Service", Name: "default/late"}
	for _, step := range []struct {
		name    string
		desired map[ovsdbnb.Owner]ovsdbnb.State
		want    []string // variables on ch1
	}{
		{"an owner without variables", map[ovsdbnb.Owner]ovsdbnb.State{{Type: "EgressIP", Name: "eip-1"}: {}},
			[]string{"Service__default_held__TCP"}},
		{"a new owner's variable", map[ovsdbnb.Owner]ovsdbnb.State{late: vars("Service__default_late__TCP")},
			[]string{"Service__default_held__TCP", "Service__default_late__TCP"}},
		{"the known owner's variable goes", map[ovsdbnb.Owner]ovsdbnb.State{held: {}},
			[]string{"Service__default_late__TCP"}},
		{"the new owner's variable goes", map[ovsdbnb.Owner]ovsdbnb.State{late: {}}, nil},
	} {
		sync(t, c, step.desired)
		got := o.Nbctl("--columns=variables", "find", "Chassis_Template_Var", "chassis=ch1")
		for _, v := range []string{"Service__default_held__TCP", "Service__default_late__TCP"} {
			if strings.Contains(got, v) != slices.Contains(step.want, v) {
				t.Errorf("%s: ch1's variables %s, want %v", step.name, strings.TrimSpace(got), step.want)
			}
		}
		drifted, err := c.Drifted(step.desired)
		if err != nil || len(drifted) != 0 {
			t.Errorf("%s: Drifted = %v, %v; want none", step.name, drifted, err)
		}
	}
}
