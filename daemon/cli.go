package daemon

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc/agent"
	"github.com/ovnedge/ovnedge/lbsvc/agent/pod"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/readiness"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

const usage = `ovnedge makes Kubernetes edge traffic work on OVN/Open vSwitch: EgressIPs out,
LoadBalancer and ExternalIP VIPs in.

Usage:
  ovnedge <command> [flags]

Commands:
  daemon    watch Kubernetes (or --manifests DIR) and keep the dataplane programmed:
            the elected leader writes the OVN Northbound database and the EgressIP
            status, every instance programs its own node's bridge (--node-name).
  render    print the desired state of a manifests directory without touching anything:
            --what flows  the node's bridge flows (ovs-ofctl syntax, one per line)
            --what nb     the Northbound rows (one JSON object per line)
  sync      apply the desired state of a manifests directory once and exit 0 when the
            dataplane matches it (--once is required).
  uninstall ask every instance (the Pods in --namespace) to remove what it wrote, the
            Northbound rows, flows, host egress IPs, announcements and the Lease, and
            wait until they did (the chart runs it before helm uninstall deletes them).
  lbsvc-agent
            inside a Kube-OVN LoadBalancer Service pod: forward LBIP:port on net1 to the
            ClusterIP (address, rules and NAT as Kube-OVN's lb-svc.sh sets them).
  version   print the version.

Examples:
  ovnedge render --manifests examples/demo --node ovn-worker2 --what flows
  ovnedge render --manifests examples/demo --what nb --cluster-subnets 10.244.0.0/16/24
  ovnedge sync --manifests examples/demo --nb-address unix:/var/run/ovn/ovnnb_db.sock \
      --ovs-db unix:/var/run/openvswitch/db.sock --bridge br-ex --node-name ovn-worker2 --once
  ovnedge daemon --kubeconfig ~/.kube/config --node-name ovn-worker2 \
      --nb-address tcp:172.18.0.10:6641 --cluster-subnets 10.244.0.0/16/24

daemon, render and sync take the same flags (and --config-file); run
"ovnedge <command> -h" for them.
`

// Main runs the ovnedge command line (args without the program name) and
// returns its exit code: 0 on success, 1 on failure, 2 on a usage error.
// ctx ends the daemon; logs go to stderr, output to stdout. client-go's
// klog is process-wide: a program routes it to slog once, before Main
// (see daemon/cmd/ovnedge).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	level := new(slog.LevelVar) // set from --log-level once parsed
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	var err error
	switch cmd {
	case "daemon":
		err = runDaemon(ctx, args, stderr, log, level)
	case "render":
		err = runRender(ctx, args, stdout, stderr, log, level)
	case "sync":
		err = runSync(ctx, args, stderr, log, level)
	case "uninstall":
		err = runUninstall(ctx, args, stderr, log, level)
	case "lbsvc-agent":
		err = runLBSvcAgent(ctx, args, stderr, log)
	case "version":
		fmt.Fprintln(stdout, "ovnedge", Version())
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "ovnedge: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "ovnedge %s: %v\n", cmd, err)
		return 2
	}
	log.Error("ovnedge "+cmd+" failed", "err", err)
	return 1
}

// usageError is a command line the command cannot run with.
type usageError struct{ error }

// summaries head each command's -h.
var summaries = map[string]string{
	"daemon":    "keep the dataplane programmed from Kubernetes (--kubeconfig, in-cluster by default) or --manifests DIR",
	"render":    "print the desired flows (--what flows --node NAME) or Northbound rows (--what nb) of --manifests DIR",
	"sync":      "apply --manifests DIR once to --nb-address (and, with --node-name, to --bridge) and check it",
	"uninstall": "ask the instances in --namespace to remove what they wrote (the chart's pre-delete hook) and wait for them",
}

// parse parses a command's flags and sets level from --log-level.
func parse(name string, args []string, stderr io.Writer, level *slog.LevelVar, extra ...func(*flag.FlagSet)) (*Config, error) {
	extra = append(extra, func(fs *flag.FlagSet) {
		fs.SetOutput(stderr)
		fs.Usage = func() {
			fmt.Fprintf(stderr, "Usage: ovnedge %s [flags]\n\n%s.\n\nFlags (also settable in --config-file; flags win):\n", name, summaries[name])
			fs.PrintDefaults()
		}
	})
	cfg, _, err := ParseConfig("ovnedge "+name, args, extra...)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return nil, usageError{err}
	}
	if cfg != nil {
		level.Set(cfg.LogLevel)
	}
	return cfg, err
}

// stampedVersion is "<version> <revision>", set with -ldflags -X by
// scripts/image.sh where the go command stamps no VCS information (a git
// worktree, whose .git is a file).
var stampedVersion string

// Version returns the module version and VCS revision the binary was
// built from.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return cmp.Or(stampedVersion, "(unknown)")
	}
	v := bi.Main.Version
	stamped := false
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
			stamped = true
		}
	}
	if !stamped && stampedVersion != "" {
		return stampedVersion
	}
	return strings.TrimSpace(v)
}

