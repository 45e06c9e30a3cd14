package ovsdbnb_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/netip"
	"os"
	"testing"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// exampleNB is the Northbound database ExampleClient_Sync writes to; set
// by TestExampleClientSync, which starts a throwaway OVN central (or skips
// the test without one) and checks the example's output.
var exampleNB = "unix:/var/run/ovn/ovnnb_db.sock"

// TestExampleClientSync runs ExampleClient_Sync against a throwaway OVN
// central and checks what it prints. The example has no Output comment, so
// `go test` never runs it bare: an Example cannot skip when OVN is missing.
func TestExampleClientSync(t *testing.T) {
	exampleNB = testbed.StartOVN(t).NB
	got := captureStdout(t, ExampleClient_Sync)
	want := "create: 3 inserts, 4 mutations, 1 transactions\n" +
		"again: 0 inserts, 0 mutations, 0 transactions\n" +
		"new backend: 0 inserts, 1 mutations, 1 transactions\n"
	if got != want {
		t.Errorf("ExampleClient_Sync printed\n%s\nwant\n%s", got, want)
	}
}

// captureStdout returns what f prints on os.Stdout.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	defer func() { os.Stdout = stdout }()
	f()
	os.Stdout = stdout
	w.Close()
	return string(<-done)
}

// A Service's load balancer and an EgressIP's reroute policy and SNAT on
// the OVN-Kubernetes topology, written in one transaction; the second
// Sync finds nothing to do, and a new backend is one mutation.
func ExampleClient_Sync() {
	nb := exampleNB // e.g. "unix:/var/run/ovn/ovnnb_db.sock"
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
	// Prints (see TestExampleClientSync):
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
