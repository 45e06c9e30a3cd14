package kubeovn_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
)

// attachSubnet is the Subnet of Kube-OVN's LoadBalancer Service example.
func attachSubnet() *kubeovn.Subnet {
	s := &kubeovn.Subnet{Spec: kubeovn.SubnetSpec{Protocol: "IPv4", Provider: provider, CIDRBlock: "172.18.0.0/16",
		Gateway: "172.18.0.1", ExcludeIps: []string{"172.18.0.0..172.18.0.10"}}}
	s.Name = "attach-subnet"
	return s
}

// dynService is that example's Service without spec.loadBalancerIP, created
// age seconds after the epoch.
func dynService(name string, age int) *corev1.Service {
	s := testService()
	s.Name, s.UID = name, types.UID("uid-"+name)
	s.CreationTimestamp = metav1.NewTime(time.Unix(int64(age), 0))
	s.Spec.LoadBalancerIP = ""
	return s
}

func reasons(events []event.Event) []string {
	var out []string
	for _, e := range events {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, e.Object.Name+":"+e.Reason)
		}
	}
	slices.Sort(out)
	return out
}

func TestDesiredSeed004(t *testing.T) {
	static := testService() // 172.18.0.18
	static.CreationTimestamp = metav1.NewTime(time.Unix(1, 0))
	in := kubeovn.Input{Services: []*corev1.Service{dynService("b", 3), static, dynService("a", 2)},
		Subnets: []*kubeovn.Subnet{attachSubnet()}, NADs: nads}
	plan := kubeovn.Desired(in, kubeovn.Options{Image: "img"})
	if w := reasons(plan.Events); len(w) > 0 {
		t.Errorf("warnings %v", w)
	}
	// excludeIps keep .0-.10 out (the gateway .1 among them): the
	// dynamic Services get .11 and .12, oldest first; the static one .18.
	want := map[string]string{"default/test-service": "172.18.0.18", "default/a": "172.18.0.11", "default/b": "172.18.0.12"}
	if len(plan.Ingress) != len(want) {
		t.Errorf("ingress %v", plan.Ingress)
	}
	for k, ip := range want {
		if ing := plan.Ingress[k]; len(ing) != 1 || ing[0].IP != ip {
			t.Errorf("ingress of %s: %v, want %s", k, ing, ip)
		}
	}
	if len(plan.Deployments) != 3 {
		t.Fatalf("%d deployments", len(plan.Deployments))
	}
	for _, dp := range plan.Deployments {
		svc := strings.TrimPrefix(dp.Name, kubeovn.DeploymentPrefix)
		if got := dp.Spec.Template.Annotations[kubeovn.IPAddressAnnotation(provider)]; got != want["default/"+svc] {
			t.Errorf("%s pinned to %q, want %s", dp.Name, got, want["default/"+svc])
		}
		if dp.Labels[kubeovn.LabelManagedBy] != kubeovn.ManagedBy || dp.Spec.Template.Labels[kubeovn.LabelManagedBy] != "" ||
			dp.Annotations[kubeovn.AnnotationSpecHash] == "" {
			t.Errorf("%s labels %v, pod labels %v, annotations %v", dp.Name, dp.Labels, dp.Spec.Template.Labels, dp.Annotations)
		}
	}

	// Once the status is written, the same plan has no ingress to write
	// and the same Deployments.
	var written []*corev1.Service
	for _, svc := range in.Services {
		c := svc.DeepCopy()
		c.Status.LoadBalancer.Ingress = plan.Ingress[c.Namespace+"/"+c.Name]
		written = append(written, c)
	}
	again := kubeovn.Desired(kubeovn.Input{Services: written, Subnets: in.Subnets, NADs: nads}, kubeovn.Options{Image: "img"})
	if len(again.Ingress) != 0 {
		t.Errorf("second pass writes ingress %v", again.Ingress)
	}
	create, update, del := again.Changes(plan.Deployments)
	if len(create)+len(update)+len(del) != 0 {
		t.Errorf("second pass changes %d %d %d", len(create), len(update), len(del))
	}

	// The Subnet's excludeIps grow over .11: a keeps it (Kube-OVN keeps
	// a pod's address), a new Service gets .13.
	grown := attachSubnet()
	grown.Spec.ExcludeIps = []string{"172.18.0.0..172.18.0.11"}
	third := kubeovn.Desired(kubeovn.Input{Services: append(written, dynService("c", 4)), Subnets: []*kubeovn.Subnet{grown}, NADs: nads},
		kubeovn.Options{Image: "img"})
	if ing := third.Ingress; len(ing) != 1 || len(ing["default/c"]) != 1 || ing["default/c"][0].IP != "172.18.0.13" {
		t.Errorf("after excludeIps grew: ingress %v", ing)
	}
}

