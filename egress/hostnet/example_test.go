package hostnet_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"

	"github.com/ovnedge/ovnedge/egress/hostnet"
)

// A daemon converges the node's host networking to the egress IPs assigned
// to it, and turns each rejection into a status event.
func ExampleManager_Converge() {
	snat, err := hostnet.NewNFTables("") // the daemon's own namespace
	if err != nil {
		log.Fatal(err)
	}
	defer snat.Close()
	m, err := hostnet.New(hostnet.Config{SNAT: snat})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	res, err := m.Converge(context.Background(), hostnet.State{{
		Link:     "eth1",
		EgressIP: netip.MustParseAddr("192.168.100.50"),
		PodIPs:   []netip.Addr{netip.MustParseAddr("10.244.1.3")},
	}})
	for _, r := range res.Rejected {
		fmt.Printf("event %s: %v\n", r.Reason, r)
	}
	if err != nil && len(res.Rejected) == 0 {
		log.Print(err)
	}
	fmt.Println(res.Changes(), "changes")
}

// A RequirementError names the assignment and the requirement it fails.
func ExampleRequirementError() {
	var err error = &hostnet.RequirementError{
		Link:     "eth1",
		EgressIP: netip.MustParseAddr("10.99.0.5"),
		Reason:   hostnet.ReasonNotInLinkNetwork,
		Detail:   "link's networks are 192.168.100.0/24",
	}
	var re *hostnet.RequirementError
	if errors.As(err, &re) {
		fmt.Println(re.Reason)
	}
	fmt.Println(err)
	// Output:
	// NotInLinkNetwork
	// egress IP 10.99.0.5 on link "eth1": NotInLinkNetwork: link's networks are 192.168.100.0/24
}
