package ovsdbnb_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// TestSharedIndexIncremental edits the routers, switches and load
// balancer groups of a real NB at random (rows added, deleted, deleted
// and added again under the same name, renamed; policies, NATs, load
// balancers, groups and QoS rows attached and detached; several edits in
// one transaction) and checks after each step that the client's shared
// index, updated from the rows that changed, equals one built anew from
// the same cache. Some steps are not looked at, so one update of the
// index takes several transactions' changes; some read the routers only,
// as a Sync of EgressIPs does, and are compared there only.
func TestSharedIndexIncremental(t *testing.T) {
	o := testbed.StartOVN(t)
	c := dial(t, o.NB)
	const names = 4
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(seed, 19))
		pick := func(prefix string) string { return fmt.Sprintf("%s%d", prefix, rng.IntN(names)) }
		ip := func() string { return fmt.Sprintf("10.0.%d.%d", rng.IntN(2), rng.IntN(4)+1) }
		uuidOf := func(table, name string) string {
			return strings.TrimSpace(o.Nbctl("--bare", "--columns=_uuid", "find", table, "name="+name))
		}
		// edit returns the ovn-nbctl commands of one random edit (joined
		// with "--" into one transaction by the caller).
		edit := func() []string {
			switch rng.IntN(14) {
			case 0:
				return []string{"--may-exist", "lr-add", pick("lr")}
			case 1:
				return []string{"--if-exists", "lr-del", pick("lr")}
			case 2:
				return []string{"--may-exist", "ls-add", pick("ls")}
			case 3:
				return []string{"--if-exists", "ls-del", pick("ls")}
			case 4:
				return []string{"--may-exist", "lb-add", pick("lb"), ip() + ":80", "10.1.0.1:8080"}
			case 5:
				return []string{"--if-exists", "lb-del", pick("lb")}
			case 6:
				return []string{"--may-exist", "ls-lb-add", pick("ls"), pick("lb")}
			case 7:
				return []string{"--may-exist", "lr-lb-add", pick("lr"), pick("lb")}
			case 8:
				return []string{"--may-exist", "lr-policy-add", pick("lr"), "100", "ip4.src == " + ip(), "allow"}
			case 9:
				return []string{"--if-exists", "lr-policy-del", pick("lr"), "100", "ip4.src == " + ip()}
			case 10:
				return []string{"--may-exist", "lr-nat-add", pick("lr"), "snat", "172.16.0.1", ip()}
			case 11:
				return []string{"--if-exists", "lr-nat-del", pick("lr"), "snat", ip()}
			case 12:
				return []string{"qos-add", pick("ls"), "from-lport", "100", "ip4.src == " + ip(), "mark=1"}
			default:
				return nil // group and rename edits need UUIDs: below
			}
		}
		for step := range 150 {
			var args []string
			for range 1 + rng.IntN(3) {
				if e := edit(); e != nil {
					if len(args) > 0 {
						args = append(args, "--")
					}
					args = append(args, e...)
				}
			}
			switch rng.IntN(6) {
			case 0: // a group holding a load balancer, held by a switch and a router
				g := pick("lbg")
				if uuidOf("Load_Balancer_Group", g) == "" {
					o.Nbctl("create", "Load_Balancer_Group", "name="+g)
				}
				if lb := uuidOf("Load_Balancer", pick("lb")); lb != "" {
					o.NbctlErr("add", "Load_Balancer_Group", g, "load_balancer", lb)
				}
				gu := uuidOf("Load_Balancer_Group", g)
				o.NbctlErr("add", "Logical_Switch", pick("ls"), "load_balancer_group", gu)
				o.NbctlErr("add", "Logical_Router", pick("lr"), "load_balancer_group", gu)
			case 1: // a group deleted
				if g := uuidOf("Load_Balancer_Group", pick("lbg")); g != "" {
					for _, tbl := range []string{"Logical_Switch", "Logical_Router"} {
						for _, h := range strings.Fields(o.Nbctl("--bare", "--columns=_uuid", "find", tbl, "load_balancer_group{>=}"+g)) {
							o.Nbctl("remove", tbl, h, "load_balancer_group", g)
						}
					}
					o.Nbctl("destroy", "Load_Balancer_Group", g)
				}
			case 2: // a router renamed, or deleted and added again (a new UUID)
				from, to := pick("lr"), pick("lr")
				if uuidOf("Logical_Router", from) != "" && uuidOf("Logical_Router", to) == "" {
					o.Nbctl("set", "Logical_Router", from, "name="+to)
				} else if uuidOf("Logical_Router", from) != "" {
					o.Nbctl("lr-del", from, "--", "lr-add", from)
				}
			}
			if len(args) > 0 {
				o.NbctlErr(args...) // an edit of a row that is not there fails, and the step with it
			}
			if rng.IntN(3) == 0 {
				continue // several transactions for one update of the index
			}
			// A third of the updates read the routers only (an
			// EgressIP's Sync): the switches' and groups' changes wait
			// for a later update that reads every table.
			routersOnly := rng.IntN(3) == 0
			deadline := time.Now().Add(5 * time.Second)
			for {
				msg, ok := ovsdbnb.SharedIndexMismatch(c, routersOnly)
				if ok {
					if msg != "" {
						t.Fatalf("seed %d step %d: the incremental index differs from a fresh one:\n%s", seed, step, msg)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("seed %d step %d: the cache never settled", seed, step)
				}
			}
		}
	}
}

