package desired

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Divergence is how an incremental desired state differs from a full
// recompute of the same objects: the NB owners whose rows differ, and the
// other parts that do.
type Divergence struct {
	Owners []ovsdbnb.Owner
	Other  []string
}

// None reports whether the two states are the same.
func (v Divergence) None() bool { return len(v.Owners) == 0 && len(v.Other) == 0 }

// Diverged compares the incremental state inc with the full recompute
// full: every part the leader writes or acts on (NB rows by owner, the
// EgressIP statuses, the Services' ingress, the owners kept, the host
// assignments, the egress nodes and the events).
func Diverged(full, inc ClusterState) Divergence {
	var v Divergence
	v.Owners = ovsdbnb.DifferingOwners(full.Egress, inc.Egress)
	v.Owners = append(v.Owners, ovsdbnb.DifferingOwners(full.LB, inc.LB)...)
	slices.SortFunc(v.Owners, ovsdbnb.CompareOwners)
	v.Owners = slices.Compact(v.Owners)
	for _, part := range []struct {
		name  string
		equal bool
	}{
		{"status", equality.Semantic.DeepEqual(full.Status, inc.Status)},
		{"ingress", equality.Semantic.DeepEqual(full.Ingress, inc.Ingress)},
		{"reply fallback", full.ReplyFallback.Equal(inc.ReplyFallback)},
		{"keep", slices.Equal(sortedOwners(full.Keep), sortedOwners(inc.Keep))},
		{"host", slices.Equal(sortedStrings(full.Host), sortedStrings(inc.Host))},
		{"nodes", reflect.DeepEqual(full.Nodes, inc.Nodes)},
		{"egress services", reflect.DeepEqual(full.EgressServices, inc.EgressServices)},
		{"events", slices.Equal(sortedStrings(full.Events), sortedStrings(inc.Events))},
	} {
		if !part.equal {
			v.Other = append(v.Other, part.name)
		}
	}
	return v
}

func sortedOwners(o []ovsdbnb.Owner) []ovsdbnb.Owner {
	return slices.SortedFunc(slices.Values(o), ovsdbnb.CompareOwners)
}

// sortedStrings are the fmt.Sprint of each of s, sorted.
func sortedStrings[T any](s []T) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprint(v)
	}
	slices.Sort(out)
	return out
}
