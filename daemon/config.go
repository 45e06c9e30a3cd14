package daemon

import (
	"flag"
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/gcfg.v1"
)

// ClusterSubnet is one `--cluster-subnets` entry: a pod network and the
// prefix length of each node's share of it.
type ClusterSubnet struct {
	CIDR       netip.Prefix
	HostPrefix int
}

// Config is everything the daemon is told. Values come from defaults, then
// the `--config-file` (gcfg/ini), then flags: a flag given on the command
// line wins over the file.
type Config struct {
	ConfigFile string
	NodeName   string
	Kubeconfig string
	Manifests  string

	ClusterSubnets []ClusterSubnet
	JoinSubnet     netip.Prefix

	// Northbound database: endpoints (several for RAFT) and TLS files.
	NBAddress               []string
	NBPrivKey, NBCert, NBCA string

	OVSDB     string // Open_vSwitch database endpoint
	OVSRunDir string // directory of <bridge>.mgmt
	Bridge    string
	CTZone    uint16

	// EgressIP reachability, as OVN-Kubernetes names it.
	ReachabilityTotalTimeout int // seconds; 0 = always reachable
	HealthCheckPort          int // 0 = DISCARD probe, else gRPC
	CheckInterval            time.Duration

	EnableEgressIP   bool
	EnableL2Announce bool

	MetricsAddr string
	Pprof       bool
}

// option is one setting: its flag, its place in the config file and how to
// store a value.
type option struct {
	name, section, key, def, usage string
	set                            func(c *Config, v string) error
}

var options = []option{
	{"config-file", "", "", "", "gcfg/ini configuration file; flags override it",
		func(c *Config, v string) error { c.ConfigFile = v; return nil }},
	{"node-name", "ovnedge", "node-name", "", "this node's Kubernetes name (node work runs for it only)",
		func(c *Config, v string) error { c.NodeName = v; return nil }},
	{"kubeconfig", "kubernetes", "kubeconfig", "", "kubeconfig file of the API server; empty: in-cluster config",
		func(c *Config, v string) error { c.Kubeconfig = v; return nil }},
	{"manifests", "ovnedge", "manifests", "", "read Kubernetes objects from YAML files in this directory instead of an API server",
		func(c *Config, v string) error { c.Manifests = v; return nil }},
	{"cluster-subnets", "default", "cluster-subnets", "10.128.0.0/14/23", "pod networks, comma-separated CIDR[/hostPrefix]",
		func(c *Config, v string) (err error) { c.ClusterSubnets, err = ParseClusterSubnets(v); return err }},
	{"join-subnet", "gateway", "v4-join-subnet", "100.64.0.0/16", "subnet of the join switch between ovn_cluster_router and the gateway routers",
		func(c *Config, v string) (err error) { c.JoinSubnet, err = parseSubnet(v); return err }},
	{"nb-address", "ovnnorth", "address", "", "OVN Northbound endpoints, comma-separated (unix:, tcp:, ssl:); several for a RAFT cluster",
		func(c *Config, v string) error { c.NBAddress = splitList(v); return nil }},
	{"nb-client-privkey", "ovnnorth", "client-privkey", "", "TLS private key for ssl: endpoints",
		func(c *Config, v string) error { c.NBPrivKey = v; return nil }},
	{"nb-client-cert", "ovnnorth", "client-cert", "", "TLS certificate for ssl: endpoints",
		func(c *Config, v string) error { c.NBCert = v; return nil }},
	{"nb-client-cacert", "ovnnorth", "client-cacert", "", "TLS CA certificate for ssl: endpoints",
		func(c *Config, v string) error { c.NBCA = v; return nil }},
	{"ovs-db", "ovnedge", "ovs-db", "unix:/var/run/openvswitch/db.sock", "Open_vSwitch database endpoint",
		func(c *Config, v string) error { c.OVSDB = v; return nil }},
	{"ovs-rundir", "ovnedge", "ovs-rundir", "/var/run/openvswitch", "directory holding the bridges' OpenFlow sockets (<bridge>.mgmt)",
		func(c *Config, v string) error { c.OVSRunDir = v; return nil }},
	{"bridge", "ovnedge", "bridge", "br-ex", "the external bridge (br-ex or breth0)",
		func(c *Config, v string) error { c.Bridge = v; return nil }},
	{"conntrack-zone", "ovnedge", "conntrack-zone", "64000", "conntrack zone of the bridge's host and egress traffic",
		func(c *Config, v string) error { n, err := parseUint(v, 1, 65535); c.CTZone = uint16(n); return err }},
	{"egressip-reachability-total-timeout", "ovnkubernetesfeature", "egressip-reachability-total-timeout", "1",
		"seconds an egress node may take to answer a reachability check; 0 treats every node as reachable",
		func(c *Config, v string) (err error) {
			c.ReachabilityTotalTimeout, err = parseUint(v, 0, 60)
			return err
		}},
	{"egressip-node-healthcheck-port", "ovnkubernetesfeature", "egressip-node-healthcheck-port", "0",
		"0: probe egress nodes on the DISCARD port; otherwise the gRPC health port every node serves",
		func(c *Config, v string) (err error) { c.HealthCheckPort, err = parseUint(v, 0, 65535); return err }},
	{"egressip-check-interval", "ovnedge", "egressip-check-interval", "5s", "interval between egress node reachability checks",
		func(c *Config, v string) (err error) { c.CheckInterval, err = parseDuration(v); return err }},
	{"enable-egress-ip", "ovnkubernetesfeature", "enable-egress-ip", "true", "program EgressIPs",
		func(c *Config, v string) (err error) { c.EnableEgressIP, err = strconv.ParseBool(v); return err }},
	{"enable-l2-announce", "ovnedge", "enable-l2-announce", "false", "answer ARP/NDP for ExternalIP and LoadBalancer VIPs from one elected node (off, as upstream)",
		func(c *Config, v string) (err error) { c.EnableL2Announce, err = strconv.ParseBool(v); return err }},
	{"metrics-address", "ovnedge", "metrics-address", ":9476", "address of /metrics, /healthz and /readyz; empty disables",
		func(c *Config, v string) error { c.MetricsAddr = v; return nil }},
	{"enable-pprof", "ovnedge", "enable-pprof", "false", "serve /debug/pprof on the metrics address",
		func(c *Config, v string) (err error) { c.Pprof, err = strconv.ParseBool(v); return err }},
}