func TestDesiredBadInput(t *testing.T) {
	mutate := func(name string, f func(*corev1.Service)) *corev1.Service {
		s := testService()
		s.Name = name
		f(s)
		return s
	}
	tiny := &kubeovn.Subnet{Spec: kubeovn.SubnetSpec{Provider: "tiny.kube-system", CIDRBlock: "192.168.50.0/30", Gateway: "192.168.50.1"}}
	tiny.Name = "tiny"
	broken := &kubeovn.Subnet{Spec: kubeovn.SubnetSpec{Provider: "broken.kube-system", CIDRBlock: "not-a-cidr"}}
	broken.Name = "broken"
	onProvider := func(p string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{kubeovn.AnnotationAttachmentProvider: p}
			s.Spec.LoadBalancerIP = ""
		}
	}
	allNADs := append(slices.Clone(nads), kubeovn.NAD{Namespace: "kube-system", Name: "tiny"},
		kubeovn.NAD{Namespace: "kube-system", Name: "broken"}, kubeovn.NAD{Namespace: "kube-system", Name: "lonely"})
	svcs := []*corev1.Service{
		testService(),
		mutate("no-nad", onProvider("missing.kube-system")),
		mutate("bad-provider", onProvider("nodot")),
		mutate("no-subnet", onProvider("lonely.kube-system")),
		mutate("outside", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.0.5" }),
		mutate("gateway", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "172.18.0.1" }),
		mutate("taken", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "172.18.0.18" }),
		mutate("broken-subnet", onProvider("broken.kube-system")),
		mutate("tiny-1", onProvider("tiny.kube-system")),
		mutate("tiny-2", onProvider("tiny.kube-system")),
	}
	for i, s := range svcs {
		s.CreationTimestamp = metav1.NewTime(time.Unix(int64(i), 0))
	}
	plan := kubeovn.Desired(kubeovn.Input{Services: svcs, Subnets: []*kubeovn.Subnet{attachSubnet(), tiny, broken}, NADs: allNADs},
		kubeovn.Options{Image: "img"})
	want := []string{
		"bad-provider:" + kubeovn.ReasonUnknownProvider,
		"broken-subnet:" + kubeovn.ReasonBadSubnet,
		"gateway:" + ipam.ReasonGateway,
		"no-nad:" + kubeovn.ReasonNADNotFound,
		"no-subnet:" + kubeovn.ReasonNoSubnet,
		"outside:" + ipam.ReasonOutsidePool,
		"taken:" + ipam.ReasonTaken,
		"tiny-2:" + ipam.ReasonExhausted,
	}
	if got := reasons(plan.Events); !slices.Equal(got, want) {
		t.Errorf("warnings\n got %v\nwant %v", got, want)
	}
	var names []string
	for _, dp := range plan.Deployments {
		names = append(names, dp.Name)
	}
	if !slices.Equal(names, []string{"lb-svc-test-service", "lb-svc-tiny-1"}) {
		t.Errorf("deployments %v", names)
	}
	if ing := plan.Ingress["default/tiny-1"]; len(ing) != 1 || ing[0].IP != "192.168.50.2" {
		t.Errorf("tiny-1 ingress %v (the /30's only address but the gateway)", ing)
	}

	// No image: events, no Deployment, and the existing ones are kept.
	noImage := kubeovn.Desired(kubeovn.Input{Services: svcs[:1], Subnets: []*kubeovn.Subnet{attachSubnet()}, NADs: nads}, kubeovn.Options{})
	if got := reasons(noImage.Events); !slices.Equal(got, []string{"test-service:" + kubeovn.ReasonNoImage}) || len(noImage.Deployments) != 0 {
		t.Errorf("no image: %v, %d deployments", got, len(noImage.Deployments))
	}
	if _, _, del := noImage.Changes(plan.Deployments); len(del) != 1 || del[0].Name != "lb-svc-tiny-1" {
		t.Errorf("no image: deletes %v, want only lb-svc-tiny-1 (test-service's is kept)", del)
	}
}

