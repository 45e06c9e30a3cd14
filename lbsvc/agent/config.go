package agent

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultExternal    = "net1"
	DefaultPod         = "eth0"
	DefaultTable       = 100
	DefaultARPAttempts = 5
	DefaultARPTimeout  = time.Second
	DefaultResync      = 30 * time.Second
)

// Port is one service port forwarded to the ClusterIP.
type Port struct {
	// Protocol is "tcp", "udp" or "sctp".
	Protocol string
	Port     uint16
}

// String renders "tcp/80", the form ParsePort reads.
func (p Port) String() string { return p.Protocol + "/" + strconv.Itoa(int(p.Port)) }

// ParsePort parses "tcp/80" (also "TCP/80", "udp/53", "sctp/9").
func ParsePort(s string) (Port, error) {
	proto, num, ok := strings.Cut(s, "/")
	proto = strings.ToLower(proto)
	n, err := strconv.ParseUint(num, 10, 16)
	if !ok || err != nil || n == 0 {
		return Port{}, fmt.Errorf("port %q: want <tcp|udp|sctp>/<1-65535>", s)
	}
	if proto != "tcp" && proto != "udp" && proto != "sctp" {
		return Port{}, fmt.Errorf("port %q: protocol %q is not tcp, udp or sctp", s, proto)
	}
	return Port{Protocol: proto, Port: uint16(n)}, nil
}

// Config is what the agent programs. Zero fields take the defaults.
type Config struct {
	// LBIP is net1's address with the subnet's prefix length, e.g.
	// 172.18.0.18/16. When unset it is read from AnnotationsFile.
	LBIP netip.Prefix
	// Gateway is the subnet gateway on net1, e.g. 172.18.0.1: table
	// 100's default route and the address the ARP check asks for. When
	// unset it is read from AnnotationsFile.
	Gateway netip.Addr
	// Provider and AnnotationsFile locate Kube-OVN's pod annotations
	// <Provider>.kubernetes.io/ip_address, .../cidr and .../gateway in a
	// downward-API annotations file (key="value" lines).
	Provider, AnnotationsFile string
	// ClusterIP is the Service's ClusterIP the ports are DNATed to.
	ClusterIP netip.Addr
	// PodGateway is eth0's gateway, the next hop to the ClusterIP; when
	// unset, the gateway of the main table's default route via Pod.
	PodGateway netip.Addr
	// Ports are the service ports; each is DNATed to ClusterIP:port.
	Ports []Port
	// External and Pod are the interfaces (DefaultExternal, DefaultPod).
	External, Pod string
	// Table is the routing table of the two rules (DefaultTable).
	Table int
	// ARPAttempts bounds the gateway check (DefaultARPAttempts), each
	// attempt waiting ARPTimeout (DefaultARPTimeout) for the answer.
	ARPAttempts int
	ARPTimeout  time.Duration
	// Resync is how often Run re-applies (DefaultResync).
	Resync time.Duration
	// Logger receives the agent's logs (slog.Default() when nil).
	Logger *slog.Logger
}

// ErrNotAttached is wrapped by the error of a Config whose annotations
// file lacks the provider's address annotations: Kube-OVN has not
// attached the pod yet, or the kubelet has not refreshed the file. Run
// waits for them.
var ErrNotAttached = errors.New("not attached by Kube-OVN yet")

// portsFlag is the repeatable --port flag.
type portsFlag struct{ ports *[]Port }

func (f portsFlag) String() string {
	if f.ports == nil {
		return ""
	}
	s := make([]string, len(*f.ports))
	for i, p := range *f.ports {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (f portsFlag) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		p, err := ParsePort(strings.TrimSpace(part))
		if err != nil {
			return err
		}
		*f.ports = append(*f.ports, p)
	}
	return nil
}

