package egress_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/testbed"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// benchNodes are n egress nodes on 172.16.0.0/12 (node i has 172.16.i/8.x).
func benchNodes(n int) []ovnknode.Node {
	nodes := make([]ovnknode.Node, n)
	for i := range nodes {
		nodes[i] = ovnknode.Node{
			Name:        fmt.Sprintf("node-%03d", i),
			Subnets:     []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 128 + byte(i/256), byte(i), 0}), 24)},
			Primary:     []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16, byte(i), 1}), 12)},
			GatewayJoin: []netip.Addr{netip.AddrFrom4([4]byte{100, 64, byte(i / 250), byte(i%250 + 2)})},
			Assignable:  true, Ready: true,
		}
		nodes[i].HostCIDRs = nodes[i].Primary
	}
	return nodes
}

// benchEIPs are n EgressIPs of two IPs each on 172.20.0.0/16, EgressIP i
// selecting namespace ns-<i> (pods labelled app=web).
func benchEIPs(n int) []*egressv1.EgressIP {
	eips := make([]*egressv1.EgressIP, n)
	for i := range eips {
		eips[i] = &egressv1.EgressIP{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("eip-%04d", i)},
			Spec: egressv1.EgressIPSpec{
				EgressIPs:         []string{fmt.Sprintf("172.20.%d.%d", i/100, i%100*2+1), fmt.Sprintf("172.20.%d.%d", i/100, i%100*2+2)},
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"name": fmt.Sprintf("ns-%d", i)}},
				PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			}}
	}
	return eips
}

// BenchmarkAssign assigns 1,000 EgressIPs (2,000 IPs) over 100 nodes:
// "fresh" from empty status, "steady" re-validating a full assignment,
// "failover" with one node unreachable (its IPs move).
func BenchmarkAssign(b *testing.B) {
	nodes, eips := benchNodes(100), benchEIPs(1000)
	first := egress.Assign(eips, nodes, nil, nil)
	assigned := withStatus(eips, first)
	for _, c := range []struct {
		name      string
		eips      []*egressv1.EgressIP
		reachable func(string) bool
	}{
		{"fresh", eips, nil},
		{"steady", assigned, nil},
		{"failover", assigned, func(n string) bool { return n != "node-000" }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				egress.Assign(c.eips, nodes, c.reachable, nil)
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/assign")
		})
	}
}

// labelChange is the label-change scenario: 10,000 pods (10 per
// namespace) served by 1,000 assigned EgressIPs over 100 nodes.
type labelChange struct {
	cluster    egress.Cluster
	nodes      []ovnknode.Node
	byName     map[string]*ovnknode.Node
	eips       []*egressv1.EgressIP
	selectors  []*egress.Selector
	namespaces []*corev1.Namespace
	nsByName   map[string]*corev1.Namespace
	pods       []*egress.PodInfo
	served     []egress.Served
}

const labelPods, labelEIPs, labelNodes = 10000, 1000, 100

func newLabelChange(b *testing.B) *labelChange {
	b.Helper()
	f := &labelChange{
		cluster:  egress.Cluster{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.128.0.0/9")}},
		nodes:    benchNodes(labelNodes),
		byName:   map[string]*ovnknode.Node{},
		nsByName: map[string]*corev1.Namespace{},
	}
	for i := range f.nodes {
		f.byName[f.nodes[i].Name] = &f.nodes[i]
	}
	eips := benchEIPs(labelEIPs)
	f.eips = withStatus(eips, egress.Assign(eips, f.nodes, nil, nil))
	for i := range labelEIPs {
		name := fmt.Sprintf("ns-%d", i)
		ns := namespace(name, map[string]string{"name": name})
		f.namespaces = append(f.namespaces, ns)
		f.nsByName[name] = ns
	}
	for i := range labelPods {
		f.pods = append(f.pods, egress.NewPodInfo(pod(fmt.Sprintf("ns-%d", i%labelEIPs), fmt.Sprintf("pod-%d", i), f.nodes[i%labelNodes].Name,
			map[string]string{"app": "web"}, fmt.Sprintf("10.%d.%d.%d", 128+i/65536, i/256%256, i%256))))
	}
	for _, e := range f.eips {
		s, err := egress.NewSelector(&e.Spec)
		if err != nil {
			b.Fatal(err)
		}
		f.selectors = append(f.selectors, s)
	}
	f.served = make([]egress.Served, labelEIPs)
	f.selectAll(b)
	return f
}

// selectAll re-selects every EgressIP's pods.
func (f *labelChange) selectAll(b *testing.B) {
	for i, e := range f.eips {
		ps, err := egress.SelectPods(e, f.namespaces, f.pods)
		if err != nil {
			b.Fatal(err)
		}
		f.served[i] = egress.Served{Name: e.Name, Status: e.Status.Items, Pods: ps}
	}
}

// all is the whole desired state.
func (f *labelChange) all(b *testing.B) map[ovsdbnb.Owner]ovsdbnb.State {
	d, err := egress.Compute(f.cluster, f.nodes, f.served)
	if err != nil {
		b.Fatal(err)
	}
	return d.NB
}

// flip toggles target's app label between web and batch and returns
// whether it is now selected.
func flip(target *egress.PodInfo) bool {
	if target.Labels.Get("app") == "web" {
		target.Labels = labels.Set{"app": "batch"}
		return false
	}
	target.Labels = labels.Set{"app": "web"}
	return true
}

// changed is the incremental recompute after target's labels changed:
// the EgressIPs whose selection of target changes are re-selected, and
// the desired state returned holds their rows and the cluster-wide
// policies and address sets only (the nodes' own policies depend on the
// nodes alone).
func (f *labelChange) changed(b *testing.B, target *egress.PodInfo) map[ovsdbnb.Owner]ovsdbnb.State {
	ns := f.nsByName[target.Namespace]
	out := map[ovsdbnb.Owner]ovsdbnb.State{}
	for i, s := range f.selectors {
		was := slices.ContainsFunc(f.served[i].Pods, func(p egress.Pod) bool {
			return p.Namespace == target.Namespace && p.Name == target.Name
		})
		if s.Selects(ns, target) == was {
			continue
		}
		ps, err := egress.SelectPods(f.eips[i], f.namespaces, f.pods)
		if err != nil {
			b.Fatal(err)
		}
		f.served[i].Pods = ps
		st, _ := egress.EgressIPState(f.cluster, f.served[i], f.byName)
		out[ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: f.served[i].Name}] = st
	}
	var all []egress.Pod
	for i := range f.served {
		all = append(all, f.served[i].Pods...)
	}
	cl, err := egress.ClusterState(f.cluster, f.nodes, all)
	if err != nil {
		b.Fatal(err)
	}
	for o, st := range cl {
		if o.Type != egress.OwnerNode {
			out[o] = st
		}
	}
	return out
}

