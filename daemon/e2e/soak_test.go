package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/kubewatch"
	"github.com/ovnedge/ovnedge/ovsflow/brex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
	"github.com/ovnedge/ovnedge/ovsflow"
)

// soak is the state of BenchmarkSoak: the cluster, the one ovnedge
// instance (leader and node of egressNode), a client of the NB and the
// informers the expected state is computed from.
type soak struct {
	b       *testing.B
	c       *cluster
	a       *instance
	nb      *ovsdbnb.Client
	w       *kubewatch.Watcher
	p       desired.Params
	rng     *rand.Rand
	rewrite int // churn rewrites so far
	// took are the convergence times by fault kind; rss the daemon's
	// resident set samples (MiB), with the instance they were taken of.
	took map[string][]time.Duration
	// nbTook is, per fault kind, when the NB alone first held the render
	// for good (the bridge aside): the NB lag.
	nbTook map[string][]time.Duration
	rss    []rssSample
	gen    int           // daemon instances started
	slow   time.Duration // rounds slower than this log the daemon's log since the fault
	faults []faultKind   // the fault kinds injected (SOAK_FAULTS)
	// slowRounds counts the rounds slower than slow.
	slowRounds int
	// injected is how long the last fault took to inject (restarting
	// ovs-vswitchd, restoring a wiped NB's topology): no check comes
	// before its end.
	injected time.Duration
	// takeover, after a daemon was killed, is the offset in the log of
	// its successor's start: the round converges once the successor
	// logs that it leads.
	takeover *int64
}

type faultKind struct {
	name   string
	inject func(s *soak)
}

type rssSample struct {
	at  time.Duration // since the soak began
	gen int           // which daemon instance
	mib float64
}