// RegisterFlags defines the Config's flags on fs; Args renders them.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.TextVar(&c.LBIP, "lb-ip", netip.Prefix{}, "LoadBalancer address of the external interface with the subnet length, e.g. 172.18.0.18/16")
	fs.TextVar(&c.Gateway, "gateway", netip.Addr{}, "subnet gateway on the external interface")
	fs.StringVar(&c.Provider, "provider", "", "Kube-OVN attachment provider <nad>.<namespace> whose pod annotations give --lb-ip and --gateway")
	fs.StringVar(&c.AnnotationsFile, "annotations-file", "", "downward-API file of the pod's annotations")
	fs.TextVar(&c.ClusterIP, "cluster-ip", netip.Addr{}, "the Service's ClusterIP")
	fs.TextVar(&c.PodGateway, "pod-gateway", netip.Addr{}, "gateway of the pod interface (default: the main table's default route)")
	fs.Var(portsFlag{&c.Ports}, "port", "service port <tcp|udp|sctp>/<port>, repeatable or comma-separated")
	fs.StringVar(&c.External, "external-interface", DefaultExternal, "interface on the external network")
	fs.StringVar(&c.Pod, "pod-interface", DefaultPod, "the pod's cluster interface")
	fs.IntVar(&c.Table, "table", DefaultTable, "routing table of the policy rules")
	fs.IntVar(&c.ARPAttempts, "arp-attempts", DefaultARPAttempts, "attempts of the gateway ARP check")
	fs.DurationVar(&c.ARPTimeout, "arp-timeout", DefaultARPTimeout, "wait for each gateway ARP answer")
	fs.DurationVar(&c.Resync, "resync", DefaultResync, "interval between re-applications")
}

// Args renders the set fields as the flags RegisterFlags defines.
func (c Config) Args() []string {
	var args []string
	add := func(name, v string) { args = append(args, "--"+name+"="+v) }
	if c.LBIP.IsValid() {
		add("lb-ip", c.LBIP.String())
	}
	if c.Gateway.IsValid() {
		add("gateway", c.Gateway.String())
	}
	if c.Provider != "" {
		add("provider", c.Provider)
	}
	if c.AnnotationsFile != "" {
		add("annotations-file", c.AnnotationsFile)
	}
	if c.ClusterIP.IsValid() {
		add("cluster-ip", c.ClusterIP.String())
	}
	if c.PodGateway.IsValid() {
		add("pod-gateway", c.PodGateway.String())
	}
	for _, p := range c.Ports {
		add("port", p.String())
	}
	for _, s := range []struct{ name, v, def string }{{"external-interface", c.External, DefaultExternal}, {"pod-interface", c.Pod, DefaultPod}} {
		if s.v != "" && s.v != s.def {
			add(s.name, s.v)
		}
	}
	for _, n := range []struct {
		name   string
		v, def int
	}{{"table", c.Table, DefaultTable}, {"arp-attempts", c.ARPAttempts, DefaultARPAttempts}} {
		if n.v != 0 && n.v != n.def {
			add(n.name, strconv.Itoa(n.v))
		}
	}
	for _, d := range []struct {
		name   string
		v, def time.Duration
	}{{"arp-timeout", c.ARPTimeout, DefaultARPTimeout}, {"resync", c.Resync, DefaultResync}} {
		if d.v != 0 && d.v != d.def {
			add(d.name, d.v.String())
		}
	}
	return args
}

