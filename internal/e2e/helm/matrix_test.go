package helm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/internal/e2e"
)

// matrixPort is the first UDP port of the matrix's streams.
const matrixPort = 9400

// fault is one way the egress node stops serving, as internal/e2e's
// failover matrix has it, on the kubelet deployment: fail breaks node,
// and restore (after the failover) brings it back.
type fault struct {
	name string
	// ip is where the EgressIP must be after the fault: "moves" to the
	// sender's node, "stays" on the egress node, or "either" (killed
	// ovnedge restarted before the leader saw it gone, or not).
	ip            string
	fail, restore func(t *testing.T, h *harness, node string)
}

// faults are the matrix: the uplink down (the node pod's heartbeats say
// NOT_SERVING), the uplink down while ovn-controller lags (its chassis
// keeps the egress IP's NAT when the uplink is back: the node pod's fence
// must silence it), the node's ovnedge container killed (the kubelet
// restarts it; the chassis keeps forwarding meanwhile), and the leader's
// (anywhere: the egress keeps flowing while the Lease expires and is
// taken again, and the new leader changes no row). Chassis and kubelet
// killed is the Failover step.
var faults = []fault{
	{"UplinkDown", "moves",
		func(t *testing.T, h *harness, n string) { h.cl.Node(n).SetUplink(false) },
		func(t *testing.T, h *harness, n string) { h.cl.Node(n).SetUplink(true) }},
	{"UplinkDownControllerLagging", "moves",
		func(t *testing.T, h *harness, n string) {
			h.cl.Node(n).PauseController(true)
			h.cl.Node(n).SetUplink(false)
		},
		func(t *testing.T, h *harness, n string) {
			h.cl.Node(n).SetUplink(true)
			time.Sleep(time.Second) // the chassis's stale NAT, unless fenced
			h.cl.Node(n).PauseController(false)
		}},
	{"OvnedgeKilled", "either",
		func(t *testing.T, h *harness, n string) { h.killNodePod(t, n) },
		func(*testing.T, *harness, string) {}},
	{"LeaderKilled", "stays",
		func(t *testing.T, h *harness, _ string) { h.killLeader(t) },
		func(*testing.T, *harness, string) {}},
}

// fastFailover turns the chart's egress.fastFailover on (`helm upgrade
// --reuse-values --set`: heartbeats every 100 ms, the leader and the node
// pods) and runs the matrix: for each fault, with the EgressIP on the node
// that is not the sender's, a UDP stream every 10 ms from the kubelet-run
// sender pod and ARP requests for the egress IP every 10 ms from the
// client, the fault on the egress node. The IP must move to the sender's
// node (or, with only the ovnedge container killed and restarted before
// the leader saw it, stay), the stream arrive from the egress IP again,
// and no two nodes answer ARP for it at once, the owner last. The loss
// windows are measured.
func (h *harness) fastFailover(t *testing.T) {
	h.setValue(t, "egress.fastFailover=true")
	sender, egressNode := h.cl.Nodes[0].Name, h.cl.Nodes[len(h.cl.Nodes)-1].Name
	for i, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			h.egressOn(t, egressNode, sender)
			_, _ = h.cl.Client.RunErr("ip", "neigh", "flush", "dev", "eth0")
			w, err := e2e.StartARPWatch(h.cl.Client, "eth0", egressIP, 10*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			s := h.egressStream(t, uint16(matrixPort+i))
			defer s.Stop()
			failed, sentAtFault := time.Now(), s.Sent()
			f.fail(t, h, egressNode)
			h.eventually(t, 60*time.Second, "the stream from "+egressIP.String()+" after "+f.name, func() error {
				return s.ArrivedAfter(sentAtFault+5, egressIP)
			})
			// The leader's verdict lands within its heartbeat timeout
			// (300 ms) even where the stream never stopped (the chassis
			// forwards while only ovnedge is dead): watch it land.
			time.Sleep(1500 * time.Millisecond)
			gap, lost := s.Gap(failed)
			f.restore(t, h, egressNode)
			time.Sleep(500 * time.Millisecond) // ARP after the restore too
			w.Stop()
			owner := h.egressNode(t)
			owners := w.Owners()
			named := make([]string, len(owners))
			for j, m := range owners {
				named[j] = h.nodeOfMAC(m)
			}
			t.Logf("%s on %s: EgressIP on %s after it; loss window %v (%d packets lost); ARP answered by %v (%d replies)",
				f.name, egressNode, owner, gap.Round(time.Millisecond), lost, named, len(w.Replies()))
			h.note("fast failover "+f.name+": loss window", fmt.Sprintf("%v (EgressIP then on %s)", gap.Round(time.Millisecond), owner))
			if err := w.Overlap(); err != nil {
				t.Errorf("two nodes answered ARP for %s: %v (%v)", egressIP, err, named)
			}
			if len(named) == 0 || named[len(named)-1] != owner {
				t.Errorf("ARP for %s last answered by %v, want the owner %s", egressIP, named, owner)
			}
			if f.ip == "moves" && owner != sender || f.ip == "stays" && owner != egressNode ||
				owner != sender && owner != egressNode {
				t.Errorf("EgressIP %s on %q after %s, want it %s (%s, the egress node, or %s, the sender's)",
					egressName, owner, f.name, f.ip, egressNode, sender)
			}
			h.eventually(t, 90*time.Second, "every ovnedge pod Ready and Reconciled after "+f.name, func() error {
				return h.everyPodReady(func(*corev1.Pod) error { return nil })
			})
		})
	}
}

