package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

// The sandbox: worker0 runs the pod, worker1 and worker2 are
// egress-assignable; the external host is 172.18.0.1 on the nodes' L2
// segment.
var (
	topology = ovsdbnb.Topology{ClusterSubnet: "10.244.0.0/16", JoinRouterIP: "100.64.0.1/16", Nodes: []ovsdbnb.Node{
		{Name: "worker0", Subnet: "10.244.0.0/24", JoinIP: "100.64.0.2/16", ExternalIP: "172.18.0.2/24", Gateway: "172.18.0.1"},
		{Name: "worker1", Subnet: "10.244.1.0/24", JoinIP: "100.64.0.3/16", ExternalIP: "172.18.0.3/24", Gateway: "172.18.0.1"},
		{Name: "worker2", Subnet: "10.244.2.0/24", JoinIP: "100.64.0.4/16", ExternalIP: "172.18.0.4/24", Gateway: "172.18.0.1"},
	}}
	cluster    = egress.Cluster{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix(topology.ClusterSubnet)}}
	externalIP = "172.18.0.1/24"
	egressIP   = netip.MustParseAddr("172.18.0.44")
	podIP      = netip.MustParseAddr("10.244.0.5")
)

// k8sNodes are the topology's nodes as Kubernetes reports them.
func k8sNodes() []*corev1.Node {
	var out []*corev1.Node
	for _, n := range topology.Nodes {
		labels := map[string]string{}
		if n.Name != "worker0" {
			labels[ovnknode.LabelEgressAssignable] = ""
		}
		out = append(out, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels, Annotations: map[string]string{
				ovnknode.AnnotationNodeSubnets:     fmt.Sprintf(`{"default":[%q]}`, n.Subnet),
				ovnknode.AnnotationPrimaryIfAddr:   fmt.Sprintf(`{"ipv4":%q}`, n.ExternalIP),
				ovnknode.AnnotationGatewayJoinAddr: fmt.Sprintf(`{"ipv4":%q}`, n.JoinIP),
			}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
	}
	return out
}

// gatewayMAC is the MAC of GR_<node>'s external port: packets through
// that gateway router carry it as their source.
func gatewayMAC(t *testing.T, node string) string {
	t.Helper()
	for _, n := range topology.Nodes {
		if n.Name == node {
			return ovsdbnb.MAC(netip.MustParsePrefix(n.ExternalIP).Addr())
		}
	}
	t.Fatalf("no node %s", node)
	return ""
}

// sandbox is the running testbed with the OVN-Kubernetes topology and a
// pod on worker0.
type sandbox struct {
	ovn     *testbed.OVN
	chassis *testbed.Chassis
	ext     *testbed.External
	pod     *testbed.Netns
	nb      *ovsdbnb.Client
}

// newSandbox starts OVN central and one chassis, writes the topology with
// ovsdbnb.EnsureTopology, binds every gateway router to the chassis and
// plugs the pod in.
func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	testbed.Require(t, "iptables")
	// The NB takes the reply-traffic QoS rules (action mark=42) that
	// egress.Compute returns; northd 23.03 leaves them out of its flows.
	s := &sandbox{ovn: testbed.StartOVNWith(t, testbed.OVNOptions{QoSMark: true})}
	s.ext = testbed.NewExternal(t, externalIP)
	s.chassis = testbed.StartChassis(t, s.ovn, s.ext, testbed.ChassisOptions{Physnet: ovsdbnb.Physnet})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nb, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{s.ovn.NB}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nb.Close)
	s.nb = nb
	if err := ovsdbnb.EnsureTopology(ctx, nb, topology); err != nil {
		t.Fatal(err)
	}
	// EnsureTopology binds GR_<node> to a chassis named <node>; the one
	// chassis here hosts them all.
	for _, n := range topology.Nodes {
		s.ovn.Nbctl("set", "Logical_Router", "GR_"+n.Name, "options:chassis="+s.chassis.Name)
	}
	podMAC := ovsdbnb.MAC(podIP)
	s.ovn.Nbctl("lsp-add", "worker0", "default_web", "--", "lsp-set-addresses", "default_web", podMAC+" "+podIP.String())
	s.pod = s.chassis.AddPod(testbed.PodOptions{IfaceID: "default_web", MAC: podMAC, IP: podIP.String() + "/24", Gateway: "10.244.0.1"})
	s.chassis.WaitHV(30 * time.Second)
	return s
}