// faultKinds are the faults BenchmarkSoak injects, one at random after
// each burst of churn.
var faultKinds = []faultKind{
	{"nb-restart", func(s *soak) { s.c.ovn.RestartNB() }},
	{"nb-wiped", func(s *soak) {
		s.c.ovn.ReplaceNB()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for {
			// The admin restores the topology (ovnkube would).
			err := ovsdbnb.EnsureTopology(ctx, s.nb, topology)
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				s.b.Fatalf("restore the topology: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}},
	{"vswitchd-restart", func(s *soak) {
		s.a.ovs.KillVswitchd()
		s.a.ovs.StartVswitchd()
	}},
	{"flows-deleted", func(s *soak) {
		// Every flow: the base flows, and the Services' (OVN-Kubernetes'
		// cookies, one per Service port and VIP).
		s.a.ovs.Ofctl("del-flows", s.a.ovs.Mgmt())
	}},
	{"daemon-killed", func(s *soak) {
		if err := s.a.Kill(); err != nil {
			s.b.Fatal(err)
		}
		s.churn() // a change while no daemon runs
		from := s.logSize()
		s.a = s.c.start(s.b, egressNode, s.a.ovs)
		s.gen++
		// Converged once the new process leads: it waits for the
		// killed one's Lease to expire. Without this a churn the NB
		// already matched would let the round end at once, and the
		// takeover delay the next round, whatever its fault.
		s.takeover = &from
	}},
}

// BenchmarkSoak runs `ovnedge daemon` (one instance, the leader and the
// node of ovn-worker2, as a subprocess) on the demo's objects against a
// real kube-apiserver, OVN NB and northd and a real br-ex for SOAK (a
// duration, default 3m; SOAK=30m for the soak) per iteration, run
// it with -benchtime=1x. Over and over it rewrites objects at random
// (Service externalIPs, EndpointSlice backends, EgressIP addresses,
// namespace and pod labels) and injects one fault at random: the NB
// ovsdb-server killed and restarted, the NB wiped and its topology
// restored, ovs-vswitchd killed and restarted, ovnedge's flows deleted by
// hand, the daemon SIGKILLed and started again (with a rewrite while it is
// down). After each fault it waits until the NB's owned rows and the
// bridge's owned flows are what `ovnedge render` computes for the objects
// of the moment (daemon.ComputeCluster/ComputeNode over the informers'
// snapshot, in the NB's and the bridge's form), and fails after 2
// minutes. It reports the convergence time per fault kind (p50 and max,
// ms) and samples the daemon's RSS after each fault (MiB; rss-growth is
// the last sample over the first of the longest-lived instance). A
// killed daemon's successor waits for the old Lease to expire before it
// leads (it logs so): its convergence includes that takeover, which
// would otherwise delay the next round whatever its fault. The NB lag
// (nb-<kind>-max-ms, and p50 in the log) is when the NB alone held the
// render for good. RSS is reported per daemon process: first, last, max.
//
// SOAK_SEED fixes the random sequence (the seed used is logged).
// SOAK_FAULTS, a comma-separated list of fault kinds, injects only those
// (e.g. SOAK_FAULTS=nb-restart,nb-wiped,vswitchd-restart,flows-deleted
// keeps one daemon process for the whole run, whose RSS then says
// whether memory is flat). SOAK_LOG_LEVEL is the daemons' --log-level;
// a round slower than SOAK_SLOW (default 2s) is logged, and with SOAK_OUT
// (a directory) the daemon's log since its fault and the report are
// written there.
func BenchmarkSoak(b *testing.B) {
	dur := envDuration(b, "SOAK", 3*time.Minute)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SOAK_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			b.Fatalf("SOAK_SEED=%q: %v", v, err)
		}
	}
	faults := faultKinds
	if v := os.Getenv("SOAK_FAULTS"); v != "" {
		faults = nil
		for name := range strings.SplitSeq(v, ",") {
			i := slices.IndexFunc(faultKinds, func(f faultKind) bool { return f.name == name })
			if i < 0 {
				b.Fatalf("SOAK_FAULTS: no fault kind %q (have %s)", name, strings.Join(faultNames(), ", "))
			}
			faults = append(faults, faultKinds[i])
		}
	}
	slow := envDuration(b, "SOAK_SLOW", 2*time.Second)
	var names []string
	for _, f := range faults {
		names = append(names, f.name)
	}
	b.Logf("soak of %v, SOAK_SEED=%d, faults %s", dur, seed, strings.Join(names, ","))
	s := startSoak(b, rand.New(rand.NewPCG(seed, seed)), os.Getenv("SOAK_LOG_LEVEL"))
	s.slow, s.faults = slow, faults
	for b.Loop() {
		begin := time.Now()
		s.converge("start", begin)
		s.sample(begin)
		for time.Since(begin) < dur {
			for range 1 + s.rng.IntN(10) {
				s.churn()
			}
			f := s.faults[s.rng.IntN(len(s.faults))]
			at := time.Now()
			f.inject(s)
			s.injected = time.Since(at)
			s.converge(f.name, at)
			s.sample(begin)
		}
	}
	s.report()
}

// envDuration is the duration in the environment variable name, def
// when it is not set.
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// startSoak starts the cluster, the daemon and the informers.
func startSoak(b *testing.B, rng *rand.Rand, logLevel string) *soak {
	c := startCluster(b)
	if logLevel != "" {
		c.extraArgs = []string{"--log-level", logLevel}
	}
	s := &soak{b: b, c: c, rng: rng, took: map[string][]time.Duration{}, nbTook: map[string][]time.Duration{}}
	s.a = c.start(b, egressNode, nil)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	if s.nb, err = ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{c.ovn.NB}, Logger: quiet}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.nb.Close)
	s.w = kubewatch.NewWatcher(c.cs, c.dyn, quiet)
	if err := s.w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	// The daemon's own parameters; the bridge MAC is the bridge's, as
	// the daemon reads it.
	cfg, _, err := daemon.ParseConfig("soak", []string{"--node-name", egressNode, "--cluster-subnets", clusterSubnets,
		"--join-subnet", joinSubnet, "--bridge", s.a.ovs.Bridge, "--metrics-address", ""})
	if err != nil {
		b.Fatal(err)
	}
	s.p = daemon.ParamsFrom(cfg)
	return s
}

