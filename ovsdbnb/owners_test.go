package ovsdbnb_test

import (
	"reflect"
	"testing"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestOwners: a restarted controller (a new client) finds every owner that
// has rows, and removes one by syncing it empty.
func TestOwners(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0", "--", "lr-add", "lr0")
	sync(t, dial(t, o.NB), map[ovsdbnb.Owner]ovsdbnb.State{svc: webState("10.244.1.5:8080"), eip: eipState("100.64.0.3")})

	c := dial(t, o.NB) // the restart
	for _, tc := range []struct {
		types []string
		want  []ovsdbnb.Owner
	}{
		{nil, []ovsdbnb.Owner{eip, svc}},
		{[]string{"Service"}, []ovsdbnb.Owner{svc}},
		{[]string{"Node"}, []ovsdbnb.Owner{}},
	} {
		got, err := c.Owners(tc.types...)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Owners(%v) = %v, %v; want %v", tc.types, got, err, tc.want)
		}
	}
	sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{eip: {}})
	if got, err := c.Owners(); err != nil || !reflect.DeepEqual(got, []ovsdbnb.Owner{svc}) {
		t.Errorf("after deleting %v: Owners() = %v, %v", eip, got, err)
	}
}
