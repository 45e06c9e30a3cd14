package scale

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ovnedge/ovnedge/testbed"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The event kinds measured, from the API write to the NB row another
// client sees.
const (
	// EventPodLabel relabels a pod from one EgressIP's selector to the
	// other's: its SNAT moves to the other egress IP.
	EventPodLabel = "pod-label"
	// EventNewService creates a ClusterIP Service: its load balancer.
	EventNewService = "new-service"
	// EventEndpoint replaces one endpoint of a Service's EndpointSlice:
	// its load balancer's backends.
	EventEndpoint = "endpoint"
	// EventNodeNotReady sets an egress node's Ready condition False: the
	// SNATs of an egress IP it hosted move to another node.
	EventNodeNotReady = "node-notready"
)

// Events are the kinds in report order.
var Events = []string{EventPodLabel, EventNewService, EventEndpoint, EventNodeNotReady}

// The aims at full size.
const (
	AimP99 = 50 * time.Millisecond
	// AimSync and AimRSS are issue 39's: the leader's initial sync and
	// peak RSS (the shipped chart's limit) at 150,000 pods.
	AimSync = 20 * time.Second
	AimRSS  = 512 << 20
	// AimNodeRSS is issue 39's aim for a node instance without
	// host-interface egress IPs, at any size.
	AimNodeRSS = 96 << 20
)

// LeaderRun is a leader's initial sync: daemon start -> informers
// synced, -> NB converged, and its memory then (Peak: the whole run's).
type LeaderRun struct {
	Informers, Sync time.Duration
	Synced          Memory
}

// Result is what one cluster size measured.
type Result struct {
	Shape Shape
	// Load is the time to create this size's objects on top of the
	// previous size's; Objects and Requests count them.
	Load              time.Duration
	Objects, Requests int
	// Steps are Load by kind.
	Steps []LoadStep
	// Topology is the time to create the NB topology (not the daemon's).
	Topology time.Duration
	// Informers is daemon start -> its log's "informers synced" line,
	// FirstRow daemon start -> the first NB row change, Sync daemon start
	// -> NB converged (the last row change of the initial sync, seen by
	// another client).
	Informers, FirstRow, Sync time.Duration
	// Compared is daemon start -> the last time the leader was seen
	// comparing NB rows with what it wrote (the initial sync's echo);
	// the events start after it.
	Compared time.Duration
	// Reconciles, ReconcileSeconds and NBOps are the daemon's cluster
	// reconciles, their total time and the NB operations it sent during
	// the initial sync.
	Reconciles       int
	ReconcileSeconds float64
	NBOps            int
	// Repairs are the leader's NB repairs that wrote rows during the
	// initial sync (SyncRepairs) and the events (EventRepairs).
	SyncRepairs, EventRepairs int
	// Synced is the daemon's memory once synced, After after the events
	// (After.Peak is the peak of the whole run).
	Synced, After Memory
	// Cgroup are the counters of the memory cgroup the leader runs in,
	// after the events (zero when it ran without a limit).
	Cgroup testbed.MemoryCgroupStats
	// BaseLeader is the baseline binary's leader (SCALE_BASE_BIN) at
	// this size, nil without one.
	BaseLeader *LeaderRun
	// Latency are the write -> NB times by kind (from just before the
	// API write), FromEvent the event -> NB times (from the write's watch
	// event, as a watcher of the apiserver receives it); Failed counts
	// events whose change did not show within the timeout.
	Latency, FromEvent map[string][]time.Duration
	Failed             map[string]int
	// API are the API writes' own durations (part of Latency) by kind.
	API map[string][]time.Duration
	// Skipped are the rounds left out once the size's time budget was
	// spent.
	Skipped int
	// Nodes are node 0's instance measured once the events are done:
	// the baseline binary's first when there is one.
	Nodes []NodeResult
}

// node is r's node instance result of binary, nil when not measured.
func (r Result) node(binary string) *NodeResult {
	for i := range r.Nodes {
		if r.Nodes[i].Binary == binary {
			return &r.Nodes[i]
		}
	}
	return nil
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 1) of d,
// 0 for none.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(p*float64(len(s))))-1)]
}

