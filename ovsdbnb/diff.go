package ovsdbnb

import (
	"cmp"
	"fmt"
	"slices"
)

// Empty reports whether s holds no rows.
func (s State) Empty() bool {
	return len(s.LoadBalancers)+len(s.Groups)+len(s.Policies)+len(s.NATs)+len(s.AddressSets)+len(s.QoSRules)+len(s.ACLs)+len(s.TemplateVars) == 0
}

// AsRead returns desired as Client.Current reads the same rows back once
// written: each State sorted, without the shared load balancer groups
// (Current reads no Groups), owners with rows only (template variables
// count). Compare it with Current through Diff.
func AsRead(desired map[Owner]State) map[Owner]State {
	out := map[Owner]State{}
	for o, st := range desired {
		st = st.Sorted()
		st.Groups = nil
		if !st.Empty() || len(st.TemplateVars) > 0 {
			out[o] = st
		}
	}
	return out
}

// Diff says how the owners' rows have (Client.Current) differ from want
// (AsRead of the desired rows), one sorted line per owner; none when
// equal.
func Diff(have, want map[Owner]State) []string {
	var diffs []string
	for o, st := range want {
		if !have[o].Equal(st) {
			diffs = append(diffs, fmt.Sprintf("%s:\n  have %+v\n  want %+v", o, have[o], st))
		}
	}
	for o := range have {
		if _, ok := want[o]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: not wanted, still there", o))
		}
	}
	slices.Sort(diffs)
	return diffs
}

// DifferingOwners are the owners whose States in a and b differ, one side
// having none among them, sorted.
func DifferingOwners(a, b map[Owner]State) []Owner {
	var out []Owner
	for o, st := range a {
		if t, ok := b[o]; !ok || !st.Equal(t) {
			out = append(out, o)
		}
	}
	for o := range b {
		if _, ok := a[o]; !ok {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, CompareOwners)
	return out
}

// CompareOwners orders owners by type, then name.
func CompareOwners(a, b Owner) int {
	return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name))
}
