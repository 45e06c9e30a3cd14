package daemon

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/ovsdbnb"
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
			out, events := dedupVIPs(c.svcs)
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

const dupExternalIP = `apiVersion: v1
kind: Service
metadata:
  name: aaa
  namespace: prod
spec:
  type: ClusterIP
  clusterIP: 10.96.0.12
  clusterIPs: [10.96.0.12]
  externalIPs: [172.18.0.201, 172.18.0.210]
  selector: {app: web}
  ports:
  - {name: https, protocol: TCP, port: 443, targetPort: 8443}
`

// A Service added to the manifests with an ExternalIP that a running
// Service serves gets its ClusterIP and its other ExternalIP programmed
// in a real NB, not the duplicate, which stays with the running Service
// although the newcomer's file and name sort first; the sync succeeds (no
// retry) and the newcomer gets a Warning event. Started anew on the same
// files, the daemon orders by file name, then position in the file.
func TestClusterDuplicateExternalIPManifests(t *testing.T) {
	ovn := startNB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := demoConfig(t, "--nb-address", ovn.NB)
	s, c := loadDemo(t, cfg, nil)
	rec := record.NewFakeRecorder(100)
	d := NewDataplane(cfg, c, rec, NewMetrics(), quiet)
	defer d.Close()
	if err := d.Cluster(ctx, s); err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(c.Typed, c.Dynamic, quiet, c.watchOptions(cfg)...)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}

	putFile(t, cfg.Manifests, "aa-dup.yaml", dupExternalIP)
	if err := c.Source.Reload(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if s, err = w.Snapshot(); err == nil && len(s.Services) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the added Service never reached the informers: %v", err)
		}
	}
	if err := d.Cluster(ctx, s); err != nil {
		t.Fatalf("a duplicate ExternalIP failed the sync (retried): %v", err)
	}
	lbVIPs := func(owner string) string {
		rows := ovn.Nbctl("--bare", "--columns=vips", "find", "Load_Balancer", "external_ids:\""+ovsdbnb.KeyOwner+"\"=\""+owner+"\"")
		t.Logf("%s: %s", owner, rows)
		return rows
	}
	if got := lbVIPs("prod/aaa"); !strings.Contains(got, "10.96.0.12:443") || !strings.Contains(got, "172.18.0.210:443") || strings.Contains(got, "172.18.0.201") {
		t.Errorf("newcomer's load balancer VIPs %q, want its ClusterIP and 172.18.0.210 only", got)
	}
	if got := lbVIPs("prod/api"); !strings.Contains(got, "172.18.0.201:443") {
		t.Errorf("running Service's load balancer VIPs %q lost 172.18.0.201", got)
	}
	if ev := drain(rec); !strings.Contains(ev, ReasonDuplicateExternalIP) || !strings.Contains(ev, "prod/api") {
		t.Errorf("events %q, want %s naming prod/api", ev, ReasonDuplicateExternalIP)
	}

	restarted, _ := loadDemo(t, cfg, map[string]string{"aa-dup.yaml": dupExternalIP})
	cs, err := ComputeCluster(restarted, ParamsFrom(cfg), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for o, st := range cs.LB {
		for _, lb := range st.LoadBalancers {
			if o.Name == "prod/api" && strings.Contains(fmt.Sprint(lb.VIPs), "172.18.0.201") {
				t.Errorf("after a restart, aa-dup.yaml's Service comes first (file order) and holds 172.18.0.201; prod/api has %v", lb.VIPs)
			}
		}
	}
}
