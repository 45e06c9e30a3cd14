package ovsdbnb_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"

	"github.com/ovnedge/ovnedge/internal/testbed"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// exampleT lets the examples run the testbed outside a test: an Example
// cannot skip, so a missing prerequisite (root, OVN) panics with the
// testbed's message; stop runs the cleanups.
type exampleT struct{ cleanups []func() }

func (e *exampleT) Helper()                   {}
func (e *exampleT) Logf(string, ...any)       {}
func (e *exampleT) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (e *exampleT) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (e *exampleT) Skipf(f string, a ...any)  { panic(fmt.Sprintf(f, a...)) }
func (e *exampleT) Cleanup(f func())          { e.cleanups = append(e.cleanups, f) }
func (e *exampleT) Failed() bool              { return false }
func (e *exampleT) stop() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

// throwawayNB starts an OVN central for an example and returns its NB
// endpoint and the function that removes it.
func throwawayNB() (string, func()) {
	t := &exampleT{}
	return testbed.StartOVN(t).NB, t.stop
}

// A Service's load balancer and an EgressIP's reroute policy and SNAT on
// the OVN-Kubernetes topology, written in one transaction; the second
// Sync finds nothing to do, and a new backend is one mutation.
func ExampleClient_Sync() {
	nb, stop := throwawayNB()
	defer stop()
	ctx := context.Background()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{nb}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	err = ovsdbnb.EnsureTopology(ctx, c, ovsdbnb.Topology{
		ClusterSubnet: "10.244.0.0/16", JoinRouterIP: "100.64.0.1/16",
		Nodes: []ovsdbnb.Node{{Name: "ovn-worker", Subnet: "10.244.1.0/24", JoinIP: "100.64.0.3/16",
			ExternalIP: "172.18.0.2/16", Gateway: "172.18.0.1"}},
	})
	if err != nil {
		log.Fatal(err)
	}

	web := ovsdbnb.LoadBalancer{
		Name: "Service_default/web_TCP_cluster", Protocol: "tcp",
		VIPs:        map[string]string{"10.96.0.10:80": "10.244.1.5:8080"},
		Options:     map[string]string{"reject": "true", "event": "false", "skip_snat": "false"},
		ExternalIDs: map[string]string{ovsdbnb.KeyKind: "Service", ovsdbnb.KeyOwner: "default/web"},
		Switches:    []string{"ovn-worker"}, Routers: []string{"GR_ovn-worker"},
	}
	eipIDs := map[string]string{ovsdbnb.KeyOwnerController: ovsdbnb.DefaultController, ovsdbnb.KeyOwnerType: "EgressIP",
		ovsdbnb.KeyName: "eip1_default/web-1", ovsdbnb.KeyIPFamily: "ip4", ovsdbnb.KeyNetwork: "default"}
	desired := map[ovsdbnb.Owner]ovsdbnb.State{
		{Type: "Service", Name: "default/web"}: {LoadBalancers: []ovsdbnb.LoadBalancer{web}},
		{Type: "EgressIP", Name: "eip1"}: {
			Policies: []ovsdbnb.RouterPolicy{{Router: ovsdbnb.ClusterRouter, Priority: 100, Match: "ip4.src == 10.244.1.3",
				Action: "reroute", Nexthops: []string{"100.64.0.3"}, ExternalIDs: eipIDs}},
			NATs: []ovsdbnb.NAT{{Router: "GR_ovn-worker", Type: "snat", ExternalIP: "172.18.0.33", LogicalIP: "10.244.1.3",
				LogicalPort: "k8s-ovn-worker", Options: map[string]string{"stateless": "false"}, ExternalIDs: eipIDs}},
		},
	}
	for _, step := range []string{"create", "again", "new backend"} {
		if step == "new backend" {
			web.VIPs = map[string]string{"10.96.0.10:80": "10.244.1.5:8080,10.244.1.6:8080"}
			desired[ovsdbnb.Owner{Type: "Service", Name: "default/web"}] = ovsdbnb.State{LoadBalancers: []ovsdbnb.LoadBalancer{web}}
		}
		res, err := c.Sync(ctx, desired)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d inserts, %d mutations, %d transactions\n", step, res.Inserts, res.Mutates, res.Transactions)
	}
	// Output:
	// create: 3 inserts, 4 mutations, 1 transactions
	// again: 0 inserts, 0 mutations, 0 transactions
	// new backend: 0 inserts, 1 mutations, 1 transactions
}

// A bad owner fails alone, named with its row; the others are written.
func ExampleOwnerError() {
	err := &ovsdbnb.OwnerError{Owner: ovsdbnb.Owner{Type: "EgressIP", Name: "eip1"},
		Row: `policy ovn_cluster_router/100 "ip4.src == (10.244.1.3"`, Err: ovsdbnb.CheckMatch("ip4.src == (10.244.1.3")}
	fmt.Println(err)
	// Output:
	// ovsdbnb: owner EgressIP/eip1: policy ovn_cluster_router/100 "ip4.src == (10.244.1.3": match "ip4.src == (10.244.1.3": "(" is not a constant
}

// Address sets are named from their k8s.ovn.org/id as OVN-Kubernetes
// does, and MACs derived from IPv4 addresses.
func ExampleAddressSetName() {
	name := ovsdbnb.AddressSetName("default-network-controller:EgressIP:egressip-served-pods:v4:default")
	fmt.Println("ip4.src == $" + name)
	fmt.Println(ovsdbnb.MAC(netip.MustParseAddr("10.244.1.1")))
	// Output:
	// ip4.src == $a8519615025667110816
	// 0a:58:0a:f4:01:01
}
