package lbsvc_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/arp"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest/bridge"
)

// brEx is the example node's bridge (breth0, uplink eth0 at ofport 1)
// running the base flows and the bypass of every VIP of cluster().
func brEx(t *testing.T) (*bridge.Bridge, *ovsflow.Program) {
	t.Helper()
	br := bridge.New(t, bridge.Options{Bridge: brextest.Bridge, Node: brextest.Node, Uplink: brextest.Uplink,
		UplinkOFPort: brextest.UplinkOFPort, PatchOFPort: brextest.PatchOFPort})
	p := &ovsflow.Program{}
	base, err := brex.BaseFlows(brextest.Base())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Set("base", base); err != nil {
		t.Fatal(err)
	}
	syncBypass(t, br, p, cluster().Services)
	return br, p
}

// syncBypass makes the Services' bypass owners of p current, as a node
// does when Services come and go, and installs p.
func syncBypass(t *testing.T, br *bridge.Bridge, p *ovsflow.Program, svcs []*corev1.Service) {
	t.Helper()
	bypass, err := lbsvc.BypassFlows(brex.Bypass{Uplink: brextest.Uplink}, svcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, owner := range p.Owners() {
		if _, ok := bypass[owner]; !ok && strings.HasPrefix(owner, "service/") {
			p.Delete(owner)
		}
	}
	for owner, flows := range bypass {
		if err := p.Set(owner, flows); err != nil {
			t.Fatal(err)
		}
	}
	br.Install(p)
}

// bypassed reports whether the ARP request (NS) for vip from the uplink
// takes the bypass to LOCAL.
func bypassed(br *bridge.Bridge, vip string) (bool, string) {
	flow := "in_port=1,arp,arp_op=1,arp_tpa=" + vip
	if strings.Contains(vip, ":") {
		flow = "in_port=1,icmp6,icmpv6_type=135,icmpv6_code=0,nd_target=" + vip
	}
	tr := br.Trace(flow)
	return len(tr.Rules) > 0 && strings.Contains(tr.Rules[0], "priority 110") && strings.Contains(tr.Output, "\n    LOCAL\n"), tr.Output
}

// ARP (NDP) for every VIP from the uplink goes to LOCAL; when a Service
// goes, so does the bypass of its VIPs.
func TestBrExBypassTrace(t *testing.T) {
	br, p := brEx(t)
	for _, vip := range []string{"172.18.0.50", "172.18.0.60", "172.18.0.70", "2001:db8::70"} {
		if ok, out := bypassed(br, vip); !ok {
			t.Errorf("%s: not the bypass to LOCAL:\n%s", vip, out)
		}
	}
	if ok, _ := bypassed(br, "172.18.0.77"); ok {
		t.Errorf("ARP for a non-VIP took the bypass")
	}
	// lb-cluster (172.18.0.50, .60) is deleted.
	svcs := slices.DeleteFunc(cluster().Services, func(s *corev1.Service) bool { return s.Name == "lb-cluster" })
	syncBypass(t, br, p, svcs)
	for vip, want := range map[string]bool{"172.18.0.50": false, "172.18.0.60": false, "172.18.0.70": true} {
		if ok, out := bypassed(br, vip); ok != want {
			t.Errorf("after deleting lb-cluster, %s bypassed: %v, want %v\n%s", vip, ok, want, out)
		}
	}
}

// startResponder runs an arp.Responder on the bridge's LOCAL interface,
// inside the bridge's namespace, until the test ends.
func startResponder(t *testing.T, br *bridge.Bridge) *arp.Responder {
	t.Helper()
	r, err := arp.New(arp.Config{Interface: br.Bridge, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		h, err := netns.GetFromName(br.NS)
		if err == nil {
			err = netns.Set(h)
			h.Close()
		}
		if err != nil {
			done <- err
			return
		}
		done <- r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("responder: %v", err)
		}
	})
	return r
}

var arpingReplies = regexp.MustCompile(`Received (\d+) response`)

