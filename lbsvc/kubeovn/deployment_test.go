package kubeovn_test

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/ovnedge/ovnedge/lbsvc/agent"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

const provider = "lb-svc-attachment.kube-system"

var nads = []kubeovn.NAD{{Namespace: "kube-system", Name: "lb-svc-attachment"}}

// testService is the test-service of Kube-OVN's LoadBalancer Service
// example.
func testService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "test-service", UID: "161edee1-7f6e-40f5-9e09-5a52c44267d0",
			Annotations: map[string]string{
				kubeovn.AnnotationAttachmentProvider:      provider,
				kubeovn.LogicalSwitchAnnotation(provider): "attach-subnet",
			}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.109.201.193",
			LoadBalancerIP: "172.18.0.18",
			Ports: []corev1.ServicePort{{Name: "test", Protocol: corev1.ProtocolTCP, Port: 80,
				TargetPort: intstr.FromInt32(80), NodePort: 30056}}},
	}
}

func TestDeploymentGolden(t *testing.T) {
	dp, events := kubeovn.Deployment(testService(), nads, kubeovn.Options{Image: "ghcr.io/ovnedge/ovnedge:latest"})
	if len(events) != 0 {
		t.Errorf("events: %v", events)
	}
	out, err := yaml.Marshal(dp)
	if err != nil {
		t.Fatal(err)
	}
	flowtest.Golden(t, "../../testdata/lbsvc/lb-svc-test-service.yaml", out)
}

func TestDeploymentSemantics(t *testing.T) {
	dp, _ := kubeovn.Deployment(testService(), nads, kubeovn.Options{Image: "img"})
	if dp.Name != "lb-svc-test-service" || dp.Namespace != "default" || *dp.Spec.Replicas != 1 ||
		dp.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("deployment %s/%s replicas %d strategy %s", dp.Namespace, dp.Name, *dp.Spec.Replicas, dp.Spec.Strategy.Type)
	}
	wantAnn := map[string]string{
		"k8s.v1.cni.cncf.io/networks":                                "kube-system/lb-svc-attachment",
		"lb-svc-attachment.kube-system.kubernetes.io/logical_switch": "attach-subnet",
		"lb-svc-attachment.kube-system.kubernetes.io/ip_address":     "172.18.0.18",
	}
	if got := dp.Spec.Template.Annotations; !reflect.DeepEqual(got, wantAnn) {
		t.Errorf("pod annotations %v, want %v", got, wantAnn)
	}
	if o := dp.OwnerReferences; len(o) != 1 || o[0].Kind != "Service" || o[0].Name != "test-service" || !*o[0].Controller {
		t.Errorf("owner references %+v", o)
	}

	// The container's arguments are the agent's flags.
	var cfg agent.Config
	fs := flag.NewFlagSet("lbsvc-agent", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	c := dp.Spec.Template.Spec.Containers[0]
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("agent flags %q: %v", c.Args, err)
	}
	if cfg.ClusterIP.String() != "10.109.201.193" || cfg.Provider != provider || !slices.Equal(cfg.Ports, []agent.Port{{Protocol: "tcp", Port: 80}}) {
		t.Errorf("agent config from %q: %+v", c.Args, cfg)
	}
	if !slices.Equal(c.Command, kubeovn.DefaultCommand) {
		t.Errorf("command %q", c.Command)
	}

	// Without spec.loadBalancerIP the allocated ingress IP is pinned; a
	// port change changes the pod template (Recreate replaces the pod).
	s := testService()
	s.Spec.LoadBalancerIP = ""
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.11"}}
	s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
	dp2, _ := kubeovn.Deployment(s, nads, kubeovn.Options{Image: "img"})
	if got := dp2.Spec.Template.Annotations[kubeovn.IPAddressAnnotation(provider)]; got != "172.18.0.11" {
		t.Errorf("ip_address annotation %q, want the ingress IP", got)
	}
	if args := dp2.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--port=udp/53") {
		t.Errorf("args %q lack the new port", args)
	}

	// A NAD with a device resource: one requested and limited.
	withRes := []kubeovn.NAD{{Namespace: "kube-system", Name: "lb-svc-attachment", ResourceName: "intel.com/sriov"}}
	dp3, _ := kubeovn.Deployment(testService(), withRes, kubeovn.Options{})
	if r := dp3.Spec.Template.Spec.Containers[0].Resources; r.Limits.Name("intel.com/sriov", "").String() != "1" ||
		r.Requests.Name("intel.com/sriov", "").String() != "1" {
		t.Errorf("resources %+v", r)
	}
}

