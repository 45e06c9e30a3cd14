package daemon

import "testing"

func TestLeaseIdentity(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"ovn-worker", "ovn-worker", "AB12"}, "ovn-worker_ovn-worker_AB12"},
		{[]string{"", "ovnedge-leader-5d9f-x2", "AB12"}, "ovnedge-leader-5d9f-x2_AB12"},
		{[]string{"", "", "AB12"}, "AB12"},
	} {
		if got := leaseIdentity(c.parts...); got != c.want {
			t.Errorf("leaseIdentity(%q) = %q, want %q", c.parts, got, c.want)
		}
	}
}
