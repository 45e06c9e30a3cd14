package helm

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/testbed"
)

const (
	// backendsNS holds the kubelet-run backends and their Services.
	backendsNS = "backends"
	// lbPool and lbPool6 are the chart's loadBalancer.pools entries the
	// Services' addresses come from.
	lbPool  = "172.18.0.160/28"
	lbPool6 = "fd00:18::160/124"
)

// family is what the steps need of an IP family.
type family struct {
	ip corev1.IPFamily
	// pool is the LB IPAM pool of the family.
	pool string
	// client is the external client's address of the family.
	client string
	// nodeIP is a node's address of the family.
	nodeIP func(*testbed.ClusterNode) netip.Addr
	// subnet is a node's pod subnet of the family.
	subnet func(*testbed.ClusterNode) netip.Prefix
}

var (
	ipv4 = family{corev1.IPv4Protocol, lbPool, testbed.ClusterClientIP,
		func(n *testbed.ClusterNode) netip.Addr { return n.IP }, func(n *testbed.ClusterNode) netip.Prefix { return n.Subnet }}
	ipv6 = family{corev1.IPv6Protocol, lbPool6, testbed.ClusterClientIP6,
		func(n *testbed.ClusterNode) netip.Addr { return n.IP6 }, func(n *testbed.ClusterNode) netip.Prefix { return n.Subnet6 }}
)

// podIP is p's address of the family, "" if none.
func (f family) podIP(p corev1.Pod) string {
	for _, a := range p.Status.PodIPs {
		if ip, err := netip.ParseAddr(a.IP); err == nil && ip.Is4() == (f.ip == corev1.IPv4Protocol) {
			return a.IP
		}
	}
	return ""
}