func ms(d time.Duration) float64   { return float64(d.Microseconds()) / 1000 }
func mib(b int64) float64          { return float64(b) / (1 << 20) }
func fmtMS(d time.Duration) string { return strconv.FormatFloat(ms(d), 'f', 1, 64) }

// WriteReport writes rs (ascending sizes) into dir: results.csv (one row
// per size), samples.csv (every latency sample), README.md (the table,
// the aims, notes), and the plots latency-p50.png, latency-p99.png,
// memory.png and sync.png.
func WriteReport(dir string, rs []Result, notes []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(dir, "results.csv"), resultRows(rs)); err != nil {
		return err
	}
	samples := [][]string{{"pods", "event", "n", "ms", "from_event_ms", "api_ms"}}
	at := func(d []time.Duration, i int) string {
		if i < len(d) {
			return strconv.FormatFloat(ms(d[i]), 'f', 3, 64)
		}
		return ""
	}
	for _, r := range rs {
		for _, k := range Events {
			for i := range r.Latency[k] {
				samples = append(samples, []string{strconv.Itoa(r.Shape.Pods), k, strconv.Itoa(i), at(r.Latency[k], i),
					at(r.FromEvent[k], i), at(r.API[k], i)})
			}
		}
	}
	for _, r := range rs {
		for _, n := range r.Nodes {
			for _, k := range NodeEvents {
				for i := range n.Latency[k] {
					samples = append(samples, []string{strconv.Itoa(r.Shape.Pods), k + "-" + n.Binary, strconv.Itoa(i),
						at(n.Latency[k], i), at(n.FromEvent[k], i), ""})
				}
			}
		}
	}
	if err := writeCSV(filepath.Join(dir, "samples.csv"), samples); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(markdown(rs, notes)), 0o644); err != nil {
		return err
	}
	for _, p := range []struct {
		file string
		plot func([]Result) (*plot.Plot, error)
	}{
		{"latency-p50.png", func(rs []Result) (*plot.Plot, error) { return latencyPlot(rs, 0.5) }},
		{"latency-p99.png", func(rs []Result) (*plot.Plot, error) { return latencyPlot(rs, 0.99) }},
		{"memory.png", memoryPlot},
		{"sync.png", syncPlot},
		{"node-memory.png", nodeMemoryPlot},
		{"node-latency.png", nodeLatencyPlot},
	} {
		pl, err := p.plot(rs)
		if err != nil {
			return fmt.Errorf("scale: plot %s: %w", p.file, err)
		}
		if pl == nil {
			continue // nothing to plot
		}
		if err := pl.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, p.file)); err != nil {
			return fmt.Errorf("scale: plot %s: %w", p.file, err)
		}
	}
	return nil
}

