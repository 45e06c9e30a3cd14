package hostspec_test

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/ovnedge/ovnedge/egress/hostspec"
)

func TestRequirementError(t *testing.T) {
	eip := netip.MustParseAddr("10.10.10.100")
	cause := errors.New("permission denied")
	for _, tc := range []struct {
		name string
		err  *hostspec.RequirementError
		want string
	}{
		{"reason only", &hostspec.RequirementError{Link: "eg0", EgressIP: eip, Reason: hostspec.ReasonLinkDown},
			`egress IP 10.10.10.100 on link "eg0": LinkDown`},
		{"detail", &hostspec.RequirementError{Link: "eg0", EgressIP: eip, Reason: hostspec.ReasonNotInLinkNetwork, Detail: "link's networks are 10.20.0.0/24"},
			`egress IP 10.10.10.100 on link "eg0": NotInLinkNetwork: link's networks are 10.20.0.0/24`},
		{"cause", &hostspec.RequirementError{Link: "eg0", EgressIP: eip, Reason: hostspec.ReasonForwardingDisabled, Detail: "read forwarding sysctl", Err: cause},
			`egress IP 10.10.10.100 on link "eg0": ForwardingDisabled: read forwarding sysctl: permission denied`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
			if !errors.Is(tc.err, cause) && tc.err.Err != nil {
				t.Errorf("Unwrap lost the cause")
			}
		})
	}
}

// A State is plain values: what a node hosts on its non-OVN links.
func ExampleState() {
	s := hostspec.State{{
		Link:     "eth1",
		EgressIP: netip.MustParseAddr("10.10.10.100"),
		PodIPs:   []netip.Addr{netip.MustParseAddr("10.244.1.3")},
	}}
	for _, a := range s {
		fmt.Println(a, a.PodIPs)
	}
	// Output: 10.10.10.100 on eth1 [10.244.1.3]
}
