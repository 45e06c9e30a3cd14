package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/ovsdbnb"
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
	w       *daemon.Watcher
	p       daemon.Params
	rng     *rand.Rand
	rewrite int // churn rewrites so far
	// took are the convergence times by fault kind; rss the daemon's
	// resident set samples (MiB), with the instance they were taken of.
	took map[string][]time.Duration
	rss  []rssSample
	gen  int // daemon instances started
}

type rssSample struct {
	at  time.Duration // since the soak began
	gen int           // which daemon instance
	mib float64
}

// faultKinds are the faults BenchmarkSoak injects, one at random after
// each burst of churn.
var faultKinds = []struct {
	name   string
	inject func(s *soak)
}{
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
		s.a.ovs.Ofctl("del-flows", s.a.ovs.Mgmt(), "cookie=0xdeff105/-1")
		s.a.ovs.Ofctl("del-flows", s.a.ovs.Mgmt(), "cookie=0x0ede000000000000/0xffff000000000000")
	}},
	{"daemon-killed", func(s *soak) {
		if err := s.a.Kill(); err != nil {
			s.b.Fatal(err)
		}
		s.churn() // a change while no daemon runs
		s.a = s.c.start(s.b, egressNode, s.a.ovs)
		s.gen++
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
// leads: its convergence includes that takeover.
//
// SOAK_SEED fixes the random sequence (the seed used is logged).
func BenchmarkSoak(b *testing.B) {
	dur := 3 * time.Minute
	if v := os.Getenv("SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("SOAK=%q: %v", v, err)
		}
		dur = d
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SOAK_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			b.Fatalf("SOAK_SEED=%q: %v", v, err)
		}
	}
	b.Logf("soak of %v, SOAK_SEED=%d", dur, seed)
	s := startSoak(b, rand.New(rand.NewPCG(seed, seed)))
	for b.Loop() {
		begin := time.Now()
		s.converge("start", begin)
		s.sample(begin)
		for time.Since(begin) < dur {
			for range 1 + s.rng.IntN(10) {
				s.churn()
			}
			f := faultKinds[s.rng.IntN(len(faultKinds))]
			at := time.Now()
			f.inject(s)
			s.converge(f.name, at)
			s.sample(begin)
		}
	}
	s.report()
}

// startSoak starts the cluster, the daemon and the informers.
func startSoak(b *testing.B, rng *rand.Rand) *soak {
	c := startCluster(b)
	s := &soak{b: b, c: c, rng: rng, took: map[string][]time.Duration{}}
	s.a = c.start(b, egressNode, nil)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	if s.nb, err = ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{c.ovn.NB}, Logger: quiet}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.nb.Close)
	s.w = daemon.NewWatcher(c.cs, c.dyn, quiet)
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
		_, err = s.c.dyn.Resource(daemon.EgressIPResource).Patch(ctx, "egress-prod", types.MergePatchType,
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
// kind.
func (s *soak) converge(kind string, at time.Time) {
	var last, first error
	for {
		last = s.diff()
		if last == nil {
			break
		}
		if first == nil && time.Since(at) > 5*time.Second {
			first = last
			s.b.Logf("%s: not converged after 5s: %.3000s", kind, last)
		}
		if time.Since(at) > 2*time.Minute {
			s.b.Fatalf("%s: not converged after %v: %v\ndaemon log:\n%s", kind, time.Since(at).Round(time.Millisecond), last, s.a.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.took[kind] = append(s.took[kind], time.Since(at))
}

// diff says how the NB and the bridge differ from the render of the
// informers' snapshot, nil when they do not.
func (s *soak) diff() error {
	snap, err := s.w.Snapshot()
	if err != nil {
		return err
	}
	cs, err := daemon.ComputeCluster(snap, s.p, nil, nil)
	if err != nil {
		return err
	}
	want := daemon.RenderedNB(cs, s.nb)
	cur, err := s.nb.Current()
	if err != nil {
		return err
	}
	var diffs []string
	for _, d := range daemon.DiffNB(cur, want) {
		diffs = append(diffs, "NB "+d)
	}
	p := s.p
	mac := s.a.ovs.Vsctl("get", "Interface", s.a.ovs.Bridge, "mac_in_use")
	if p.BridgeMAC, err = net.ParseMAC(strings.Trim(strings.TrimSpace(mac), `"`)); err != nil {
		return fmt.Errorf("bridge MAC: %w", err)
	}
	ns, err := daemon.ComputeNode(snap, p, egressNode)
	if err != nil {
		return err
	}
	rendered, err := daemon.RenderFlows(ns)
	if err != nil {
		return err
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
		return fmt.Errorf("rendered flows: %w", err)
	}
	haveFlows, err := ownedFlows([]byte(dump))
	if err != nil {
		return fmt.Errorf("bridge flows: %w", err)
	}
	if !slices.Equal(haveFlows, wantFlows) {
		diffs = append(diffs, fmt.Sprintf("bridge: have\n%s\nwant\n%s", strings.Join(haveFlows, "\n"), strings.Join(wantFlows, "\n")))
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		return errors.New(strings.Join(diffs, "\n"))
	}
	return nil
}

// ownedFlows are ovnedge's flows of a dump (ovsflow.OwnedCookie) in the
// package's canonical text, sorted.
func ownedFlows(dump []byte) ([]string, error) {
	flows, err := ovsflow.ParseFlows(dump)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range flows {
		// The egress fence is the node's own time-bounded state, which a
		// render of the objects does not show.
		if ovsflow.OwnedCookie(f.Cookie) && f.Cookie != ovsflow.FenceCookie {
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

// report reports the convergence times per fault kind and the RSS.
func (s *soak) report() {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	faults := 0
	for _, f := range append([]string{"start"}, faultNames()...) {
		t := slices.Clone(s.took[f])
		if len(t) == 0 {
			continue
		}
		slices.Sort(t)
		if f != "start" {
			faults += len(t)
			s.b.ReportMetric(ms(t[len(t)/2]), f+"-p50-ms")
			s.b.ReportMetric(ms(t[len(t)-1]), f+"-max-ms")
		}
		var all []string
		for _, d := range s.took[f] {
			all = append(all, d.Round(time.Millisecond).String())
		}
		s.b.Logf("%-17s n=%-3d p50 %-9v max %-9v all %s", f, len(t), t[len(t)/2].Round(time.Millisecond), t[len(t)-1].Round(time.Millisecond),
			strings.Join(all, " "))
	}
	s.b.ReportMetric(float64(faults), "faults")
	s.b.ReportMetric(float64(s.rewrite), "rewrites")
	// The longest-lived instance's samples say whether RSS is flat.
	byGen := map[int][]rssSample{}
	for _, r := range s.rss {
		byGen[r.gen] = append(byGen[r.gen], r)
	}
	var longest []rssSample
	for _, rs := range byGen {
		if len(rs) > len(longest) {
			longest = rs
		}
	}
	var lines []string
	for _, r := range s.rss {
		lines = append(lines, fmt.Sprintf("%v:%d:%.0f", r.at.Round(time.Second), r.gen, r.mib))
	}
	s.b.Logf("RSS MiB (time:instance:MiB): %s", strings.Join(lines, " "))
	if len(longest) > 1 {
		first, last := longest[0].mib, longest[len(longest)-1].mib
		s.b.ReportMetric(last/first, "rss-growth")
		s.b.ReportMetric(last, "rss-last-MiB")
		s.b.Logf("longest-lived instance: %d samples over %v, RSS %.0f -> %.0f MiB", len(longest),
			(longest[len(longest)-1].at - longest[0].at).Round(time.Second), first, last)
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