// BenchmarkLabelChange is the pure part of one pod's label change at
// 10,000 pods and 1,000 EgressIPs: find the EgressIPs whose selection
// changes, re-select their pods, recompute their rows and the cluster
// rows. The baseline, reported as full-ms and speedup-x, re-selects and
// recomputes every EgressIP: timed warm, like the operations it is
// compared with (one untimed run first, then the median of five).
func BenchmarkLabelChange(b *testing.B) {
	f := newLabelChange(b)
	target := f.pods[4242]
	f.selectAll(b)
	f.all(b)
	flip(target)
	f.changed(b, target) // warm the incremental path too
	var fulls []time.Duration
	for range 5 {
		start := time.Now()
		f.selectAll(b)
		f.all(b)
		fulls = append(fulls, time.Since(start))
	}
	slices.Sort(fulls)
	fullTime := fulls[len(fulls)/2]
	b.ResetTimer()
	for b.Loop() {
		flip(target)
		f.changed(b, target)
	}
	perOp := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(fullTime.Microseconds())/1000, "full-ms")
	b.ReportMetric(float64(fullTime)/float64(perOp), "speedup-x")
}

// BenchmarkLabelChangeNB is one pod's label change at 10,000 pods and
// 1,000 EgressIPs against a real NB (with northd) holding the whole state
// (100 gateway routers, 10,000 reroute policies, 20,000 SNATs): the time
// from the label change until the pod's reroute policy shows in a second,
// independent NB client's monitor (recompute, ovsdbnb.Sync, the server's
// commit and update). "incremental" recomputes what the change touches;
// "full-recompute", the baseline, re-selects and recomputes every
// EgressIP. Both sync the same owners. p50-ms and p99-ms are over the
// iterations; the removal that sets up each iteration is not timed.
//
// Setup: the rows of the 999 EgressIPs the change does not touch are
// loaded with plain inserts as another writer's rows (loadForeign), the
// cluster rows and the touched EgressIP's with ovsdbnb.Sync: loading all
// 30,000 rows through Sync takes over 15 minutes on a loaded 2-core
// machine (each insert's guard scans its whole table), while the tables
// the server scans and updates during the measurement are as large either
// way.
func BenchmarkLabelChangeNB(b *testing.B) {
	f := newLabelChange(b)
	nb := startRealNBWith(b, topologyOf("10.128.0.0/9", f.nodes, ""), ovsdbnb.Options{ConnectTimeout: time.Minute, InactivityProbe: 10 * time.Minute})
	w := testbed.WatchNB(b, nb.ovn.NB, nbdb.LogicalRouterPolicyTable, &nbdb.LogicalRouterPolicy{},
		func(p *nbdb.LogicalRouterPolicy) string { return p.Match })

	target := f.pods[4242]
	match := "ip4.src == " + target.IPs[0].String()
	touched := ovsdbnb.Owner{Type: egress.OwnerEgressIP, Name: f.eips[4242%labelEIPs].Name}
	owned := map[ovsdbnb.Owner]ovsdbnb.State{}
	var foreign []ovsdbnb.State
	for o, st := range f.all(b) {
		if o.Type == egress.OwnerEgressIP && o != touched {
			foreign = append(foreign, st)
		} else {
			owned[o] = st
		}
	}
	start := time.Now()
	rows := loadForeign(b, w.Client(), foreign)
	res := nb.sync(b, owned)
	b.Logf("initial load: %d foreign rows, %d synced, in %v", rows, res.Inserts, time.Since(start).Round(time.Millisecond))
	ownedOnly := func(m map[ovsdbnb.Owner]ovsdbnb.State) map[ovsdbnb.Owner]ovsdbnb.State {
		maps.DeleteFunc(m, func(o ovsdbnb.Owner, _ ovsdbnb.State) bool { _, ok := owned[o]; return !ok })
		return m
	}

	for _, c := range []struct {
		name    string
		desired func() map[ovsdbnb.Owner]ovsdbnb.State
	}{
		{"incremental", func() map[ovsdbnb.Owner]ovsdbnb.State { return f.changed(b, target) }},
		{"full-recompute", func() map[ovsdbnb.Owner]ovsdbnb.State { f.selectAll(b); return ownedOnly(f.all(b)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var lat, recompute, synced []time.Duration
			for b.Loop() {
				b.StopTimer()
				if flip(target) {
					b.Fatal("the pod was not selected before the iteration")
				}
				nb.sync(b, c.desired())
				w.Wait(b, match, false, 30*time.Second)
				b.StartTimer()

				begin := time.Now()
				flip(target)
				desired := c.desired()
				recompute = append(recompute, time.Since(begin))
				nb.sync(b, desired)
				synced = append(synced, time.Since(begin))
				w.Wait(b, match, true, 30*time.Second)
				lat = append(lat, time.Since(begin))
			}
			p := func(d []time.Duration, q int) float64 {
				slices.Sort(d)
				return float64(d[len(d)*q/100].Microseconds()) / 1000
			}
			b.ReportMetric(p(lat, 50), "p50-ms")
			b.ReportMetric(p(lat, 99), "p99-ms")
			b.ReportMetric(p(recompute, 50), "recompute-p50-ms")
			b.ReportMetric(p(synced, 50), "synced-p50-ms")
		})
	}
}

// loadForeign inserts the policies and NATs of states as plain rows (no
// ovsdbnb ownership stamp: ovsdbnb sees them as another writer's and
// never touches them), 5,000 rows per transaction with one mutation per
// router and column, and returns how many it wrote.
func loadForeign(b *testing.B, cl client.Client, states []ovsdbnb.State) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var ops []ovsdb.Operation
	refs := map[[2]string][]ovsdb.UUID{} // router, column -> rows
	rows := 0
	must := func(v any, err error) any {
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	set := func(v []string) any { return must(ovsdb.NewOvsSet(append([]string{}, v...))) }
	smap := func(m map[string]string) any {
		return must(ovsdb.NewOvsMap(maps.Collect(maps.All(m))))
	}
	flush := func() {
		for k, uuids := range refs {
			ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable,
				Where:     []ovsdb.Condition{{Column: "name", Function: ovsdb.ConditionEqual, Value: k[0]}},
				Mutations: []ovsdb.Mutation{{Column: k[1], Mutator: ovsdb.MutateOperationInsert, Value: must(ovsdb.NewOvsSet(uuids))}}})
		}
		res, err := cl.Transact(ctx, ops...)
		if err == nil {
			_, err = ovsdb.CheckOperationResults(res, ops)
		}
		if err != nil {
			b.Fatalf("load foreign rows: %v", err)
		}
		ops, refs = nil, map[[2]string][]ovsdb.UUID{}
	}
	add := func(table, router, column string, row ovsdb.Row) {
		rows++
		name := fmt.Sprintf("row%d", rows)
		ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationInsert, Table: table, Row: row, UUIDName: name})
		k := [2]string{router, column}
		refs[k] = append(refs[k], ovsdb.UUID{GoUUID: name})
		if len(ops) >= 5000 {
			flush()
		}
	}
	for _, st := range states {
		for _, p := range st.Policies {
			add(nbdb.LogicalRouterPolicyTable, p.Router, "policies", ovsdb.Row{"priority": p.Priority, "match": p.Match,
				"action": p.Action, "nexthops": set(p.Nexthops), "options": smap(p.Options), "external_ids": smap(p.ExternalIDs)})
		}
		for _, n := range st.NATs {
			add(nbdb.NATTable, n.Router, "nat", ovsdb.Row{"type": n.Type, "external_ip": n.ExternalIP, "logical_ip": n.LogicalIP,
				"logical_port": set([]string{n.LogicalPort}), "options": smap(n.Options), "external_ids": smap(n.ExternalIDs)})
		}
	}
	if len(ops) > 0 {
		flush()
	}
	return rows
}