// Bad input: an event and no Deployment for that Service, the others
// unaffected.
func TestDeploymentBadInput(t *testing.T) {
	mutate := func(f func(*corev1.Service)) *corev1.Service { s := testService(); f(s); return s }
	tests := []struct {
		name   string
		svc    *corev1.Service
		reason string // "" = no Deployment and no event
	}{
		{"not annotated", mutate(func(s *corev1.Service) { delete(s.Annotations, kubeovn.AnnotationAttachmentProvider) }), ""},
		{"not a LoadBalancer", mutate(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), ""},
		{"nil", nil, ""},
		{"provider without namespace", mutate(func(s *corev1.Service) { s.Annotations[kubeovn.AnnotationAttachmentProvider] = "lb-svc-attachment" }),
			kubeovn.ReasonUnknownProvider},
		{"provider with two dots", mutate(func(s *corev1.Service) { s.Annotations[kubeovn.AnnotationAttachmentProvider] = "a.b.c" }),
			kubeovn.ReasonUnknownProvider},
		{"missing NAD", mutate(func(s *corev1.Service) { s.Annotations[kubeovn.AnnotationAttachmentProvider] = "other.kube-system" }),
			kubeovn.ReasonNADNotFound},
		{"headless", mutate(func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }), kubeovn.ReasonNoClusterIP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dp, events := kubeovn.Deployment(tt.svc, nads, kubeovn.Options{})
			if dp != nil {
				t.Errorf("got Deployment %s", dp.Name)
			}
			var reasons []string
			for _, e := range events {
				reasons = append(reasons, e.Reason)
				if e.Type != corev1.EventTypeWarning || e.Object.Kind != "Service" {
					t.Errorf("event %v", e)
				}
			}
			if want := []string{tt.reason}; tt.reason != "" && !slices.Equal(reasons, want) || tt.reason == "" && len(reasons) > 0 {
				t.Errorf("events %v, want reason %q", events, tt.reason)
			}
		})
	}
	// A bad spec.loadBalancerIP: an event, the subnet picks the address.
	dp, events := kubeovn.Deployment(mutate(func(s *corev1.Service) { s.Spec.LoadBalancerIP = "not-an-ip" }), nads, kubeovn.Options{})
	if dp == nil || len(events) != 1 || events[0].Reason != kubeovn.ReasonInvalidLBIP {
		t.Errorf("bad loadBalancerIP: %v, %v", dp != nil, events)
	} else if _, ok := dp.Spec.Template.Annotations[kubeovn.IPAddressAnnotation(provider)]; ok {
		t.Errorf("bad loadBalancerIP passed to the pod")
	}
	// Others are unaffected: the good Service's Deployment is the same.
	good, _ := kubeovn.Deployment(testService(), nads, kubeovn.Options{})
	again, _ := kubeovn.Deployment(testService(), append(slices.Clone(nads), kubeovn.NAD{Namespace: "x", Name: "y"}), kubeovn.Options{})
	if !reflect.DeepEqual(good, again) {
		t.Errorf("Deployment depends on unrelated NADs")
	}
}

func TestPoolNames(t *testing.T) {
	if got := kubeovn.PoolNames(testService()); !slices.Equal(got, []string{"attach-subnet"}) {
		t.Errorf("PoolNames = %v", got)
	}
	s := testService()
	delete(s.Annotations, kubeovn.LogicalSwitchAnnotation(provider))
	if got := kubeovn.PoolNames(s); got != nil {
		t.Errorf("PoolNames without subnet = %v", got)
	}
}