// ParseConfig reads args (without the program and subcommand names) and
// the config file they name. Errors name the flag or file key at fault.
func ParseConfig(name string, args []string) (*Config, *flag.FlagSet, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	given := map[string]string{}
	for _, o := range options {
		fs.Func(o.name, fmt.Sprintf("%s (default %q)", o.usage, o.def), func(v string) error {
			given[o.name] = v
			return o.set(&Config{}, v) // validate now, apply in order below
		})
	}
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	c := &Config{}
	for _, o := range options {
		if err := o.set(c, o.def); err != nil {
			return nil, fs, fmt.Errorf("default of --%s: %w", o.name, err)
		}
	}
	if path := given["config-file"]; path != "" {
		file, err := readConfigFile(path)
		if err != nil {
			return nil, fs, err
		}
		for _, o := range options {
			if v, ok := file[o.section+"."+o.key]; ok {
				if err := o.set(c, v); err != nil {
					return nil, fs, fmt.Errorf("%s: [%s] %s: %w", path, o.section, o.key, err)
				}
			}
		}
	}
	for _, o := range options {
		if v, ok := given[o.name]; ok {
			if err := o.set(c, v); err != nil {
				return nil, fs, fmt.Errorf("--%s: %w", o.name, err)
			}
		}
	}
	return c, fs, nil
}