// kubeletBackends proves LoadBalancer Services, ETP=Cluster and
// ETP=Local, and their NodePorts with backends that are kubelet-run pods
// on OVN: a DaemonSet of /netserver (testbed.PauseImage) whose pods
// examples/ovncni plugs into br-int, their EndpointSlices written by
// kube-controller-manager, their addresses from ovnedge's LB IPAM (the
// chart's loadBalancer.pools). Through each node, the client's
// connections to the ETP=Local VIP and NodePort are answered by that
// node's pod only, which sees the client's address; ETP=Cluster ones are
// answered. Deleting the DaemonSet takes the pods' logical switch ports
// away (the plugin's DEL) and their endpoints out of the load balancers.
func (h *harness) kubeletBackends(t *testing.T) {
	begin := time.Now()
	if _, err := h.cs.CoreV1().Namespaces().Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: backendsNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cs.AppsV1().DaemonSets(backendsNS).Create(h.ctx, netserverDaemonSet(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := h.backendPods(t)
	h.measured("DaemonSet apply -> a pod Ready on OVN on every node", time.Since(begin))
	begin = time.Now()
	svcs := map[corev1.ServiceExternalTrafficPolicy]*corev1.Service{}
	for _, etp := range []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal} {
		svc, err := h.cs.CoreV1().Services(backendsNS).Create(h.ctx, lbService(etp), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svcs[etp] = svc
	}
	h.controllerSlices(t, svcs, pods, ipv4)
	h.measured("Services apply -> EndpointSlices by kube-controller-manager", time.Since(begin))
	for etp, svc := range svcs {
		svcs[etp] = h.lbAddress(t, svc.Name, ipv4)
	}
	h.measured("Services apply -> LB IPAM addresses in status", time.Since(begin))
	for _, n := range h.cl.Nodes {
		h.throughNode(t, n, svcs, pods, ipv4)
	}
	h.measured("Services apply -> answered through every node", time.Since(begin))
	h.singleStackIPv6(t, pods)
	h.sourceRanges(t, svcs)
	h.unidling(t, pods)
	h.l2Announce(t, svcs, pods)
	h.bgp(t, svcs, pods)
	h.egressService(t, svcs, pods)
	h.removeBackends(t, pods)
}

// sourceRanges restricts each Service's loadBalancerSourceRanges (the
// chart's default loadBalancer.sourceRanges=true) to a range without the
// client, which then gets nothing from the VIP while the NodePort still
// answers, then to the client's own address, which connects again, and
// clears them (the client's route is through the last node).
func (h *harness) sourceRanges(t *testing.T, svcs map[corev1.ServiceExternalTrafficPolicy]*corev1.Service) {
	n := h.cl.Nodes[len(h.cl.Nodes)-1]
	for etp, svc := range svcs {
		vip := svc.Status.LoadBalancer.Ingress[0].IP + ":80"
		np := fmt.Sprintf("%s:%d", n.IP, svc.Spec.Ports[0].NodePort)
		for _, c := range []struct {
			ranges []string
			open   bool
		}{{[]string{"192.0.2.0/24"}, false}, {[]string{testbed.ClusterClientIP + "/32"}, true}, {nil, true}} {
			begin := time.Now()
			h.setRanges(t, svc.Name, c.ranges)
			h.eventually(t, 30*time.Second, fmt.Sprintf("%s (ETP=%s) with ranges %v: open=%v", vip, etp, c.ranges, c.open), func() error {
				_, err := e2e.Reply(h.cl.Client, vip, 1000, 2*time.Second)
				if open := err == nil; open != c.open {
					return fmt.Errorf("open=%v (%v)", open, err)
				}
				return nil
			})
			t.Logf("%s (ETP=%s): ranges %v -> open=%v in %v", vip, etp, c.ranges, c.open, time.Since(begin).Round(time.Millisecond))
			if _, err := e2e.Reply(h.cl.Client, np, 1000, 3*time.Second); err != nil {
				t.Errorf("NodePort %s with ranges %v: %v (NodePorts are never restricted)", np, c.ranges, err)
			}
		}
	}
}

// unidling turns the chart's loadBalancer.emptyLBEvents on (helm upgrade
// --reuse-values: the leaders' --ovn-empty-lb-events and their RBAC,
// with the cluster's ovn.sbAddress): a kubelet-run pod's connection to
// an idled Service's ClusterIP becomes a NeedPods event, and the idler
// removing idled-at makes the leader set k8s.ovn.org/unidled-at; it
// turns it off again.
func (h *harness) unidling(t *testing.T, pods map[string]corev1.Pod) {
	h.setValueOf(t, "leader", "loadBalancer.emptyLBEvents=true")
	defer h.setValueOf(t, "leader", "loadBalancer.emptyLBEvents=false")
	svc := lbService(corev1.ServiceExternalTrafficPolicyCluster)
	svc.Name, svc.Spec.Type, svc.Spec.ExternalTrafficPolicy = "idle", corev1.ServiceTypeClusterIP, ""
	svc.Spec.Selector = map[string]string{"app": "nobody"}
	svc.Annotations = map[string]string{"idling.alpha.openshift.io/idled-at": time.Now().UTC().Format(time.RFC3339)}
	svc, err := h.cs.CoreV1().Services(backendsNS).Create(h.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.cs.CoreV1().Services(backendsNS).Delete(h.ctx, svc.Name, metav1.DeleteOptions{}) }()
	n := h.cl.Nodes[0]
	pod := pods[n.Name]
	ns := h.env.KubeNode(n.Name).PodNetns(t, pod.Status.ContainerStatuses[0].ContainerID)
	addr := svc.Spec.ClusterIP + ":80"
	begin := time.Now()
	h.eventually(t, 60*time.Second, "a NeedPods event after connections to the idled "+addr, func() error {
		if _, err := e2e.Reply(ns, addr, 10, 2*time.Second); err == nil {
			t.Fatalf("the idled Service %s answered", addr)
		}
		evs, err := h.cs.CoreV1().Events(backendsNS).List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=idle,reason=NeedPods"})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 || evs.Items[0].Message != "The service idle needs pods" {
			return fmt.Errorf("events %v", evs.Items)
		}
		return nil
	})
	h.measured("idled Service, pod connects -> NeedPods event", time.Since(begin))
	cur, err := h.cs.CoreV1().Services(backendsNS).Get(h.ctx, svc.Name, metav1.GetOptions{})
	if err == nil {
		delete(cur.Annotations, "idling.alpha.openshift.io/idled-at")
		_, err = h.cs.CoreV1().Services(backendsNS).Update(h.ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	h.eventually(t, 30*time.Second, "k8s.ovn.org/unidled-at after the idled-at annotation went", func() error {
		got, err := h.cs.CoreV1().Services(backendsNS).Get(h.ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Annotations["k8s.ovn.org/unidled-at"] == "" {
			return fmt.Errorf("annotations %v", got.Annotations)
		}
		return nil
	})
}

// setRanges replaces the Service's loadBalancerSourceRanges.
func (h *harness) setRanges(t *testing.T, name string, ranges []string) {
	t.Helper()
	s, err := h.cs.CoreV1().Services(backendsNS).Get(h.ctx, name, metav1.GetOptions{})
	if err == nil {
		s.Spec.LoadBalancerSourceRanges = ranges
		_, err = h.cs.CoreV1().Services(backendsNS).Update(h.ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("ranges %v of %s: %v", ranges, name, err)
	}
}

// l2Announce turns the chart's loadBalancer.l2Announce on (helm upgrade
// --reuse-values) and, with no route to the VIPs on the client, checks
// that exactly one node answers ARP for each VIP (for ETP=Local, a node
// running a backend) and that a connection is answered; it turns it off
// again, as the later steps expect.
func (h *harness) l2Announce(t *testing.T, svcs map[corev1.ServiceExternalTrafficPolicy]*corev1.Service, pods map[string]corev1.Pod) {
	h.setValue(t, "loadBalancer.l2Announce=true")
	defer h.setValue(t, "loadBalancer.l2Announce=false")
	for etp, svc := range svcs {
		vip := svc.Status.LoadBalancer.Ingress[0].IP
		_, _ = h.cl.Client.RunErr("ip", "route", "del", vip+"/32")
		_, _ = h.cl.Client.RunErr("ip", "neigh", "flush", "dev", "eth0")
		w, err := e2e.StartARPWatch(h.cl.Client, "eth0", netip.MustParseAddr(vip), 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		h.eventually(t, 30*time.Second, "one node answering ARP for "+vip, func() error {
			if owners := w.Owners(); len(owners) != 1 {
				return fmt.Errorf("answered by %v", owners)
			}
			return nil
		})
		time.Sleep(time.Second)
		w.Stop()
		owners := w.Owners()
		var owner string
		for _, n := range h.cl.Nodes {
			if len(owners) == 1 && strings.EqualFold(owners[0], n.MAC) {
				owner = n.Name
			}
		}
		if owner == "" {
			t.Fatalf("ARP for %s answered by %v, want one node", vip, owners)
		}
		var line string
		h.eventually(t, 30*time.Second, "a connection to "+vip+":80 without a route", func() (err error) {
			line, err = e2e.Reply(h.cl.Client, vip+":80", 1000, 3*time.Second)
			return err
		})
		pod, _, _ := strings.Cut(line, " ")
		if etp == corev1.ServiceExternalTrafficPolicyLocal && pod != pods[owner].Name {
			t.Errorf("%s (ETP=Local) announced by %s, answered by %s, want %s's %s", vip, owner, pod, owner, pods[owner].Name)
		}
		t.Logf("L2: %s (%s, ETP=%s) announced by %s alone (%d replies), answered by %s", vip, svc.Name, etp, owner, len(w.Replies()), pod)
	}
}

// setValue runs helm upgrade --reuse-values --set kv, a value of the node
// DaemonSet, and waits until every node pod is new and every pod Ready
// and Reconciled.
func (h *harness) setValue(t *testing.T, kv string) { h.setValueOf(t, "node", kv) }

// setValueOf is setValue for a value of component's pods ("node" or
// "leader").
func (h *harness) setValueOf(t *testing.T, component, kv string) {
	h.upgradeWith(t, component, "--set "+kv, "--set", kv)
}

// upgradeWith runs helm upgrade --reuse-values with args (what says
// them) and waits as setValue does. (--set-json key=[] empties a list:
// --set key=null keeps the reused value, --set key={} gives [""].)
func (h *harness) upgradeWith(t *testing.T, component, what string, args ...string) {
	old, err := h.pods(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	argv := append([]string{"upgrade", release, filepath.Join(h.root, "deploy", "helm", "ovnedge"), "--namespace", namespace,
		"--reuse-values"}, args...)
	out, err := h.runHelm(append(argv, "--wait", "--timeout", "120s")...)
	if err != nil {
		t.Fatalf("helm upgrade %s: %v\n%s%s", what, err, out, h.diagnose())
	}
	h.eventually(t, 90*time.Second, "every "+component+" pod replaced, every pod Ready and Reconciled after "+what, func() error {
		return h.everyPodReady(func(p *corev1.Pod) error {
			if p.Labels["app.kubernetes.io/component"] == component && slices.ContainsFunc(old, func(o corev1.Pod) bool { return o.UID == p.UID }) {
				return fmt.Errorf("pod %s not replaced yet", p.Name)
			}
			return nil
		})
	})
	h.measured("helm upgrade "+what+" -> "+component+" pods new and Ready", time.Since(begin))
}

// netserverDaemonSet is a pod on every node serving TCP 8080.
func netserverDaemonSet() *appsv1.DaemonSet {
	labels := map[string]string{"app": "netserver"}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(backendPort)}},
		PeriodSeconds: 1}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: backendsNS, Name: "netserver"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{Name: "server", Image: testbed.PauseImage, ImagePullPolicy: corev1.PullNever,
						Command: []string{"/netserver", fmt.Sprint(backendPort)}, ReadinessProbe: probe,
						Ports: []corev1.ContainerPort{{ContainerPort: backendPort, Protocol: corev1.ProtocolTCP}}}}}}}}
}

