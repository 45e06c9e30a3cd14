package unidle_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc/unidle"
	"github.com/ovnedge/ovnedge/testbed"
)

// OVN-Kubernetes' "should respond to a controller event" (unidle_test.go
// at 8871cd9) on a real Southbound: the empty_lb_backends row already in
// the table and one written later are each handled once and deleted;
// rows of other types are left alone.
func TestRun(t *testing.T) {
	o := testbed.StartOVN(t)
	o.Sbctl("create", "Controller_Event", "event_type=empty_lb_backends", "seq_num=8",
		`event_info:vip="10.10.10.10:80"`, "event_info:protocol=tcp", "event_info:load_balancer=lb1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, err := unidle.Dial(ctx, []string{o.SB}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	got := make(chan unidle.Event, 10)
	go events.Run(ctx, func(ev unidle.Event) { got <- ev })
	next := func() unidle.Event {
		select {
		case ev := <-got:
			return ev
		case <-ctx.Done():
			t.Fatal("no event")
		}
		return unidle.Event{}
	}
	if ev := next(); ev.VIP != "10.10.10.10:80" || ev.Protocol != "tcp" || ev.LoadBalancer != "lb1" {
		t.Errorf("first event %+v", ev)
	}
	o.Sbctl("create", "Controller_Event", "event_type=empty_lb_backends", "seq_num=9",
		`event_info:vip="[fd00::10]:53"`, "event_info:protocol=udp")
	if ev := next(); ev.VIP != "[fd00::10]:53" || ev.Protocol != "udp" {
		t.Errorf("second event %+v", ev)
	}
	for {
		if rows := o.Sbctl("--bare", "--columns=_uuid", "list", "Controller_Event"); rows == "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the Controller_Event rows were not deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case ev := <-got:
		t.Errorf("an event handled twice: %+v", ev)
	case <-time.After(200 * time.Millisecond):
	}
}

// NeedPods finds the Service by VIP, port and protocol among its
// ClusterIPs (OVN-Kubernetes), ExternalIPs and ingress IPs (beyond it).
func TestNeedPods(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "foo_ns", Name: "foo_service"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.10.10.10", ClusterIPs: []string{"10.10.10.10", "fd00:10::10"},
			ExternalIPs: []string{"172.18.0.150"}, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP},
				{Port: 53, Protocol: corev1.ProtocolUDP}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "172.18.0.200"}}}}}
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "other"},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.10.10.11"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	for _, c := range []struct {
		vip, proto string
		want       string // the Service, "" for none
	}{
		{"10.10.10.10:80", "tcp", "foo_service"},
		{"[fd00:10::10]:80", "tcp", "foo_service"},
		{"10.10.10.10:53", "udp", "foo_service"},
		{"172.18.0.150:80", "tcp", "foo_service"},
		{"172.18.0.200:80", "tcp", "foo_service"},
		{"10.10.10.11:80", "tcp", "other"},
		{"10.10.10.10:53", "tcp", ""},
		{"10.10.10.10:81", "tcp", ""},
		{"not-a-vip", "tcp", ""},
	} {
		e, ok := unidle.NeedPods([]*corev1.Service{other, svc}, unidle.Event{VIP: c.vip, Protocol: c.proto})
		if !ok {
			if c.want != "" {
				t.Errorf("%s/%s: no Service, want %s", c.vip, c.proto, c.want)
			}
			continue
		}
		if e.Object.Name != c.want || e.Reason != unidle.ReasonNeedPods || e.Type != corev1.EventTypeNormal ||
			e.Message != "The service "+c.want+" needs pods" {
			t.Errorf("%s/%s: %s, want NeedPods on %s", c.vip, c.proto, e, c.want)
		}
	}
}

func ExampleNeedPods() {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.10"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	e, ok := unidle.NeedPods([]*corev1.Service{svc}, unidle.Event{VIP: "10.96.0.10:80", Protocol: "tcp"})
	fmt.Println(ok, e.Object.Namespace, e.Type, e.Reason, e.Message)
	// Output: true shop Normal NeedPods The service web needs pods
}

// Serve dials again after a failure, and records the NeedPods event of
// a controller event on the Service with its VIP.
func TestServe(t *testing.T) {
	o := testbed.StartOVN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dials := 0
	dial := func(ctx context.Context) (*unidle.Events, error) {
		if dials++; dials == 1 {
			return nil, fmt.Errorf("the Southbound is not there yet")
		}
		return unidle.Dial(ctx, []string{o.SB}, nil, nil)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.10"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	got := make(chan string, 1)
	go unidle.Serve(ctx, dial, 10*time.Millisecond, func() []*corev1.Service { return []*corev1.Service{svc} },
		func(e event.Event) { got <- e.Object.Name + " " + e.Reason }, slog.Default())
	o.Sbctl("create", "Controller_Event", "event_type=empty_lb_backends", "seq_num=1",
		`event_info:vip="10.96.0.10:80"`, "event_info:protocol=tcp")
	select {
	case r := <-got:
		if r != "web NeedPods" || dials != 2 {
			t.Errorf("recorded %q after %d dials, want web NeedPods after 2", r, dials)
		}
	case <-ctx.Done():
		t.Fatalf("nothing recorded (%d dials)", dials)
	}
}
