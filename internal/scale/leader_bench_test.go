package scale

import (
	"fmt"
	"testing"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress"
)

// BenchmarkLeaderFirstPass is the pure part of a leader's initial sync:
// its first pass (desired.NewIndex, then Apply of every object) over the
// scale benchmark's cluster of each size, pods included, with
// LeaderArgs' settings; the NB write, the informers' lists and the
// process's other work are not in it (`make bench-scale` measures the
// whole).
func BenchmarkLeaderFirstPass(b *testing.B) {
	cfg, _, err := daemon.ParseConfig("bench", LeaderArgs("kubeconfig", "tcp:127.0.0.1:6641", "127.0.0.1:0")[1:])
	if err != nil {
		b.Fatal(err)
	}
	p := daemon.ParamsFrom(cfg)
	for _, pods := range []int{10000, 150000} {
		s := nodeSnapshot(ShapeFor(pods))
		for i := range pods {
			s.Pods = append(s.Pods, egress.NewPodInfo(Pod(i)))
		}
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				x := desired.NewIndex(p, func(string) bool { return true }, nil)
				cs, err := x.Apply(desired.SnapshotChanges(s))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(cs.LB)+len(cs.Egress)), "owners")
			}
		})
	}
}
