package ovsdbnb_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/testbed"
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
// ovsdb-server: with one Sync (10,000 owners; "lib"), with the same insert
// operations as bare transactions on a client that monitors nothing
// ("raw": the server's floor, in Sync's batches of DefaultBatchOps with
// the same two in flight), with one chained ovn-nbctl call, and with one
// ovn-nbctl call per load balancer (ovn-nbctl writes the same name,
// protocol, vips, options and external_ids with `create`). The last would
// take minutes, so it is sampled: 5 calls at each of the fill levels
// 1,250, 3,750, 6,250 and 8,750 (a call's cost grows with the database),
// and the total estimated as 10,000 times their mean (metrics named
// "est"). Only one client is connected while a side is timed: the
// library's monitor would otherwise decode the other sides' rows on the
// same two cores.
func BenchmarkCreateLoadBalancers(b *testing.B) {
	o := startNB(b)
	desired := services(benchLBs)
	empty := make(map[ovsdbnb.Owner]ovsdbnb.State, benchLBs)
	for owner := range desired {
		empty[owner] = ovsdbnb.State{}
	}
	inserts := ovsdbnb.LoadBalancerInserts(desired)
	chainedArgs := []string{"--timeout=600"}
	for i := range benchLBs {
		if i > 0 {
			chainedArgs = append(chainedArgs, "--")
		}
		// Other names than the library's (of the same length), as
		// before the sides were timed one client at a time.
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
	// The CPU time of this process (the client) and of the NB
	// ovsdb-server during each timed side: unlike the wall time, it
	// hardly depends on what else the machine runs.
	var libCPU, rawCPU, libServerCPU, rawServerCPU time.Duration
	server := serverPID(b, o)
	// libSide times one Sync of desired on a client of its own (dialed
	// and emptied untimed).
	libSide := func() time.Duration {
		c := dialUntracked(b, o.NB)
		defer c.Close()
		cpu0, srv0 := selfCPU(), procCPU(server)
		d := timed(func() {
			if res := sync(b, c, desired); res.Inserts != benchLBs || res.Transactions < 1 {
				b.Fatalf("Sync: %+v, want %d inserts", res, benchLBs)
			}
		})
		libCPU, libServerCPU = libCPU+selfCPU()-cpu0, libServerCPU+procCPU(server)-srv0
		sync(b, c, empty)
		return d
	}
	rawSide := func() time.Duration {
		raw := rawClient(b, o.NB)
		defer raw.Close()
		cpu0, srv0 := selfCPU(), procCPU(server)
		d := timed(func() { rawTransact(b, raw, inserts, ovsdbnb.DefaultBatchOps) })
		rawCPU, rawServerCPU = rawCPU+selfCPU()-cpu0, rawServerCPU+procCPU(server)-srv0
		o.Nbctl("--all", "destroy", "Load_Balancer")
		return d
	}
	// Warm up: the first 10,000-row transactions into a fresh
	// ovsdb-server (and a fresh client heap) pay for growing their
	// memory, a cost that would otherwise land on whichever side runs
	// first.
	libSide()
	rawSide()
	libCPU, rawCPU, libServerCPU, rawServerCPU = 0, 0, 0, 0
	const samples = 5
	var lib, raw, chained, perCall time.Duration
	calls := 0
	b.ResetTimer()
	for range b.N { // ns/op is a whole round, setup included
		// Labelled for -cpuprofile (pprof -tagfocus side=lib): the
		// goroutines of the client, dialled inside, inherit the label.
		pprof.Do(context.Background(), pprof.Labels("side", "lib"), func(context.Context) { lib += libSide() })
		pprof.Do(context.Background(), pprof.Labels("side", "raw"), func(context.Context) { raw += rawSide() })
		chained += timed(func() { o.Nbctl(chainedArgs...) })
		o.Nbctl("--all", "destroy", "Load_Balancer")

		// Per call: fill to each level with the library, then time
		// single ovn-nbctl calls adding other load balancers.
		c := dialUntracked(b, o.NB)
		fill := map[ovsdbnb.Owner]ovsdbnb.State{}
		for level := benchLBs / 8; level < benchLBs; level += benchLBs / 4 {
			for i := range level {
				fill[serviceOwner(i)] = desired[serviceOwner(i)]
			}
			sync(b, c, fill)
			for s := range samples {
				args := createLBArgs(benchLBs+calls, fmt.Sprintf("sample-%d-%d", level, s))
				perCall += timed(func() { o.Nbctl(args...) })
				calls++
			}
		}
		sync(b, c, empty)
		c.Close()
		o.Nbctl("--all", "destroy", "Load_Balancer") // the samples
	}
	n := float64(b.N)
	perLB := perCall.Seconds() / float64(calls)
	b.ReportMetric(lib.Seconds()/n, "lib-s")
	b.ReportMetric(raw.Seconds()/n, "raw-s")
	b.ReportMetric(lib.Seconds()/raw.Seconds(), "x-of-raw")
	b.ReportMetric(libCPU.Seconds()/n, "lib-client-cpu-s")
	b.ReportMetric(rawCPU.Seconds()/n, "raw-client-cpu-s")
	b.ReportMetric(libServerCPU.Seconds()/n, "lib-server-cpu-s")
	b.ReportMetric(rawServerCPU.Seconds()/n, "raw-server-cpu-s")
	b.ReportMetric((libCPU+libServerCPU).Seconds()/(rawCPU+rawServerCPU).Seconds(), "x-of-raw-cpu")
	b.ReportMetric(chained.Seconds()/n, "nbctl-chained-s")
	b.ReportMetric(perLB*1000, "nbctl-percall-ms/lb(sampled)")
	b.ReportMetric(perLB*benchLBs, "nbctl-percall-est-s")
	b.ReportMetric(perLB*benchLBs/(lib.Seconds()/n), "x-faster-than-percall-est")
	b.ReportMetric(chained.Seconds()/lib.Seconds(), "x-faster-than-chained")
}

// serverPID returns the PID of o's NB ovsdb-server.
func serverPID(b *testing.B, o *testbed.OVN) int {
	b.Helper()
	pid, err := os.ReadFile(filepath.Join(o.Dir, "nb.pid"))
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err != nil {
		b.Fatalf("nb.pid: %v", err)
	}
	return n
}

// selfCPU returns the CPU time (user and system) this process used so
// far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns the CPU time (user and system) process pid used so far,
// from /proc (0 when unreadable).
func procCPU(pid int) time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces): utime
	// and stime are the 14th and 15th of the line, in clock ticks.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// dialUntracked is dial for a client the caller closes (and may close
