package helm

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/internal/e2e"
	"github.com/ovnedge/ovnedge/testbed"
)

const (
	// the EgressIP of the Upgrade step, its namespace and sender pod
	egressName, egressNS, senderName = "upgrade", "egress", "sender"
	egressPort                       = 9100
	egressPort6                      = 9007
	// the Service's second port, for the long-lived connection (Serve's
	// connections end after 30 s)
	longPort, longTargetPort = 81, 8081
	// probeEvery is the interval of the ingress probes.
	probeEvery = 20 * time.Millisecond
)

var egressIP = netip.MustParseAddr("172.18.0.44")

// upgrade runs `helm upgrade --reuse-values --set image.tag=<new>
// --wait` to a second tag of the same image while an external client
// opens a connection to the ExternalIP every 20 ms and keeps another one
// exchanging data, and a pod sends a UDP packet every 10 ms through an
// EgressIP; it measures the rollout, the connections that failed, the
// egress stream's loss window, and checks that no flow or NB row was
// churned.
func (h *harness) upgrade(t *testing.T) {
	egressNode := h.cl.Nodes[len(h.cl.Nodes)-1]
	senderNode := h.cl.Nodes[0]
	if h.leaders > 1 {
		h.handOff(t, egressNode.Name)
	}
	stream := h.egress(t, senderNode, egressNode)
	defer stream.Stop()
	h.longService(t)

	// Steady state: the egress rows written, the stream leaving with the
	// egress IP; then what the upgrade must not touch.
	time.Sleep(time.Second)
	k := h.keep(t)
	if len(vipFlows(k.before.flows[h.cl.Nodes[0].Name])) == 0 || !slices.ContainsFunc(k.before.rows, func(r string) bool {
		return strings.Contains(r, egressIP.String())
	}) {
		t.Fatalf("nothing to keep: flows %v, NB rows %v", k.before.flows, k.before.rows)
	}

	// The new tag: the same image, tagged anew in every node's containerd
	// (pullPolicy Never keeps it local).
	newTag := h.tag + "-upgrade"
	for _, n := range h.nodes {
		if out, err := exec.Command("ctr", "-n", "k8s.io", "--address", n.Socket, "images", "tag", "--force",
			imageRepo+":"+h.tag, imageRepo+":"+newTag).CombinedOutput(); err != nil {
			t.Fatalf("ctr images tag on %s: %v: %s", n.Name, err, out)
		}
	}
	oldPods, err := h.pods(h.ctx)
	if err != nil {
		t.Fatal(err)
	}

	ctx, stop := context.WithCancel(h.ctx)
	short := probe(ctx, func() error {
		_, err := e2e.Reply(h.cl.Client, vip.String()+":80", 1000, 2*time.Second)
		return err
	})
	long := probe(ctx, h.longConn())
	defer stop()
	time.Sleep(time.Second) // the probes running before the upgrade

	begin := time.Now()
	out, err := h.runHelm("upgrade", release, filepath.Join(h.root, "deploy", "helm", "ovnedge"), "--namespace", namespace,
		"--reuse-values", "--set", "image.tag="+newTag, "--wait", "--timeout", "120s")
	helmTook := time.Since(begin)
	t.Logf("helm upgrade (%v):\n%s", helmTook.Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("helm upgrade: %v%s", err, h.diagnose())
	}
	h.measured("helm upgrade --wait (new image tag)", helmTook)

	var dsDone, depDone time.Duration
	h.eventually(t, 90*time.Second, "the DaemonSet and the Deployment rolled out, every pod of the new image Ready and Reconciled", func() error {
		ds, err := h.cs.AppsV1().DaemonSets(namespace).Get(h.ctx, "ovnedge-node", metav1.GetOptions{})
		if err != nil {
			return err
		}
		dep, err := h.cs.AppsV1().Deployments(namespace).Get(h.ctx, "ovnedge-leader", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := dsRolledOut(ds, len(h.nodes)); err != nil {
			return err
		} else if dsDone == 0 {
			dsDone = time.Since(begin)
		}
		if err := deploymentRolledOut(dep, int32(h.leaders)); err != nil {
			return err
		} else if depDone == 0 {
			depDone = time.Since(begin)
		}
		return h.everyPodReady(func(p *corev1.Pod) error {
			if img := p.Spec.Containers[0].Image; img != imageRepo+":"+newTag {
				return fmt.Errorf("pod %s runs %s", p.Name, img)
			}
			if slices.ContainsFunc(oldPods, func(o corev1.Pod) bool { return o.UID == p.UID }) {
				return fmt.Errorf("pod %s is from before the upgrade", p.Name)
			}
			return nil
		})
	})
	rollout := time.Since(begin)
	h.measured("upgrade -> DaemonSet rolled out", dsDone)
	h.measured("upgrade -> Deployment rolled out", depDone)
	h.measured("upgrade -> every pod new, Ready and Reconciled", rollout)
	h.tag = newTag

	time.Sleep(2 * time.Second) // traffic after the rollout, too
	// The egress stream leaving with the egress IP again, if it stopped:
	// the loss window is whole.
	sent, back := stream.Sent(), time.Now()
	for time.Since(back) < 30*time.Second && stream.ArrivedAfter(sent, egressIP) != nil {
		time.Sleep(20 * time.Millisecond)
	}
	if waited := time.Since(back); waited > 500*time.Millisecond {
		t.Logf("the egress stream was not arriving from %s 2 s after the rollout; waited %v: %v", egressIP,
			waited.Round(time.Millisecond), stream.ArrivedAfter(sent, egressIP))
	}
	stop()
	end := time.Now()

	// Ingress.
	for _, p := range []struct {
		what string
		r    probeResult
	}{{"new connection every 20 ms", short.wait()}, {"long-lived connection, round trip every 20 ms", long.wait()}} {
		t.Logf("ingress %s to %s across the upgrade (%v): %d attempts, %d failed, longest gap between successes %v, slowest %v; errors %q",
			p.what, vip, end.Sub(begin).Round(time.Millisecond), p.r.attempts, p.r.failed, p.r.gap.Round(time.Millisecond),
			p.r.slowest.Round(time.Millisecond), p.r.errs)
		h.note("ingress "+p.what, fmt.Sprintf("%d attempts, %d failed, longest gap %v", p.r.attempts, p.r.failed, p.r.gap.Round(time.Millisecond)))
		if p.r.failed > 0 || p.r.attempts == 0 {
			t.Errorf("ingress %s: %d of %d failed across the upgrade: %q", p.what, p.r.failed, p.r.attempts, p.r.errs)
		}
	}

	// Egress: the longest time without a packet from the egress IP.
	gap, gapAt, other := egressGap(stream, egressIP, begin, end)
	_, lost := stream.Gap(begin)
	t.Logf("egress stream %s -> %s (egress IP %s on %s), 10 ms interval, across the upgrade: loss window %v (from %v after helm upgrade began), %d packets lost in the whole stream of %d, %d arrived from another source (the node's IP: the egress IP unassigned)",
		senderNode.Name, testbed.ClusterClientIP, egressIP, egressNode.Name, gap.Round(time.Millisecond), gapAt.Sub(begin).Round(time.Millisecond),
		lost, stream.Sent(), other)
	h.note("egress stream loss window across the upgrade", fmt.Sprintf("%v (%d packets from the node IP, %d lost)", gap.Round(time.Millisecond), other, lost))
	if gap >= time.Second || other > 0 {
		t.Logf("egress: loss window %v, %d packets from another source: over the aim (< 1 s)", gap.Round(time.Millisecond), other)
		t.Logf("the leaders' egress lines:\n%s", h.env.LeaderLog("reachab", "EgressIP status", "NoMatchingNodeFound", "leader"))
	}
	if node := h.egressNode(t); node != egressNode.Name {
		t.Errorf("EgressIP %s on %q after the upgrade, want %s", egressName, node, egressNode.Name)
	}

	// No churn: same flows, none re-added since the upgrade began, same
	// NB rows.
	t.Logf("across the upgrade: %s", h.check(t, k, "the upgrade", begin, h.cl.Nodes...))
}

// dsRolledOut says why the DaemonSet's rollout is not complete, nil if
// it is.
func dsRolledOut(ds *appsv1.DaemonSet, nodes int) error {
	s := ds.Status
	if s.ObservedGeneration < ds.Generation || s.DesiredNumberScheduled != int32(nodes) || s.UpdatedNumberScheduled != s.DesiredNumberScheduled ||
		s.NumberReady != s.DesiredNumberScheduled || s.NumberAvailable != s.DesiredNumberScheduled || s.NumberUnavailable != 0 {
		return fmt.Errorf("DaemonSet generation %d, status %+v", ds.Generation, s)
	}
	return nil
}

// deploymentRolledOut says why the Deployment's rollout is not complete,
// nil if it is.
func deploymentRolledOut(d *appsv1.Deployment, replicas int32) error {
	s := d.Status
	if s.ObservedGeneration < d.Generation || s.Replicas != replicas || s.UpdatedReplicas != replicas ||
		s.ReadyReplicas != replicas || s.AvailableReplicas != replicas {
		return fmt.Errorf("Deployment generation %d, status %+v", d.Generation, s)
	}
	return nil
}

// egress labels egressNode egress-assignable and has EgressIP egressName
// serve a testbed pod on senderNode; it returns a UDP stream from that
// pod to the external client, arriving from the egress IP.
//
// The pod is a testbed pod (a network namespace on the node's br-int),
// not a kubelet-run one; its Pod object, which the leader selects it by,
// is never scheduled (a scheduling gate) and the harness writes its
// status (Running, the testbed pod's IPs), as the kubelet would.
func (h *harness) egress(t *testing.T, senderNode, egressNode *testbed.ClusterNode) *e2e.Stream {
	h.labelEgress(t, egressNode.Name, `""`)
	if _, err := h.cs.CoreV1().Namespaces().Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: egressNS,
		Labels: map[string]string{"env": egressNS}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := h.env.RunPod(h.ctx, t, egressNS, senderName, senderNode.Name, map[string]string{"app": senderName})
	// The test's sockets in the kubelet-run pod's network namespace
	// (for the whole test: Failover streams from it too).
	h.sender = h.env.KubeNode(senderNode.Name).PodNetns(h.t, pod.Status.ContainerStatuses[0].ContainerID)
	eip := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
		"metadata": map[string]any{"name": egressName},
		"spec": map[string]any{"egressIPs": []any{egressIP.String()},
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"env": egressNS}}}}}
	begin := time.Now()
	if _, err := h.dyn.Resource(e2e.EgressGVR).Create(h.ctx, eip, metav1.CreateOptions{}); err != nil {
		t.Fatalf("EgressIP %s: %v", egressName, err)
	}
	h.eventually(t, wait, "EgressIP "+egressName+" assigned to "+egressNode.Name, func() error {
		if n := h.egressNode(t); n != egressNode.Name {
			return fmt.Errorf("on %q", n)
		}
		return nil
	})
	h.measured("EgressIP apply -> status assigned", time.Since(begin))
	s := h.egressStream(t, egressPort)
	h.measured("EgressIP apply -> stream arriving from it", time.Since(begin))
	t.Logf("EgressIP %s (%s) on %s serves %s/%s (%s) on %s: the client sees its stream from %s", egressName, egressIP,
		egressNode.Name, egressNS, senderName, pod.Status.PodIP, senderNode.Name, s.LastFrom())
	return s
}