// arping sends two requests for vip from the external host and returns
// the number of replies.
func arping(t *testing.T, br *bridge.Bridge, vip netip.Addr) int {
	t.Helper()
	out, _ := br.ExecErr(br.ExtNS, "arping", "-c", "2", "-w", "2", "-I", "eth0", vip.String())
	m := arpingReplies.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("arping %s: %s", vip, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// L2 mode: the bridge plays each node in turn, its responder given the
// VIPs VIPOwners gives the node; summed over the nodes, every VIP of
// L2VIPs gets exactly one node's replies, from the node VIPOwners names.
func TestL2ModeOneNodeAnswers(t *testing.T) {
	in := cluster()
	healthy := []string{"node1", "node2"}
	br, _ := brEx(t)
	r := startResponder(t, br)
	vips := lbsvc.L2VIPs(in.Services, in.EndpointSlices, br.Bridge)
	owners := lbsvc.VIPOwners(in.Services, in.EndpointSlices, healthy)
	answered := map[netip.Addr][]string{}
	for _, node := range healthy {
		// What the node's L2 writer does: its own VIPs to the responder.
		if err := r.SetAddresses(owners[node]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the responder picks up its addresses
		for _, v := range vips {
			if !v.Addr.Is4() {
				continue
			}
			switch n := arping(t, br, v.Addr); {
			case n == 0:
			case n <= 2:
				answered[v.Addr] = append(answered[v.Addr], node)
			default:
				t.Errorf("%s as %s: %d replies to 2 requests", v.Addr, node, n)
			}
		}
	}
	for _, v := range vips {
		if !v.Addr.Is4() {
			continue
		}
		want := ""
		for node, owned := range owners {
			for _, a := range owned {
				if a == v.Addr {
					want = node
				}
			}
		}
		if got := answered[v.Addr]; len(got) != 1 || got[0] != want {
			t.Errorf("VIP %s answered by %v, want exactly %q", v.Addr, got, want)
		}
	}
	t.Logf("owners: %v", fmt.Sprint(owners))
}

// MetalLB underlay mode: on the provider bridge, VIP traffic from the
// underlay NIC is steered to the router MAC and into OVN through the
// patch port; other traffic is not.
func TestUnderlaySteeringTrace(t *testing.T) {
	pool, err := ipam.NewPool("underlay-subnet", "172.18.0.0/24", []string{"172.18.0.240..172.18.0.250"})
	if err != nil {
		t.Fatal(err)
	}
	routerMAC := net.HardwareAddr{0x0a, 0x58, 0xac, 0x12, 0x00, 0x01}
	opts := lbsvc.Options{PreferLocal: true, Underlay: []lbsvc.UnderlaySubnet{{Subnet: pool, EnableExternalLBAddress: true, RouterMAC: routerMAC}}}
	s := svc("nginx-lb", corev1.ServiceTypeLoadBalancer, []string{"10.96.0.80"},
		port("http", corev1.ProtocolTCP, 80, 0, "80"), port("dns", corev1.ProtocolUDP, 53, 0, "53"))
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.245"}}
	flows, missing, events, err := lbsvc.SteeringFlows(lbsvc.Steering{NIC: brextest.Uplink, Patch: brextest.Patch}, s, opts)
	if err != nil || len(flows) != 2 || len(missing)+len(events) != 0 {
		t.Fatalf("SteeringFlows: %d flows, missing %v, events %v, %v", len(flows), missing, events, err)
	}
	br := bridge.New(t, bridge.Options{Bridge: brextest.Bridge, Node: brextest.Node, Uplink: brextest.Uplink,
		UplinkOFPort: brextest.UplinkOFPort, PatchOFPort: brextest.PatchOFPort})
	var p ovsflow.Program
	base, err := brex.BaseFlows(brextest.Base())
	if err == nil {
		err = p.Set("base", base)
	}
	if err == nil {
		err = p.Set(brex.Service{Namespace: s.Namespace, Name: s.Name}.Owner(), flows)
	}
	if err != nil {
		t.Fatal(err)
	}
	br.Install(&p)
	for _, tt := range []struct {
		flow    string
		steered bool
	}{
		{"in_port=1,tcp,nw_src=192.0.2.9,nw_dst=172.18.0.245,tp_src=40000,tp_dst=80", true},
		{"in_port=1,udp,nw_src=192.0.2.9,nw_dst=172.18.0.245,udp_src=40000,udp_dst=53", true},
		{"in_port=1,tcp,nw_src=192.0.2.9,nw_dst=172.18.0.245,tp_src=40000,tp_dst=443", false},
		{"in_port=1,tcp,nw_src=192.0.2.9,nw_dst=172.18.0.9,tp_src=40000,tp_dst=80", false},
	} {
		tr := br.Trace(tt.flow)
		got := len(tr.Rules) > 0 && strings.Contains(tr.Rules[0], "priority 10000") &&
			strings.Contains(tr.Output, "set_field:"+routerMAC.String()+"->eth_dst") && strings.Contains(tr.Output, "output:2")
		if got != tt.steered {
			t.Errorf("%s: steered %v, want %v\n%s", tt.flow, got, tt.steered, tr.Output)
		}
	}
}