func resultRows(rs []Result) [][]string {
	head := []string{"pods", "nodes", "namespaces", "services", "egressips", "load_s", "load_objects", "load_requests",
		"topology_s", "informers_s", "first_row_s", "sync_s", "sync_reconciles", "sync_reconcile_s", "sync_nb_ops", "sync_nb_repairs", "event_nb_repairs",
		"rss_synced_mib", "rss_after_mib", "rss_peak_mib", "rss_synced_anon_mib", "rss_synced_file_mib", "base_informers_s", "base_sync_s", "base_rss_synced_mib", "base_rss_peak_mib",
		"cgroup_limit_mib", "cgroup_peak_mib", "cgroup_failcnt", "cgroup_oom_kills"}
	for _, k := range Events {
		head = append(head, k+"_n", k+"_p50_ms", k+"_p99_ms", k+"_max_ms", k+"_failed",
			k+"_event_p50_ms", k+"_event_p99_ms", k+"_event_max_ms")
	}
	for _, bin := range []string{"new", "base"} {
		p := "node_" + bin + "_"
		head = append(head, p+"ready_s", p+"flows", p+"rss_mib", p+"peak_mib", p+"heap_mib", p+"pod_watches", p+"rss_anon_mib", p+"rss_file_mib",
			p+"cgroup_limit_mib", p+"cgroup_peak_mib", p+"cgroup_oom_kills")
		for _, k := range NodeEvents {
			head = append(head, p+k+"_n", p+k+"_p50_ms", p+k+"_p99_ms", p+k+"_failed", p+k+"_event_p50_ms", p+k+"_event_p99_ms")
		}
	}
	rows := [][]string{head}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, r := range rs {
		s := r.Shape
		row := []string{strconv.Itoa(s.Pods), strconv.Itoa(s.Nodes), strconv.Itoa(s.Namespaces), strconv.Itoa(s.Services),
			strconv.Itoa(s.EgressIPs), f(r.Load.Seconds()), strconv.Itoa(r.Objects), strconv.Itoa(r.Requests),
			f(r.Topology.Seconds()), f(r.Informers.Seconds()), f(r.FirstRow.Seconds()), f(r.Sync.Seconds()), strconv.Itoa(r.Reconciles),
			f(r.ReconcileSeconds), strconv.Itoa(r.NBOps), strconv.Itoa(r.SyncRepairs), strconv.Itoa(r.EventRepairs), f(mib(r.Synced.RSS)), f(mib(r.After.RSS)), f(mib(r.After.Peak)),
			f(mib(r.Synced.Anon)), f(mib(r.Synced.File))}
		if l := r.BaseLeader; l != nil {
			row = append(row, f(l.Informers.Seconds()), f(l.Sync.Seconds()), f(mib(l.Synced.RSS)), f(mib(l.Synced.Peak)))
		} else {
			row = append(row, "", "", "", "")
		}
		row = append(row, f(mib(r.Cgroup.Limit)), f(mib(r.Cgroup.MaxUsage)), strconv.FormatInt(r.Cgroup.Failcnt, 10), strconv.FormatInt(r.Cgroup.OOMKills, 10))
		for _, k := range Events {
			l := r.Latency[k]
			e := r.FromEvent[k]
			row = append(row, strconv.Itoa(len(l)), f(ms(Percentile(l, 0.5))), f(ms(Percentile(l, 0.99))),
				f(ms(Percentile(l, 1))), strconv.Itoa(r.Failed[k]),
				f(ms(Percentile(e, 0.5))), f(ms(Percentile(e, 0.99))), f(ms(Percentile(e, 1))))
		}
		for _, bin := range []string{"new", "base"} {
			if n := r.node(bin); n != nil {
				row = append(row, f(n.Ready.Seconds()), strconv.Itoa(n.Flows), f(mib(n.Mem.RSS)), f(mib(n.Mem.Peak)), f(mib(n.Heap)),
					strconv.Itoa(n.Watches["pods"]), f(mib(n.Mem.Anon)), f(mib(n.Mem.File)),
					f(mib(n.Cgroup.Limit)), f(mib(n.Cgroup.MaxUsage)), strconv.FormatInt(n.Cgroup.OOMKills, 10))
				for _, k := range NodeEvents {
					l, e := n.Latency[k], n.FromEvent[k]
					row = append(row, strconv.Itoa(len(l)), f(ms(Percentile(l, 0.5))), f(ms(Percentile(l, 0.99))), strconv.Itoa(n.Failed[k]),
						f(ms(Percentile(e, 0.5))), f(ms(Percentile(e, 0.99))))
				}
			} else {
				row = append(row, make([]string, 11+6*len(NodeEvents))...)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// markdown is README.md: the sizes, the daemon's numbers and the aims.
func markdown(rs []Result, notes []string) string {
	var b strings.Builder
	b.WriteString("# ovnedge at scale (`make bench-scale`)\n\n")
	b.WriteString("Daemon start -> informers synced -> first NB row -> NB converged (initial sync), in seconds:\n\n")
	b.WriteString("| pods | nodes | Services | EgressIPs | load (s) | informers synced | first NB row | initial sync | reconciles | RSS synced (MiB) | RSS peak (MiB) |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		s := r.Shape
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %d | %.0f | %.0f |\n", s.Pods, s.Nodes, s.Services, s.EgressIPs,
			r.Load.Seconds(), r.Informers.Seconds(), r.FirstRow.Seconds(), r.Sync.Seconds(), r.Reconciles, mib(r.Synced.RSS), mib(r.After.Peak))
	}
	table := func(title string, lat func(Result) map[string][]time.Duration) {
		b.WriteString("\n" + title + ", p50 / p99 / max in ms (n samples; failed = not seen within the timeout):\n\n| pods |")
		for _, k := range Events {
			fmt.Fprintf(&b, " %s |", k)
		}
		b.WriteString("\n|---:|" + strings.Repeat("---:|", len(Events)) + "\n")
		for _, r := range rs {
			fmt.Fprintf(&b, "| %d |", r.Shape.Pods)
			for _, k := range Events {
				l := lat(r)[k]
				fmt.Fprintf(&b, " %s / %s / %s (n=%d", fmtMS(Percentile(l, 0.5)), fmtMS(Percentile(l, 0.99)), fmtMS(Percentile(l, 1)), len(l))
				if n := r.Failed[k]; n > 0 {
					fmt.Fprintf(&b, ", %d failed", n)
				}
				if r.Skipped > 0 && k == Events[len(Events)-1] {
					fmt.Fprintf(&b, "; %d rounds over the time budget skipped", r.Skipped)
				}
				b.WriteString(") |")
			}
			b.WriteString("\n")
		}
	}
	leaderTable(&b, rs)
	nodeTable(&b, rs)
	cgroupTable(&b, rs)
	table("Event -> NB, from the watch event of the write", func(r Result) map[string][]time.Duration { return r.FromEvent })
	table("Write -> NB, from just before the API write (the apiserver's own time included)", func(r Result) map[string][]time.Duration { return r.Latency })
	if len(rs) > 0 {
		r := rs[len(rs)-1]
		b.WriteString(fmt.Sprintf("\nAims (issue 19, at full size %d pods; largest size here %d):\n\n", MaxPods, r.Shape.Pods))
		for _, k := range Events {
			p, w := Percentile(r.FromEvent[k], 0.99), Percentile(r.Latency[k], 0.99)
			fmt.Fprintf(&b, "- %s p99 from the event %s ms: %s; from before the write %s ms: %s (aim < %s ms)\n", k,
				fmtMS(p), verdict(p > 0 && p < AimP99), fmtMS(w), verdict(w > 0 && w < AimP99), fmtMS(AimP99))
		}
		fmt.Fprintf(&b, "- initial sync %.1f s: %s (aim < %.0f s)\n", r.Sync.Seconds(), verdict(r.Sync < AimSync), AimSync.Seconds())
		fmt.Fprintf(&b, "- RSS peak %.0f MiB: %s (aim < %.0f MiB)\n", mib(r.After.Peak), verdict(r.After.Peak < AimRSS), mib(AimRSS))
	}
	b.WriteString("\nPlots: latency-p50.png, latency-p99.png, memory.png, sync.png, node-memory.png, node-latency.png. Data: results.csv, samples.csv.\n")
	if len(notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
	}
	return b.String()
}

// leaderTable writes the baseline's leader (SCALE_BASE_BIN) beside this
// tree's, when there is one: the initial sync and the memory, and the
// baseline's peak over this tree's.
func leaderTable(b *strings.Builder, rs []Result) {
	if !slices.ContainsFunc(rs, func(r Result) bool { return r.BaseLeader != nil }) {
		return
	}
	b.WriteString("\nThe leader, baseline (SCALE_BASE_BIN) and this tree, each synced on an NB of its own:\n\n")
	b.WriteString("| pods | binary | informers synced (s) | initial sync (s) | RSS synced (MiB) | of it anon / file | RSS peak (MiB) | base peak / new |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if l := r.BaseLeader; l != nil {
			fmt.Fprintf(b, "| %d | base | %.1f | %.1f | %.0f | %.0f / %.0f | %.0f | |\n", r.Shape.Pods, l.Informers.Seconds(), l.Sync.Seconds(),
				mib(l.Synced.RSS), mib(l.Synced.Anon), mib(l.Synced.File), mib(l.Synced.Peak))
		}
		ratio := ""
		if l := r.BaseLeader; l != nil && r.After.Peak > 0 {
			ratio = fmt.Sprintf("%.2f", float64(l.Synced.Peak)/float64(r.After.Peak))
		}
		fmt.Fprintf(b, "| %d | new | %.1f | %.1f | %.0f | %.0f / %.0f | %.0f | %s |\n", r.Shape.Pods, r.Informers.Seconds(), r.Sync.Seconds(),
			mib(r.Synced.RSS), mib(r.Synced.Anon), mib(r.Synced.File), mib(r.After.Peak), ratio)
	}
}

// cgroupTable writes how this tree's leader and node instance fared in
// memory cgroups limited as the chart's containers are: the peak charged
// (anonymous memory and page cache, as the kubelet's limit counts it),
// what it was at the end, how often the limit made the kernel reclaim,
// and OOM kills.
func cgroupTable(b *strings.Builder, rs []Result) {
	type row struct {
		pods int
		who  string
		s    testbed.MemoryCgroupStats
	}
	var rows []row
	for _, r := range rs {
		if r.Cgroup.Limit > 0 {
			rows = append(rows, row{r.Shape.Pods, "leader", r.Cgroup})
		}
		for _, n := range r.Nodes {
			if n.Cgroup.Limit > 0 {
				rows = append(rows, row{r.Shape.Pods, "node (" + n.Binary + ")", n.Cgroup})
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nUnder the chart's memory limits, each in a memory cgroup limited as the kubelet limits its container (MiB; the peak counts anonymous memory and page cache, the binary's pages among it, as the limit does; at the limit the kernel reclaims page cache before it OOM-kills):\n\n")
	b.WriteString("| pods | instance | limit | peak charged | at the end: anon | page cache (mapped) | limit hit (reclaims) | OOM kills |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range rows {
		fmt.Fprintf(b, "| %d | %s | %.0f | %.0f | %.0f | %.0f (%.0f) | %d | %d |\n", x.pods, x.who, mib(x.s.Limit), mib(x.s.MaxUsage),
			mib(x.s.RSS), mib(x.s.Cache), mib(x.s.Mapped), x.s.Failcnt, x.s.OOMKills)
	}
}

// nodeTable writes the node instances' table: per size and binary, the
// time to ready, the bridge's flows, the memory and the watches opened,
// and the baseline's RSS over this tree's.
func nodeTable(b *strings.Builder, rs []Result) {
	if !slices.ContainsFunc(rs, func(r Result) bool { return len(r.Nodes) > 0 }) {
		return
	}
	b.WriteString("\nNode instance (node 0, in its node's role, beside the leader, after the events), once its bridge is programmed:\n\n")
	b.WriteString("| pods | binary | ready (s) | flows | RSS (MiB) | of it anon / file | peak (MiB) | heap in use (MiB) | base RSS / new | base heap / new | watches opened |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rs {
		for _, n := range r.Nodes {
			ratio, heap := "", ""
			if base, cur := r.node("base"), r.node("new"); n.Binary == "new" && base != nil && cur.Mem.RSS > 0 && cur.Heap > 0 {
				ratio = fmt.Sprintf("%.2f", float64(base.Mem.RSS)/float64(cur.Mem.RSS))
				heap = fmt.Sprintf("%.2f", float64(base.Heap)/float64(cur.Heap))
			}
			var w []string
			for _, res := range NodeResources {
				w = append(w, fmt.Sprintf("%s %d", res, n.Watches[res]))
			}
			fmt.Fprintf(b, "| %d | %s | %.1f | %d | %.0f | %.0f / %.0f | %.0f | %.0f | %s | %s | %s |\n", r.Shape.Pods, n.Binary, n.Ready.Seconds(), n.Flows,
				mib(n.Mem.RSS), mib(n.Mem.Anon), mib(n.Mem.File), mib(n.Mem.Peak), mib(n.Heap), ratio, heap, strings.Join(w, ", "))
		}
	}
	fmt.Fprintf(b, "\nAim (issue 39): a node instance without host-interface egress IPs at <= %.0f MiB, flat from 1k to 150k pods, with no Pod watch.\n", mib(AimNodeRSS))
	nodeLatencyTable(b, rs)
}

// nodeLatencyTable writes the node events' times to the bridge, per size
// and binary: from the API write and from its watch event.
func nodeLatencyTable(b *strings.Builder, rs []Result) {
	b.WriteString("\nNode events -> bridge (ms; the first change of the event's flows on node 0's bridge, from OpenFlow's flow monitor): write -> bridge p50 / p99, event -> bridge p50 / p99 (n, failed):\n\n")
	b.WriteString("| pods | binary |")
	for _, k := range NodeEvents {
		fmt.Fprintf(b, " %s write | %s event |", k, k)
	}
	b.WriteString("\n|---:|---|" + strings.Repeat("---:|---:|", len(NodeEvents)) + "\n")
	for _, r := range rs {
		for _, n := range r.Nodes {
			fmt.Fprintf(b, "| %d | %s |", r.Shape.Pods, n.Binary)
			for _, k := range NodeEvents {
				l, e := n.Latency[k], n.FromEvent[k]
				fmt.Fprintf(b, " %s / %s | %s / %s (%d, %d) |", fmtMS(Percentile(l, 0.5)), fmtMS(Percentile(l, 0.99)),
					fmtMS(Percentile(e, 0.5)), fmtMS(Percentile(e, 0.99)), len(e), n.Failed[k])
			}
			b.WriteString("\n")
		}
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// newPlot is a log-log plot against the number of pods, ticked at the
// sizes measured.
func newPlot(rs []Result, title, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "pods (nodes, Services, EgressIPs in proportion)"
	p.Y.Label.Text = y
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	var xt plot.ConstantTicks
	for _, r := range rs {
		xt = append(xt, plot.Tick{Value: float64(r.Shape.Pods), Label: podsLabel(r.Shape.Pods)})
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = xt, logTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}

// podsLabel is 1500 as "1.5k".
func podsLabel(n int) string {
	if n < 1000 {
		return strconv.Itoa(n)
	}
	return strconv.FormatFloat(float64(n)/1000, 'f', -1, 64) + "k"
}

// logTicks ticks a log axis at 1, 2, 3, ... 9 x 10^k, labelling 1, 2
// and 5 x 10^k, so a range within one decade is labelled too.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// series turns f over rs into points, clamping to a positive floor for
// the log scale.
func series(rs []Result, f func(Result) float64) plotter.XYs {
	var out plotter.XYs
	for _, r := range rs {
		out = append(out, plotter.XY{X: float64(r.Shape.Pods), Y: max(f(r), 0.01)})
	}
	return out
}

// addAim draws a horizontal line at y across rs's sizes.
func addAim(p *plot.Plot, rs []Result, y float64, label string) error {
	lo, hi := float64(rs[0].Shape.Pods), float64(rs[len(rs)-1].Shape.Pods)
	if hi == lo {
		lo, hi = lo/2, hi*2
	}
	l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: y}, {X: hi, Y: y}})
	if err != nil {
		return err
	}
	l.Color = color.RGBA{R: 200, A: 255}
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}

func latencyPlot(rs []Result, q float64) (*plot.Plot, error) {
	p := newPlot(rs, fmt.Sprintf("event -> NB row change, p%.0f", q*100), "ms")
	var args []any
	for _, k := range Events {
		args = append(args, k, series(rs, func(r Result) float64 { return ms(Percentile(r.Latency[k], q)) }))
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	if q > 0.5 {
		return p, addAim(p, rs, ms(AimP99), "aim p99 (full size)")
	}
	return p, nil
}

func memoryPlot(rs []Result) (*plot.Plot, error) {
	p := newPlot(rs, "ovnedge leader resident memory", "MiB")
	err := plotutil.AddLinePoints(p,
		"RSS once synced", series(rs, func(r Result) float64 { return mib(r.Synced.RSS) }),
		"RSS after the events", series(rs, func(r Result) float64 { return mib(r.After.RSS) }),
		"peak RSS", series(rs, func(r Result) float64 { return mib(r.After.Peak) }))
	if err != nil {
		return nil, err
	}
	if have := slices.DeleteFunc(slices.Clone(rs), func(r Result) bool { return r.BaseLeader == nil }); len(have) > 0 {
		if err := plotutil.AddLinePoints(p, "baseline: RSS once synced", series(have, func(r Result) float64 { return mib(r.BaseLeader.Synced.RSS) }),
			"baseline: peak RSS", series(have, func(r Result) float64 { return mib(r.BaseLeader.Synced.Peak) })); err != nil {
			return nil, err
		}
	}
	return p, addAim(p, rs, mib(AimRSS), "aim (full size)")
}

func syncPlot(rs []Result) (*plot.Plot, error) {
	p := newPlot(rs, "initial sync and loading", "s")
	err := plotutil.AddLinePoints(p,
		"daemon start -> NB converged", series(rs, func(r Result) float64 { return r.Sync.Seconds() }),
		"daemon start -> first NB row", series(rs, func(r Result) float64 { return r.FirstRow.Seconds() }),
		"daemon start -> informers synced", series(rs, func(r Result) float64 { return r.Informers.Seconds() }),
		"loading the objects (this size's increment)", series(rs, func(r Result) float64 { return r.Load.Seconds() }))
	if err != nil {
		return nil, err
	}
	return p, addAim(p, rs, AimSync.Seconds(), "aim sync (full size)")
}

// withNode are the results with a node instance of binary that has
// what ok asks.
func withNode(rs []Result, binary string, ok func(*NodeResult) bool) []Result {
	var out []Result
	for _, r := range rs {
		if n := r.node(binary); n != nil && ok(n) {
			out = append(out, r)
		}
	}
	return out
}

// nodeLatencyPlot is the node events' event -> bridge p50 and p99 by
// binary.
func nodeLatencyPlot(rs []Result) (*plot.Plot, error) {
	p := newPlot(rs, "node 0: event -> bridge flow change", "ms")
	var lines []any
	for _, bin := range []string{"new", "base"} {
		have := withNode(rs, bin, func(n *NodeResult) bool { return len(n.FromEvent) > 0 })
		for _, k := range NodeEvents {
			for _, q := range []float64{0.5, 0.99} {
				if len(have) > 0 {
					lines = append(lines, fmt.Sprintf("%s p%.0f (%s)", k, q*100, bin),
						series(have, func(r Result) float64 { return ms(Percentile(r.node(bin).FromEvent[k], q)) }))
				}
			}
		}
	}
	if len(lines) == 0 {
		return nil, nil // no node events: no plot
	}
	return p, plotutil.AddLinePoints(p, lines...)
}

func nodeMemoryPlot(rs []Result) (*plot.Plot, error) {
	p := newPlot(rs, "ovnedge node instance resident memory (node 0)", "MiB")
	var lines []any
	for _, bin := range []string{"new", "base"} {
		if have := withNode(rs, bin, func(*NodeResult) bool { return true }); len(have) > 0 {
			lines = append(lines, "RSS ("+bin+")", series(have, func(r Result) float64 { return mib(r.node(bin).Mem.RSS) }),
				"of it anon ("+bin+")", series(have, func(r Result) float64 { return mib(r.node(bin).Mem.Anon) }),
				"heap in use ("+bin+")", series(have, func(r Result) float64 { return mib(r.node(bin).Heap) }))
		}
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, err
	}
	return p, addAim(p, rs, mib(AimNodeRSS), "aim")
}