// early).
func dialUntracked(b *testing.B, endpoint string) *ovsdbnb.Client {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{endpoint}})
	if err != nil {
		b.Fatalf("Dial: %v", err)
	}
	return c
}

// rawClient is a bare libovsdb client of endpoint: no monitor, no cache.
func rawClient(b *testing.B, endpoint string) client.Client {
	b.Helper()
	m, err := model.NewClientDBModel("OVN_Northbound", map[string]model.Model{nbdb.LoadBalancerTable: &nbdb.LoadBalancer{}})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := client.NewOVSDBClient(m, client.WithEndpoint(endpoint))
	if err == nil {
		err = raw.Connect(context.Background())
	}
	if err != nil {
		b.Fatalf("raw client: %v", err)
	}
	return raw
}

// rawTransact sends ops in transactions of batch operations, two in
// flight, and fails b on any error.
func rawTransact(b *testing.B, raw client.Client, ops []ovsdb.Operation, batch int) {
	var wg gosync.WaitGroup
	slots := make(chan struct{}, 2)
	errs := make(chan error, len(ops)/batch+1)
	for i := 0; i < len(ops); i += batch {
		part := ops[i:min(i+batch, len(ops))]
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			res, err := raw.Transact(context.Background(), part...)
			if err == nil {
				_, err = ovsdb.CheckOperationResults(res, part)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("raw transact: %v", err)
	}
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

// BenchmarkResyncWithChassis syncs again, unchanged, 10,000 Services'
// load balancers and the node IP template variables of 2,000 chassis
// (one owner): the leader's periodic and post-event re-plan at
// OpenShift's node count. Nothing is sent; the time is the planning of
// 10,001 owners against the cache.
func BenchmarkResyncWithChassis(b *testing.B) {
	const chassis = 2000
	o := startNB(b)
	c := dial(b, o.NB)
	desired := services(benchLBs)
	nodes := ovsdbnb.Owner{Type: "NodeIPTemplates", Name: "cluster"}
	var vars []ovsdbnb.TemplateVar
	for i := range chassis {
		vars = append(vars, ovsdbnb.TemplateVar{Chassis: fmt.Sprintf("chassis-%d", i), Name: "NODEIP_IPv4_0",
			Value: fmt.Sprintf("172.18.%d.%d", i/250, i%250+2)})
	}
	desired[nodes] = ovsdbnb.State{TemplateVars: vars}
	sync(b, c, desired)
	b.ResetTimer()
	for range b.N {
		if res := sync(b, c, desired); res.Ops() != 0 || res.Owners != len(desired) {
			b.Fatalf("resync: %+v, want no operations and %d owners", res, len(desired))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/resync")
}
