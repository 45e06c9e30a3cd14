package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	"github.com/ovnedge/ovnedge/testbed"
)

const (
	seedDir     = "../testdata/kubeovn"
	lbProvider  = "lb-svc-attachment.kube-system"
	lbSvcImage  = "registry.example/ovnedge:e2e"
	lbNamespace = "default"
)

// TestLBSvc runs Kube-OVN's LoadBalancer Service example end to end on a real API server: `ovnedge daemon
// --enable-lb-svc`, started as the leader is (deploy/rbac.yaml's
// ovnedge-leader, no node), creates the lb-svc Deployments with the image
// and node selector of Kube-OVN's ovn-vpc-nat-config ConfigMap, writes the
// Services' ingress from the Subnet (excludeIps honoured), follows a
// Service edit, deletes the Deployment of a deleted Service and an orphan,
// leaves a Deployment it does not manage alone, and answers bad input with
// events, without crashing.
func TestLBSvc(t *testing.T) {
	t.Parallel()
	bin := buildOvnedge(t)
	k := startKube(t)
	k.poll(t, "Subnet and NetworkAttachmentDefinition CRDs served", func(ctx context.Context) error {
		if _, err := k.dyn.Resource(kubeovn.SubnetResource).List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		_, err := k.dyn.Resource(kubeovn.NADResource).List(ctx, metav1.ListOptions{})
		return err
	})
	ctx := context.Background()
	k.apply(t, seedDir, "seed004.yaml")
	if _, err := k.cs.CoreV1().ConfigMaps(kubeovn.ConfigMapNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: kubeovn.ConfigMapName, Namespace: kubeovn.ConfigMapNamespace},
		Data:       map[string]string{"image": lbSvcImage, "nodeSelector": "kubernetes.io/os: linux"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Deployment of the lb-svc name that is not ovnedge's (Kube-OVN's own,
	// say): never touched.
	foreign := lbDeployment("lb-svc-foreign", nil)
	if _, err := k.cs.AppsV1().Deployments(lbNamespace).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	k.apply(t, deployDir, "rbac.yaml")
	tr, err := k.cs.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "ovnedge-leader",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "ovnedge.log")
	d := testbed.StartProcess(t, "ovnedge leader", log, nil, bin, "daemon",
		"--kubeconfig", k.KubeconfigFor(t, "ovnedge-leader", tr.Status.Token), "--enable-lb-svc",
		"--metrics-address", "127.0.0.1:0", "--egressip-reachability-total-timeout", "0")

	// The example's test-service: its static 172.18.0.18, its Deployment.
	svc, err := k.cs.CoreV1().Services(lbNamespace).Get(ctx, "test-service", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dp := k.waitDeployment(t, "lb-svc-test-service", func(dp *appsv1.Deployment) error {
		return checkLBDeployment(dp, svc, "172.18.0.18")
	})
	t.Logf("lb-svc-test-service: args %q, pod annotations %v", dp.Spec.Template.Spec.Containers[0].Args, dp.Spec.Template.Annotations)
	k.waitIngress(t, "test-service", "172.18.0.18")

	// A Service without loadBalancerIP nor logical_switch annotation:
	// the Subnet of its provider, whose excludeIps (.0-.10, the gateway
	// among them) keep it off the low addresses.
	// (Services are created typed: the daemon writes their status.)
	dyn, err := k.cs.CoreV1().Services(lbNamespace).Create(ctx, lbSvc("dyn", lbProvider, ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k.waitIngress(t, "dyn", "172.18.0.11")
	k.waitDeployment(t, "lb-svc-dyn", func(dp *appsv1.Deployment) error { return checkLBDeployment(dp, dyn, "172.18.0.11") })

	// An edit of the Service (a second port) updates its Deployment.
	svc, err = k.cs.CoreV1().Services(lbNamespace).Get(ctx, "test-service", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "tls", Protocol: corev1.ProtocolTCP, Port: 8443, TargetPort: intstr.FromInt32(8443)})
	if _, err := k.cs.CoreV1().Services(lbNamespace).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.waitDeployment(t, "lb-svc-test-service", func(dp *appsv1.Deployment) error {
		if args := dp.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--port=tcp/8443") {
			return fmt.Errorf("args %q lack the new port", args)
		}
		return nil
	})

	// Deleting a Service deletes its Deployment (there is no garbage
	// collector here: the daemon does it); an orphan is collected.
	if err := k.cs.CoreV1().Services(lbNamespace).Delete(ctx, "dyn", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	k.waitGone(t, "lb-svc-dyn")
	ghost := lbDeployment("lb-svc-ghost", map[string]string{kubeovn.LabelManagedBy: kubeovn.ManagedBy})
	if _, err := k.cs.AppsV1().Deployments(lbNamespace).Create(ctx, ghost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.waitGone(t, "lb-svc-ghost")

	// Bad input: an event each, no crash, the good Deployment untouched.
	for _, obj := range []*unstructured.Unstructured{
		nadObject("lonely"), nadObject("tiny"),
		subnetObject("tiny", "tiny.kube-system", "192.168.50.0/30", "192.168.50.1"),
	} {
		if _, err := k.create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	k.waitIngress(t, "test-service", "172.18.0.18")
	for _, tc := range []struct {
		svc    *corev1.Service
		reason string
	}{
		{lbSvc("no-nad", "missing.kube-system", ""), kubeovn.ReasonNADNotFound},
		{lbSvc("bad-provider", "nodot", ""), kubeovn.ReasonUnknownProvider},
		{lbSvc("no-subnet", "lonely.kube-system", ""), kubeovn.ReasonNoSubnet},
		{lbSvc("outside", lbProvider, "10.1.2.3"), ipam.ReasonOutsidePool},
		{lbSvc("tiny-1", "tiny.kube-system", ""), ""},
		{lbSvc("tiny-2", "tiny.kube-system", ""), ipam.ReasonExhausted},
	} {
		if _, err := k.cs.CoreV1().Services(lbNamespace).Create(ctx, tc.svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if tc.reason == "" {
			k.waitIngress(t, tc.svc.Name, "192.168.50.2") // the /30's one address but the gateway
			continue
		}
		k.waitEvent(t, tc.svc.Name, tc.reason)
		if _, err := k.cs.AppsV1().Deployments(lbNamespace).Get(ctx, kubeovn.DeploymentPrefix+tc.svc.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Service %s with bad input has a Deployment (%v)", tc.svc.Name, err)
		}
	}
	if !d.Alive() {
		t.Fatalf("the daemon did not survive the bad input:%s", d.Log())
	}
	if data, err := os.ReadFile(log); err != nil || bytes.Contains(data, []byte("panic")) {
		t.Errorf("the daemon's log mentions a panic (or cannot be read: %v)", err)
	}
	for _, name := range []string{"lb-svc-test-service", "lb-svc-tiny-1", "lb-svc-foreign"} {
		if _, err := k.cs.AppsV1().Deployments(lbNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("Deployment %s: %v", name, err)
		}
	}
}

// checkLBDeployment says how dp differs from the lb-svc Deployment of
// svc pinned to ip.
func checkLBDeployment(dp *appsv1.Deployment, svc *corev1.Service, ip string) error {
	var errs []error
	if *dp.Spec.Replicas != 1 || dp.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		errs = append(errs, fmt.Errorf("replicas %d, strategy %s", *dp.Spec.Replicas, dp.Spec.Strategy.Type))
	}
	pod := dp.Spec.Template
	c := pod.Spec.Containers[0]
	if !slices.Equal(c.Command, []string{"ovnedge", "lbsvc-agent"}) || c.Image != lbSvcImage ||
		!slices.Contains(c.Args, "--cluster-ip="+svc.Spec.ClusterIP) || !slices.Contains(c.Args, "--provider="+lbProvider) {
		errs = append(errs, fmt.Errorf("container %s %q %q", c.Image, c.Command, c.Args))
	}
	if !maps.Equal(pod.Spec.NodeSelector, map[string]string{"kubernetes.io/os": "linux"}) {
		errs = append(errs, fmt.Errorf("node selector %v", pod.Spec.NodeSelector))
	}
	if pod.Annotations["k8s.v1.cni.cncf.io/networks"] != "kube-system/lb-svc-attachment" || pod.Annotations[kubeovn.IPAddressAnnotation(lbProvider)] != ip {
		errs = append(errs, fmt.Errorf("pod annotations %v, want net1 from kube-system/lb-svc-attachment at %s", pod.Annotations, ip))
	}
	if o := dp.OwnerReferences; len(o) != 1 || o[0].Kind != "Service" || o[0].Name != svc.Name || o[0].UID != svc.UID {
		errs = append(errs, fmt.Errorf("owner references %+v", o))
	}
	if dp.Labels[kubeovn.LabelManagedBy] != kubeovn.ManagedBy || pod.Labels["service"] != svc.Name {
		errs = append(errs, fmt.Errorf("labels %v, pod labels %v", dp.Labels, pod.Labels))
	}
	return errors.Join(errs...)
}

func (k *kube) waitDeployment(t *testing.T, name string, check func(*appsv1.Deployment) error) *appsv1.Deployment {
	t.Helper()
	var dp *appsv1.Deployment
	k.poll(t, "Deployment "+name, func(ctx context.Context) (err error) {
		if dp, err = k.cs.AppsV1().Deployments(lbNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		return check(dp)
	})
	return dp
}

func (k *kube) waitGone(t *testing.T, name string) {
	t.Helper()
	k.poll(t, "Deployment "+name+" deleted", func(ctx context.Context) error {
		_, err := k.cs.AppsV1().Deployments(lbNamespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

func (k *kube) waitIngress(t *testing.T, name, ip string) {
	t.Helper()
	k.poll(t, "ingress "+ip+" of Service "+name, func(ctx context.Context) error {
		svc, err := k.cs.CoreV1().Services(lbNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ing := svc.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != ip {
			return fmt.Errorf("ingress %v", ing)
		}
		return nil
	})
}

func (k *kube) waitEvent(t *testing.T, name, reason string) {
	t.Helper()
	k.poll(t, "a "+reason+" event on Service "+name, func(ctx context.Context) error {
		evs, err := k.cs.CoreV1().Events(lbNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			o := e.InvolvedObject
			if o.Kind == "Service" && o.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == reason {
				t.Logf("event on Service %s: %s: %s", name, e.Reason, e.Message)
				return nil
			}
			seen = append(seen, o.Name+" "+e.Reason)
		}
		return fmt.Errorf("events so far: %q", seen)
	})
}

// lbSvc is a LoadBalancer Service of provider, with a static
// loadBalancerIP when ip is not empty.
func lbSvc(name, provider, ip string) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: lbNamespace,
			Annotations: map[string]string{kubeovn.AnnotationAttachmentProvider: provider}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: ip, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
}

// lbDeployment is a minimal Deployment named like an lb-svc one.
func lbDeployment(name string, labels map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: lbNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}},
	}
}

func nadObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": name, "namespace": "kube-system"},
		"spec":     map[string]any{"config": `{"cniVersion": "0.3.0", "type": "macvlan", "master": "eth0", "mode": "bridge"}`},
	}}
}

func subnetObject(name, provider, cidr, gateway string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeovn.io/v1", "kind": "Subnet", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"protocol": "IPv4", "provider": provider, "cidrBlock": cidr, "gateway": gateway},
	}}
}
