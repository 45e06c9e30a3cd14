package lbsvc

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/lbsvc/ipam"
)

// svcWith is a Service of the demo's kind: ClusterIP ip, its ports (TCP)
// and its ExternalIPs or, with ingress set, a LoadBalancer with that
// ingress.
func svcWith(name string, age int, clusterIP string, ports []int32, externalIPs []string, ingress ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name,
		CreationTimestamp: metav1.NewTime(time.Unix(1000+int64(age), 0))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}, ExternalIPs: externalIPs}}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: p})
	}
	if len(ingress) > 0 {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		for _, ip := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
	return s
}

// vipsOf lists a Service's ExternalIPs and ingress IPs as dedupVIPs left them.
func vipsOf(svcs []*corev1.Service, name string) string {
	for _, s := range svcs {
		if s.Name == name {
			v := slices.Clone(s.Spec.ExternalIPs)
			for _, ing := range s.Status.LoadBalancer.Ingress {
				v = append(v, "lb:"+ing.IP)
			}
			return strings.Join(v, " ")
		}
	}
	return "missing"
}

// First come, first served: the older Service keeps a VIP, whatever the
// order of the input or the names; the younger loses that VIP only.
func TestDedupVIPs(t *testing.T) {
	for _, c := range []struct {
		name    string
		svcs    []*corev1.Service
		want    map[string]string // Service -> VIPs kept
		reasons []string
	}{
		{"duplicate ExternalIP, same port: the younger keeps its other ExternalIP",
			[]*corev1.Service{svcWith("b-new", 2, "10.96.0.12", []int32{443}, []string{"172.18.0.201", "172.18.0.210"}),
				svcWith("z-old", 1, "10.96.0.11", []int32{443}, []string{"172.18.0.201"})},
			map[string]string{"z-old": "172.18.0.201", "b-new": "172.18.0.210"}, []string{ReasonDuplicateExternalIP}},
		{"ExternalIP shared on disjoint ports",
			[]*corev1.Service{svcWith("a", 1, "10.96.0.11", []int32{443}, []string{"172.18.0.201"}),
				svcWith("b", 2, "10.96.0.12", []int32{80}, []string{"172.18.0.201"})},
			map[string]string{"a": "172.18.0.201", "b": "172.18.0.201"}, nil},
		{"duplicate LoadBalancer ingress: the older keeps it whatever the names",
			[]*corev1.Service{svcWith("a-new", 2, "10.96.0.12", []int32{8080}, nil, "172.18.0.200", "172.18.0.202"),
				svcWith("web", 1, "10.96.0.10", []int32{80}, nil, "172.18.0.200")},
			map[string]string{"web": "lb:172.18.0.200", "a-new": "lb:172.18.0.202"}, []string{ipam.ReasonDuplicate}},
		{"ExternalIP on an older Service's ingress port",
			[]*corev1.Service{svcWith("web", 1, "10.96.0.10", []int32{80}, nil, "172.18.0.200"),
				svcWith("ext", 2, "10.96.0.12", []int32{80}, []string{"172.18.0.200"})},
			map[string]string{"web": "lb:172.18.0.200", "ext": ""}, []string{ReasonDuplicateExternalIP}},
		{"ingress on an older Service's ExternalIP port",
			[]*corev1.Service{svcWith("ext", 1, "10.96.0.12", []int32{80}, []string{"172.18.0.200"}),
				svcWith("web", 2, "10.96.0.10", []int32{80}, nil, "172.18.0.200")},
			map[string]string{"web": "", "ext": "172.18.0.200"}, []string{ipam.ReasonDuplicate}},
		{"same timestamps: namespace/name",
			[]*corev1.Service{svcWith("b", 1, "10.96.0.12", []int32{443}, []string{"172.18.0.201"}),
				svcWith("a", 1, "10.96.0.11", []int32{443}, []string{"172.18.0.201"})},
			map[string]string{"a": "172.18.0.201", "b": ""}, []string{ReasonDuplicateExternalIP}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, events := DedupVIPs(c.svcs)
			for name, want := range c.want {
				if got := vipsOf(out, name); got != want {
					t.Errorf("%s keeps %q, want %q", name, got, want)
				}
			}
			var reasons []string
			for _, e := range events {
				reasons = append(reasons, e.Reason)
			}
			if fmt.Sprint(reasons) != fmt.Sprint(c.reasons) {
				t.Errorf("events %v, want reasons %v", events, c.reasons)
			}
			for _, s := range c.svcs {
				if got := vipsOf([]*corev1.Service{s}, s.Name); got != vipsOf(c.svcs, s.Name) {
					t.Errorf("input Service %s modified", s.Name)
				}
			}
		})
	}
}

func TestCompareKeys(t *testing.T) {
	keys := [][2]string{{"a", "b"}, {"a-x", "b"}, {"a", "b-c"}, {"a.b", ""}, {"", "a"}, {"a", ""}, {"ab", "c"}, {"a", "bc"}, {"a", "b"}}
	for _, a := range keys {
		for _, b := range keys {
			want := strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1])
			if got := compareKeys(a[0], a[1], b[0], b[1]); got != want {
				t.Errorf("compareKeys(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func TestClassAssigned(t *testing.T) {
	class := func(c string) *corev1.Service {
		s := &corev1.Service{}
		if c != "" {
			s.Spec.LoadBalancerClass = &c
		}
		return s
	}
	for _, tc := range []struct {
		svc     *corev1.Service
		lbClass string
		metallb bool
		want    bool
	}{
		{class(""), "", false, true},
		{class(""), "", true, false},
		{class(""), "ovnedge.io/lb", false, false},
		{class("ovnedge.io/lb"), "ovnedge.io/lb", false, true},
		{class("ovnedge.io/lb"), "ovnedge.io/lb", true, true},
		{class("metallb.io/metallb"), "ovnedge.io/lb", false, false},
		{class("metallb.io/metallb"), "", false, false},
	} {
		got := ClassAssigned(tc.svc, tc.lbClass, tc.metallb)
		c := "<none>"
		if tc.svc.Spec.LoadBalancerClass != nil {
			c = *tc.svc.Spec.LoadBalancerClass
		}
		if got != tc.want {
			t.Errorf("class %s, --lb-class %q, metallb mode %v: ours %v, want %v", c, tc.lbClass, tc.metallb, got, tc.want)
		}
	}
}