// readConfigFile returns the file's values as "section.key" -> value.
// Sections and keys ovnedge does not know (an OVN-Kubernetes config file
// has many) are ignored.
func readConfigFile(path string) (map[string]string, error) {
	var raw struct {
		Default, Kubernetes, Gateway, Ovnnorth, Ovnkubernetesfeature, Ovnedge rawSection
	}
	if err := gcfg.FatalOnly(gcfg.ReadFileInto(&raw, path)); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	sections := map[string]*rawSection{"default": &raw.Default, "kubernetes": &raw.Kubernetes, "gateway": &raw.Gateway, "ovnnorth": &raw.Ovnnorth,
		"ovnkubernetesfeature": &raw.Ovnkubernetesfeature, "ovnedge": &raw.Ovnedge}
	out := map[string]string{}
	for _, o := range options {
		if s := sections[o.section]; s != nil {
			if v := s.get(o.key); v != nil {
				out[o.section+"."+o.key] = *v
			}
		}
	}
	return out, nil
}

// rawSection holds every key any section may carry, as text; gcfg fills
// the ones present in the file.
type rawSection struct {
	NodeName                         *string `gcfg:"node-name"`
	Kubeconfig                       *string `gcfg:"kubeconfig"`
	Manifests                        *string `gcfg:"manifests"`
	ClusterSubnets                   *string `gcfg:"cluster-subnets"`
	V4JoinSubnet                     *string `gcfg:"v4-join-subnet"`
	Address                          *string `gcfg:"address"`
	ClientPrivkey                    *string `gcfg:"client-privkey"`
	ClientCert                       *string `gcfg:"client-cert"`
	ClientCacert                     *string `gcfg:"client-cacert"`
	OVSDB                            *string `gcfg:"ovs-db"`
	OVSRundir                        *string `gcfg:"ovs-rundir"`
	Bridge                           *string `gcfg:"bridge"`
	ConntrackZone                    *string `gcfg:"conntrack-zone"`
	EgressIPReachabilityTotalTimeout *string `gcfg:"egressip-reachability-total-timeout"`
	EgressIPNodeHealthcheckPort      *string `gcfg:"egressip-node-healthcheck-port"`
	EgressIPCheckInterval            *string `gcfg:"egressip-check-interval"`
	EnableEgressIP                   *string `gcfg:"enable-egress-ip"`
	EnableL2Announce                 *string `gcfg:"enable-l2-announce"`
	MetricsAddress                   *string `gcfg:"metrics-address"`
	EnablePprof                      *string `gcfg:"enable-pprof"`
}

// get returns the value of key, nil when the file does not set it.
func (s *rawSection) get(key string) *string {
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		if v.Type().Field(i).Tag.Get("gcfg") == key {
			return v.Field(i).Interface().(*string)
		}
	}
	return nil
}

// ParseClusterSubnets parses `--cluster-subnets`: comma-separated
// CIDR[/hostPrefix] entries such as "10.244.0.0/16/24,fd00:10:244::/48/64".
// The host prefix defaults to 24 for IPv4 and 64 for IPv6.
func ParseClusterSubnets(s string) ([]ClusterSubnet, error) {
	var out []ClusterSubnet
	for _, entry := range splitList(s) {
		cidr, host := entry, ""
		if strings.Count(entry, "/") == 2 {
			i := strings.LastIndex(entry, "/")
			cidr, host = entry[:i], entry[i+1:]
		}
		p, err := parseSubnet(cidr)
		if err != nil {
			return nil, fmt.Errorf("cluster subnet %q: %w", entry, err)
		}
		cs := ClusterSubnet{CIDR: p, HostPrefix: 24}
		if p.Addr().Is6() {
			cs.HostPrefix = 64
		}
		if host != "" {
			if cs.HostPrefix, err = parseUint(host, p.Bits(), p.Addr().BitLen()); err != nil {
				return nil, fmt.Errorf("cluster subnet %q: host prefix: %w", entry, err)
			}
		} else if cs.HostPrefix < p.Bits() {
			cs.HostPrefix = p.Bits()
		}
		out = append(out, cs)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cluster subnet")
	}
	return out, nil
}

// parseSubnet parses a CIDR that must be given in its network form.
func parseSubnet(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return p, err
	}
	if p != p.Masked() {
		return p, fmt.Errorf("%s has host bits set (did you mean %s?)", s, p.Masked())
	}
	return p, nil
}

func parseUint(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d out of range %d-%d", n, lo, hi)
	}
	return n, nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err == nil && d <= 0 {
		err = fmt.Errorf("%s is not positive", s)
	}
	return d, err
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
