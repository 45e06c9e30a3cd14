package ovsdbnb

import (
	"slices"
	"testing"
)

// union merges sorted columns (as the server sends sets) and sorts the
// others; either way the distinct UUIDs, sorted.
func TestUnion(t *testing.T) {
	for _, tc := range []struct {
		name string
		cols [][]string
		want []string
	}{
		{"none", [][]string{nil, {}}, nil},
		{"one sorted", [][]string{{"a", "b", "c"}}, []string{"a", "b", "c"}},
		{"one unsorted", [][]string{{"c", "a", "b"}}, []string{"a", "b", "c"}},
		{"one with a repeat", [][]string{{"a", "a", "b"}}, []string{"a", "b"}},
		{"two sorted", [][]string{{"a", "c", "e"}, {"b", "c", "d", "f"}}, []string{"a", "b", "c", "d", "e", "f"}},
		{"two sorted, one empty", [][]string{nil, {"b", "d"}}, []string{"b", "d"}},
		{"two, one unsorted", [][]string{{"a", "c"}, {"d", "b"}}, []string{"a", "b", "c", "d"}},
		{"three sorted", [][]string{{"a"}, {"c"}, {"b", "c"}}, []string{"a", "b", "c"}},
	} {
		if got := union(tc.cols...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: union = %v, want %v", tc.name, got, tc.want)
		}
	}
}