// healthNodes gives each egress-assignable node a namespace at its
// management IP, linked to a leader namespace the checker dials from.
// With grpcPort set the node serves the gRPC health service on it;
// otherwise nothing listens and the DISCARD probe gets a refusal, which
// means up. It returns the leader namespace and the nodes' namespaces by
// name.
func healthNodes(t *testing.T, nodes []ovnknode.Node, grpcPort int) (*testbed.Netns, map[string]*testbed.Netns) {
	t.Helper()
	leader := testbed.NewNetns(t, "e2el")
	out := map[string]*testbed.Netns{}
	for i, n := range nodes {
		if !n.Assignable {
			continue
		}
		mgmt, _ := n.MgmtIP(false)
		gw := n.Subnets[0].Masked().Addr().Next()
		ns := testbed.NewNetns(t, "e2en")
		testbed.Link(t, leader, fmt.Sprintf("n%d", i), []string{netip.PrefixFrom(gw, 24).String()},
			ns, "eth0", []string{netip.PrefixFrom(mgmt, 24).String()})
		out[n.Name] = ns
		if grpcPort == 0 {
			continue
		}
		srv, err := reach.NewServer(reach.TLSFiles{})
		if err != nil {
			t.Fatal(err)
		}
		var l net.Listener
		if err := ns.Do(func() (err error) {
			l, err = net.Listen("tcp", netip.AddrPortFrom(mgmt, uint16(grpcPort)).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(srv.Stop)
	}
	return leader, out
}

// dialFrom dials from the namespace.
func dialFrom(ns *testbed.Netns) reach.DialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		var conn net.Conn
		err := ns.Do(func() (err error) {
			conn, err = (&net.Dialer{}).DialContext(ctx, network, address)
			return err
		})
		return conn, err
	}
}

// leader is what the EgressIP leader of the daemon does, in the test's
// goroutine: assign, compute, apply make-before-break.
type leader struct {
	t       *testing.T
	sb      *sandbox
	eip     *egressv1.EgressIP
	nodes   []ovnknode.Node
	pods    []egress.Pod
	applied map[ovsdbnb.Owner]ovsdbnb.State
}

// reconcile runs one assignment pass with reachable and programs NB: the
// new SNAT is on the chassis (ovn-nbctl --wait=hv) before the reroute
// moves, then the old SNAT goes. It returns the new status.
func (l *leader) reconcile(ctx context.Context, reachable func(string) bool) []egressv1.EgressIPStatusItem {
	l.t.Helper()
	res := egress.Assign([]*egressv1.EgressIP{l.eip}, l.nodes, reachable, nil)
	for _, e := range res.Events {
		l.t.Logf("event: %s", e)
	}
	status := res.Status[l.eip.Name]
	l.eip.Status.Items = status
	d, err := egress.Compute(cluster, l.nodes, []egress.Served{{Name: l.eip.Name, Status: status, Pods: l.pods}})
	if err != nil {
		l.t.Fatal(err)
	}
	var took []string
	begin := time.Now()
	lap := func(what string) {
		took = append(took, fmt.Sprintf("%s %v", what, time.Since(begin).Round(time.Millisecond)))
		begin = time.Now()
	}
	lap("assign+compute")
	for i, step := range egress.MakeBeforeBreak(l.applied, d.NB) {
		if _, err := l.sb.nb.Sync(ctx, step); err != nil {
			l.t.Fatalf("sync step %d: %v", i+1, err)
		}
		lap(fmt.Sprintf("step %d", i+1))
		if i == 0 {
			l.sb.chassis.WaitHV(10 * time.Second)
			lap("wait-hv")
		}
	}
	l.applied = d.NB
	l.t.Logf("reconcile: %s", strings.Join(took, ", "))
	return status
}

// syn is a TCP SYN the external host received.
type syn struct {
	at      time.Time
	src     netip.AddrPort
	fromMAC string
}

// recorder collects what a background reader saw, in arrival order.
type recorder[T any] struct {
	mu    sync.Mutex
	items []T
}

func (r *recorder[T]) add(v T) {
	r.mu.Lock()
	r.items = append(r.items, v)
	r.mu.Unlock()
}

// first waits up to timeout for the first item match accepts.
func (r *recorder[T]) first(match func(T) bool, timeout time.Duration) (T, bool) {
	deadline := time.Now().Add(timeout)
	for {
		r.mu.Lock()
		i := slices.IndexFunc(r.items, match)
		var got T
		if i >= 0 {
			got = r.items[i]
		}
		r.mu.Unlock()
		if i >= 0 {
			return got, true
		}
		if time.Now().After(deadline) {
			return got, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sniffer records the SYNs to one port arriving at the external host's
// bridge, from an AF_PACKET socket in its namespace.
type sniffer struct{ recorder[syn] }

func sniff(t *testing.T, ext *testbed.External, port uint16) *sniffer {
	t.Helper()
	var c *packet.Conn
	err := ext.Do(func() error {
		ifi, err := net.InterfaceByName(ext.Bridge)
		if err != nil {
			return err
		}
		c, err = packet.Listen(ifi, packet.Raw, int(ethernet.EtherTypeIPv4), nil)
		return err
	})
	if err != nil {
		t.Fatalf("sniff on %s: %v", ext.Bridge, err)
	}
	s := &sniffer{}
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			at := time.Now()
			var f ethernet.Frame
			if f.UnmarshalBinary(buf[:n]) != nil {
				continue
			}
			if src, ok := synTo(f.Payload, port); ok {
				s.add(syn{at: at, src: src, fromMAC: f.Source.String()})
			}
		}
	}()
	return s
}

// synTo returns the source of an IPv4 TCP SYN (without ACK) to port.
func synTo(ip []byte, port uint16) (netip.AddrPort, bool) {
	if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != 6 {
		return netip.AddrPort{}, false
	}
	tcp := ip[int(ip[0]&0x0f)*4:]
	if len(tcp) < 14 || uint16(tcp[2])<<8|uint16(tcp[3]) != port || tcp[13]&0x12 != 0x02 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), uint16(tcp[0])<<8|uint16(tcp[1])), true
}

