package ovsdbnb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// dial connects to nb and closes the client when the test ends.
func dial(t testing.TB, endpoints ...string) *ovsdbnb.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: endpoints})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// sync runs Sync with a timeout and fails the test on error.
func sync(t testing.TB, c *ovsdbnb.Client, desired map[ovsdbnb.Owner]ovsdbnb.State) ovsdbnb.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Sync(ctx, desired)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return res
}

var (
	svc = ovsdbnb.Owner{Type: "Service", Name: "default/web"}
	eip = ovsdbnb.Owner{Type: "EgressIP", Name: "eip1"}
)

// webState is a Service owner's state: one LB on sw0 and lr0.
func webState(backends string) ovsdbnb.State {
	return ovsdbnb.State{LoadBalancers: []ovsdbnb.LoadBalancer{{
		Name: "Service_default/web_TCP_cluster", Protocol: "tcp",
		VIPs:        map[string]string{"10.96.0.10:80": backends},
		Options:     map[string]string{"reject": "true", "event": "false", "skip_snat": "false"},
		ExternalIDs: map[string]string{ovsdbnb.KeyKind: "Service", ovsdbnb.KeyOwner: "default/web"},
		Switches:    []string{"sw0"}, Routers: []string{"lr0"},
	}}}
}

// eipState is an EgressIP owner's state on lr0.
func eipState(nexthops ...string) ovsdbnb.State {
	ids := map[string]string{ovsdbnb.KeyOwnerController: ovsdbnb.DefaultController, ovsdbnb.KeyOwnerType: "EgressIP"}
	return ovsdbnb.State{
		Policies: []ovsdbnb.RouterPolicy{{Router: "lr0", Priority: 100, Match: "ip4.src == 10.244.1.3",
			Action: "reroute", Nexthops: nexthops, ExternalIDs: ids}},
		NATs: []ovsdbnb.NAT{{Router: "lr0", Type: "snat", ExternalIP: "172.18.0.33", LogicalIP: "10.244.1.3",
			Options: map[string]string{"stateless": "false"}, ExternalIDs: ids}},
		AddressSets: []ovsdbnb.AddressSet{{Addresses: []string{"10.244.1.3"},
			ExternalIDs: map[string]string{ovsdbnb.KeyID: "default-network-controller:EgressIP:egressip-served-pods:v4:default"}}},
	}
}