func runDaemon(ctx context.Context, args []string, stderr io.Writer, log *slog.Logger, level *slog.LevelVar) error {
	cfg, err := parse("daemon", args, stderr, level)
	if err != nil {
		return err
	}
	if cfg.LeaderElect && len(cfg.NBAddress) == 0 {
		log.Warn("no --nb-address: the leader assigns EgressIPs and LoadBalancer addresses but writes no Northbound rows")
	}
	if cfg.NodeName == "" {
		log.Warn("no --node-name: no node work (bridge flows, ARP/NDP)")
	}
	if err := cfg.CheckLease(); cfg.LeaderElect && err != nil {
		return err
	}
	if cfg.LeaderElect && cfg.OVNEmptyLBEvents && len(cfg.SBAddress) == 0 {
		return errors.New("--ovn-empty-lb-events needs --sb-address: the leader reads the Southbound's Controller_Event rows")
	}
	applyMemoryLimit(log)
	c, err := Connect(cfg, log)
	if err != nil {
		return err
	}
	m := NewMetrics()
	rec, stop := NewRecorder(c.Typed, !c.FromManifests, log)
	defer stop()
	d := NewDataplane(cfg, c, rec, m, log)
	defer d.Close()
	env := runEnv{Log: log, Metrics: m, ManifestPoll: cfg.ManifestsPoll, FullRecompute: cfg.FullRecompute}
	if cfg.LeaderElect && cfg.OVNEmptyLBEvents {
		env.Unidle = &unidling{cfg: cfg, cs: c.Typed, rec: rec, log: log}
	}
	if err := wireReachability(ctx, cfg, c, d, &env, log); err != nil {
		return err
	}
	// Readiness goes to the instance's own Pod too, when it runs in one;
	// there the uninstall marker stops the work and removes what it wrote.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var uninstalling atomic.Bool
	podNS := os.Getenv("POD_NAMESPACE")
	p := readiness.NewPodReporter(c.Typed, rec, podNS, os.Getenv("POD_NAME"), log)
	if p != nil && !c.FromManifests {
		go p.Run(ctx)
		env.Ready = p.Report
		go watchUninstall(ctx, c.Typed, podNS, func() {
			log.Warn("uninstall: stopping and removing what this instance wrote", "marker", podNS+"/"+UninstallMarker)
			uninstalling.Store(true)
			stopRun()
		})
	}
	// A former leader forgets what it wrote (see Dataplane.Leading).
	lead := env.Leading
	env.Leading = func(leading bool) {
		d.Leading(leading)
		if lead != nil {
			lead(leading)
		}
	}
	err = run(runCtx, cfg, c, d.reconcilers(), env)
	if !uninstalling.Load() || ctx.Err() != nil {
		return err
	}
	return uninstallInstance(ctx, cfg, c, d, rec, m, p, log)
}

// uninstallInstance removes what the instance wrote, reports it on its
// Pod and stays idle until ctx ends (a restarted process would program
// again).
func uninstallInstance(ctx context.Context, cfg *Config, c *Clients, d *Dataplane, rec record.EventRecorder, m *Metrics, p *readiness.PodReporter, log *slog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	err := d.cleanup(cctx, cfg, c, rec, m, log)
	cancel()
	s := readiness.State{Reason: readiness.ReasonUninstalled, Message: "removed what it wrote; idle until deleted"}
	if err != nil {
		log.Error("uninstall: not everything was removed", "err", err)
		s.Message = "removing what it wrote failed: " + err.Error()
	} else {
		log.Info("uninstall: removed what this instance wrote; idle until stopped")
	}
	p.Report(s)
	<-ctx.Done()
	return nil
}

func runRender(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger, level *slog.LevelVar) error {
	var what string
	cfg, err := parse("render", args, stderr, level, renderFlags(&what))
	if err != nil {
		return err
	}
	if cfg.Manifests == "" {
		return usageError{errors.New("--manifests DIR is required")}
	}
	if what != "flows" && what != "provider-flows" && what != "nb" {
		return usageError{fmt.Errorf("--what %q: want flows, provider-flows or nb", what)}
	}
	if what != "nb" && cfg.NodeName == "" {
		return usageError{fmt.Errorf("--what %s needs --node NAME", what)}
	}
	s, _, err := LoadSnapshot(ctx, cfg, log)
	if err != nil {
		return err
	}
	if cfg.Uplink == "" {
		cfg.Uplink = "eth0" // render reads no bridge to find it on
	}
	p := ParamsFrom(cfg)
	var out []byte
	if what != "nb" {
		ns, err := desired.ComputeNode(s, p, cfg.NodeName)
		if err != nil {
			return err
		}
		logEvents(log, ns.Events)
		if what == "provider-flows" {
			ns = desired.NodeState{Sets: ns.Provider}
		}
		if out, err = desired.RenderFlows(ns); err != nil {
			return err
		}
	} else {
		cs, err := desired.ComputeCluster(s, p, nil, nil)
		if err != nil {
			return err
		}
		logEvents(log, cs.Events)
		if out, err = ovsdbnb.Render(cs.NB()); err != nil {
			return err
		}
	}
	_, err = stdout.Write(out)
	return err
}

