package ovsdbnb

import (
	"slices"
	"testing"
)

// TestNATRouters: the routers a make-before-break step gives a new NAT,
// whose chassis must confirm it before the reroute moves.
func TestNATRouters(t *testing.T) {
	o := Owner{Type: "EgressIP", Name: "prod"}
	nat := func(router, ext string) NAT {
		return NAT{Router: router, Type: "snat", ExternalIP: ext, LogicalIP: "10.244.1.3"}
	}
	synced := map[Owner]State{o: {NATs: []NAT{nat("GR_a", "172.18.0.44")}}}
	send := map[Owner]State{
		o:                               {NATs: []NAT{nat("GR_a", "172.18.0.44"), nat("GR_b", "172.18.0.44")}},
		{Type: "EgressIP", Name: "new"}: {NATs: []NAT{nat("GR_c", "172.18.0.45")}},
	}
	if got := natRouters(send, synced); !slices.Equal(got, []string{"GR_b", "GR_c"}) {
		t.Errorf("routers %v, want [GR_b GR_c]", got)
	}
	if got := natRouters(synced, synced); len(got) != 0 {
		t.Errorf("nothing new: %v", got)
	}
}