func TestSyncIdempotentAndForeignSurvive(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0", "--", "lr-add", "lr0", "--", "lr-add", "lr1")
	c := dial(t, o.NB)

	want := map[ovsdbnb.Owner]ovsdbnb.State{svc: webState("10.244.1.5:8080,10.244.2.5:8080"), eip: eipState("100.64.0.3")}
	res := sync(t, c, want)
	if res.Inserts != 4 || res.Transactions != 1 {
		t.Errorf("first sync: %+v, want 4 inserts in 1 transaction", res)
	}
	if got := o.Nbctl("lr-policy-list", "lr0"); !strings.Contains(got, "ip4.src == 10.244.1.3") || !strings.Contains(got, "reroute") {
		t.Errorf("lr-policy-list lr0:\n%s", got)
	}
	if got := o.Nbctl("lr-nat-list", "lr0"); !strings.Contains(got, "172.18.0.33") {
		t.Errorf("lr-nat-list lr0:\n%s", got)
	}
	if got := o.Nbctl("ls-lb-list", "sw0"); !strings.Contains(got, "10.96.0.10:80") {
		t.Errorf("ls-lb-list sw0:\n%s", got)
	}

	// Foreign rows and keys: another writer's LB, policy and keys on our rows.
	o.Nbctl("lb-add", "foreign", "10.96.0.99:53", "10.244.0.9:53", "udp")
	o.Nbctl("lr-policy-add", "lr0", "200", "ip4.dst == 8.8.8.8", "drop")
	lb := o.Nbctl("--bare", "--columns=_uuid", "find", "Load_Balancer", "name=Service_default/web_TCP_cluster")
	o.Nbctl("set", "Load_Balancer", lb, "external_ids:other=keep", "options:foreign=1", `vips:"10.96.0.11:80"="10.0.0.1:80"`)

	if res := sync(t, c, want); res.Ops() != 0 {
		t.Errorf("second identical sync sent %+v, want 0 ops", res)
	}

	// A change: one backend, one nexthop, one address; a managed option dropped.
	want[svc] = webState("10.244.1.5:8080,10.244.2.6:8080")
	delete(want[svc].LoadBalancers[0].Options, "event")
	want[eip] = eipState("100.64.0.3", "100.64.0.4")
	want[eip].AddressSets[0].Addresses = []string{"10.244.1.3", "10.244.1.4"}
	res = sync(t, c, want)
	if res.Inserts != 0 || res.Deletes != 0 || res.Ops() != 3 {
		t.Errorf("change sync: %+v, want 1 LB mutate, 1 policy update, 1 address set mutate", res)
	}
	tests := []struct{ args, want, notWant string }{
		{"get Load_Balancer " + lb + " vips", `"10.96.0.11:80"="10.0.0.1:80"`, "10.244.2.5"},
		{"get Load_Balancer " + lb + " vips", "10.244.2.6:8080", ""},
		{"get Load_Balancer " + lb + " options", "foreign", "event"},
		{"get Load_Balancer " + lb + " external_ids", "other=keep", ""},
		{"lb-list", "foreign", ""},
		{"lr-policy-list lr0", "8.8.8.8", ""},
		{"lr-policy-list lr0", "100.64.0.3, 100.64.0.4", ""},
	}
	for _, tc := range tests {
		got := o.Nbctl(strings.Fields(tc.args)...)
		if !strings.Contains(got, tc.want) || (tc.notWant != "" && strings.Contains(got, tc.notWant)) {
			t.Errorf("%s:\n%s\nwant %q, not %q", tc.args, got, tc.want, tc.notWant)
		}
	}
	if res := sync(t, c, want); res.Ops() != 0 {
		t.Errorf("sync after change sent %+v, want 0 ops", res)
	}

	// Move the policy and the NAT to lr1: delete + insert, detached from lr0.
	st := want[eip]
	st.Policies[0].Router, st.NATs[0].Router = "lr1", "lr1"
	sync(t, c, want)
	if got := o.Nbctl("lr-policy-list", "lr1"); !strings.Contains(got, "10.244.1.3") {
		t.Errorf("lr-policy-list lr1:\n%s", got)
	}

	// An owner absent from the map is untouched; an empty State deletes.
	res = sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{svc: {}})
	if res.Deletes != 1 {
		t.Errorf("delete sync: %+v, want 1 delete", res)
	}
	if got := o.Nbctl("lb-list"); strings.Contains(got, "web") || !strings.Contains(got, "foreign") {
		t.Errorf("lb-list after delete:\n%s", got)
	}
	if got := o.Nbctl("ls-lb-list", "sw0"); got != "" {
		t.Errorf("ls-lb-list sw0 after delete: %q", got)
	}
	if got := o.Nbctl("lr-nat-list", "lr1"); !strings.Contains(got, "172.18.0.33") {
		t.Errorf("EgressIP owner absent from the map lost its NAT:\n%s", got)
	}
	sync(t, c, map[ovsdbnb.Owner]ovsdbnb.State{eip: {}})
	for _, args := range [][]string{{"lr-nat-list", "lr1"}, {"--bare", "--columns=name", "list", "Address_Set"}} {
		if got := o.Nbctl(args...); got != "" {
			t.Errorf("%v after delete: %q", args, got)
		}
	}
	if got := o.Nbctl("lr-policy-list", "lr0"); !strings.Contains(got, "8.8.8.8") || strings.Contains(got, "10.244.1.3") {
		t.Errorf("lr-policy-list lr0 after delete:\n%s", got)
	}
}