// Complete returns c with defaults filled in, the address and gateway
// read from the annotations file when unset, and checked.
func (c Config) Complete() (Config, error) {
	c.External = cmp.Or(c.External, DefaultExternal)
	c.Pod = cmp.Or(c.Pod, DefaultPod)
	c.Table = cmp.Or(c.Table, DefaultTable)
	c.ARPAttempts = cmp.Or(c.ARPAttempts, DefaultARPAttempts)
	c.ARPTimeout = cmp.Or(c.ARPTimeout, DefaultARPTimeout)
	c.Resync = cmp.Or(c.Resync, DefaultResync)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if (!c.LBIP.IsValid() || !c.Gateway.IsValid()) && c.AnnotationsFile != "" {
		if err := c.fromAnnotations(); err != nil {
			return c, err
		}
	}
	var errs []error
	if !c.LBIP.IsValid() {
		errs = append(errs, errors.New("no LoadBalancer address (--lb-ip, or --provider with --annotations-file)"))
	}
	if !c.ClusterIP.IsValid() {
		errs = append(errs, errors.New("no ClusterIP (--cluster-ip)"))
	} else if c.LBIP.IsValid() && c.LBIP.Addr().Is4() != c.ClusterIP.Unmap().Is4() {
		errs = append(errs, fmt.Errorf("LoadBalancer address %s and ClusterIP %s are of different families", c.LBIP, c.ClusterIP))
	}
	if !c.Gateway.IsValid() {
		errs = append(errs, errors.New("no gateway (--gateway, or --provider with --annotations-file)"))
	} else if c.LBIP.IsValid() && !c.LBIP.Masked().Contains(c.Gateway) {
		errs = append(errs, fmt.Errorf("gateway %s is outside %s", c.Gateway, c.LBIP.Masked()))
	}
	if c.PodGateway.IsValid() && c.ClusterIP.IsValid() && c.PodGateway.Is4() != c.ClusterIP.Is4() {
		errs = append(errs, fmt.Errorf("pod gateway %s and ClusterIP %s are of different families", c.PodGateway, c.ClusterIP))
	}
	if c.Table <= 0 || c.Table == 253 || c.Table == 254 || c.Table == 255 {
		errs = append(errs, fmt.Errorf("table %d is reserved or invalid", c.Table))
	}
	if c.ARPAttempts < 0 || c.ARPTimeout < 0 || c.Resync < 0 {
		errs = append(errs, errors.New("negative ARP attempts, ARP timeout or resync"))
	}
	seen := map[Port]bool{}
	for _, p := range c.Ports {
		if _, err := ParsePort(p.String()); err != nil {
			errs = append(errs, err)
		}
		if seen[p] {
			errs = append(errs, fmt.Errorf("port %s listed twice", p))
		}
		seen[p] = true
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("agent config: %w", err)
	}
	c.ClusterIP = c.ClusterIP.Unmap()
	c.Ports = slices.Clone(c.Ports)
	return c, nil
}

// fromAnnotations fills LBIP and Gateway from Kube-OVN's pod annotations.
func (c *Config) fromAnnotations() error {
	if c.Provider == "" {
		return errors.New("agent config: --annotations-file needs --provider")
	}
	data, err := os.ReadFile(c.AnnotationsFile)
	if err != nil {
		return fmt.Errorf("agent config: %w", err)
	}
	ann, err := ParseAnnotations(data)
	if err != nil {
		return fmt.Errorf("agent config: %s: %w", c.AnnotationsFile, err)
	}
	get := func(key string) (string, error) {
		k := c.Provider + ".kubernetes.io/" + key
		v, ok := ann[k]
		if !ok {
			return "", fmt.Errorf("agent config: %s has no annotation %s: %w", c.AnnotationsFile, k, ErrNotAttached)
		}
		return v, nil
	}
	if !c.LBIP.IsValid() {
		ipS, err := get("ip_address")
		if err != nil {
			return err
		}
		cidrS, err := get("cidr")
		if err != nil {
			return err
		}
		// Dual-stack annotations are comma-separated; the first is used.
		ip, err1 := netip.ParseAddr(strings.Split(ipS, ",")[0])
		cidr, err2 := netip.ParsePrefix(strings.Split(cidrS, ",")[0])
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("agent config: pod annotations of %s: %w", c.Provider, err)
		}
		c.LBIP = netip.PrefixFrom(ip, cidr.Bits())
	}
	if !c.Gateway.IsValid() {
		gwS, err := get("gateway")
		if err != nil {
			return err
		}
		gw, err := netip.ParseAddr(strings.Split(gwS, ",")[0])
		if err != nil {
			return fmt.Errorf("agent config: pod annotations of %s: %w", c.Provider, err)
		}
		c.Gateway = gw
	}
	return nil
}

// ParseAnnotations reads a downward-API annotations file: one
// key="value" per line, the value Go-quoted.
func ParseAnnotations(data []byte) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, q, ok := strings.Cut(line, "=")
		v, err := strconv.Unquote(q)
		if !ok || err != nil || k == "" {
			return nil, fmt.Errorf("line %d: want key=\"value\", got %q", i+1, line)
		}
		out[k] = v
	}
	return out, nil
}
