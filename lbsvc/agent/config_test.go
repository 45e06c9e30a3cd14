package agent_test

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/lbsvc/agent"
)

// Args and RegisterFlags round-trip.
func TestConfigFlags(t *testing.T) {
	want := agent.Config{
		LBIP: netip.MustParsePrefix("172.18.0.18/16"), Gateway: netip.MustParseAddr("172.18.0.1"),
		Provider: "lb-svc-attachment.kube-system", AnnotationsFile: "/etc/podinfo/annotations",
		ClusterIP: netip.MustParseAddr("10.96.0.10"), PodGateway: netip.MustParseAddr("10.16.0.1"),
		Ports:    []agent.Port{{Protocol: "tcp", Port: 80}, {Protocol: "udp", Port: 53}},
		External: "macvlan0", Pod: agent.DefaultPod, Table: 200, ARPAttempts: agent.DefaultARPAttempts,
		ARPTimeout: 300 * time.Millisecond, Resync: agent.DefaultResync,
	}
	var got agent.Config
	fs := flag.NewFlagSet("lbsvc-agent", flag.ContinueOnError)
	got.RegisterFlags(fs)
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatalf("parse %q: %v", want.Args(), err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip of %q:\n got %+v\nwant %+v", want.Args(), got, want)
	}
}

func TestParsePort(t *testing.T) {
	for _, tt := range []struct {
		in, want, err string
	}{
		{"tcp/80", "tcp/80", ""},
		{"UDP/53", "udp/53", ""},
		{"sctp/9", "sctp/9", ""},
		{"icmp/1", "", "not tcp, udp or sctp"},
		{"tcp/0", "", "want <tcp|udp|sctp>/<1-65535>"},
		{"tcp/65536", "", "want"},
		{"80", "", "want"},
	} {
		p, err := agent.ParsePort(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParsePort(%q) = %v, %v; want error with %q", tt.in, p, err, tt.err)
			}
			continue
		}
		if err != nil || p.String() != tt.want {
			t.Errorf("ParsePort(%q) = %v, %v; want %s", tt.in, p, err, tt.want)
		}
	}
}

// Bad configurations are refused before anything is touched, with every
// reason at once.
func TestApplyBadConfig(t *testing.T) {
	dir := t.TempDir()
	partial := filepath.Join(dir, "partial")
	if err := os.WriteFile(partial, []byte(`p.kubernetes.io/ip_address="172.18.0.18"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("no equals sign\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := agent.Config{LBIP: netip.MustParsePrefix("172.18.0.18/24"), Gateway: netip.MustParseAddr("172.18.0.1"),
		ClusterIP: netip.MustParseAddr("10.96.0.10")}
	with := func(f func(*agent.Config)) agent.Config { c := ok; f(&c); return c }
	for _, tt := range []struct {
		name string
		cfg  agent.Config
		want []string
	}{
		{"empty", agent.Config{}, []string{"no LoadBalancer address", "no ClusterIP", "no gateway"}},
		{"families", with(func(c *agent.Config) { c.ClusterIP = netip.MustParseAddr("fd00::10") }), []string{"different families"}},
		{"gateway outside", with(func(c *agent.Config) { c.Gateway = netip.MustParseAddr("10.0.0.1") }), []string{"outside 172.18.0.0/24"}},
		{"reserved table", with(func(c *agent.Config) { c.Table = 254 }), []string{"table 254"}},
		{"duplicate port", with(func(c *agent.Config) {
			c.Ports = []agent.Port{{Protocol: "tcp", Port: 80}, {Protocol: "tcp", Port: 80}}
		}), []string{"listed twice"}},
		{"bad protocol", with(func(c *agent.Config) { c.Ports = []agent.Port{{Protocol: "icmp", Port: 80}} }), []string{"not tcp, udp or sctp"}},
		{"annotations without provider", agent.Config{AnnotationsFile: partial}, []string{"needs --provider"}},
		{"annotation missing", agent.Config{AnnotationsFile: partial, Provider: "p"}, []string{"no annotation p.kubernetes.io/cidr"}},
		{"annotations garbage", agent.Config{AnnotationsFile: garbage, Provider: "p"}, []string{`line 1: want key="value"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.Complete()
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Complete: %v; want an error with %q", err, w)
				}
			}
		})
	}
}

func ExampleConfig_Args() {
	cfg := agent.Config{
		Provider: "lb-svc-attachment.kube-system", AnnotationsFile: "/etc/podinfo/annotations",
		ClusterIP: netip.MustParseAddr("10.109.201.193"),
		Ports:     []agent.Port{{Protocol: "tcp", Port: 80}},
	}
	fmt.Println(strings.Join(cfg.Args(), " "))
	// Output:
	// --provider=lb-svc-attachment.kube-system --annotations-file=/etc/podinfo/annotations --cluster-ip=10.109.201.193 --port=tcp/80
}

// ParseAnnotations never panics, and what it accepts survives a
// re-rendering in the kubelet's format.
func FuzzParseAnnotations(f *testing.F) {
	f.Add([]byte("a=\"b\"\nc.kubernetes.io/ip_address=\"172.18.0.18\"\n"))
	f.Add([]byte("x=\"multi\\nline\"\n\n"))
	f.Add([]byte("broken"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := agent.ParseAnnotations(data)
		if err != nil {
			return
		}
		var b strings.Builder
		for k, v := range m {
			if strings.ContainsAny(k, "\n=") {
				return // such a key never comes from the kubelet
			}
			fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(v))
		}
		again, err := agent.ParseAnnotations([]byte(b.String()))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Errorf("re-rendered %q: %v, %v; want %v", b.String(), again, err, m)
		}
	})
}

// ParsePort never panics and round-trips through String.
func FuzzParsePort(f *testing.F) {
	for _, s := range []string{"tcp/80", "UDP/53", "sctp/65535", "x/1", "tcp/", "/80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := agent.ParsePort(s)
		if err != nil {
			return
		}
		if again, err := agent.ParsePort(p.String()); err != nil || again != p {
			t.Errorf("%q -> %v -> %v, %v", s, p, again, err)
		}
	})
}