// lbService is a LoadBalancer Service of the netservers with policy etp.
func lbService(etp corev1.ServiceExternalTrafficPolicy) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: backendsNS, Name: "lb-" + strings.ToLower(string(etp))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: etp,
			Selector: map[string]string{"app": "netserver"},
			Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80,
				TargetPort: intstr.FromInt32(backendPort)}}}}
}

// backendPods waits until every node runs a Ready netserver pod with an
// address of each of its node's subnets, and returns them by node.
func (h *harness) backendPods(t *testing.T) map[string]corev1.Pod {
	byNode := map[string]corev1.Pod{}
	h.eventually(t, wait, "a Ready netserver pod on OVN on every node", func() error {
		list, err := h.cs.CoreV1().Pods(backendsNS).List(h.ctx, metav1.ListOptions{LabelSelector: "app=netserver"})
		if err != nil {
			return err
		}
		clear(byNode)
		for _, p := range list.Items {
			ip, err := netip.ParseAddr(p.Status.PodIP)
			if c := condition(&p, corev1.PodReady); err != nil || c == nil || c.Status != corev1.ConditionTrue {
				continue
			}
			ip6, _ := netip.ParseAddr(ipv6.podIP(p))
			if n := h.cl.Node(p.Spec.NodeName); n != nil && n.Subnet.Contains(ip) && n.Subnet6.Contains(ip6) {
				byNode[p.Spec.NodeName] = p
			}
		}
		if len(byNode) != len(h.cl.Nodes) {
			return fmt.Errorf("%d of %d nodes (pods: %s)", len(byNode), len(h.cl.Nodes), podSummary(list.Items))
		}
		return nil
	})
	for node, p := range byNode {
		t.Logf("kubelet-run backend %s on %s at %v (OVN port %s_%s)", p.Name, node, p.Status.PodIPs, p.Namespace, p.Name)
	}
	return byNode
}