// egressNode is the node EgressIP egressName's status puts egressIP
// on, "" if none.
func (h *harness) egressNode(t *testing.T) string { return h.statusNode(t, egressName, egressIP) }

// statusNode is the node EgressIP name's status puts ip on, "" if none.
func (h *harness) statusNode(t *testing.T, name string, ip netip.Addr) string {
	u, err := h.dyn.Resource(e2e.EgressGVR).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return e2e.EgressStatusNode(u, ip, "")
}

// egressGap is the longest time, between from and to, without a packet
// of s arriving from src (the time from `from` to the first one, and
// from the last one to `to`, count), and how many arrived from another
// source then.
func egressGap(s *e2e.Stream, src netip.Addr, from, to time.Time) (gap time.Duration, at time.Time, other int) {
	prev := from
	for _, a := range s.Arrivals() {
		if a.At.Before(from) || a.At.After(to) {
			continue
		}
		if a.From != src {
			other++
			continue
		}
		if a.At.Sub(prev) > gap {
			gap, at = a.At.Sub(prev), prev
		}
		prev = a.At
	}
	if to.Sub(prev) > gap {
		gap, at = to.Sub(prev), prev
	}
	return gap, at, other
}

// longService adds port longPort to the Service (target longTargetPort,
// an echo server of the backend pod that keeps its connections) and
// waits until a connection through it works.
func (h *harness) longService(t *testing.T) {
	backend := h.cl.Pod(svcNS, backendName)
	var ln net.Listener
	if err := backend.Netns.Do(func() (err error) {
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", longTargetPort))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	go func() { <-h.ctx.Done(); _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	svc, err := h.cs.CoreV1().Services(svcNS).Get(h.ctx, svcName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "long", Protocol: corev1.ProtocolTCP, Port: longPort,
		TargetPort: intstr.FromInt32(longTargetPort)})
	if _, err := h.cs.CoreV1().Services(svcNS).Update(h.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice, err := h.cs.DiscoveryV1().EndpointSlices(svcNS).Get(h.ctx, svcName+"-harness", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To("long"), Protocol: ptr.To(corev1.ProtocolTCP),
		Port: ptr.To[int32](longTargetPort)})
	if _, err := h.cs.DiscoveryV1().EndpointSlices(svcNS).Update(h.ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	round := h.longConn()
	h.eventually(t, 30*time.Second, fmt.Sprintf("a long-lived connection to %s:%d", vip, longPort), round)
}

// longConn returns a function that sends 8 bytes over a connection from
// the client to the ExternalIP's longPort and reads them back, dialling
// it first (and again after a failure).
func (h *harness) longConn() func() error {
	var c net.Conn
	var seq uint64
	return func() error {
		if c == nil {
			if err := h.cl.Client.Do(func() (err error) {
				c, err = net.DialTimeout("tcp", fmt.Sprintf("%s:%d", vip, longPort), 2*time.Second)
				return err
			}); err != nil {
				c = nil
				return fmt.Errorf("dial: %w", err)
			}
		}
		seq++
		var out, in [8]byte
		binary.BigEndian.PutUint64(out[:], seq)
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Write(out[:])
		if err == nil {
			_, err = io.ReadFull(c, in[:])
		}
		if err == nil && in != out {
			err = fmt.Errorf("echoed %x, sent %x", in, out)
		}
		if err != nil {
			_ = c.Close()
			c = nil
		}
		return err
	}
}

// probeResult is what a probe saw.
type probeResult struct {
	attempts, failed int
	// gap is the longest time between two successes (from the start to
	// the first, and from the last to the end, count), slowest the
	// longest attempt.
	gap, slowest time.Duration
	errs         []string // the first few errors, with their times
}

type prober struct {
	done chan probeResult
}

func (p prober) wait() probeResult { return <-p.done }

// probe calls try every probeEvery (one at a time) until ctx ends.
func probe(ctx context.Context, try func() error) prober {
	p := prober{done: make(chan probeResult, 1)}
	go func() {
		var r probeResult
		start := time.Now()
		last := start
		tick := time.NewTicker(probeEvery)
		defer tick.Stop()
		for ctx.Err() == nil {
			t0 := time.Now()
			err := try()
			t1 := time.Now()
			r.attempts++
			r.slowest = max(r.slowest, t1.Sub(t0))
			if err != nil {
				r.failed++
				if len(r.errs) < 5 {
					r.errs = append(r.errs, t0.Format("15:04:05.000")+" "+err.Error())
				}
			} else {
				r.gap = max(r.gap, t1.Sub(last))
				last = t1
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		r.gap = max(r.gap, time.Since(last))
		p.done <- r
	}()
	return p
}

// egressIP6 is the IPv6 egress IP of the EgressIPv6 step.
const egressIP6 = "fd00:18::44"

// egressIPv6 gives the Upgrade step's EgressIP an IPv6 egress IP instead
// of its IPv4 one (an EgressIP's IPs go to different nodes, and one node
// may be egress-assignable): the kubelet-run sender pod (dual-stack,
// examples/ovncni) reaches the external client over IPv6 from it; with the
// IPv4 one back, over IPv4 from that again.
func (h *harness) egressIPv6(t *testing.T) {
	set := func(ip string) {
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"egressIPs": []string{ip}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.dyn.Resource(e2e.EgressGVR).Patch(h.ctx, egressName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("EgressIP %s: %v", egressName, err)
		}
	}
	if err := e2e.Serve(h.ctx, h.cl.Client, "client", egressPort6); err != nil {
		t.Fatal(err)
	}
	from := func(client, src string) {
		dst := net.JoinHostPort(client, fmt.Sprint(egressPort6))
		var seen string
		h.eventually(t, wait, "the client seeing "+dst+"'s connection from "+src, func() error {
			line, err := e2e.Reply(h.sender, dst, 100, 2*time.Second)
			if _, seen, _ = strings.Cut(line, " "); err != nil || !strings.HasPrefix(seen, net.JoinHostPort(src, "")) {
				return fmt.Errorf("seen as %q (%v)", seen, err)
			}
			return nil
		})
		t.Logf("%s/%s -> %s: the client saw %s", egressNS, senderName, dst, seen)
	}
	begin := time.Now()
	set(egressIP6)
	from(testbed.ClusterClientIP6, egressIP6)
	h.measured("EgressIP changed to IPv6 -> the sender's connections leave from it", time.Since(begin))
	u, err := h.dyn.Resource(e2e.EgressGVR).Get(h.ctx, egressName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EgressIP %s: %s on %q", egressName, egressIP6, e2e.EgressStatusNode(u, netip.MustParseAddr(egressIP6), ""))
	set(egressIP.String())
	from(testbed.ClusterClientIP, egressIP.String())
}

// egressStream starts a UDP packet every 10 ms from the sender pod to the
// external client's port and waits until the stream arrives from the
// egress IP; the caller stops it.
func (h *harness) egressStream(t *testing.T, port uint16) *e2e.Stream {
	s, err := e2e.StartStream(h.sender, h.cl.Client, netip.AddrPortFrom(netip.MustParseAddr(testbed.ClusterClientIP), port), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	h.eventually(t, 30*time.Second, fmt.Sprintf("the stream to port %d arriving from %s", port, egressIP), func() error {
		if from := s.LastFrom(); from != egressIP {
			return fmt.Errorf("last from %v", from)
		}
		return nil
	})
	return s
}
