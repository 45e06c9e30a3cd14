package ovsdbnb_test

import (
	"fmt"

	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// Render prints desired rows one JSON object per line, sorted: what
// `ovnedge render --what nb` prints, for pinning in a golden file.
func ExampleRender() {
	out, err := ovsdbnb.Render(map[ovsdbnb.Owner]ovsdbnb.State{
		{Type: "Service", Name: "default/web"}: {AddressSets: []ovsdbnb.AddressSet{{Addresses: []string{"10.244.1.3"}, ExternalIDs: map[string]string{"k8s.ovn.org/id": "web"}}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(out))
	// Output:
	// {"owner":"Service/default/web","table":"Address_Set","row":{"Addresses":["10.244.1.3"],"ExternalIDs":{"k8s.ovn.org/id":"web"}}}
}
