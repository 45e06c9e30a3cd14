package lbsvc

import (
	"strings"
	"testing"
)

// TestCompareNamespaced: ordering by namespace and name orders as
// strings.Compare orders "namespace/name", namespaces that prefix others
// included.
func TestCompareNamespaced(t *testing.T) {
	keys := [][2]string{{"a", "x"}, {"a", "y"}, {"a-b", "x"}, {"ab", "x"}, {"a", ""}, {"", "x"}, {"b", "a"}, {"a0", "z"}, {"a.b", "c"}}
	sign := func(c int) int { return min(max(c, -1), 1) }
	for _, a := range keys {
		for _, b := range keys {
			want := strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1])
			if got := compareNamespaced(a[0], a[1], b[0], b[1]); sign(got) != want {
				t.Errorf("%q against %q: %d, want %d", a, b, got, want)
			}
		}
	}
}
