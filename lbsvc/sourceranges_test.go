package lbsvc_test

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// ranged is a LoadBalancer Service with source ranges and ingress IPs.
func ranged(ranges []string, ingress ...string) *corev1.Service {
	s := svc("web", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.10", "fd00:10:96::10"},
		port("http", corev1.ProtocolTCP, 80, 30080, "8080"), port("https", corev1.ProtocolTCP, 443, 30443, "8443"),
		port("dns", corev1.ProtocolUDP, 53, 30053, "53"))
	s.Spec.LoadBalancerSourceRanges = ranges
	for _, ip := range ingress {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

// Firewalls reads the field as kube-proxy does: LoadBalancer ingress IPs
// only, each limited to its family's ranges (trimmed, masked); a family
// without ranges, ExternalIPs, proxy-mode ingress and other Service
// types are not restricted; an entry that is not a CIDR is an event.
func TestFirewalls(t *testing.T) {
	v4, v6 := netip.MustParseAddr("172.18.0.200"), netip.MustParseAddr("fd00:18::200")
	proxy := corev1.LoadBalancerIPModeProxy
	for _, c := range []struct {
		name   string
		svc    *corev1.Service
		want   []lbsvc.Firewall
		events []string
	}{
		{"no ranges", ranged(nil, "172.18.0.200"), nil, nil},
		{"both families", ranged([]string{"192.168.1.0/24", " 10.1.0.0/16 ", "fd00:1::/64"}, "fd00:18::200", "172.18.0.200"),
			[]lbsvc.Firewall{{v4, prefixes("192.168.1.0/24", "10.1.0.0/16")}, {v6, prefixes("fd00:1::/64")}}, nil},
		{"IPv4 ranges only: the IPv6 VIP is open", ranged([]string{"192.168.1.10/24"}, "172.18.0.200", "fd00:18::200"),
			[]lbsvc.Firewall{{v4, prefixes("192.168.1.0/24")}}, nil},
		{"legacy leading zeros, as the API server accepted them", ranged([]string{"010.001.0.0/16"}, "172.18.0.200"),
			[]lbsvc.Firewall{{v4, prefixes("10.1.0.0/16")}}, nil},
		{"invalid entry", ranged([]string{"192.168.1.0/33", "10.0.0.0/8"}, "172.18.0.200"),
			[]lbsvc.Firewall{{v4, prefixes("10.0.0.0/8")}}, []string{`"192.168.1.0/33" is not a CIDR`}},
		{"proxy mode", func() *corev1.Service {
			s := ranged([]string{"10.0.0.0/8"}, "172.18.0.200")
			s.Status.LoadBalancer.Ingress[0].IPMode = &proxy
			return s
		}(), nil, nil},
		{"ExternalIPs are not restricted", func() *corev1.Service {
			s := ranged([]string{"10.0.0.0/8"})
			s.Spec.ExternalIPs = []string{"172.18.0.150"}
			return s
		}(), nil, nil},
		{"not a LoadBalancer", func() *corev1.Service {
			s := ranged([]string{"10.0.0.0/8"}, "172.18.0.200")
			s.Spec.Type = corev1.ServiceTypeNodePort
			return s
		}(), nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, events := lbsvc.Firewalls(c.svc)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Firewalls = %v, want %v", got, c.want)
			}
			if len(events) != len(c.events) {
				t.Fatalf("events %v, want %d", events, len(c.events))
			}
			for i, e := range events {
				if e.Reason != lbsvc.ReasonInvalidSourceRange || !strings.Contains(e.Message, c.events[i]) {
					t.Errorf("event %d: %s %q, want %s containing %q", i, e.Reason, e.Message, lbsvc.ReasonInvalidSourceRange, c.events[i])
				}
			}
		})
	}
}

// With Options.SourceRanges a restricted Service's owner also holds one
// drop ACL per protocol and family on every node's external and logical
// switch; its load balancers are those without it.
func TestSourceRangeACLs(t *testing.T) {
	s := ranged([]string{"192.168.1.0/24", "fd00:1::/64"}, "172.18.0.200", "fd00:18::200")
	in := lbsvc.Input{Services: []*corev1.Service{s}, Nodes: nodes()}
	off, _ := lbsvc.Build(in, lbsvc.Options{})
	on, _ := lbsvc.Build(in, lbsvc.Options{SourceRanges: true})
	o := lbsvc.ServiceOwner("default", "web")
	if len(off[o].ACLs) != 0 {
		t.Errorf("without SourceRanges: ACLs %v", off[o].ACLs)
	}
	withoutACLs := on[o]
	withoutACLs.ACLs = nil
	if !withoutACLs.Equal(off[o]) {
		t.Errorf("the load balancers differ with SourceRanges")
	}
	switches := []string{"ext_node1", "ext_node2", "node1", "node2"}
	acl := func(match, key string) ovsdbnb.ACL {
		return ovsdbnb.ACL{Priority: lbsvc.SourceRangeACLPriority, Direction: "from-lport", Action: "drop", Name: "lb-src:default/web",
			Match: match, Switches: switches, ExternalIDs: map[string]string{
				ovsdbnb.KeyOwnerController: "ovnedge", ovsdbnb.KeyOwnerType: "LoadBalancerSourceRanges",
				ovsdbnb.KeyName: "default/web", ovsdbnb.KeyID: "ovnedge:LoadBalancerSourceRanges:default/web:" + key}}
	}
	want := []ovsdbnb.ACL{
		acl("ip4.dst == {172.18.0.200} && tcp.dst == {80, 443} && ip4.src != {192.168.1.0/24}", "tcp:IPv4"),
		acl("ip6.dst == {fd00:18::200} && tcp.dst == {80, 443} && ip6.src != {fd00:1::/64}", "tcp:IPv6"),
		acl("ip4.dst == {172.18.0.200} && udp.dst == {53} && ip4.src != {192.168.1.0/24}", "udp:IPv4"),
		acl("ip6.dst == {fd00:18::200} && udp.dst == {53} && ip6.src != {fd00:1::/64}", "udp:IPv6"),
	}
	if got := on[o].ACLs; !reflect.DeepEqual(got, want) {
		t.Errorf("ACLs:\n got %+v\nwant %+v", got, want)
	}
	for _, a := range on[o].ACLs {
		if err := ovsdbnb.CheckMatch(a.Match); err != nil {
			t.Errorf("match %q: %v", a.Match, err)
		}
	}
}
