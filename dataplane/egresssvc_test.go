package dataplane

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress/hostnet"
)

// TestEgressServiceRequirements: what the node or an EgressService lacks
// becomes an event (on the Node, on the EgressService); other errors stay
// errors.
func TestEgressServiceRequirements(t *testing.T) {
	w := &EgressServiceHost{Node: "n1"}
	s := desired.Snapshot{Nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}}
	other := errors.New("netlink: busy")
	err := errors.Join(errors.Join(&hostnet.TableError{Service: "shop/web", Table: "blue", Err: errors.New("no such table")}, other),
		fmt.Errorf("%w: net.ipv4.conf.all.forwarding is 0", hostnet.ErrNoForwarding))
	events, rest := w.requirements(s, err)
	if !errors.Is(rest, other) || errors.Is(rest, hostnet.ErrNoForwarding) {
		t.Errorf("rest = %v, want the netlink error alone", rest)
	}
	if len(events) != 2 || events[0].Object.Kind != "EgressService" || events[0].Object.Namespace != "shop" || events[0].Object.Name != "web" ||
		events[1].Object.Kind != "Node" || events[1].Object.Name != "n1" {
		t.Errorf("events = %v", events)
	}
	if events, rest := w.requirements(s, nil); events != nil || rest != nil {
		t.Errorf("no error: %v, %v", events, rest)
	}
}
