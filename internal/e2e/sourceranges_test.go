package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/testbed"
)

// setRanges replaces the Service's loadBalancerSourceRanges.
func setRanges(t *testing.T, e *Env, ns, name string, ranges ...string) {
	t.Helper()
	s, err := e.CS.CoreV1().Services(ns).Get(e.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.LoadBalancerSourceRanges = ranges
	if _, err := e.CS.CoreV1().Services(ns).Update(e.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update %s/%s ranges %v: %v", ns, name, ranges, err)
	}
}

// admits waits until the connections from each client in allowed to addr
// are answered and those from each in denied get nothing.
func admits(t *testing.T, e *Env, addr string, allowed, denied []*testbed.Netns) {
	t.Helper()
	e.Eventually(Timeout, "the ranges of "+addr, func() error {
		for _, ns := range allowed {
			if _, err := Reply(ns, addr, payload, 2*time.Second); err != nil {
				return fmt.Errorf("from %s (allowed): %v", ns.Name, err)
			}
		}
		for _, ns := range denied {
			if !refused(ns, addr) {
				return fmt.Errorf("from %s (outside the ranges): answered", ns.Name)
			}
		}
		return nil
	})
}

// TestLoadBalancerSourceRanges proves spec.loadBalancerSourceRanges over
// real packets, as kube-proxy enforces it: the external client
// (172.18.0.100) inside the ranges connects to the LoadBalancer VIP,
// the routed client (192.168.250.10) and a pod outside them get
// nothing, the NodePort of the same Service stays open to everyone, a
// change of the ranges swaps who gets through, and no ranges open the
// VIP again. ETP=Cluster and ETP=Local are filtered in OVN by the drop
// ACLs on the nodes' external and logical switches (checked in the NB);
// an ETP=Local VIP served by a host-network endpoint never enters OVN
// and is filtered by the bridge's flows.
func TestLoadBalancerSourceRanges(t *testing.T) {
	env := shared.With(t)
	env.CreatePod(ServerPod("shop", "ranges-client", w1, map[string]string{"app": "ranges-client"}, 8080))
	pod := env.WaitPod("shop", "ranges-client")
	client, remote := env.Client, env.RemoteClient
	for _, f := range []family{
		{"IPv4", false, testbed.ClusterClientIP + "/32", testbed.ClusterRemoteClientIP + "/32"},
		{"IPv6", true, testbed.ClusterClientIP6 + "/128", testbed.ClusterRemoteClientIP6 + "/128"},
	} {
		t.Run(f.name, func(t *testing.T) {
			for _, c := range []struct {
				name string
				etp  corev1.ServiceExternalTrafficPolicy
				node string // the node the clients route the VIP through
			}{{"lb-ranges-cluster", corev1.ServiceExternalTrafficPolicyCluster, w1},
				{"lb-ranges-local", corev1.ServiceExternalTrafficPolicyLocal, w2}} {
				t.Run(string(c.etp), func(t *testing.T) {
					e := env.With(t)
					name := c.name + f.suffix()
					s := f.service(service("shop", name, "web", corev1.ServiceTypeLoadBalancer, c.etp))
					s.Spec.LoadBalancerSourceRanges = []string{f.client}
					s = createService(t, e, s)
					vip := e.LoadBalancerIP("shop", name)
					addr := f.route(t, e, vip, c.node)

					admits(t, e, addr, []*testbed.Netns{client}, []*testbed.Netns{remote, pod.Netns})
					acls := e.OVN.Nbctl("acl-list", "ext_"+c.node)
					t.Logf("%s: ranges %s; ACLs of ext_%s:\n%s", name, f.client, c.node, acls)
					ip := map[bool]string{false: "ip4", true: "ip6"}[f.v6]
					if want := fmt.Sprintf("%s.dst == {%s} && tcp.dst == {80} && %s.src != {%s}", ip, vip, ip, f.client); !strings.Contains(acls, want) {
						t.Errorf("ext_%s has no ACL %q", c.node, want)
					}
					np := net.JoinHostPort(f.nodeIP(e, c.node).String(), fmt.Sprint(s.Spec.Ports[0].NodePort))
					if pod, _ := answers(t, e, remote, np); !strings.HasPrefix(pod, "web-") {
						t.Errorf("NodePort %s from the routed client: answered by %q", np, pod)
					}

					setRanges(t, e, "shop", name, f.remote)
					admits(t, e, addr, []*testbed.Netns{remote}, []*testbed.Netns{client, pod.Netns})
					setRanges(t, e, "shop", name)
					admits(t, e, addr, []*testbed.Netns{client, remote, pod.Netns}, nil)
					if acls := e.OVN.Nbctl("--bare", "--columns=_uuid", "find", "ACL", "external_ids:k8s.ovn.org/name=shop/"+name); acls != "" {
						t.Errorf("ACLs left after the ranges went: %s", acls)
					}
				})
			}

			t.Run("HostNetworkEndpoint", func(t *testing.T) {
				// An ETP=Local Service whose endpoint is w2's host (the test
				// serves on w2's address): its VIP goes from the bridge to the
				// host, never to OVN.
				e := env.With(t)
				name, target := "lb-ranges-host"+f.suffix(), int32(9080)
				if f.v6 {
					target++
				}
				n := e.Node(w2)
				if err := Serve(e.Context(), n.NS, "host-"+w2, int(target)); err != nil {
					t.Fatal(err)
				}
				s := f.service(service("shop", name, "", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal))
				s.Spec.Selector = nil
				s.Spec.Ports[0].TargetPort.IntVal = target
				s.Spec.LoadBalancerSourceRanges = []string{f.client}
				createService(t, e, s)
				writeHostSlice(t, e, "shop", name, w2, f.nodeIP(e, w2), target)
				vip := e.LoadBalancerIP("shop", name)
				addr := f.route(t, e, vip, w2)
				admits(t, e, addr, []*testbed.Netns{client}, []*testbed.Netns{remote})
				if got, _ := answers(t, e, client, addr); got != "host-"+w2 {
					t.Errorf("answered by %q, want the host-network endpoint host-%s", got, w2)
				}
				// The bridge did it: the allowed source's DNAT flow (111) and
				// the VIP's drop (110) counted packets.
				flows := n.Ofctl("dump-flows", testbed.ClusterBridge)
				src, _, _ := strings.Cut(f.client, "/")
				for _, want := range []string{"priority=111,", "_src=" + src + ",", "priority=110,"} {
					if !counted(flows, want, "nw_dst="+vip.String()) && !counted(flows, want, "ipv6_dst="+vip.String()) {
						t.Errorf("no flow with %q for %s counted packets:\n%s", want, vip, flows)
					}
				}
				setRanges(t, e, "shop", name, f.remote)
				admits(t, e, addr, []*testbed.Netns{remote}, []*testbed.Netns{client})
			})
		})
	}
}

// family is one IP family of the source ranges scenarios: the external
// client's and the routed client's ranges.
type family struct {
	name           string
	v6             bool
	client, remote string
}

func (f family) suffix() string {
	if f.v6 {
		return "6"
	}
	return ""
}

// service makes s single-stack of the family.
func (f family) service(s *corev1.Service) *corev1.Service {
	if f.v6 {
		return v6(s)
	}
	return s
}

func (f family) nodeIP(e *Env, node string) netip.Addr {
	if f.v6 {
		return e.Node(node).IP6
	}
	return e.Node(node).IP
}

// route routes vip through node from the external client and the
// router (the routed client's path) and returns vip's port 80 address.
func (f family) route(t *testing.T, e *Env, vip netip.Addr, node string) string {
	if f.v6 {
		via6(t, e, vip, node)
		e.Router.Run(t, "ip", "-6", "route", "replace", vip.String()+"/128", "via", e.Node(node).IP6.String())
	} else {
		via(t, e, vip, node)
		e.Router.Run(t, "ip", "route", "replace", vip.String()+"/32", "via", e.Node(node).IP.String())
	}
	return net.JoinHostPort(vip.String(), "80")
}

// writeHostSlice writes the EndpointSlice of a selector-less Service: one
// ready endpoint, node's host address ip on node, port target.
func writeHostSlice(t *testing.T, e *Env, ns, svc, node string, ip netip.Addr, target int32) {
	t.Helper()
	ready, proto, portName := true, corev1.ProtocolTCP, "http"
	at := discoveryv1.AddressTypeIPv4
	if ip.Is6() {
		at = discoveryv1.AddressTypeIPv6
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-host",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: at,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip.String()}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &target}},
	}
	if _, err := e.CS.DiscoveryV1().EndpointSlices(ns).Create(e.Context(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.CS.DiscoveryV1().EndpointSlices(ns).Delete(e.Context(), slice.Name, metav1.DeleteOptions{})
	})
}

// counted reports whether a flow of the dump containing every part has
// a non-zero n_packets.
func counted(dump string, parts ...string) bool {
	for _, l := range strings.Split(dump, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all && strings.Contains(l, "n_packets=") && !strings.Contains(l, "n_packets=0,") {
			return true
		}
	}
	return false
}
