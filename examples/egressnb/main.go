// Command egressnb computes the OVN Northbound state of an EgressIP from
// Kubernetes objects, without the ovnedge daemon, and applies it: the pure
// functions of package egress decide which node hosts the egress IP and
// which rows that takes (reroute policies, SNATs, address sets, the
// reply-traffic QoS rules of the node switches), and
// ovsdbnb writes exactly those rows, idempotently.
//
//	go run ./examples/egressnb                                  # print the rows
//	go run ./examples/egressnb --nb-address unix:/var/run/ovn/ovnnb_db.sock
//
// Applying needs the OVN-Kubernetes topology (ovn_cluster_router,
// GR_<node>) in the NB database.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/egress"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/ovnknode"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/ovsdbnb/nbdb"
)

func main() {
	nb := flag.String("nb-address", "", "OVN Northbound endpoint to apply to; empty prints the rows only")
	flag.Parse()
	if err := Run(context.Background(), *nb, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "egressnb:", err)
		os.Exit(1)
	}
}

// Objects are the example's cluster: two nodes (ovn-worker2 may host
// egress IPs), a namespace env=prod with one running pod, and an EgressIP
// for that namespace.
func Objects() ([]*corev1.Node, []*corev1.Namespace, []*corev1.Pod, []*egressv1.EgressIP) {
	node := func(name, subnet, ip, join string, assignable bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{
			ovnknode.AnnotationNodeSubnets:     `{"default":["` + subnet + `"]}`,
			ovnknode.AnnotationPrimaryIfAddr:   `{"ipv4":"` + ip + `"}`,
			ovnknode.AnnotationGatewayJoinAddr: `{"ipv4":"` + join + `"}`,
		}}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if assignable {
			n.Labels[ovnknode.LabelEgressAssignable] = ""
		}
		return n
	}
	nodes := []*corev1.Node{
		node("ovn-worker", "10.244.1.0/24", "172.18.0.2/24", "100.64.0.3/16", false),
		node("ovn-worker2", "10.244.2.0/24", "172.18.0.3/24", "100.64.0.4/16", true),
	}
	ns := []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}}}
	pods := []*corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web-0"},
		Spec:       corev1.PodSpec{NodeName: "ovn-worker"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.3", PodIPs: []corev1.PodIP{{IP: "10.244.1.3"}}},
	}}
	eips := []*egressv1.EgressIP{{ObjectMeta: metav1.ObjectMeta{Name: "egress-prod"}, Spec: egressv1.EgressIPSpec{
		EgressIPs:         []string{"172.18.0.44"},
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
	}}}
	return nodes, ns, pods, eips
}

// Desired computes the NB rows of the example's objects.
func Desired() (map[ovsdbnb.Owner]ovsdbnb.State, map[string][]egressv1.EgressIPStatusItem, error) {
	k8sNodes, namespaces, pods, eips := Objects()
	nodes, broken := ovnknode.ParseAll(k8sNodes)
	assigned := egress.Assign(eips, nodes, nil, broken)
	var served []egress.Served
	for _, e := range eips {
		selected, err := egress.SelectPods(e, namespaces, egress.PodInfos(pods))
		if err != nil {
			return nil, nil, fmt.Errorf("EgressIP %s: %w", e.Name, err)
		}
		served = append(served, egress.Served{Name: e.Name, Status: assigned.Status[e.Name], Pods: selected})
	}
	d, err := egress.Compute(egress.Cluster{ClusterSubnets: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}, nodes, served)
	if err != nil {
		return nil, nil, err
	}
	return d.NB, assigned.Status, nil
}

// Run prints the assignment and the rows and, with an NB endpoint,
// applies them.
func Run(ctx context.Context, nb string, out io.Writer) error {
	rows, status, err := Desired()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "EgressIP status: %v\n", status)
	owners := make([]ovsdbnb.Owner, 0, len(rows))
	for o := range rows {
		owners = append(owners, o)
	}
	slices.SortFunc(owners, func(a, b ovsdbnb.Owner) int { return strings.Compare(a.String(), b.String()) })
	for _, o := range owners {
		st := rows[o]
		for _, p := range st.Policies {
			fmt.Fprintf(out, "%s: policy %s %d %q %s %v\n", o, p.Router, p.Priority, p.Match, p.Action, p.Nexthops)
		}
		for _, n := range st.NATs {
			fmt.Fprintf(out, "%s: nat %s %s %s -> %s\n", o, n.Router, n.Type, n.LogicalIP, n.ExternalIP)
		}
		for _, a := range st.AddressSets {
			fmt.Fprintf(out, "%s: address set %s %v\n", o, a.Name(), a.Addresses)
		}
		for _, q := range st.QoSRules {
			fmt.Fprintf(out, "%s: qos %v %d %s %q %v\n", o, q.Switches, q.Priority, q.Direction, q.Match, q.Action)
		}
	}
	if nb == "" {
		return nil
	}
	c, err := ovsdbnb.Dial(ctx, ovsdbnb.Options{Endpoints: []string{nb}})
	if err != nil {
		return err
	}
	defer c.Close()
	// The reply-traffic QoS rules mark packets (action mark=42), which the
	// NB schema of OVN before 24.03 does not have: leave them out there.
	if !c.SupportsKey(nbdb.QoSTable, "action", "mark") {
		fmt.Fprintf(out, "NB schema has no QoS mark action (OVN < 24.03): %s left out\n", egress.ReplyQoSOwner)
		delete(rows, egress.ReplyQoSOwner)
	}
	res, err := c.Sync(ctx, rows)
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	fmt.Fprintf(out, "applied: %d inserts, %d updates, %d mutates, %d deletes\n", res.Inserts, res.Updates, res.Mutates, res.Deletes)
	return nil
}
