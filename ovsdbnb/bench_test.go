package ovsdbnb_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/internal/testbed"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// benchLBs is the number of load balancers of the benchmarks.
const benchLBs = 10000

// createLBArgs are the ovn-nbctl arguments creating the row of
// serviceLB(i, 0) with the same columns the library writes (all but its
// own two ownership keys), named name.
func createLBArgs(i int, name string) []string {
	lb := serviceLB(i, 0)
	args := []string{"create", "Load_Balancer", "name=" + strconv.Quote(name), "protocol=" + lb.Protocol}
	for col, m := range map[string]map[string]string{"vips": lb.VIPs, "options": lb.Options, "external_ids": lb.ExternalIDs} {
		for k, v := range m {
			args = append(args, col+":"+strconv.Quote(k)+"="+strconv.Quote(v))
		}
	}
	return args
}

// startNB starts OVN central with ovn-northd paused: the benchmarks
// measure the NB database and its clients only.
func startNB(b *testing.B) *testbed.OVN {
	o := testbed.StartOVN(b)
	if out, err := exec.Command("ovn-appctl", "-t", filepath.Join(o.Dir, "northd.ctl"), "pause").CombinedOutput(); err != nil {
		b.Fatalf("pause ovn-northd: %v: %s", err, out)
	}
	return o
}

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	begin := time.Now()
	f()
	return time.Since(begin)
}

// BenchmarkCreateLoadBalancers creates 10,000 load balancers with three
// backends each from an empty NB, side by side against the same
// ovsdb-server: with one Sync (10,000 owners), with one chained ovn-nbctl
// call, and with one ovn-nbctl call per load balancer (ovn-nbctl writes
// the same name, protocol, vips, options and external_ids with `create`). The last would take
// minutes, so it is sampled: 5 calls at each of the fill levels 1,250,
// 3,750, 6,250 and 8,750 (a call's cost grows with the database), and
// the total estimated as 10,000 times their mean (metrics named "est").
func BenchmarkCreateLoadBalancers(b *testing.B) {
	o := startNB(b)
	c := dial(b, o.NB)
	desired := services(benchLBs)
	empty := make(map[ovsdbnb.Owner]ovsdbnb.State, benchLBs)
	for owner := range desired {
		empty[owner] = ovsdbnb.State{}
	}
	chainedArgs := []string{"--timeout=600"}
	for i := range benchLBs {
		if i > 0 {
			chainedArgs = append(chainedArgs, "--")
		}
		// Other names than the library's (of the same length): the
		// client's cache may still show these rows, destroyed by
		// ovn-nbctl, when the library fills the database again.
		name := strings.Replace(serviceLB(i, 0).Name, "Service_", "Chained_", 1)
		chainedArgs = append(chainedArgs, createLBArgs(i, name)...)
	}
	// The chained call's 3 MB of arguments exceed the 2 MiB execve
	// allows with an 8 MiB stack limit (a quarter of RLIMIT_STACK).
	var stack syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &stack); err != nil {
		b.Fatal(err)
	}
	if raised := (syscall.Rlimit{Cur: 64 << 20, Max: stack.Max}); stack.Cur < raised.Cur && stack.Max >= raised.Cur {
		if err := syscall.Setrlimit(syscall.RLIMIT_STACK, &raised); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = syscall.Setrlimit(syscall.RLIMIT_STACK, &stack) }()
	}
	// Warm up: the first 10,000-row transactions into a fresh
	// ovsdb-server (and a fresh client heap) pay for growing their
	// memory, a cost that would otherwise land on whichever side runs
	// first.
	sync(b, c, desired)
	sync(b, c, empty)
	const samples = 5
	var lib, chained, perCall time.Duration
	calls := 0
	b.ResetTimer()
	for range b.N {
		lib += timed(func() {
			if res := sync(b, c, desired); res.Inserts != benchLBs || res.Transactions < 1 {
				b.Fatalf("Sync: %+v, want %d inserts", res, benchLBs)
			}
		})
		b.StopTimer()
		sync(b, c, empty)
		b.StartTimer()

		chained += timed(func() { o.Nbctl(chainedArgs...) })
		b.StopTimer()
		o.Nbctl("--all", "destroy", "Load_Balancer")

		// Per call: fill to each level with the library, then time
		// single ovn-nbctl calls adding other load balancers.
		fill := map[ovsdbnb.Owner]ovsdbnb.State{}
		for level := benchLBs / 8; level < benchLBs; level += benchLBs / 4 {
			for i := range level {
				fill[serviceOwner(i)] = desired[serviceOwner(i)]
			}
			sync(b, c, fill)
			for s := range samples {
				args := createLBArgs(benchLBs+calls, fmt.Sprintf("sample-%d-%d", level, s))
				b.StartTimer()
				perCall += timed(func() { o.Nbctl(args...) })
				b.StopTimer()
				calls++
			}
		}
		sync(b, c, empty)
		o.Nbctl("--all", "destroy", "Load_Balancer") // the samples
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	perLB := perCall.Seconds() / float64(calls)
	b.ReportMetric(lib.Seconds()/n, "lib-s")
	b.ReportMetric(chained.Seconds()/n, "nbctl-chained-s")
	b.ReportMetric(perLB*1000, "nbctl-percall-ms/lb(sampled)")
	b.ReportMetric(perLB*benchLBs, "nbctl-percall-est-s")
	b.ReportMetric(perLB*benchLBs/(lib.Seconds()/n), "x-faster-than-percall-est")
	b.ReportMetric(chained.Seconds()/lib.Seconds(), "x-faster-than-chained")
}

// BenchmarkChangeOneBackend changes one backend of one Service among
// 10,000 load balancers: each Sync must be one transaction with one
// mutation. It reports the latency percentiles, and the heap held by a
// client whose cache holds the 10,000 load balancers.
func BenchmarkChangeOneBackend(b *testing.B) {
	o := startNB(b)
	sync(b, dial(b, o.NB), services(benchLBs))

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c := dial(b, o.NB)
	runtime.GC()
	runtime.ReadMemStats(&after)
	cache := float64(after.HeapAlloc - before.HeapAlloc)

	owner := serviceOwner(benchLBs / 2)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		want := map[ovsdbnb.Owner]ovsdbnb.State{owner: {LoadBalancers: []ovsdbnb.LoadBalancer{serviceLB(benchLBs/2, i+1)}}}
		var res ovsdbnb.Result
		lat = append(lat, timed(func() { res = sync(b, c, want) }))
		if res.Transactions != 1 || res.Mutates != 1 || res.Ops() != 1 {
			b.Fatalf("change %d: %+v, want one transaction with one mutation", i, res)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(cache/(1<<20), "cache-MiB")
	b.ReportMetric(cache/benchLBs, "cache-B/lb")
}