// churn makes one random rewrite through the API server.
func (s *soak) churn() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.rewrite++
	n := s.rng.IntN(4)
	var err error
	switch s.rng.IntN(5) {
	case 0: // a Service's ExternalIPs
		ips := []string{`"172.18.0.201"`}
		for i := range n {
			ips = append(ips, fmt.Sprintf(`"172.18.0.%d"`, 210+i))
		}
		_, err = s.c.cs.CoreV1().Services("prod").Patch(ctx, "api", types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"externalIPs":[%s]}}`, strings.Join(ips, ",")), metav1.PatchOptions{})
	case 1: // an EndpointSlice's backends
		var eps []string
		for i := range n + 1 {
			eps = append(eps, fmt.Sprintf(`{"addresses":["10.244.1.%d"],"conditions":{"ready":true},"nodeName":"ovn-worker"}`, 3+i))
		}
		_, err = s.c.cs.DiscoveryV1().EndpointSlices("prod").Patch(ctx, "web-abcde", types.MergePatchType,
			fmt.Appendf(nil, `{"endpoints":[%s]}`, strings.Join(eps, ",")), metav1.PatchOptions{})
	case 2: // the EgressIP's address
		_, err = s.c.dyn.Resource(egressv1.Resource).Patch(ctx, "egress-prod", types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"egressIPs":["172.18.0.%d"]}}`, 44+n), metav1.PatchOptions{})
	case 3: // the namespace's label the EgressIP selects on
		env := "prod"
		if n == 0 {
			env = "staging"
		}
		_, err = s.c.cs.CoreV1().Namespaces().Patch(ctx, "prod", types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"labels":{"env":%q}}}`, env), metav1.PatchOptions{})
	default: // a pod's labels
		_, err = s.c.cs.CoreV1().Pods("prod").Patch(ctx, "web-0", types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"labels":{"rev":"%d"}}}`, s.rewrite), metav1.PatchOptions{})
	}
	if err != nil {
		s.b.Fatalf("churn: %v", err)
	}
}