// The daemon's sequence: allocate from the annotated subnet, write the
// status, build the Deployment.
func Example() {
	subnet, _ := ipam.NewPool("attach-subnet", "172.18.0.0/16", []string{"172.18.0.0..172.18.0.10"})
	alloc, _ := ipam.NewAllocator(subnet)
	svc := testService()
	svc.Spec.LoadBalancerIP = ""
	res := alloc.Allocate(svc, kubeovn.PoolNames(svc)...)
	svc.Status.LoadBalancer.Ingress = res.Ingress
	dp, _ := kubeovn.Deployment(svc, nads, kubeovn.Options{Image: "ovnedge"})
	fmt.Println(res.Ingress[0].IP, dp.Name, dp.Spec.Strategy.Type)
	fmt.Println(strings.Join(dp.Spec.Template.Spec.Containers[0].Args, " "))
	// Output:
	// 172.18.0.11 lb-svc-test-service Recreate
	// --provider=lb-svc-attachment.kube-system --annotations-file=/etc/podinfo/annotations --cluster-ip=10.109.201.193 --port=tcp/80
}

// TestNormalizeLabelValue ports Kube-OVN's pkg/util/label_test.go, and
// checks the app label of a Service with a 63-character name.
func TestNormalizeLabelValue(t *testing.T) {
	fits := strings.Repeat("a", 63)
	if got := kubeovn.NormalizeLabelValue(fits); got != fits {
		t.Errorf("63 characters changed to %q", got)
	}
	long := strings.Repeat("a", 83)
	got := kubeovn.NormalizeLabelValue(long)
	sum := sha256.Sum256([]byte(long))
	if len(got) != 63 || got != strings.Repeat("a", 54)+"-"+hex.EncodeToString(sum[:4]) || got != kubeovn.NormalizeLabelValue(long) {
		t.Errorf("83 characters normalised to %q", got)
	}

	s := testService()
	s.Name = strings.Repeat("s", 63)
	dp, _ := kubeovn.Deployment(s, nads, kubeovn.Options{Image: "img"})
	app := dp.Spec.Template.Labels["app"]
	if errs := validation.IsValidLabelValue(app); len(errs) > 0 || !strings.HasPrefix(app, "lb-svc-sss") {
		t.Errorf("app label %q: %v", app, errs)
	}
	if dp.Name != "lb-svc-"+s.Name || dp.Spec.Selector.MatchLabels["app"] != app || dp.Labels["app"] != app {
		t.Errorf("name %q, selector %v, labels %v", dp.Name, dp.Spec.Selector.MatchLabels, dp.Labels)
	}
}

func TestProviderSubnet(t *testing.T) {
	sub := func(name, provider string) *kubeovn.Subnet {
		s := &kubeovn.Subnet{Spec: kubeovn.SubnetSpec{Provider: provider, CIDRBlock: "172.18.0.0/16"}}
		s.Name = name
		return s
	}
	subnets := []*kubeovn.Subnet{sub("ovn-default", "ovn"), sub("z-attach", provider), sub("attach-subnet", provider), sub("other", "x.y")}
	noAnn := testService()
	delete(noAnn.Annotations, kubeovn.LogicalSwitchAnnotation(provider))
	wrong := testService()
	wrong.Annotations[kubeovn.LogicalSwitchAnnotation(provider)] = "other"
	missing := testService()
	missing.Annotations[kubeovn.LogicalSwitchAnnotation(provider)] = "nope"
	for _, tt := range []struct {
		name    string
		svc     *corev1.Service
		subnets []*kubeovn.Subnet
		want    string // subnet name or "error: ..."
	}{
		{"annotated", testService(), subnets, "attach-subnet"},
		{"by provider, first by name", noAnn, subnets, "attach-subnet"},
		{"annotated subnet of another provider", wrong, subnets, "error: of provider"},
		{"annotated subnet missing", missing, subnets, "error: does not exist"},
		{"no subnet of the provider", noAnn, subnets[:1], "error: no subnet"},
	} {
		got, err := kubeovn.ProviderSubnet(tt.svc, tt.subnets)
		if want, ok := strings.CutPrefix(tt.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want an error with %q", tt.name, err, want)
			}
		} else if err != nil || got.Name != tt.want {
			t.Errorf("%s: %v, %v; want %s", tt.name, got, err, tt.want)
		}
	}
}