// podSummary is each pod's name, node, phase and IP.
func podSummary(pods []corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		parts = append(parts, fmt.Sprintf("%s@%s %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP))
	}
	return strings.Join(parts, ", ")
}

// controllerSlices waits until kube-controller-manager's EndpointSlice
// controller lists every pod's address of family f, ready, for each
// Service.
func (h *harness) controllerSlices(t *testing.T, svcs map[corev1.ServiceExternalTrafficPolicy]*corev1.Service, pods map[string]corev1.Pod, f family) {
	var want []string
	for _, p := range pods {
		want = append(want, f.podIP(p))
	}
	slices.Sort(want)
	for _, svc := range svcs {
		h.eventually(t, wait, "EndpointSlices of "+svc.Name+" by kube-controller-manager", func() error {
			list, err := h.cs.DiscoveryV1().EndpointSlices(backendsNS).List(h.ctx, metav1.ListOptions{
				LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name + "," + discoveryv1.LabelManagedBy + "=endpointslice-controller.k8s.io"})
			if err != nil {
				return err
			}
			var got []string
			for _, s := range list.Items {
				for _, ep := range s.Endpoints {
					if ptr.Deref(ep.Conditions.Ready, false) {
						got = append(got, ep.Addresses...)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("ready endpoints %v, want %v", got, want)
			}
			return nil
		})
	}
}

// lbAddress waits until Service name has a LoadBalancer ingress address
// from f's pool and returns the Service.
func (h *harness) lbAddress(t *testing.T, name string, f family) *corev1.Service {
	var svc *corev1.Service
	pool := netip.MustParsePrefix(f.pool)
	h.eventually(t, wait, "a LoadBalancer address of "+f.pool+" for "+name, func() (err error) {
		if svc, err = h.cs.CoreV1().Services(backendsNS).Get(h.ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(in.IP); err == nil && pool.Contains(ip) {
				return nil
			}
		}
		return fmt.Errorf("status %+v", svc.Status.LoadBalancer)
	})
	return svc
}

// throughNode connects the client to each Service's VIP of family f
// through node n (its route to the VIPs via n) and to n's NodePorts,
// several times: ETP=Local ones must all be answered by n's pod, which
// sees the client's address, ETP=Cluster ones by some pod.
func (h *harness) throughNode(t *testing.T, n *testbed.ClusterNode, svcs map[corev1.ServiceExternalTrafficPolicy]*corev1.Service, pods map[string]corev1.Pod, f family) {
	for etp, svc := range svcs {
		vip := ingressIP(svc, f)
		h.cl.Client.Run(t, "ip", "route", "replace", vip, "via", f.nodeIP(n).String())
		targets := map[string]string{"VIP": net.JoinHostPort(vip, "80"), "NodePort": net.JoinHostPort(f.nodeIP(n).String(), fmt.Sprint(svc.Spec.Ports[0].NodePort))}
		for kind, addr := range targets {
			answered := map[string]int{}
			for i := range 6 {
				var line string
				h.eventually(t, 30*time.Second, fmt.Sprintf("%s %s (%s, ETP=%s) through %s", kind, addr, svc.Name, etp, n.Name), func() (err error) {
					line, err = e2e.Reply(h.cl.Client, addr, 1000, 3*time.Second)
					return err
				})
				pod, client, _ := strings.Cut(line, " ")
				answered[pod]++
				if etp != corev1.ServiceExternalTrafficPolicyLocal {
					continue
				}
				if pod != pods[n.Name].Name {
					t.Errorf("%s %s (ETP=Local) through %s, connection %d: answered by %s, want %s's %s", kind, addr, n.Name, i, pod, n.Name, pods[n.Name].Name)
				}
				if !strings.HasPrefix(client, net.JoinHostPort(f.client, "")) {
					t.Errorf("%s %s (ETP=Local) through %s: the pod saw %s, not the client %s", kind, addr, n.Name, client, f.client)
				}
			}
			t.Logf("%s %s (%s, ETP=%s) through %s: answered by %v", kind, addr, svc.Name, etp, n.Name, answered)
		}
	}
}

// ingressIP is svc's LoadBalancer ingress address of family f, "" if none.
func ingressIP(svc *corev1.Service, f family) string {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil && ip.Is4() == (f.ip == corev1.IPv4Protocol) {
			return in.IP
		}
	}
	return ""
}

// singleStackIPv6 proves IPv6 LoadBalancer Services (IPv6 single-stack,
// ETP=Cluster and ETP=Local, addresses from the chart's IPv6 pool) of the
// kubelet-run backends, their IPv6 addresses (examples/ovncni's
// dual-stack host-local ranges) in the controller's IPv6 EndpointSlices:
// throughNode over IPv6 through every node. The Services are deleted
// again.
func (h *harness) singleStackIPv6(t *testing.T, pods map[string]corev1.Pod) {
	begin := time.Now()
	svcs := map[corev1.ServiceExternalTrafficPolicy]*corev1.Service{}
	for _, etp := range []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal} {
		svc := lbService(etp)
		svc.Name += "-6"
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		svc, err := h.cs.CoreV1().Services(backendsNS).Create(h.ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.cs.CoreV1().Services(backendsNS).Delete(h.ctx, svc.Name, metav1.DeleteOptions{}) })
		svcs[etp] = svc
	}
	h.controllerSlices(t, svcs, pods, ipv6)
	for etp, svc := range svcs {
		svcs[etp] = h.lbAddress(t, svc.Name, ipv6)
	}
	for _, n := range h.cl.Nodes {
		h.throughNode(t, n, svcs, pods, ipv6)
	}
	h.measured("IPv6 Services apply -> answered through every node", time.Since(begin))
	h.ndpBypass(t, ingressIP(svcs[corev1.ServiceExternalTrafficPolicyCluster], ipv6))
	for _, svc := range svcs {
		_, _ = h.cl.Client.RunErr("ip", "route", "del", ingressIP(svc, ipv6))
		if err := h.cs.CoreV1().Services(backendsNS).Delete(h.ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// removeBackends deletes the DaemonSet and waits until the pods' logical
// switch ports are gone from the NB (examples/ovncni's DEL, run by the
// kubelet) and no NB load balancer lists their addresses.
func (h *harness) removeBackends(t *testing.T, pods map[string]corev1.Pod) {
	begin := time.Now()
	if err := h.cs.AppsV1().DaemonSets(backendsNS).Delete(h.ctx, "netserver", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually(t, wait, "the pods' ports and endpoints gone from the NB", func() error {
		out, err := h.cl.OVN.NbctlErr("--bare", "--columns=name", "list", "Logical_Switch_Port")
		if err == nil {
			var more string
			more, err = h.cl.OVN.NbctlErr("--bare", "--columns=vips", "list", "Load_Balancer")
			out += more
		}
		if err != nil {
			return err
		}
		for _, p := range pods {
			if strings.Contains(out, p.Namespace+"_"+p.Name) || strings.Contains(out, p.Status.PodIP+":") {
				return errors.New("pod " + p.Name + " still in the NB")
			}
		}
		return nil
	})
	h.measured("DaemonSet delete -> ports and endpoints gone", time.Since(begin))
}