// egressOn puts the EgressIP on node: the other node (other) loses the
// egress-assignable label until the status names node, then gets it back
// (ovnedge keeps an assignment that is still valid).
func (h *harness) egressOn(t *testing.T, node, other string) {
	if h.egressNode(t) == node {
		return
	}
	if to := h.moveOff(t, egressName, egressIP, other); to != node {
		t.Fatalf("EgressIP %s moved to %q, want %s", egressName, to, node)
	}
}

// killNodePod SIGKILLs the ovnedge container of node's node pod (the
// kubelet restarts it).
func (h *harness) killNodePod(t *testing.T, node string) {
	pods, err := h.pods(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Labels["app.kubernetes.io/component"] == "node" && p.Spec.NodeName == node {
			h.kill(t, &p)
			return
		}
	}
	t.Fatalf("no node pod on %s", node)
}

// kill SIGKILLs p's ovnedge container (its kubelet restarts it).
func (h *harness) kill(t *testing.T, p *corev1.Pod) {
	pid, err := containerPID(h.env.KubeNode(p.Spec.NodeName), p)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); !strings.Contains(string(b), "ovnedge") {
		t.Fatalf("pid %d is %q, not ovnedge", pid, b)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

// killLeader SIGKILLs the Lease holder's container: it releases nothing,
// so the Lease is taken again (by the other replica or the restarted
// process, a new identity) once it expires. It waits for that and for the
// new leader's first pass, and checks that meanwhile and then no NB row
// or flow changed: the EgressIP keeps its node and its rows.
func (h *harness) killLeader(t *testing.T) {
	k := h.keep(t)
	id := h.leaseHolder(t)
	var holder *corev1.Pod
	pods, err := h.pods(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pods {
		if p.Labels["app.kubernetes.io/component"] == "leader" && strings.HasPrefix(id, p.Name+"_") {
			holder = &pods[i]
		}
	}
	if holder == nil {
		t.Fatalf("no leader pod holds the Lease (holder %q)", id)
	}
	killed := time.Now()
	h.kill(t, holder)
	h.eventually(t, 60*time.Second, "a new leader after "+holder.Name+"'s was killed", func() error {
		if now := h.leaseHolder(t); now == "" || now == id {
			return fmt.Errorf("the Lease held by %q", now)
		}
		return nil
	})
	h.measured("leader killed -> the Lease taken again", time.Since(killed))
	h.eventually(t, 90*time.Second, "every ovnedge pod Ready and Reconciled after the leader's kill", func() error {
		return h.everyPodReady(func(*corev1.Pod) error { return nil })
	})
	time.Sleep(2 * time.Second) // the new leader's passes
	t.Logf("leader %s killed; the Lease now held by %s; %s", holder.Name, h.leaseHolder(t),
		h.check(t, k, "the leader's kill", killed))
}

// leaseHolder is the Lease's holder identity ("" while free).
func (h *harness) leaseHolder(t *testing.T) string {
	l := daemon.DefaultLease("")
	lease, err := h.cs.CoordinationV1().Leases(l.Namespace).Get(h.ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// nodeOfMAC names the node whose breth0 has mac.
func (h *harness) nodeOfMAC(mac string) string {
	for _, n := range h.cl.Nodes {
		if strings.EqualFold(n.MAC, mac) {
			return n.Name
		}
	}
	return "?" + mac
}