func TestSyncBadInput(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Nbctl("ls-add", "sw0", "--", "lr-add", "lr0")
	c := dial(t, o.NB)
	good := ovsdbnb.Owner{Type: "Service", Name: "default/good"}
	tests := []struct {
		name  string
		owner ovsdbnb.Owner
		state ovsdbnb.State
		want  string // in the OwnerError
	}{
		{"match syntax", ovsdbnb.Owner{Type: "EgressIP", Name: "badmatch"},
			ovsdbnb.State{Policies: []ovsdbnb.RouterPolicy{{Router: "lr0", Priority: 100, Match: "ip4.src == (10.244.1.3", Action: "allow"}}},
			`policy lr0/100 "ip4.src == (10.244.1.3"`},
		{"missing router", ovsdbnb.Owner{Type: "EgressIP", Name: "norouter"},
			ovsdbnb.State{NATs: []ovsdbnb.NAT{{Router: "GR_nowhere", Type: "snat", ExternalIP: "172.18.0.5", LogicalIP: "10.244.1.5"}}},
			`logical router "GR_nowhere" does not exist`},
		{"duplicate vip", ovsdbnb.Owner{Type: "Service", Name: "default/web2"},
			ovsdbnb.State{LoadBalancers: []ovsdbnb.LoadBalancer{{Name: "Service_default/web2_TCP_cluster", Protocol: "tcp",
				VIPs: map[string]string{"10.96.0.10:80": "10.244.1.9:80"}}}},
			"vip tcp 10.96.0.10:80: also claimed by owner Service/default/good"},
		{"duplicate load balancer name", ovsdbnb.Owner{Type: "Service", Name: "default/zz-samename"},
			ovsdbnb.State{LoadBalancers: []ovsdbnb.LoadBalancer{{Name: "Service_default/web_TCP_cluster", Protocol: "tcp",
				VIPs: map[string]string{"10.96.0.77:80": "10.244.1.9:80"}}}},
			"load balancer Service_default/web_TCP_cluster: also wanted by owner Service/default/good"},
		{"bad vip", ovsdbnb.Owner{Type: "Service", Name: "default/badvip"},
			ovsdbnb.State{LoadBalancers: []ovsdbnb.LoadBalancer{{Name: "x", VIPs: map[string]string{"10.96.0.300:80": ""}}}},
			`load balancer x: vip "10.96.0.300:80"`},
		{"reroute without nexthop", ovsdbnb.Owner{Type: "EgressIP", Name: "nonh"},
			ovsdbnb.State{Policies: []ovsdbnb.RouterPolicy{{Router: "lr0", Priority: 100, Match: "ip4", Action: "reroute"}}},
			"needs nexthops"},
		{"priority out of range", ovsdbnb.Owner{Type: "EgressIP", Name: "prio"},
			ovsdbnb.State{Policies: []ovsdbnb.RouterPolicy{{Router: "lr0", Priority: 40000, Match: "ip4", Action: "allow"}}},
			"priority 40000"},
		{"qos without a switch", ovsdbnb.Owner{Type: "ClusterPolicies", Name: "qos-noswitch"},
			ovsdbnb.State{QoSRules: []ovsdbnb.QoS{{Priority: 103, Direction: "from-lport", Match: "ip4", Action: map[string]int{"dscp": 1}}}},
			`qos from-lport/103 "ip4": no logical switch holds it`},
		{"qos on a missing switch", ovsdbnb.Owner{Type: "ClusterPolicies", Name: "qos-missing"},
			ovsdbnb.State{QoSRules: []ovsdbnb.QoS{{Priority: 103, Direction: "from-lport", Match: "ip4", Action: map[string]int{"dscp": 1},
				Switches: []string{"sw0", "nosw"}}}},
			`logical switch "nosw" does not exist`},
		{"qos dscp out of range", ovsdbnb.Owner{Type: "ClusterPolicies", Name: "qos-dscp"},
			ovsdbnb.State{QoSRules: []ovsdbnb.QoS{{Priority: 103, Direction: "to-lport", Match: "ip4", Action: map[string]int{"dscp": 64},
				Switches: []string{"sw0"}}}},
			"action dscp=64: want 0-63"},
		{"qos direction", ovsdbnb.Owner{Type: "ClusterPolicies", Name: "qos-dir"},
			ovsdbnb.State{QoSRules: []ovsdbnb.QoS{{Priority: 103, Direction: "in", Match: "ip4", Action: map[string]int{"dscp": 1},
				Switches: []string{"sw0"}}}},
			`direction "in"`},
		// Both owners pass every client check; the server refuses the
		// second Address_Set of the same name (a unique index), and the
		// batch is retried owner by owner.
		{"server rejects", ovsdbnb.Owner{Type: "EgressIP", Name: "zz-dup-set"},
			ovsdbnb.State{AddressSets: []ovsdbnb.AddressSet{{ExternalIDs: map[string]string{ovsdbnb.KeyID: "shared"}}}},
			"constraint violation"},
	}
	setOwner := ovsdbnb.Owner{Type: "EgressIP", Name: "a-set"}
	desired := map[ovsdbnb.Owner]ovsdbnb.State{good: webState("10.244.1.5:8080"),
		setOwner: {AddressSets: []ovsdbnb.AddressSet{{ExternalIDs: map[string]string{ovsdbnb.KeyID: "shared"}}}}}
	for _, tc := range tests {
		desired[tc.owner] = tc.state
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Sync(ctx, desired)
	var se *ovsdbnb.SyncError
	if !errors.As(err, &se) {
		t.Fatalf("Sync: %v, want a *SyncError", err)
	}
	if res.Inserts != 2 || res.Owners != 2 {
		t.Errorf("result %+v, want the good owners' LB and address set inserted", res)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var found *ovsdbnb.OwnerError
			for _, oe := range se.Owners {
				if oe.Owner == tc.owner {
					found = oe
				}
			}
			if found == nil {
				t.Fatalf("no error for owner %s in %v", tc.owner, err)
			}
			if msg := found.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, tc.owner.String()) {
				t.Errorf("error %q, want it to name %s and contain %q", msg, tc.owner, tc.want)
			}
		})
	}
	if got := o.Nbctl("lb-list"); !strings.Contains(got, "Service_default/good_TCP_cluster") && !strings.Contains(got, "10.96.0.10:80") {
		t.Errorf("lb-list: the good owner's LB is missing:\n%s", got)
	}
}
