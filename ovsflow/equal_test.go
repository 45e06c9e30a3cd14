package ovsflow_test

import (
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
)

// Flows compare equal field by field exactly when they render to the same
// text: every flow of the example programs (base, egress, ARP bypass, the
// gateway's Service flows with CT, NAT and exec, IPv4 and IPv6) against
// every other and against its own copy parsed back from text (new
// pointers for CT's table and NAT).
func TestFlowsEqualMeansSameText(t *testing.T) {
	var flows []ovsflow.Flow
	for _, parts := range []brextest.Parts{
		{Base: true, Egress: true, Services: true, VLAN: 10},
		{Base: true, Egress: true, Gateway: true, DualStack: true},
	} {
		p := brextest.MustProgram(t, parts)
		for _, o := range p.Owners() {
			flows = append(flows, p.Flows(o)...)
		}
	}
	for i, a := range flows {
		back, err := ovsflow.ParseFlow(a.String())
		if err != nil {
			t.Fatal(err)
		}
		if !ovsflow.FlowsEqual([]ovsflow.Flow{a}, []ovsflow.Flow{back}) {
			t.Errorf("%s differs from its copy parsed back", a)
		}
		for _, b := range flows[i+1:] {
			same := a.String() == b.String()
			if got := ovsflow.FlowsEqual([]ovsflow.Flow{a}, []ovsflow.Flow{b}); got != same {
				t.Errorf("FlowsEqual(%s, %s) = %v, want %v", a, b, got, same)
			}
		}
	}
	if ovsflow.FlowsEqual(flows[:2], flows[:1]) {
		t.Error("sets of different lengths compare equal")
	}
}

// Setting an owner's flows again to an equal copy changes nothing: the
// next Apply sends nothing; a real change is sent.
func TestSetEqualFlowsKeepsOwner(t *testing.T) {
	p := brextest.MustProgram(t, brextest.Parts{Base: true, Egress: true, Gateway: true})
	mem := &memBridge{}
	a := ovsflow.NewApplier(brextest.Bridge, mem, ovsflow.StaticPorts(brextest.Ports), testLog(t))
	ctx := ctxFor(t)
	if _, err := a.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Owners() {
		var copied []ovsflow.Flow
		for _, f := range p.Flows(o) {
			back, err := ovsflow.ParseFlow(f.String())
			if err != nil {
				t.Fatal(err)
			}
			copied = append(copied, back)
		}
		if err := p.Set(o, copied); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := a.Apply(ctx, p); err != nil || res.Changed() {
		t.Fatalf("apply of equal sets: %+v, %v; want nothing sent", res, err)
	}
	flows := p.Flows("egress")
	flows[0].Priority++
	if err := p.Set("egress", flows); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Apply(ctx, p); err != nil || res != (ovsflow.Result{Added: 1, Deleted: 1}) {
		t.Fatalf("apply of one changed flow: %+v, %v; want 1 added, 1 deleted", res, err)
	}
}