// firstVia waits up to timeout for the first SYN after since from src
// through the router with MAC mac.
func (s *sniffer) firstVia(since time.Time, src netip.Addr, mac string, timeout time.Duration) (syn, error) {
	got, ok := s.first(func(p syn) bool { return p.at.After(since) && p.src.Addr() == src && p.fromMAC == mac }, timeout)
	if !ok {
		return got, fmt.Errorf("no SYN from %s via %s within %v", src, mac, timeout)
	}
	return got, nil
}

// accepted is a connection the external host's listener accepted.
type accepted struct {
	at     time.Time
	remote netip.AddrPort
}

// acceptor accepts connections on the external host and records their
// source; the pod's traffic generator connects to it.
type acceptor struct {
	recorder[accepted]
	l net.Listener
}

func listen(t *testing.T, ext *testbed.External) *acceptor {
	t.Helper()
	a := &acceptor{}
	if err := ext.Do(func() (err error) {
		a.l, err = net.Listen("tcp", netip.AddrPortFrom(ext.IP.Addr(), 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { a.l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := a.l.Accept()
			if err != nil {
				return
			}
			a.add(accepted{time.Now(), c.RemoteAddr().(*net.TCPAddr).AddrPort()})
			c.Close()
		}
	}()
	return a
}

func (a *acceptor) port() uint16 { return uint16(a.l.Addr().(*net.TCPAddr).Port) }

// firstFrom waits up to timeout for a connection accepted after since
// from src whose source port port accepts.
func (a *acceptor) firstFrom(since time.Time, src netip.Addr, port func(uint16) bool, timeout time.Duration) (accepted, error) {
	got, ok := a.first(func(c accepted) bool {
		return c.at.After(since) && c.remote.Addr() == src && port(c.remote.Port())
	}, timeout)
	if !ok {
		return got, fmt.Errorf("no connection from %s accepted within %v", src, timeout)
	}
	return got, nil
}

// generate opens a new TCP connection from the pod to target every
// interval until ctx ends; each connection is a fresh conntrack entry,
// so it follows the current reroute and SNAT. It returns when it stops.
func generate(ctx context.Context, pod *testbed.Netns, target string, interval time.Duration) error {
	return pod.Do(func() error {
		d := &net.Dialer{Timeout: 500 * time.Millisecond}
		for {
			c, err := d.DialContext(ctx, "tcp", target)
			if err == nil {
				c.Close()
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(interval):
			}
		}
	})
}