func logEvents(log *slog.Logger, events []event.Event) {
	for _, e := range events {
		log.Warn("event", "event", e.String())
	}
}

func runSync(ctx context.Context, args []string, stderr io.Writer, log *slog.Logger, level *slog.LevelVar) error {
	var once bool
	cfg, err := parse("sync", args, stderr, level, syncFlags(&once))
	if err != nil {
		return err
	}
	if !once {
		return usageError{errors.New("--once is required (`ovnedge daemon --manifests DIR` keeps syncing)")}
	}
	if cfg.Manifests == "" || len(cfg.NBAddress) == 0 {
		return usageError{errors.New("--manifests DIR and --nb-address (or --ovn-nb) ENDPOINTS are required")}
	}
	return SyncOnce(ctx, cfg, log)
}

func runLBSvcAgent(ctx context.Context, args []string, stderr io.Writer, log *slog.Logger) error {
	var cfg agent.Config
	fs := flag.NewFlagSet("ovnedge lbsvc-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	cfg.Logger = log
	return pod.Run(ctx, cfg)
}

// runUninstall creates the uninstall marker in the instances' namespace,
// waits (up to --uninstall-timeout) until every instance reported that it
// removed what it wrote, and deletes the marker. It never fails an
// uninstall over an instance that does not answer: it logs it.
func runUninstall(ctx context.Context, args []string, stderr io.Writer, log *slog.Logger, level *slog.LevelVar) error {
	var namespace string
	var timeout time.Duration
	cfg, err := parse("uninstall", args, stderr, level, uninstallFlags(&namespace, &timeout))
	if err != nil {
		return err
	}
	if namespace == "" {
		return usageError{errors.New("--namespace is required (or $POD_NAMESPACE)")}
	}
	c, err := Connect(cfg, log)
	if err != nil {
		return err
	}
	cms := c.Typed.CoreV1().ConfigMaps(namespace)
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: UninstallMarker, Namespace: namespace}}
	if _, err := cms.Create(ctx, marker, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s/%s: %w", namespace, UninstallMarker, err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	waiting, err := waitUninstalled(wctx, c.Typed, namespace, log)
	cancel()
	if len(waiting) > 0 || err != nil {
		log.Warn("uninstall: some instances did not report; what they wrote may remain", "pods", waiting, "err", err)
	} else {
		log.Info("uninstall: every instance removed what it wrote", "namespace", namespace)
	}
	if err := cms.Delete(ctx, UninstallMarker, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s/%s: %w", namespace, UninstallMarker, err)
	}
	return nil
}

// SyncOnce applies the desired state of cfg's manifests once, the way
// `ovnedge sync --once` does: the NB rows and EgressIP statuses, and with
// cfg.NodeName the bridge flows of that node. It returns nil when the
// dataplane then matches the desired state.
func SyncOnce(ctx context.Context, cfg *Config, log *slog.Logger) error {
	s, c, err := LoadSnapshot(ctx, cfg, log)
	if err != nil {
		return err
	}
	rec, stop := NewRecorder(c.Typed, false, log)
	defer stop()
	d := NewDataplane(cfg, c, rec, NewMetrics(), log)
	defer d.Close()
	if err := d.Cluster(ctx, s); err != nil {
		return err
	}
	if err := d.Node(ctx, s); err != nil {
		return err
	}
	if err := d.Verify(ctx, s); err != nil {
		return err
	}
	log.Info("dataplane matches the manifests", "manifests", cfg.Manifests, "node", cfg.NodeName)
	return nil
}

// uninstallFlags registers uninstall's own flags beside the shared ones.
func uninstallFlags(namespace *string, timeout *time.Duration) func(*flag.FlagSet) {
	return func(fs *flag.FlagSet) {
		fs.StringVar(namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the instances' namespace (default $POD_NAMESPACE)")
		fs.DurationVar(timeout, "uninstall-timeout", time.Minute, "how long to wait for the instances to report")
	}
}

// renderFlags registers render's own flags beside the shared ones: --what
// into what.
func renderFlags(what *string) func(*flag.FlagSet) {
	return func(fs *flag.FlagSet) {
		fs.StringVar(what, "what", "flows", "what to print: flows (the node's bridge flows), provider-flows (its provider bridge's, --underlay-lb-mode) or nb (the Northbound rows)")
	}
}

// syncFlags registers sync's own flags beside the shared ones: --once
// into once.
func syncFlags(once *bool) func(*flag.FlagSet) {
	return func(fs *flag.FlagSet) {
		fs.BoolVar(once, "once", false, "apply once and exit (required; for a loop, run `ovnedge daemon`)")
	}
}
