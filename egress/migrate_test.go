package egress_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/egress"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// oldIDs turns desired into the rows ovnedge wrote before its
// k8s.ovn.org/id followed OVN-Kubernetes' key order: policy ids
// "<controller>:<type>:<name>:<priority>:<ip-family>:<network>", the 1004
// policies owned by type Node with those keys, NATs with a network key
// and value; no reply-traffic policy nor QoS rules.
func oldIDs(t *testing.T, desired map[ovsdbnb.Owner]ovsdbnb.State) map[ovsdbnb.Owner]ovsdbnb.State {
	t.Helper()
	const ctrl = "default-network-controller"
	out := map[ovsdbnb.Owner]ovsdbnb.State{}
	for o, st := range desired {
		if o == egress.ReplyQoSOwner {
			continue
		}
		var old ovsdbnb.State
		old.AddressSets = st.AddressSets
		for _, p := range st.Policies {
			ids := maps.Clone(p.ExternalIDs)
			switch {
			case p.Match == "pkt.mark == 42":
				continue
			case o.Type == egress.OwnerNode:
				fam := "ip4"
				if strings.Contains(p.Match, "ip6.dst") {
					fam = "ip6"
				}
				ids = map[string]string{ovsdbnb.KeyOwnerController: ctrl, ovsdbnb.KeyOwnerType: egress.OwnerNode,
					ovsdbnb.KeyName: o.Name, ovsdbnb.KeyPriority: "1004", ovsdbnb.KeyIPFamily: fam, ovsdbnb.KeyNetwork: "default"}
			}
			ids[ovsdbnb.KeyID] = strings.Join([]string{ctrl, ids[ovsdbnb.KeyOwnerType], ids[ovsdbnb.KeyName],
				ids[ovsdbnb.KeyPriority], ids[ovsdbnb.KeyIPFamily], ids[ovsdbnb.KeyNetwork]}, ":")
			p.ExternalIDs = ids
			old.Policies = append(old.Policies, p)
		}
		for _, n := range st.NATs {
			ids := maps.Clone(n.ExternalIDs)
			ids[ovsdbnb.KeyNetwork] = "default"
			ids[ovsdbnb.KeyID] += ":default"
			n.ExternalIDs = ids
			old.NATs = append(old.NATs, n)
		}
		out[o] = old
	}
	return out
}

// uuids lists the UUIDs of a NB table's rows, sorted.
func (r *realNB) uuids(table string) []string {
	out := strings.Fields(r.ovn.Nbctl("--bare", "--columns=_uuid", "list", table))
	slices.Sort(out)
	return out
}

// TestMigrateOldIDsRealNB: rows ovnedge wrote with its former
// k8s.ovn.org/id values (policies' values out of OVN-Kubernetes' key
// order, NATs with a network, 1004 policies with ids OVN-Kubernetes does
// not give them) are found by the new code and updated in place: the same
// UUIDs, only their external_ids mutated; the reply-traffic policy and QoS
// rule are the only inserts, nothing is deleted.
func TestMigrateOldIDsRealNB(t *testing.T) {
	nb := startRealNB(t, topologyOf("10.244.0.0/16", seedNodes(t), "172.18.0.1"))
	_, d := seedDesired(t, seedNodes(t), "172.18.0.33", "172.18.0.44")
	nb.sync(t, oldIDs(t, d.NB))
	reroute := nb.ovn.Nbctl("--bare", "--columns=_uuid", "find", "Logical_Router_Policy", "priority=100")
	if got := nb.ovn.Nbctl("get", "Logical_Router_Policy", reroute, "external_ids:k8s.ovn.org/id"); got !=
		`"default-network-controller:EgressIP:egressip-prod_default/web:100:ip4:default"` {
		t.Fatalf("old reroute id: %s", got)
	}
	before := map[string][]string{}
	for _, table := range []string{"Logical_Router_Policy", "NAT", "Address_Set", "QoS"} {
		before[table] = nb.uuids(table)
	}

	res := nb.sync(t, d.NB)
	// 3 1004 policies, 3 102 and the reroute, 2 NATs: one external_ids
	// mutation each; inserted: the reply-traffic policy (added to the
	// router's policies) and QoS rule (to the 3 node switches' qos_rules).
	if res.Deletes != 0 || res.Inserts != 2 || res.Updates != 0 || res.Mutates != 9+1+3 {
		t.Errorf("migration: %+v, want 2 inserts (reply-traffic policy and QoS rule), 13 mutations, no delete or update", res)
	}
	for table, was := range before {
		now := nb.uuids(table)
		if gone := slices.DeleteFunc(slices.Clone(was), func(u string) bool { return slices.Contains(now, u) }); len(gone) > 0 {
			t.Errorf("%s: rows %v replaced, want them updated in place", table, gone)
		}
		if added := len(now) - len(was); (table == "Logical_Router_Policy" || table == "QoS") != (added == 1) || added > 1 {
			t.Errorf("%s: %d rows added", table, added)
		}
	}
	for _, tc := range []struct{ table, where, key, want string }{
		{"Logical_Router_Policy", "priority=100", "k8s.ovn.org/id", `"default-network-controller:EgressIP:100:egressip-prod_default/web:ip4:default"`},
		{"Logical_Router_Policy", `match="ip4.src == 10.244.0.0/16 && ip4.dst == 10.244.0.0/16"`, "k8s.ovn.org/id",
			`"default-network-controller:EgressIP:102:EIP-No-Reroute-Pod-To-Pod:ip4:default"`},
		{"NAT", "external_ip=172.18.0.33", "k8s.ovn.org/id", `"default-network-controller:EgressIP:egressip-prod_default/web:ip4"`},
		{"NAT", "external_ip=172.18.0.33", "network", ""},
		{"Logical_Router_Policy", "priority=1004", "k8s.ovn.org/id", ""},
		{"Logical_Router_Policy", "priority=1004", "k8s.ovn.org/owner-type", ""},
	} {
		for _, u := range strings.Fields(nb.ovn.Nbctl("--bare", "--columns=_uuid", "find", tc.table, tc.where)) {
			got, err := nb.ovn.NbctlErr("get", tc.table, u, "external_ids:"+tc.key)
			if tc.want == "" && err == nil {
				t.Errorf("%s %s: external_ids:%s = %s, want none", tc.table, tc.where, tc.key, got)
			} else if tc.want != "" && strings.TrimSpace(got) != tc.want {
				t.Errorf("%s %s: external_ids:%s = %s (%v), want %s", tc.table, tc.where, tc.key, got, err, tc.want)
			}
		}
	}
	if got := nb.ovn.Nbctl("--bare", "--columns=_uuid", "find", "Logical_Router_Policy", "priority=100"); got != reroute {
		t.Errorf("reroute policy %s after the migration, want %s", got, reroute)
	}
	if res := nb.sync(t, d.NB); res.Ops() != 0 {
		t.Errorf("sync after the migration: %+v, want no operations", res)
	}
}