// TestRoutersOnlySnapshot: a Sync of EgressIPs reads the routers only; a
// plan that meets load balancers or QoS rows reads the switches that hold
// them now, including one that took them after the last full read (here
// by another writer, between two EgressIP Syncs). A load balancer synced
// again is taken from that switch (ovnedge makes exactly the switches it
// names hold it); a QoS row deleted is detached from it first (a strong
// reference: the server refuses the delete otherwise).
func TestRoutersOnlySnapshot(t *testing.T) {
	lbs := func(o *testbed.OVN) string {
		return o.Nbctl("--bare", "--columns=load_balancer", "find", "Logical_Switch", "name=sw1")
	}
	qos := ovsdbnb.Owner{Type: "EgressIP", Name: "qos"}
	for _, tc := range []struct {
		name         string
		owner        ovsdbnb.Owner
		state, final ovsdbnb.State
		table, col   string
		held         func(o *testbed.OVN) string // the rows sw1 holds
		rowsLeft     bool
	}{
		{"load balancer synced again", svc, webState("10.244.1.5:8080"), webState("10.244.1.5:8080"), "Load_Balancer", "load_balancer", lbs, true},
		{"load balancer deleted", svc, webState("10.244.1.5:8080"), ovsdbnb.State{}, "Load_Balancer", "load_balancer", lbs, false},
		{"qos deleted", qos, ovsdbnb.State{QoSRules: []ovsdbnb.QoS{dscpQoS("sw0")}}, ovsdbnb.State{}, "QoS", "qos_rules",
			func(o *testbed.OVN) string { return qosUUIDs(o, "sw1") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testbed.StartOVN(t)
			o.Nbctl("ls-add", "sw0", "--", "ls-add", "sw1", "--", "lr-add", "lr0", "--", "lr-add", "lr1")
			c := dial(t, o.NB)
			sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{tc.owner: tc.state, eip: eipState("100.64.0.3")})
			sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{tc.owner: tc.state}) // a full read after the insert
			// Another writer hangs the owner's row on sw1 too.
			c.TakeChanges() // the echoes of the Syncs above
			row := strings.TrimSpace(o.Nbctl("--bare", "--columns=_uuid", "list", tc.table))
			o.Nbctl("add", "Logical_Switch", "sw1", tc.col, row)
			// Wait until the client's cache shows it: the monitor names
			// the owner whose row sw1 took. (Reading it back with
			// Current would read every table, the very thing under
			// test.)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, ok := c.TakeChanges().Owners[tc.owner]; ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the client's cache never showed sw1 holding the row")
				}
			}
			// EgressIP Syncs read the routers only.
			sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{eip: eipState("100.64.0.4")})
			sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{eip: eipState("100.64.0.3")})
			sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{tc.owner: tc.final})
			if got := strings.TrimSpace(o.Nbctl("--bare", "--columns=_uuid", "list", tc.table)); (got != "") != tc.rowsLeft {
				t.Errorf("%s rows: %q", tc.table, got)
			}
			if got := strings.TrimSpace(tc.held(o)); got != "" {
				t.Errorf("sw1 still holds %s", got)
			}
		})
	}
}