func TestChanges(t *testing.T) {
	plan := kubeovn.Desired(kubeovn.Input{Services: []*corev1.Service{testService()}, Subnets: []*kubeovn.Subnet{attachSubnet()}, NADs: nads},
		kubeovn.Options{Image: "img"})
	if len(plan.Deployments) != 1 {
		t.Fatalf("plan %+v", plan)
	}
	cur := plan.Deployments[0].DeepCopy()
	cur.ResourceVersion = "42"
	cur.Spec.ProgressDeadlineSeconds = new(int32) // the API server's defaults do not matter
	orphan := cur.DeepCopy()
	orphan.Name = "lb-svc-gone"
	foreign := cur.DeepCopy() // Kube-OVN's own, say
	foreign.Name = "lb-svc-kube-ovns"
	foreign.Labels = maps.Clone(foreign.Labels)
	delete(foreign.Labels, kubeovn.LabelManagedBy)

	create, update, del := plan.Changes([]*appsv1.Deployment{cur, orphan, foreign})
	if len(create)+len(update) != 0 || len(del) != 1 || del[0].Name != "lb-svc-gone" {
		t.Errorf("create %d, update %d, delete %v; want the orphan deleted only", len(create), len(update), del)
	}

	// A port edit changes the Deployment: an update on the current
	// resourceVersion.
	edited := testService()
	edited.Spec.Ports[0].Port = 8080
	plan2 := kubeovn.Desired(kubeovn.Input{Services: []*corev1.Service{edited}, Subnets: []*kubeovn.Subnet{attachSubnet()}, NADs: nads},
		kubeovn.Options{Image: "img"})
	_, update, _ = plan2.Changes([]*appsv1.Deployment{cur})
	if len(update) != 1 || update[0].ResourceVersion != "42" || !slices.Contains(update[0].Spec.Template.Spec.Containers[0].Args, "--port=tcp/8080") {
		t.Errorf("update %v", update)
	}
	create, _, del = plan2.Changes(nil)
	if len(create) != 1 || len(del) != 0 {
		t.Errorf("from nothing: create %d delete %d", len(create), len(del))
	}
}

func TestOptionsFromConfigMap(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{"image": " docker.io/kubeovn/vpc-nat-gateway:v1.14 ",
		"nodeSelector": "kubernetes.io/hostname: kube-ovn-control-plane\nkubernetes.io/os: linux\nbroken"}}
	got := kubeovn.OptionsFromConfigMap(kubeovn.Options{}, cm)
	if got.Image != "docker.io/kubeovn/vpc-nat-gateway:v1.14" ||
		!maps.Equal(got.NodeSelector, map[string]string{"kubernetes.io/hostname": "kube-ovn-control-plane", "kubernetes.io/os": "linux"}) {
		t.Errorf("%+v", got)
	}
	if got := kubeovn.OptionsFromConfigMap(kubeovn.Options{Image: "flag"}, cm); got.Image != "flag" {
		t.Errorf("the flag's image lost to the ConfigMap's: %q", got.Image)
	}
	if got := kubeovn.OptionsFromConfigMap(kubeovn.Options{Image: "flag"}, nil); got.Image != "flag" || got.NodeSelector != nil {
		t.Errorf("nil ConfigMap: %+v", got)
	}
}