// converge waits until the NB and the bridge hold what render computes
// for the objects of the moment, and records the time since at under
// kind (and when the NB alone matched for good under nbTook).
func (s *soak) converge(kind string, at time.Time) {
	logFrom := s.logSize()
	var first error
	var nbAt time.Duration // when the NB last started to match; 0 while it does not
	for {
		nbErr, brErr, err := s.diff()
		if err == nil && nbErr == nil && nbAt == 0 {
			nbAt = time.Since(at)
		}
		if err != nil || nbErr != nil {
			nbAt = 0
		}
		last := errors.Join(err, nbErr, brErr)
		if s.takeover != nil && !s.logged(*s.takeover, "became the cluster-wide leader") {
			last = errors.Join(last, errors.New("the restarted daemon does not lead yet"))
			nbAt = 0
		}
		if last == nil {
			s.takeover = nil
			break
		}
		if first == nil && time.Since(at) > 5*time.Second {
			first = last
			s.b.Logf("%s: not converged after 5s: %.1500s", kind, last)
		}
		if time.Since(at) > 2*time.Minute {
			s.b.Fatalf("%s: not converged after %v: %v\ndaemon log:\n%s", kind, time.Since(at).Round(time.Millisecond), last, s.a.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(at)
	s.took[kind] = append(s.took[kind], took)
	s.nbTook[kind] = append(s.nbTook[kind], nbAt)
	if s.slow > 0 && took > s.slow {
		s.slowRounds++
		msg := fmt.Sprintf("%s: converged after %v (NB %v; the fault took %v to inject, the first check came after)", kind,
			took.Round(time.Millisecond), nbAt.Round(time.Millisecond), s.injected.Round(time.Millisecond))
		if dir := os.Getenv("SOAK_OUT"); dir != "" {
			file := filepath.Join(dir, fmt.Sprintf("slow-%02d-%s.log", s.slowRounds, kind))
			if err := os.WriteFile(file, []byte(msg+"\n"+s.logSince(logFrom)), 0o644); err != nil {
				s.b.Fatal(err)
			}
			msg += "; the daemon's log since the fault: " + file
		}
		s.b.Log(msg)
	}
}

// logSize is the size of the daemon's log file (0 if unknown).
func (s *soak) logSize() int64 {
	fi, err := os.Stat(s.a.log)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logged reports whether the daemon's log from offset on holds msg.
func (s *soak) logged(offset int64, msg string) bool {
	data, err := os.ReadFile(s.a.log)
	return err == nil && offset <= int64(len(data)) && strings.Contains(string(data[offset:]), msg)
}

// logSince returns the daemon's log from offset on (its last 20,000
// bytes at most; from the start after a restart truncated it).
func (s *soak) logSince(offset int64) string {
	data, err := os.ReadFile(s.a.log)
	if err != nil {
		return err.Error()
	}
	if offset > int64(len(data)) {
		offset = 0
	}
	data = data[offset:]
	if len(data) > 20000 {
		data = data[len(data)-20000:]
	}
	return string(data)
}

// diff says how the NB (nbErr) and the bridge (brErr) differ from the
// render of the informers' snapshot, nil when they do not; err is a
// failure to read or compute them.
func (s *soak) diff() (nbErr, brErr, err error) {
	snap, err := s.w.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	cs, err := desired.ComputeCluster(snap, s.p, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	if !s.nb.SupportsKey(nbdb.QoSTable, "action", "mark") {
		cs.WithoutQoSMark()
	}
	want := ovsdbnb.AsRead(cs.NB())
	cur, err := s.nb.Current()
	if err != nil {
		return nil, nil, err
	}
	var diffs []string
	for _, d := range ovsdbnb.Diff(cur, want) {
		diffs = append(diffs, "NB "+d)
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		nbErr = errors.New(strings.Join(diffs, "\n"))
	}
	p := s.p
	p.Uplink = s.a.ovs.Uplink // the daemon finds it on the bridge
	mac := s.a.ovs.Vsctl("get", "Interface", s.a.ovs.Bridge, "mac_in_use")
	if p.BridgeMAC, err = net.ParseMAC(strings.Trim(strings.TrimSpace(mac), `"`)); err != nil {
		return nbErr, nil, fmt.Errorf("bridge MAC: %w", err)
	}
	ns, err := desired.ComputeNode(snap, p, egressNode)
	if err != nil {
		return nbErr, nil, err
	}
	rendered, err := desired.RenderFlows(ns)
	if err != nil {
		return nbErr, nil, err
	}
	// Ports by number: dump-flows shows names cut to OpenFlow's 15
	// characters.
	dump := s.a.ovs.Ofctl("--no-stats", "--no-names", "dump-flows", s.a.ovs.Mgmt())
	for _, port := range []string{p.Patch, p.Uplink} {
		n := strconv.Itoa(s.a.ovs.Ofport(port))
		rendered = regexp.MustCompile(`(in_port=|output:)`+regexp.QuoteMeta(port)+`\b`).ReplaceAll(rendered, []byte("${1}"+n))
	}
	wantFlows, err := ownedFlows(rendered)
	if err != nil {
		return nbErr, nil, fmt.Errorf("rendered flows: %w", err)
	}
	haveFlows, err := ownedFlows([]byte(dump))
	if err != nil {
		return nbErr, nil, fmt.Errorf("bridge flows: %w", err)
	}
	if !slices.Equal(haveFlows, wantFlows) {
		brErr = fmt.Errorf("bridge: have\n%s\nwant\n%s", strings.Join(haveFlows, "\n"), strings.Join(wantFlows, "\n"))
	}
	return nbErr, brErr, nil
}

// ownedFlows are ovnedge's flows of a dump (brex.Owns with the gateway
// flows) in the package's canonical text, sorted.
func ownedFlows(dump []byte) ([]string, error) {
	flows, err := ovsflow.ParseFlows(dump)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range flows {
		// The egress fence is the node's own time-bounded state, which a
		// render of the objects does not show.
		if brex.Owns(true)(f.ID()) && f.Cookie != brex.FenceCookie {
			out = append(out, string(f.AppendText(nil)))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// sample records the daemon's resident set size.
func (s *soak) sample(begin time.Time) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.a.Pid()))
	if err != nil {
		s.b.Fatalf("daemon status: %v", err)
	}
	for l := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				s.b.Fatalf("VmRSS %q: %v", v, err)
			}
			s.rss = append(s.rss, rssSample{time.Since(begin), s.gen, kb / 1024})
		}
	}
}

// report reports the convergence times (and NB lags) per fault kind and
// the RSS of each daemon process: first, last and max sample.
func (s *soak) report() {
	// Each line is logged and, with SOAK_OUT, written to report.txt
	// there (a benchmark's log may be cut short).
	var report []string
	logf := func(format string, args ...any) {
		l := fmt.Sprintf(format, args...)
		report = append(report, l)
		s.b.Log(l)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	faults := 0
	for _, f := range append([]string{"start"}, faultNames()...) {
		t, nb := slices.Sorted(slices.Values(s.took[f])), slices.Sorted(slices.Values(s.nbTook[f]))
		if len(t) == 0 {
			continue
		}
		if f != "start" {
			faults += len(t)
			s.b.ReportMetric(ms(t[len(t)/2]), f+"-p50-ms")
			s.b.ReportMetric(ms(t[len(t)-1]), f+"-max-ms")
			s.b.ReportMetric(ms(nb[len(nb)-1]), "nb-"+f+"-max-ms")
		}
		var all []string
		for i, d := range s.took[f] {
			all = append(all, fmt.Sprintf("%v(nb %v)", r(d), r(s.nbTook[f][i])))
		}
		logf("%-17s n=%-3d p50 %-9v max %-9v NB p50 %-9v max %-9v all %s", f, len(t), r(t[len(t)/2]), r(t[len(t)-1]),
			r(nb[len(nb)/2]), r(nb[len(nb)-1]), strings.Join(all, " "))
	}
	s.b.ReportMetric(float64(faults), "faults")
	s.b.ReportMetric(float64(s.rewrite), "rewrites")
	// Each process's samples say whether its RSS is flat; the
	// longest-lived one's are reported as metrics.
	byGen := map[int][]rssSample{}
	for _, r := range s.rss {
		byGen[r.gen] = append(byGen[r.gen], r)
	}
	var longest []rssSample
	for gen := range len(byGen) {
		rs := byGen[gen]
		if len(rs) > len(longest) {
			longest = rs
		}
		if len(rs) == 0 {
			continue
		}
		peak := slices.MaxFunc(rs, func(a, b rssSample) int { return cmp.Compare(a.mib, b.mib) })
		logf("daemon process %d: %d samples over %v, RSS first %.1f last %.1f max %.1f MiB (at %v)", gen, len(rs),
			(rs[len(rs)-1].at - rs[0].at).Round(time.Second), rs[0].mib, rs[len(rs)-1].mib, peak.mib, peak.at.Round(time.Second))
	}
	var lines []string
	for _, r := range s.rss {
		lines = append(lines, fmt.Sprintf("%v:%d:%.0f", r.at.Round(time.Second), r.gen, r.mib))
	}
	logf("RSS MiB (time:instance:MiB): %s", strings.Join(lines, " "))
	if len(longest) > 1 {
		first, last := longest[0].mib, longest[len(longest)-1].mib
		peak := slices.MaxFunc(longest, func(a, b rssSample) int { return cmp.Compare(a.mib, b.mib) })
		s.b.ReportMetric(last/first, "rss-growth")
		s.b.ReportMetric(last, "rss-last-MiB")
		s.b.ReportMetric(peak.mib, "rss-max-MiB")
	}
	if dir := os.Getenv("SOAK_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(strings.Join(report, "\n")+"\n"), 0o644); err != nil {
			s.b.Error(err)
		}
	}
}

// faultNames are the names of faultKinds.
func faultNames() []string {
	var out []string
	for _, f := range faultKinds {
		out = append(out, f.name)
	}
	return out
}
