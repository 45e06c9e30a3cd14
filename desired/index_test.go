package desired_test

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/egress/egresssvc"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/internal/clustermodel"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// compareStates returns how the incremental state inc differs from the
// full computation's full (diverged), with the states that differ, ""
// when it does not.
func compareStates(full, inc desired.ClusterState) string {
	v := desired.Diverged(full, inc)
	var out []string
	for _, o := range v.Owners {
		state := func(cs desired.ClusterState) string {
			if st, ok := cs.Egress[o]; ok {
				return fmt.Sprintf("egress %+v", st)
			}
			if st, ok := cs.LB[o]; ok {
				return fmt.Sprintf("load balancers %+v", st)
			}
			return "none"
		}
		out = append(out, fmt.Sprintf("%s:\n    full %s\n    inc  %s", o, state(full), state(inc)))
	}
	for _, part := range v.Other {
		var f, i any
		switch part {
		case "status":
			f, i = full.Status, inc.Status
		case "ingress":
			f, i = full.Ingress, inc.Ingress
		case "keep":
			f, i = full.Keep, inc.Keep
		case "host":
			f, i = full.Host, inc.Host
		case "events":
			f, i = eventStrings(full.Events), eventStrings(inc.Events)
		default: // too long to show
		}
		out = append(out, fmt.Sprintf("%s:\n  full %v\n  inc  %v", part, f, i))
	}
	return strings.Join(out, "\n")
}

// TestIncrementalMatchesFull applies long random sequences of edits to a
// cluster and checks after every one that the incremental desired state
// equals a full recompute of the same objects (ComputeCluster), and that
// every owner it does not mark dirty kept its previous state.
func TestIncrementalMatchesFull(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seed  uint64
		args  []string
		steps int
	}{
		{"per-node LBs", 1, []string{"--lb-templates=false", "--lb-pools", "a=172.19.0.0/29"}, 400},
		{"templates", 2, []string{"--lb-pools", "a=172.19.0.0/29"}, 400},
		{"no pools", 3, nil, 400},
		{"per-node LBs 2", 4, []string{"--lb-templates=false", "--lb-pools", "a=172.19.0.0/30,b=172.19.0.4/30"}, 400},
		{"no egress IPs", 5, []string{"--enable-egress-ip=false", "--lb-pools", "a=172.19.0.0/29"}, 300},
		{"egress services", 6, []string{"--enable-egress-service", "--lb-pools", "a=172.19.0.0/29"}, 400},
		{"egress services without egress IPs", 7, []string{"--enable-egress-service", "--enable-egress-ip=false"}, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams(t, tc.args...)
			m := clustermodel.New(tc.seed, 5, 4, 30, 12, 5)
			x := desired.NewIndex(p, nil, nil)
			var prev []ovnknode.Node
			var last desired.ClusterState
			var lastNodes struct{ at, copy []ovnknode.Node }
			counts := map[string]int{}
			esvcRows := 0
			for step := range tc.steps {
				what := "initial"
				if step > 0 {
					what = m.Edit(last)
				}
				counts[what]++
				ch := m.Ch
				m.Reset()
				inc, err := x.Apply(ch)
				if err != nil {
					t.Fatalf("step %d (%s): incremental: %v", step, what, err)
				}
				full, err := desired.ComputeCluster(m.Snapshot(), p, nil, prev)
				if err != nil {
					t.Fatalf("step %d (%s): full: %v", step, what, err)
				}
				prev = full.Nodes
				if d := compareStates(full, inc); d != "" {
					t.Fatalf("seed %d step %d (%s): incremental differs from full:\n%s", tc.seed, step, what, d)
				}
				// The leader sets the reachability targets again only
				// when the nodes are another slice (sameSlice): nodes
				// that changed must come as one.
				if step > 0 && sameSlice(inc.Nodes, lastNodes.at) && !reflect.DeepEqual(inc.Nodes, lastNodes.copy) {
					t.Fatalf("seed %d step %d (%s): the nodes changed in place", tc.seed, step, what)
				}
				lastNodes.at, lastNodes.copy = inc.Nodes, slices.Clone(inc.Nodes)
				if step > 0 {
					for _, pair := range []struct {
						old, cur map[ovsdbnb.Owner]ovsdbnb.State
					}{{last.Egress, inc.Egress}, {last.LB, inc.LB}} {
						for o, st := range pair.cur {
							if old, ok := pair.old[o]; !inc.Dirty[o] && (!ok || !old.Equal(st)) {
								t.Fatalf("seed %d step %d (%s): owner %s changed but is not dirty", tc.seed, step, what, o)
							}
						}
						for o := range pair.old {
							if _, ok := pair.cur[o]; !ok && !inc.Dirty[o] {
								t.Fatalf("seed %d step %d (%s): owner %s gone but not dirty", tc.seed, step, what, o)
							}
						}
					}
				}
				for o := range inc.Egress {
					if o.Type == egresssvc.OwnerType {
						esvcRows++
					}
				}
				last = snapshotState(inc)
			}
			t.Logf("edits: %v; EgressService owners seen: %d", counts, esvcRows)
			if p.EnableEgressService && esvcRows == 0 {
				t.Error("no EgressService had rows")
			}
		})
	}
}

// snapshotState copies the maps of an incremental state (shared with its
// index) so the next apply does not change them.
func snapshotState(cs desired.ClusterState) desired.ClusterState {
	cs.Egress, cs.LB = maps.Clone(cs.Egress), maps.Clone(cs.LB)
	cs.Status, cs.Ingress = maps.Clone(cs.Status), maps.Clone(cs.Ingress)
	return cs
}

// testParams are the Params of ovnedge's defaults with cluster subnet
// 10.244.0.0/16 and, as flags would set them: "--lb-templates=false",
// "--enable-egress-ip=false" and "--lb-pools NAME=CIDR,...".
func testParams(t *testing.T, args ...string) desired.Params {
	t.Helper()
	cluster := netip.MustParsePrefix("10.244.0.0/16")
	p := desired.Params{Bridge: "br-ex", Uplink: "eth0", Patch: "patch-br-ex_-to-br-int", Zone: 64000,
		EnableEgressIP: true, GatewayFlows: true}
	p.Egress.ClusterSubnets = []netip.Prefix{cluster}
	p.Egress.JoinSubnets = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("fd98::/64")}
	p.LB.ClusterSubnets = []netip.Prefix{cluster}
	p.LB.MasqueradeSubnetV4, p.LB.MasqueradeSubnetV6 = netip.MustParsePrefix("169.254.169.0/29"), netip.MustParsePrefix("fd69::/125")
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--lb-templates=false":
			p.LB.PerNodeLBs = true
		case "--enable-egress-ip=false":
			p.EnableEgressIP = false
		case "--enable-egress-service":
			p.EnableEgressService = true
		case "--lb-pools":
			i++
			for _, entry := range strings.Split(args[i], ",") {
				name, cidr, _ := strings.Cut(entry, "=")
				pool, err := ipam.NewPool(name, cidr, nil)
				if err != nil {
					t.Fatal(err)
				}
				p.Pools = append(p.Pools, pool)
			}
		default:
			t.Fatalf("testParams: %q", args[i])
		}
	}
	return p
}

// eventStrings are the events as text, sorted.
func eventStrings(events []event.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.String()
	}
	slices.Sort(out)
	return out
}

// sameSlice reports whether a and b are the same slice (the same
// elements in the same memory), not merely equal.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
